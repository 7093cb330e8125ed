#pragma once

// The cluster evaluation (`corun eval cluster`): a seeded stream of model arrivals and
// departures over K nodes of G GPUs, placed by several schedulers side by side (corun's
// extender rule, corun's consolidating rule, memory bin-packing, spread), optionally under one
// cluster-wide GPU budget; every changed node is measured on the testbed after each event.

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/plan/node.h"
#include "corun/spec/workload.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief Every scheduler the cluster evaluation knows, in its default order: corun (extender
/// rule: the node whose plan gains most), corun-pack (consolidating: a GPU in use where every
/// SLA holds as predicted before a new one), binpack, spread.
inline const std::vector<std::string> kClusterSchedulers = {"corun", "corun-pack", "binpack",
                                                            "spread"};

/// @brief Builds the planner of one node: `w` (which outlives it) planned under `ctx`;
/// `shared` (outlives it; may be null): per-unit plans shared with the planners of the other
/// nodes of one scheduler. The planner returned owns (or outlives) what it refers to.
using NodePlannerFactory = std::function<Result<std::shared_ptr<NodePlanner>>(
    const Context& ctx, const Workload& w, UnitPlanCache* shared)>;

/// @brief What to evaluate: the cluster's shape, the stream and the schedulers.
struct ClusterEvalOptions {
  int nodes = 4;
  int gpus = 8;  ///< per node
  int arrivals = 200;
  double residents = 24;  ///< mean models in the cluster (lifetime / inter-arrival time)
  /// Side by side, in this order; each one of kClusterSchedulers.
  std::vector<std::string> schedulers = kClusterSchedulers;
  int gpu_budget = 0;          ///< GPUs in use cluster-wide, at most (0 = the whole cluster)
  double window_s = 10;        ///< measurement window of each changed node
  NodePlannerFactory planner;  ///< the node planners (required)
};

/// @brief One scheduler's totals over the stream, one interval per event.
struct ClusterTotals {
  double gpu_sum = 0, utility_sum = 0, decision_ms = 0;
  double utility_held_sum = 0;  ///< the same, counting only models that held every SLA
  std::size_t gpu_max = 0, violations = 0, rejected = 0, intervals = 0;
  std::map<std::string, std::size_t> violations_by_template;  ///< the same, by template name
  std::map<std::string, std::size_t> rejected_by_template;
  std::vector<nlohmann::json> placed;  ///< per arrival: [node, gpu] where it went, or null
};

/// @brief One scheduler's run over the stream.
struct ClusterRun {
  std::string scheduler;
  ClusterTotals totals;
};

/// @brief The evaluation: the stream's length and each scheduler's totals.
struct ClusterEval {
  std::size_t events = 0;        ///< arrivals and departures in the stream
  std::vector<ClusterRun> runs;  ///< in the order of ClusterEvalOptions::schedulers
};

/// @brief Replays a seeded stream of `options.arrivals` arrivals of `mix`'s models (the
/// templates: Poisson arrivals of rate 1, exponential lifetimes of mean `options.residents`,
/// uniform templates) and their departures over `options.nodes` nodes of `options.gpus` GPUs,
/// under each scheduler of `options.schedulers`; after each event every changed node is
/// measured on `testbed`. `mix` lists at least one model and describes one GPU. `ctx.seed`
/// draws the stream and seeds the measurements; `ctx` also plans the nodes.
Result<ClusterEval> evaluate_cluster(const Context& ctx, const Workload& mix,
                                     const Testbed& testbed, const ClusterEvalOptions& options);

}  // namespace corun
