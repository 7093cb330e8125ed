#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/mutex.h"
#include "corun/core/result.h"
#include "corun/plan/solver.h"
#include "corun/runtime/admission.h"
#include "corun/runtime/decision.h"
#include "corun/runtime/infeasibility.h"
#include "corun/runtime/learner.h"
#include "corun/runtime/learning_sample.h"
#include "corun/runtime/predictor_source.h"
#include "corun/runtime/transitions.h"
#include "corun/space/transition.h"
#include "corun/spec/workload.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief How the online controller decides and learns. Every setting is declared here once.
struct ControllerOptions {
  std::string solver = "ga";  ///< exhaustive, ga, exact, greedy or hillclimb
  LearningOptions learning;
  /// Learning off only: after a measured breach the model's margin grows to the observed
  /// under-prediction plus this much (corun's rule before online learning).
  double breach_margin_step = 0.05;
  /// Learning off only: the largest margin breaches may grow a model's margin to.
  double max_margin = 5;
  /// The degradation rule's last step (runtime/admission.h, docs/scheduler.md): a model whose
  /// SLA the plan gave up admits only the largest share of its demand with which its SLA holds
  /// as predicted — the rest is refused at the door — and is paused when no share does.
  AdmissionOptions admission;
  TransitionOptions transitions;
  /// Called inside every decision with the problem solved and the solver's answer (before
  /// any degradation), e.g. so that an evaluation can score it against references; not timed.
  std::function<void(const PlanProblem&, const PlanResult&)> on_decision;
};

/// @brief Where one model's online error model stands (for reports, GET /v1/plan, /metrics).
struct ModelLearningState {
  double last_error = 0;    ///< measured / predicted − 1 of its SLA latency, last window
  double abs_error = 0;     ///< moving average of |measured / predicted − 1|
  double margin = 0;        ///< the largest margin of its configuration in the plan in force
  double z = 0;             ///< conformal bound level, standard deviations (SLA latency)
  double noise_sd = 0;      ///< estimated window noise, log space (SLA latency)
  double shared_error = 0;  ///< the learned log error shared by its configurations
  std::uint64_t observations = 0;
  std::uint64_t misses = 0;    ///< measured values above their planned bound
  std::uint64_t breaches = 0;  ///< measured SLA breaches
};

/// @brief What an observation did.
struct ObservationResult {
  std::vector<bool> breach;  ///< per model of the workload: measured SLA breach (ground truth)
  std::size_t learned = 0;   ///< observations that updated a learner
  std::size_t stale = 0;     ///< observations of another plan than the one in force (ignored)
  bool replan = false;       ///< the controller wants a new decision
  std::string reason;        ///< why ("breach cam0", "learning")
};

/// @brief Whether a window measured a breach of the model's SLA (a failed run is one): the one
/// definition the controller, the run loop and serve's telemetry share.
bool measured_breach(const ModelSpec& m, const ModelObservation& o);

/// @brief The online controller: one object holding the workload as it is now, the plan in
/// force, each model's error state and margins, the predictor source and the solver.
/// `corun run` drives it with a testbed and a simulated clock (runtime/online_run.h); `corun
/// serve` drives it from HTTP and a planner thread. Decisions never wait for learning, and
/// learning never waits for a decision.
///
/// Thread-safety: every member function may be called from several threads. replan() runs one
/// at a time (it owns the source and the solver while it searches) without blocking observe(),
/// apply() or set_workload(); a decision made for a workload that changed during its search is
/// dropped (replan() returns none) and a new one is due.
///
/// @code
/// Controller c(Context{}, workload, std::make_unique<TwinSource>(), options);
/// auto d = c.replan("start");                    // plan
/// auto r = c.observe(observations, c.plan()->id);  // learn from what ran
/// if (r.replan) c.replan(r.reason);
/// @endcode
class Controller {
 public:
  /// @param ctx each decision's solver seed derives from ctx.seed and the decision id; the
  /// solver runs on ctx.threads
  Controller(const Context& ctx, Workload w, std::unique_ptr<PredictorSource> source,
             ControllerOptions options);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // ---- the workload as the planner knows it

