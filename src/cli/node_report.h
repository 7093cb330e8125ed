#pragma once

// Rendering node plans (several GPUs, MIG slices) for `corun plan` and `corun eval node`.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

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

/// @brief Builds the sources; `surrogate_file` empty = the twin everywhere.
Result<NodeSources> make_node_sources(const Workload& w, const std::string& surrogate_file,
                                      const std::string& testbed, double window_s,
                                      std::uint64_t seed);

/// @brief One node plan (and, when measured, what the testbed saw) as JSON: the layout, each
/// model's GPU, slice, unit and configuration, predictions, measurements and search cost.
nlohmann::json node_plan_json(const Workload& w, const NodePlan& plan, const NodeOutcome* measured);

/// @brief The same as a text table, one row per model.
std::string node_plan_text(const Workload& w, const NodePlan& plan, const NodeOutcome* measured);

}  // namespace corun::cli
