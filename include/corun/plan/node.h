#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/plan/node_placement.h"
#include "corun/plan/objective.h"
#include "corun/plan/solver.h"
#include "corun/plan/unit_plan_cache.h"
#include "corun/spec/node.h"

namespace corun {

/// @brief How the planner predicts the models co-running on units of one device (a whole GPU
/// or one MIG profile): the unit's view of the workload, a predictor over all of its models
/// (models not on the unit are kAbsent) and each model's latency margin.
struct UnitModel {
  const Workload* workload = nullptr;  ///< unit_workload(): same models, the unit's device
  const Predictor* predictor = nullptr;
  std::vector<double> margins;  ///< per model (empty = none)
  /// Per (model, local configuration): what it adds to its co-runners' load when it runs
  /// alone (standalone SM plus bandwidth utilisation); iGniter orders models by it.
  std::vector<std::vector<float>> loads;
};

/// @brief Where a node planner gets a UnitModel for each kind of unit. Implementations cache
/// per device (the returned pointer stays valid for the provider's lifetime). Called by one
/// thread at a time.
class UnitModels {
 public:
  virtual ~UnitModels() = default;
  /// @brief The predictions for units that behave as `unit.device`.
  virtual Result<const UnitModel*> for_unit(const GpuUnit& unit) = 0;
};

/// @brief A plan for a whole node: a partitioning (layout), each model's unit and each
/// model's knobs, with what the predictor expects of it.
struct NodePlan {
  std::string strategy;  ///< "corun" or a placement rule's name
  NodeLayout layout;
  std::vector<std::int32_t> assignment;  ///< per model: unit index in layout, or kNotPlaced
  JointConfig config;                    ///< per model: local configuration, kAbsent if unplaced
  std::vector<Predicted> predicted;      ///< per model
  double utility = 0;                    ///< predicted, summed over units
  double excess = 0;           ///< predicted SLA excess summed over units (0 when every SLA holds)
  bool placed = false;         ///< every active model has a unit
  bool feasible = false;       ///< placed, and every unit's plan fits its VRAM and SLAs
  std::uint64_t subplans = 0;  ///< per-unit plans solved by the full solver (cache misses)
  std::uint64_t screened = 0;  ///< per-unit plans solved by the screening solver
  std::uint64_t cache_hits = 0;
  double elapsed_ms = 0;

  /// @brief Feasible plans rank by utility; infeasible ones below all of them, by excess.
  [[nodiscard]] double fitness() const;
};

/// @brief How the node search runs.
struct NodePlanOptions {
  /// Per-unit problems with at most this many joint configurations are solved exhaustively
  /// (a proof under the predictor); larger ones with the given solver.
  std::uint64_t exhaustive_up_to = 4096;
  /// Restarts of the local search from a perturbed best assignment, per layout.
  int restarts = 3;
  /// The search stops after evaluating this many assignments per layout (cached or not, so
  /// that the result does not depend on what an earlier search left in the cache).
  std::uint64_t max_assignments = 1500;
  /// The local search prices candidate assignments with this cheap per-unit solver ("greedy",
  /// "hillclimb"; "" = the full solver throughout); the starts and the `polish` best distinct
  /// assignments it found are then planned with the full solver and the best of those kept.
  std::string screen = "greedy";
  /// How many of the screened search's best distinct assignments the full solver plans.
  int polish = 4;
  /// While screening, sets with at most this many joint configurations are still solved
  /// exhaustively (about the greedy pass's cost).
  std::uint64_t screen_exhaustive_up_to = 256;
};

/// @brief Plans a node: which unit each model runs on and its knobs, jointly. The inner
/// evaluation is the per-unit MeanField plan (the solver under the unit's predictor), cached
/// by (device, set of models); the outer search is a local search over assignments (move one
/// model, swap two) started from the best baseline placement, with seeded restarts, that prices
/// each candidate with a cheap per-unit solver (NodePlanOptions::screen); the baseline starts
/// and the search's best few assignments are then planned with the full solver and the best
/// kept, so the plan is never worse than a baseline start under the predictor; each
/// candidate partitioning of the node (a layout) is searched and the best kept. Pins and VRAM
/// are respected: a model runs only on its pinned GPU, and a set of models whose smallest
/// configurations exceed a unit's memory is infeasible there without being solved.
/// Deterministic for a seed. Not thread-safe (one planner per thread).
class NodePlanner {
 public:
  /// @param w the workload (outlives the planner)
  /// @param models where per-unit predictions come from (outlives the planner)
  /// @param solver the per-unit solver for large unit problems (outlives the planner)
  /// @param shared per-unit plans shared with other planners (outlives the planner; null =
  /// this planner's own only): sets already planned there are not solved again, and what
  /// this planner solves is added
  /// @param ctx the seed and threads of each per-unit plan and of the search
  NodePlanner(const Context& ctx, const Workload& w, UnitModels& models, const Solver& solver,
              NodePlanOptions options, UnitPlanCache* shared = nullptr);
  ~NodePlanner();

  /// @brief The joint plan over every layout of the node.
  Result<NodePlan> plan();
  /// @brief The joint plan for one layout.
  Result<NodePlan> plan(const NodeLayout& layout);
  /// @brief The knobs of a fixed assignment: each unit's plan for the models placed on it.
  Result<NodePlan> plan_assignment(const NodeLayout& layout,
                                   std::span<const std::int32_t> assignment, std::string strategy);
  /// @brief What a placement rule sees of `layout` (requests, capacities, pins, demand and
  /// the predicted interference for iGniter).
  Result<PlacementInput> placement_input(const NodeLayout& layout);
  /// @brief A baseline: rule `name`'s placement, then each unit's plan.
  Result<NodePlan> plan_baseline(const NodeLayout& layout, std::string_view name);

  struct Cache;  ///< per-unit plans by device and model set (implementation detail)

 private:
  // plan_assignment() with each unit planned by `solver` (`screening`: the cheap one, whose
  // plans are cached apart from the full solver's and never shared).
  Result<NodePlan> plan_with(const NodeLayout& layout, std::span<const std::int32_t> assignment,
                             std::string strategy, bool screening);

  const Context ctx_;
  const Workload* w_;
  UnitModels* models_;
  const Solver* solver_;
  NodePlanOptions options_;
  std::unique_ptr<Solver> exhaustive_;
  std::unique_ptr<Solver> screen_;  ///< null: the search uses the full solver
  std::unique_ptr<Cache> cache_;
};

}  // namespace corun