  /// @brief Applies a workload event (arrive, depart, demand, sla, context); drift events are
  /// refused by CHECK: they belong to the testbed. A demand or context change reopens the
  /// model's learners (TargetLearner::reopen). Returns its description; a re-plan is due.
  std::string apply(const TimelineEvent& e);
  /// @brief Replaces the model set (serve: a registration, removal or demand update). Models
  /// are matched by name: one whose catalog model or knob values changed starts learning anew,
  /// one whose demand changed is reopened as by apply().
  void set_workload(Workload w);
  [[nodiscard]] Workload workload() const;
  [[nodiscard]] const ControllerOptions& options() const { return options_; }
  [[nodiscard]] const Context& context() const { return ctx_; }

  /// @brief The load outside the plan that every decision predicts each model under: a share of
  /// the SMs and of the DRAM bandwidth that a process corun does not plan keeps busy (serve:
  /// the unexplained load DCGM measured, docs/stack.md). A change is an event: a decision is
  /// due ("gpu load"), and every model's learners are reopened, since what they learned of the
  /// GPU before was measured under the other load. Where the source cannot express a load
  /// (PredictorSource::predictor_under), decisions predict without it.
  void set_gpu_load(const Interference& load);
  [[nodiscard]] Interference gpu_load() const;

  /// @brief The controller's clock, in seconds (simulated in `corun run`, wall time since
  /// start in `corun serve`): event times for the horizon, dwell times. Never goes back.
  void advance_to(double now_s);

  // ---- deciding

  /// @brief Whether something happened since the last decision that asks for a new one.
  [[nodiscard]] bool replan_due() const;
  /// @brief Why a decision is due ("start", "event", "breach cam0", "learning", "refit").
  [[nodiscard]] std::string due_reason() const;
  /// @brief Plans the workload as it is now: corrected predictions, calibrated margins, the
  /// solver warm-started from the plan in force, and when no plan meets every SLA the
  /// degradation rule (runtime/infeasibility.h). Returns the decision now in force, or none
  /// when the workload changed during the search (the decision was dropped).
  Result<std::optional<Decision>> replan(const std::string& reason);
  /// @brief The plan in force (null before the first decision).
  [[nodiscard]] std::shared_ptr<const Decision> plan() const;

  /// @brief What the controller would predict for `config` now (a what-if: nothing changes):
  /// corrected predictions, the margins it would plan with, and whether every SLA would hold.
  struct WhatIf {
    std::vector<Predicted> predicted;
    std::vector<Margin> margins;
    std::vector<double> excess;  ///< per model: SLA excess at its margin (0: holds)
    double utility = 0;
    bool feasible = false;
  };
  Result<WhatIf> what_if(const JointConfig& config);
  /// @brief Plans `w` as the controller would if it were the workload now, and publishes
  /// nothing (a what-if: the plan in force, the workload, the learners and the decision ids are
  /// untouched). Models of `w` matched by name and catalog key to the current workload are
  /// planned with what was learned of them; others with the source's priors. Used by serve's
  /// `POST /v1/whatif` (can this node take one more model?).
  /// @return the decision (id: the one the next real decision would get) with its
  /// infeasibility reasons when no plan meets every SLA.
  /// Thread-safety: as replan(); waits for a search in progress.
  Result<Decision> plan_for(const Workload& w, const std::string& reason);

  // ---- learning

  /// @brief Learns from one window of measurements of the plan `plan_id` (one per model that
  /// reported; models absent from `obs` are not judged). Observations of another plan are
  /// counted as stale and ignored. Learning-sample records of what was learned are appended to
  /// `samples` when given (for durable storage).
  ObservationResult observe(std::span<const ModelObservation> obs, std::int64_t plan_id,
                            std::vector<LearningSample>* samples = nullptr);
  /// @brief Rebuilds learning state from stored samples (in their order) without judging or
  /// re-planning: what a restarted service or a resumed run does before its first decision.
  Status replay(std::span<const LearningSample> samples);
  /// @brief Restores the plan in force from a stored decision (a restarted service): its
  /// telemetry is learned from at once, and the next decision continues its ids. The decision
  /// must be for the current workload's models.
  void restore(Decision d);
  /// @brief Makes the next plan's id `last` + 1 and the next decision's number at least
  /// `last_decision` + 1 (a restarted service whose stored plan no longer fits its models).
  void continue_after(std::int64_t last, std::int64_t last_decision = 0);
  /// @brief Swaps in a refit surrogate: its base predictions differ, so the learners restart
  /// from its priors and the recent observations of the current workload are replayed against
  /// it; a re-plan is due.
  Status adopt(surrogate::Surrogate refit);
  /// @brief The source's surrogate (null for the twin): what a refit starts from. Only the
  /// planner thread may call it while replan() can run.
  [[nodiscard]] const surrogate::Surrogate* fitted() const;

