#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "corun/core/result.h"
#include "corun/plan/solver.h"
#include "corun/spec/workload.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief Where the controller gets predictions for the workload as it is now. A surrogate
/// source refits nothing online; it may refresh a changed model's standalone profile (a
/// measurement linear in its local configurations) when its demand or context changes.
class PredictorSource {
 public:
  virtual ~PredictorSource() = default;
  /// @brief A predictor for `current` (same models, current demands). Called after each event.
  virtual Result<std::unique_ptr<Predictor>> predictor_for(const Workload& current) = 0;
  /// @brief Calibrated latency margin per model (0.1 = plan with 10 % headroom).
  virtual std::vector<double> margins(const Workload& current) = 0;
};

/// @brief One interval of the online loop: what happened, what was decided, what was measured.
struct IntervalRecord {
  double t_s = 0;                    ///< start of the interval
  std::vector<std::string> events;   ///< events applied at t_s ("arrive cam3", ...)
  bool replanned = false;
  std::string reason;                ///< why a re-plan happened ("start", "event", "breach")
  bool plan_changed = false;
  double decision_ms = 0;            ///< wall time of the solver call (0 when not replanned)
  std::uint64_t evaluated = 0;
  JointConfig plan;
  std::vector<Predicted> predicted;  ///< per model, from the surrogate
  Measurement measured;              ///< ground truth from the testbed
  double predicted_utility = 0;
  double measured_utility = 0;       ///< utility recomputed from measured metrics
  std::vector<bool> breach;          ///< per model: measured SLA breach (ground truth)
};

/// @brief How the online loop runs.
struct ControllerOptions {
  std::string solver = "ga";
  std::uint64_t seed = 1;
  int threads = 2;
  /// After a measured breach the model's margin grows to the observed under-prediction plus
  /// this much, so the re-plan keeps more headroom.
  double breach_margin_step = 0.05;
  /// Called after every decision with the problem it solved and the answer (evaluations use
  /// it to score the decision against references); not timed as part of the decision.
  std::function<void(const PlanProblem&, const PlanResult&, const IntervalRecord&)> on_decision;
};

/// @brief Everything a run produced.
struct RunReport {
  std::string workload;
  std::string testbed;
  std::string device;
  std::string solver;
  std::uint64_t seed = 0;
  std::vector<std::string> model_names;
  std::vector<IntervalRecord> intervals;

  [[nodiscard]] std::size_t sla_violations() const;  ///< model-intervals breaching, measured
  [[nodiscard]] std::vector<double> decision_ms() const;  ///< one per re-plan
};

/// @brief Runs a workload's timeline online: at each interval apply due events; re-plan (warm
/// started) at the start, after events and after a measured breach; apply the plan to the
/// testbed for one interval; record predicted vs measured metrics and SLA status.
/// `on_interval` (optional) is called after each interval, e.g. to print a line.
Result<RunReport> run_online(const Workload& w, const Testbed& testbed, PredictorSource& source,
                             const ControllerOptions& options,
                             const std::function<void(const IntervalRecord&)>& on_interval = {});

/// @brief Whether measured metrics meet a model's SLA (no margin; ground truth).
bool measured_meets_sla(const ModelSpec& m, const ModelMetrics& mm);

/// @brief Predicted-shaped view of measured metrics (for utility on ground truth).
Predicted as_predicted(const ModelMetrics& mm);

}  // namespace corun
