#pragma once

// Rendering node plans (several GPUs, MIG slices) for `corun plan` and `corun eval node`.

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common.h"
#include "corun/core/context.h"
#include "corun/plan/solver.h"
#include "corun/runtime/node_plan.h"
#include "corun/runtime/predictor_source.h"

namespace corun::cli {

/// @brief The predictor sources a node plan uses: the fitted surrogate for whole GPUs when one
/// is given (else the catalog twin), the catalog twin for MIG slices.
struct NodeSources {
  std::unique_ptr<PredictorSource> whole;
  std::unique_ptr<PredictorSource> slices;
  std::unique_ptr<Testbed> reprofile;  ///< where the surrogate re-profiles changed demands
  std::string describe;
};

/// @brief A model's predicted (or measured) metrics as JSON, the fields of its family.
nlohmann::json predicted_json(const ModelSpec& m, const Predicted& p);
/// @brief The same in a short cell: "p95 12.3" or "ttft 420 tpot 31.0".
std::string predicted_headline(const ModelSpec& m, const Predicted& p);

/// @brief The flags `corun plan` and `corun eval node` share.
struct PlanFlags {
  std::string file, model, solver = "ga", testbed = "sim", catalog;
  std::uint64_t seed = kDefaultSeed;
  int threads = kDefaultThreads;
  double window_s = 10;
  bool json = false;
  std::string screen = NodePlanOptions{}.screen;  ///< the node search's screening solver

  /// @brief The run's Context: --seed and --threads.
  [[nodiscard]] Context context() const { return {seed, threads}; }
};

/// @brief --node-screen: the per-GPU solver that prices the node search's candidates.
void add_node_search_flags(CLI::App& sub, PlanFlags& f);

/// @brief The flags of a command that measures node plans: --testbed, --window, --catalog and
/// --json.
void add_measure_flags(CLI::App& sub, PlanFlags& f);

/// @brief Everything a node plan needs, built from the flags: predictor sources, the per-unit
/// solver, the unit predictions and the planner (which refers to the others: keep the object
/// where it was made).
struct NodeSession {
  NodeSources sources;
  std::unique_ptr<Solver> solver;
  std::unique_ptr<SourceUnitModels> models;
  std::unique_ptr<NodePlanner> planner;
};

/// @brief Builds a NodeSession for `w` (which outlives it); `flags.model` empty = the twin
/// everywhere. `ctx`: the seed and threads of the planner and of the surrogate's re-profiling.
/// `shared` (outlives the session; may be null): per-unit plans the planner shares with
/// planners of other sessions built from the same flags and Context.
Result<std::unique_ptr<NodeSession>> make_node_session(const Context& ctx, const Workload& w,
                                                       const PlanFlags& flags,
                                                       UnitPlanCache* shared = nullptr);

/// @brief The models a node plan puts on each of its units (indices into w.models), and the
/// names of those it could not place.
struct ModelsByUnit {
  std::vector<std::vector<std::size_t>> on;  ///< per unit of plan.layout
  std::vector<std::string> unplaced;
};
ModelsByUnit models_by_unit(const Workload& w, const NodePlan& plan);

/// @brief One node plan (and, when measured, what the testbed saw) as JSON: the layout, each
/// model's GPU, slice, unit and configuration, predictions, measurements and search cost.
nlohmann::json node_plan_json(const Workload& w, const NodePlan& plan, const NodeOutcome* measured);

/// @brief The same as a text table, one row per model.
std::string node_plan_text(const Workload& w, const NodePlan& plan, const NodeOutcome* measured);

}  // namespace corun::cli