  /// @brief Per model of the workload.
  [[nodiscard]] std::vector<ModelLearningState> learning_state() const;
  /// @brief Testbed measurements the source took itself (models re-profiled alone).
  [[nodiscard]] std::size_t source_measurements() const;

  /// @brief The key that identifies a model's learning state (catalog model and knob values).
  static std::string model_key(const ModelSpec& m);

 private:
  struct ModelState;
  struct Recent;

  using ModelStates = std::vector<std::unique_ptr<ModelState>>;
  /// Builds the corrections and margins of every (model, configuration) of `w` for a decision;
  /// `learners` holds one entry per model of `w`. `explore`: throughputs optimistic by
  /// LearningOptions::explore_sd.
  [[nodiscard]] std::shared_ptr<const CorrectionTable> corrections_locked(
      const Workload& w, const ModelStates& learners, const std::vector<double>& static_margins,
      LoadTable loads, bool explore = true) const CORUN_REQUIRES(mutex_);
  /// Searches `w` under `base` corrected by `table` (planner_mutex_ held, mutex_ not): the
  /// decision's config, predictions, margins, utility and infeasibility; nothing is published.
  /// `hook_ms` (real decisions only; null for a what-if): hand the problem and the answer to
  /// options_.on_decision and add the time it took.
  Result<Decision> search(const Workload& w, const std::shared_ptr<Predictor>& base,
                          const std::shared_ptr<const CorrectionTable>& table,
                          const JointConfig& warm, std::int64_t id, const std::string& reason,
                          double* hook_ms, bool priced) CORUN_REQUIRES(planner_mutex_);
  /// The prelude to every search (a decision's attempts, plan_for(), what_if()): the source's
  /// predictor for `w` (the seconds it measured added to `measure_ms` when given), then under
  /// mutex_ the learners' corrections and margins of every (model, configuration) of `w`.
  /// `own`: the controller's learners (their priors applied on first sight); else copies of
  /// those of the models `w` shares by name and catalog key with the workload, and fresh ones
  /// for the rest (a what-if for another model set changes nothing). None when `generation` is
  /// given and the workload changed since it was read (the decision is dropped).
  struct Prepared {
    std::shared_ptr<Predictor> base;
    std::shared_ptr<const CorrectionTable> table;
  };
  Result<std::optional<Prepared>> prepare(const Workload& w, bool own,
                                          const std::uint64_t* generation, bool explore,
                                          double* measure_ms) CORUN_REQUIRES(planner_mutex_);
  /// One search over `w` for a decision: the source's predictor for it (its measuring time
  /// added to `measure_ms`), the learners' corrections, the search. None when the workload
  /// changed meanwhile (the decision is dropped).
  using Attempt = AdmissionCandidate;
  Result<std::optional<Attempt>> attempt(const Workload& w, std::uint64_t generation,
                                         const JointConfig& warm, std::int64_t id,
                                         const std::string& reason, double* measure_ms,
                                         double* hook_ms, bool explore = true)
      CORUN_REQUIRES(planner_mutex_);
  /// Co-runners' load of model m in `config` under loads_.
  [[nodiscard]] double others_load_locked(std::size_t m, const JointConfig& config) const
      CORUN_REQUIRES(mutex_);
  void ensure_learners_locked(const Workload& w, const ErrorPriors& priors, ModelStates& learners)
      CORUN_REQUIRES(mutex_);
  void learn_locked(std::size_t m, const LearningSample& s) CORUN_REQUIRES(mutex_);
  /// The steps of observe() (learn.cc): which models' errors moved in a window and which way;
  /// the learning sample of one observation of the plan in force; whether most models found
  /// the GPU faster (paused models then probe); whether learning moved a bound a decision
  /// planned on.
  struct WindowChanges;
  [[nodiscard]] WindowChanges window_changes_locked(std::span<const ModelObservation> obs,
                                                    const Decision& d) const
      CORUN_REQUIRES(mutex_);
  [[nodiscard]] LearningSample sample_locked(const ModelObservation& o, const Decision& d,
                                             const WindowChanges& changes)
      CORUN_REQUIRES(mutex_);
  void probe_paused_when_gpu_faster_locked(const Decision& d, const WindowChanges& changes,
                                           ObservationResult& r) CORUN_REQUIRES(mutex_);
  void probe_paused_after_wait_locked(const Decision& d, ObservationResult& r)
      CORUN_REQUIRES(mutex_);
  [[nodiscard]] bool learning_moved_a_bound_locked(const Decision& d) const
      CORUN_REQUIRES(mutex_);
  [[nodiscard]] double planned_log_bound_locked(std::size_t m, std::int32_t l, Target t) const
      CORUN_REQUIRES(mutex_);

