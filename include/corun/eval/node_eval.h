#pragma once

// The node evaluation (`corun eval node`): corun's node plan beside the placement baselines
// (memory bin-packing, spread, round-robin, iGniter), every one measured on the testbed, for
// every partitioning of the node; and whether the partitioning corun picks is the one that
// measured best.

#include <cstddef>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/plan/node.h"
#include "corun/runtime/node_plan.h"
#include "corun/spec/node.h"
#include "corun/spec/workload.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief How each plan is measured: `repeats` windows of `window_s` (seeds ctx.seed,
/// ctx.seed + 1, ...).
struct NodeEvalOptions {
  int repeats = 3;
  double window_s = 10;
};

/// @brief One strategy's plan on one layout, measured `repeats` times.
struct NodeEvalRow {
  NodePlan plan;
  NodeOutcome first;           ///< the first measurement (shown per model)
  double mean_utility = 0;     ///< measured utility, mean over repeats
  std::size_t violations = 0;  ///< summed over repeats
  std::size_t units_used = 0;
};

/// @brief The evaluation: every layout's rows, the layout corun's plan predicts best and the
/// one whose corun plan measured best.
struct NodeEval {
  std::vector<NodeLayout> layouts;  ///< every partitioning of the node (node_layouts)
  /// Per layout: corun's plan first, then one per placement rule (placement_rule_names()).
  std::vector<std::vector<NodeEvalRow>> rows;
  std::size_t choice = 0;    ///< the layout corun's plan predicts best
  std::size_t measured = 0;  ///< the layout whose corun plan measured best
};

/// @brief Plans `w`'s node with `planner` (corun's plan and each placement rule's baseline) on
/// every layout of the node and measures every plan on `testbed`. The measured ranking puts
/// plans without violations first, then utility. `ctx.seed` seeds the measurements.
Result<NodeEval> evaluate_node(const Context& ctx, const Workload& w, NodePlanner& planner,
                               const Testbed& testbed, const NodeEvalOptions& options);

}  // namespace corun
