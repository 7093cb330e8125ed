#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "corun/core/mutex.h"
#include "corun/core/result.h"
#include "corun/plan/solver.h"
#include "corun/runtime/infeasibility.h"
#include "corun/runtime/learner.h"
#include "corun/runtime/predictor_source.h"
#include "corun/space/transition.h"
#include "corun/spec/workload.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief How the planner prices a change of the plan in force (docs/scheduler.md,
/// "Transitions"). A change of model m from configuration a to b costs the utility
///   after a break:         (outage_s + warm-up seconds) × m's utility per second in a
///   make-before-break:     ModelTransition::swap_gpu_seconds() × the utility per second of
///                          every model in the plan in force (the new copy's start runs
///                          kernels beside them all)
/// (utility per second: weight × quality of the configuration in force), spread over the
/// horizon H: the solver maximises utility − cost / H. H is `horizon_s` when set, else the mean gap between
/// the workload events seen so far, with `default_horizon_s` counted as one gap before the
/// first (the expected time until the next event makes the plan stale anyway), and never
/// below `min_horizon_s`. Within `min_dwell_s` of its last reload or restart, a model may
/// change only live knobs, unless the plan in force no longer holds every SLA as predicted
/// or a measured breach asked for the decision: a needed change is always allowed.
struct TransitionOptions {
  /// false ("ignore"): every change is free to the planner, as before transitions were
  /// priced; the testbeds charge them all the same.
  bool aware = true;
  /// Horizon in seconds (check = [0, 1e6]); 0: estimated from the events seen.
  double horizon_s = 0;
  /// The estimate's prior gap before any event is seen (check = (0, 1e6]).
  double default_horizon_s = 300;
  /// The estimate's floor (check = (0, 1e6]).
  double min_horizon_s = 60;
  /// Minimum time between two reload- or restart-class changes of one model (check = [0,
  /// 1e6]).
  double min_dwell_s = 60;
  /// Hysteresis, in sds of one window's noise of the model's SLA metric (check = [0, 10]):
  /// while a model's configuration in force holds its SLA as predicted, a configuration that
  /// would reload or restart it must hold its SLA with its margin widened by
  /// expm1(hysteresis_sd × noise sd), so that a bound moving within the noise of the windows
  /// that taught it does not flip a plan back and forth.
  double hysteresis_sd = 1;
};

/// @brief How the online controller decides and learns. Every setting is declared here once.
struct ControllerOptions {
  std::string solver = "ga";  ///< exhaustive, ga, exact, greedy or hillclimb
  std::uint64_t seed = 1;     ///< solver seeds derive from it and the decision id
  int threads = 2;            ///< solver threads
  LearningOptions learning;
  /// Learning off only: after a measured breach the model's margin grows to the observed
  /// under-prediction plus this much (corun's rule before online learning).
  double breach_margin_step = 0.05;
  /// Learning off only: the largest margin breaches may grow a model's margin to.
  double max_margin = 5;
  /// The degradation rule's last step (runtime/infeasibility.h, docs/scheduler.md): a model
  /// whose SLA the plan gave up admits only the largest share of its demand with which its SLA
  /// holds as predicted — the rest is refused at the door — and is paused when no share does.
  /// false: it runs best effort with all its demand and breaches.
  bool shed = true;
  TransitionOptions transitions;
  /// Called inside every decision with the problem solved and the solver's answer (before
  /// any degradation), e.g. so that an evaluation can score it against references; not timed.
  std::function<void(const PlanProblem&, const PlanResult&)> on_decision;
};

/// @brief A plan the controller decided, with what it expects of it.
struct Decision {
  /// The plan's id: 1, 2, ... (0 = none yet). It changes only when what runs changes (a
  /// configuration, an admitted share, the model set), so a deployer that applies plans by id
  /// applies nothing for a decision that kept them.
  std::int64_t id = 0;
  std::int64_t decision = 0;  ///< 1, 2, ...: every decision, whether it changed the plan or not
  std::string reason;         ///< "start", "event", "breach cam0", "learning", ...
  std::string source;         ///< PredictorSource::describe() when it was made
  JointConfig config;         ///< one local index per model, kAbsent when it does not run
  std::vector<Predicted> predicted;  ///< corrected predictions per model
  std::vector<Predicted> base;       ///< the source's predictions before online corrections
  std::vector<Margin> margins;       ///< per model, of the configuration it runs in
  double predicted_utility = 0;      ///< before transition costs
  /// The changes from the plan in force when it was decided (empty: the first plan, or none).
  JointTransition transition;
  /// Utility the planner charged for them (TransitionOptions; 0 when ignored).
  double transition_cost = 0;
  double horizon_s = 0;  ///< the horizon the costs were spread over
  /// Every SLA holds under the predictions and margins; false: see `infeasible`, and the
  /// models whose SLA the degradation rule gave up (`best_effort`).
  bool feasible = true;
  std::vector<Infeasibility> infeasible;
  std::vector<bool> best_effort;  ///< per model
  /// Per model, the share of its demand the plan admits (ControllerOptions::shed): 1 = all of
  /// it; 0 = paused (config kAbsent although the model is active). Empty when every model
  /// admits all of its demand.
  std::vector<double> admitted;
  double decision_ms = 0;  ///< wall time of the search (and degradation)
  /// Wall time the predictor source spent measuring before it (re-profiling).
  double measure_ms = 0;
  SearchStats stats;
};

/// @brief `w` as the plan in force runs it: each model's rate demand (fps, rps or in-flight
/// requests) scaled by its admitted share, a paused model inactive. `admitted` empty: `w`.
/// Utility is still counted against `w` (what was asked for): model_utility(w, ...) of a
/// measurement of the admitted workload charges the refused share.
Workload admitted_workload(const Workload& w, std::span<const double> admitted);

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

