#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "corun/plan/predictor.h"

namespace corun {

/// @brief One unit's plan for one set of models, per member of the set in the set's key
/// order (see UnitPlanCache): each member's local configuration and predictions, and what
/// the plan scores.
struct UnitPlan {
  std::vector<std::int32_t> config;  ///< per member: local configuration
  std::vector<Predicted> predicted;  ///< per member
  double utility = 0;
  double excess = 0;  ///< predicted SLA excess (plus the VRAM penalty when it does not fit)
  bool feasible = true;
};

/// @brief Per-unit plans kept by what they depend on, so that node planners of different
/// workloads (a node before and after an arrival, the nodes of a cluster) plan a set of models
/// on a unit once: the key names the unit's device, the objective and the plan key of each
/// model on the unit (ModelSpec::plan_key(), not its name or position), sorted. A node planner
/// given one looks there before it solves, and stores what it solves.
///
/// The key does not name the predictor source, the solver or their options: share one cache
/// only between planners that use the same ones. The plan kept for a set is the first one
/// solved; a heuristic solver's result can depend on the order in which that planner listed
/// the set's models, so what a planner gets depends on what was planned before it (the same
/// for the same sequence of plans). Not thread-safe.
class UnitPlanCache {
 public:
  /// @brief The plan stored under `key`, or null.
  [[nodiscard]] const UnitPlan* find(const std::string& key) const {
    const auto it = plans_.find(key);
    return it == plans_.end() ? nullptr : &it->second;
  }
  /// @brief Stores `plan` under `key` (a key already present keeps its plan).
  /// @return the plan stored under `key`; valid for the cache's lifetime.
  const UnitPlan& insert(std::string key, UnitPlan plan) {
    return plans_.emplace(std::move(key), std::move(plan)).first->second;
  }
  /// @brief Number of sets stored.
  [[nodiscard]] std::size_t size() const { return plans_.size(); }

 private:
  std::unordered_map<std::string, UnitPlan> plans_;
};

}  // namespace corun