  const Context ctx_;
  const ControllerOptions options_;
  /// Used by decisions only: the source belongs to one search at a time.
  std::unique_ptr<PredictorSource> source_ CORUN_PT_GUARDED_BY(planner_mutex_);
  std::unique_ptr<Solver> solver_;

  /// Serialises decisions: the source and the solver belong to one search at a time.
  mutable Mutex planner_mutex_;
  /// Guards everything below; never held while a search runs.
  mutable Mutex mutex_ CORUN_ACQUIRED_AFTER(planner_mutex_);
  Workload workload_ CORUN_GUARDED_BY(mutex_);
  std::uint64_t generation_ CORUN_GUARDED_BY(mutex_) = 0;  ///< bumped by every change
  std::shared_ptr<const Decision> plan_ CORUN_GUARDED_BY(mutex_);
  std::vector<std::string> plan_names_ CORUN_GUARDED_BY(mutex_);    ///< the models plan_ indexes
  ModelStates model_state_ CORUN_GUARDED_BY(mutex_);                ///< per model
  std::vector<double> planned_log_bound_ CORUN_GUARDED_BY(mutex_);  ///< [model * targets]
  LoadTable loads_ CORUN_GUARDED_BY(mutex_);                        ///< of the plan in force
  Interference gpu_load_ CORUN_GUARDED_BY(mutex_);  ///< outside the plan (set_gpu_load)
  bool due_ CORUN_GUARDED_BY(mutex_) = true;
  std::string due_reason_ CORUN_GUARDED_BY(mutex_) = "start";
  std::unique_ptr<Recent> recent_ CORUN_GUARDED_BY(mutex_);
  std::int64_t last_id_ CORUN_GUARDED_BY(mutex_) = 0;  ///< id of the latest decision
  /// Decisions made, whether their plan changed or not (Decision::decision): solver seeds
  /// derive from it.
  std::int64_t decisions_ CORUN_GUARDED_BY(mutex_) = 0;
  double now_s_ CORUN_GUARDED_BY(mutex_) = 0;
  std::vector<double> event_times_s_ CORUN_GUARDED_BY(mutex_);  ///< workload events seen
  /// The plan in force when a decision started (what transitions are priced from); empty when
  /// none matches the workload's models.
  /// What the decision in progress prices its transitions with (set by replan()).
  struct Pricing {
    bool on = false;
    JointConfig from;     ///< the plan in force, one entry per model of the workload
    bool needed = false;  ///< a breach asked for the decision: the dwell does not hold
    double horizon_s = 0;
    std::vector<bool> dwelling;  ///< per model: within its minimum dwell
    std::vector<double> band;    ///< per model: the hysteresis band (TransitionOptions)
  };
  Pricing pricing_ CORUN_GUARDED_BY(planner_mutex_);
  [[nodiscard]] Pricing pricing_locked(const Workload& w, const JointConfig& from,
                                       const std::string& reason) const CORUN_REQUIRES(mutex_);
  [[nodiscard]] double horizon_locked() const CORUN_REQUIRES(mutex_);
  /// The transition costs, dwell restrictions and throughput scales of pricing_ for `w` under
  /// `predictor` (left empty when pricing is off), with the hysteresis band added to `margins`
  /// of the configurations a change would reload or restart.
  void price_transitions(const Workload& w, const Predictor& predictor,
                         const std::vector<bool>& active, MarginTable& margins,
                         std::vector<std::vector<double>>& cost,
                         std::vector<std::vector<bool>>& allowed,
                         std::vector<std::vector<double>>& scale) const
      CORUN_REQUIRES(planner_mutex_);
};

}  // namespace corun