/// @brief What one observation taught, as stored for replay (serve's state, a resumed run):
/// enough to rebuild the learners without the predictor that was used.
struct LearningSample {
  std::string model;      ///< model name
  std::string model_key;  ///< its catalog model and knob values: local indices mean nothing else
  std::int32_t local = 0;
  double others_load = NAN;  ///< its co-runners' load (LoadTable) in that window
  /// Where a change in this window was: of the whole GPU (several models changed together) or of
  /// this model's configuration alone.
  TargetLearner::ChangeHint hint = TargetLearner::ChangeHint::kUnknown;
  /// log(measured / base prediction) per target (NaN: not observed)
  std::array<double, kTargetCount> log_ratio{NAN, NAN, NAN, NAN};
  double under_prediction = 1;  ///< measured / predicted of the SLA latencies (learning off)
  bool breach = false;
  double error = NAN;  ///< measured / predicted − 1 of the SLA latency
  /// The model's demand or context changed before this window: its learners were reopened
  /// (TargetLearner::reopen) first, and a replay does the same.
  bool reopen = false;
  /// The admitted share of its demand in that window (below 1: shed, docs/scheduler.md).
  double share = 1;
  /// What was measured, by Target (NaN: not observed): a shed model's windows are the evidence
  /// its later admissions are checked against.
  std::array<double, kTargetCount> measured{NAN, NAN, NAN, NAN};
};

/// @brief Whether a window measured a breach of the model's SLA (a failed run is one): the one
/// definition the controller, the run loop and serve's telemetry share.
bool measured_breach(const ModelSpec& m, const ModelObservation& o);

/// @brief The JSON form of a learning sample (serve's stored state).
nlohmann::json to_json(const LearningSample& s);
/// @brief Reads a learning sample back; errors name the field.
Result<LearningSample> learning_sample_from_json(const nlohmann::json& j);

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
/// Controller c(workload, std::make_unique<TwinSource>(), options);
/// auto d = c.replan("start");                    // plan
/// auto r = c.observe(observations, c.plan()->id);  // learn from what ran
/// if (r.replan) c.replan(r.reason);
/// @endcode
class Controller {
 public:
  Controller(Workload w, std::unique_ptr<PredictorSource> source, ControllerOptions options);
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
  struct Learners;
  struct Recent;

  using LearnerSet = std::vector<std::unique_ptr<Learners>>;
  /// Builds the corrections and margins of every (model, configuration) of `w` for a decision;
  /// `learners` holds one entry per model of `w`. `explore`: throughputs optimistic by
  /// LearningOptions::explore_sd.
  [[nodiscard]] std::shared_ptr<const CorrectionTable> corrections_locked(
      const Workload& w, const LearnerSet& learners, const std::vector<double>& static_margins,
      LoadTable loads, bool explore = true) const CORUN_REQUIRES(mutex_);
  /// Searches `w` under `base` corrected by `table` (planner_mutex_ held, mutex_ not): the
  /// decision's config, predictions, margins, utility and infeasibility; nothing is published.
  /// `hook_ms` (real decisions only; null for a what-if): hand the problem and the answer to
  /// options_.on_decision and add the time it took.
  Result<Decision> search(const Workload& w, const std::shared_ptr<Predictor>& base,
                          const std::shared_ptr<const CorrectionTable>& table,
                          const JointConfig& warm, std::int64_t id, const std::string& reason,
                          double* hook_ms, bool priced) CORUN_REQUIRES(planner_mutex_);
  /// One search over `w` for a decision: the source's predictor for it (its measuring time
  /// added to `measure_ms`), the learners' corrections, the search. None when the workload
  /// changed meanwhile (the decision is dropped).
  struct Attempt {
    Decision decision;
    std::shared_ptr<const CorrectionTable> table;
  };
  Result<std::optional<Attempt>> attempt(const Workload& w, std::uint64_t generation,
                                         const JointConfig& warm, std::int64_t id,
                                         const std::string& reason, double* measure_ms,
                                         double* hook_ms, bool explore = true)
      CORUN_REQUIRES(planner_mutex_);
  /// The degradation rule's last step (ControllerOptions::shed) on `first`, a decision for `w`
  /// that gave up some SLAs: each given-up model, heaviest first, admits the largest share of
  /// its demand (to 1/32) with which its SLA holds as predicted, else is paused. Returns the
  /// decision for the admitted workload, with Decision::admitted set; none when dropped.
  Result<std::optional<Attempt>> shed(const Workload& w, Attempt first, std::uint64_t generation,
                                      std::int64_t id, const std::string& reason,
                                      double* measure_ms) CORUN_REQUIRES(planner_mutex_);
  /// Co-runners' load of model m in `config` under loads_.
  [[nodiscard]] double others_load_locked(std::size_t m, const JointConfig& config) const
      CORUN_REQUIRES(mutex_);
  void ensure_learners_locked(const Workload& w, const ErrorPriors& priors, LearnerSet& learners)
      CORUN_REQUIRES(mutex_);
  void learn_locked(std::size_t m, const LearningSample& s) CORUN_REQUIRES(mutex_);
  [[nodiscard]] double planned_log_bound_locked(std::size_t m, std::int32_t l, Target t) const
      CORUN_REQUIRES(mutex_);

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
  LearnerSet learners_ CORUN_GUARDED_BY(mutex_);                    ///< per model
  std::vector<double> planned_log_bound_ CORUN_GUARDED_BY(mutex_);  ///< [model * targets]
  LoadTable loads_ CORUN_GUARDED_BY(mutex_);                        ///< of the plan in force
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
