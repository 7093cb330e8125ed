#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "corun/plan/solver.h"
#include "corun/runtime/infeasibility.h"
#include "corun/space/transition.h"

namespace corun {

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
  /// Per model, the share of its demand the plan admits (ControllerOptions::admission): 1 = all of
  /// it; 0 = paused (config kAbsent although the model is active). Empty when every model
  /// admits all of its demand.
  std::vector<double> admitted;
  double decision_ms = 0;  ///< wall time of the search (and degradation)
  /// Wall time the predictor source spent measuring before it (re-profiling).
  double measure_ms = 0;
  SearchStats stats;
};

}  // namespace corun
