#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/profile/dataset.h"
#include "corun/runtime/controller.h"
#include "corun/runtime/predictor_source.h"
#include "corun/runtime/unexplained_load.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief One interval of the online loop: what happened, what was decided, what was measured.
struct IntervalRecord {
  double t_s = 0;                    ///< start of the interval
  std::vector<std::string> events;   ///< workload events applied at t_s ("arrive cam3", ...)
  std::vector<std::string> drift;    ///< drift events the testbed applied at t_s (unseen)
  Conditions conditions;             ///< what acted on the testbed during the interval
  bool replanned = false;
  std::string reason;                ///< why a decision was made ("start", "event", ...)
  bool plan_changed = false;
  bool refit = false;        ///< a refit surrogate was adopted at the start of the interval
  std::string refit_error;   ///< a background refit that failed and was not adopted: why
  bool replayed = false;     ///< the measurement was read back from the run's dataset
  std::int64_t decision = 0;         ///< id of the decision in force
  double decision_ms = 0;            ///< wall time of the decision (0 when not replanned)
  double measure_ms = 0;  ///< wall time of the measurements the decision waited for (re-profiling)
  std::uint64_t evaluated = 0;
  JointConfig plan;
  std::vector<Predicted> predicted;  ///< per model, corrected predictions of the plan
  std::vector<Margin> margins;       ///< per model, of its configuration
  bool feasible = true;              ///< the plan in force holds every SLA (predicted)
  std::vector<std::string> infeasible;  ///< why not (Infeasibility::message)
  /// Per model, the share of its demand admitted (Decision::admitted); empty: all of it.
  /// The testbed measured the admitted workload (admitted_workload()).
  std::vector<double> admitted;
  Measurement measured;              ///< ground truth from the testbed
  double predicted_utility = 0;
  double measured_utility = 0;       ///< utility recomputed from measured metrics
  std::vector<bool> breach;          ///< per model: measured SLA breach (ground truth)
  std::vector<ModelLearningState> learning;  ///< per model, after learning from the interval
  /// The changes put in force at the start of the interval (empty: none), as the testbed paid
  /// them: restarts and reloads of each model, and their seconds without service.
  JointTransition transition;
  /// Per model: charged in this window (its metrics include an outage or a warm-up), so its
  /// window is counted on ground truth but not learned from.
  std::vector<bool> in_transition;
  std::vector<double> outage_s;  ///< per model, seconds of this window without service
  /// Seconds of this window in which a make-before-break swap's new copy ran its start-up
  /// kernels beside everyone, the longest such swap's (0: none). Such a window is counted on ground truth but no model
  /// learns from it, and a breach in it is the swap's, not a reason to re-plan.
  double swap_gpu_s = 0;
  /// The GPU's activity as the catalog twin predicts it for the plan (RunOptions::gpu_activity;
  /// none: not compared in this window), beside the measured one in `measured.gpu`.
  std::optional<double> sm_active_predicted;
  /// The load outside the plan the controller predicts every model beside after this window
  /// (Controller::set_gpu_load; zeros: none).
  Interference gpu_load;
};

/// @brief Everything a run produced.
struct RunReport {
  std::string workload;
  std::string testbed;
  std::string device;
  std::string solver;
  std::string source;      ///< what predicted at the start (PredictorSource::describe)
  bool learning = true;
  double breach_target = 0;
  /// What the run ran under: its seed (the report says it; threads never change a result).
  Context context{.seed = 0};
  std::vector<std::string> model_names;
  std::vector<IntervalRecord> intervals;
  std::size_t refits = 0;                 ///< refit surrogates adopted
  std::size_t refit_failures = 0;         ///< refits that failed (the previous fit stayed)
  std::size_t replayed = 0;               ///< intervals read back from the dataset
  std::size_t source_measurements = 0;    ///< models re-profiled alone by the source

  [[nodiscard]] std::size_t sla_violations() const;  ///< model-intervals breaching, measured
  /// Model-intervals that refused part or all of their demand (IntervalRecord::admitted).
  [[nodiscard]] std::size_t shed_model_intervals() const;
  [[nodiscard]] std::vector<double> decision_ms() const;  ///< one per decision
  /// Per model: changes of class `a` the plan made over the run (arrivals not counted).
  [[nodiscard]] std::vector<std::size_t> changes(Actuation a) const;
  /// Per model: seconds without service that transitions cost, measured.
  [[nodiscard]] std::vector<double> outage_s() const;
};

/// @brief What a run measured, in its dataset (an "online" campaign keyed by the run's
/// identity): each interval is stored as it is measured, so a killed `corun run` resumed with
/// the same settings reads the intervals back instead of measuring them again and reaches the
/// same decisions, and refits train on them. Not thread-safe.
class OnlineLog {
 public:
  /// @param key identifies the run (run_key(): seed and every setting that changes decisions)
  static Result<std::unique_ptr<OnlineLog>> open(const std::filesystem::path& dataset,
                                                 const Workload& w, std::string_view workload_text,
                                                 std::string_view testbed, double window_s,
                                                 std::uint64_t key, std::uint64_t intervals);
  /// @brief Creates `dir` and opens the run's online log in `dir`/dataset.db, sized for the
  /// intervals of `w`'s timeline.
  static Result<std::unique_ptr<OnlineLog>> open_in(const std::filesystem::path& dir,
                                                    const Workload& w,
                                                    std::string_view workload_text,
                                                    std::string_view testbed, double window_s,
                                                    std::uint64_t key);
  /// @brief What identifies a run for its online log: the context's seed and every setting
  /// that changes its decisions (the solver; learning, its breach target and exploration;
  /// admission; the transitions mode; where predictions come from and, for a fitted surrogate,
  /// its provenance).
  static std::uint64_t run_key(const Context& ctx, const ControllerOptions& c,
                               const PredictorSource& source);
  /// @brief The stored measurement of interval `step`, if it was of `config`.
  [[nodiscard]] std::optional<Measurement> find(std::uint64_t step, const JointConfig& config) const;
  /// @brief Stores interval `step`, measured with the noise of the `interval` stream
  /// (atomically; an interval already stored is kept).
  Status store(std::uint64_t step, const JointConfig& config, const Context& interval,
               const Measurement& m);

 private:
  OnlineLog(profile::Dataset ds, std::int64_t campaign) : ds_(std::move(ds)), campaign_(campaign) {}
  profile::Dataset ds_;
  std::int64_t campaign_ = 0;
  std::vector<profile::SampleRecord> stored_;
};

/// @brief How the online loop runs.
struct RunOptions {
  ControllerOptions controller;
  /// Called after each interval with its record and the workload the testbed met: the planner's,
  /// with each trace demand (ModelSpec::trace) of that interval, which the planner learns only
  /// at the next interval.
  std::function<void(const IntervalRecord&, const Workload&)> on_interval;
  /// Stores and resumes the intervals (corun run); none: nothing persists (evaluations).
  OnlineLog* log = nullptr;
  /// The dataset the surrogate was profiled into: enables background refits on its campaigns
  /// plus the online samples (LearningOptions::refit_every); empty: no refits.
  std::filesystem::path refit_dataset;
  const Catalog* catalog = nullptr;  ///< for refits (nullptr: the built-in catalog)
  /// A trace demand (ModelSpec::trace) is told to the planner as a demand event when its
  /// request rate or a mean token length has moved by more than this share of what the planner
  /// was last told (0: every change). A trace moves a little every interval,
  /// as a real stack's measured rate does (a 10 s count at 2 requests/s has a relative noise of
  /// 1/sqrt(20) = 22 %); re-planning for each move makes the horizon one interval and pays
  /// transitions for noise. The testbed always meets the trace's own demand. A window whose
  /// trace demand is out of this band around the demand its plan was made for is not learned
  /// from (it measured another workload than the one predicted; serve's `demand_moved`).
  double trace_demand_band = 0.2;
  /// The testbed's measured GPU activity against the catalog twin's prediction for the plan,
  /// as `corun serve` reads DCGM (docs/stack.md, "GPU activity"): an unexplained load is
  /// planned with. None: not compared. Compared only on the simulator (SimTestbed), whose
  /// activity the catalog twin describes; torch-cpu's CPU activity it does not.
  std::optional<UnexplainedLoadOptions> gpu_activity = UnexplainedLoadOptions{};
};

/// @brief Runs a workload's timeline on a testbed with a simulated clock: at each interval the
/// due events are applied — workload events to the controller, drift events to the testbed's
/// conditions only —, the controller re-plans when it asks to (start, events, breaches, learning
/// that moved a planned bound, an adopted refit), the plan in force is measured for one interval
/// and the controller learns from it. A refit started after interval k is adopted at the start of
/// interval k+2, so a run is deterministic whatever the fit's wall time.
/// `ctx` is the controller's (Controller), and each interval's measurement noise derives
/// from its seed; the report records the seed.
Result<RunReport> run_online(const Context& ctx, const Workload& w, const Testbed& testbed,
                             std::unique_ptr<PredictorSource> source, const RunOptions& options);

/// @brief The observations of a measurement of `config`, for Controller::observe.
std::vector<ModelObservation> observations(const Measurement& m, const JointConfig& config);

}  // namespace corun
