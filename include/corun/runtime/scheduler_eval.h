#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "corun/core/result.h"
#include "corun/runtime/controller.h"

namespace corun {

/// @brief One row of `corun eval scheduler`: a scenario run online with one solver.
struct SchedulerEvalRow {
  std::string scenario;
  std::string solver;
  std::size_t decisions = 0;
  /// Median over decisions of (exhaustive - chosen) / exhaustive predicted utility, under the
  /// same surrogate, margins and constraints, in %.
  double gap_to_exhaustive_pct = 0;
  /// Median over decisions of (oracle - chosen) / oracle, where both are scored on the testbed
  /// itself (one fixed noise seed) and the oracle is the best configuration that meets every
  /// SLA there, found by exhaustive search on the testbed; in %.
  double gap_to_oracle_pct = 0;
  std::size_t sla_violations = 0;  ///< measured model-intervals breaching
  double decision_ms_p50 = 0;
  double decision_ms_p99 = 0;
  double mean_measured_utility = 0;
};

/// @brief Makes a fresh predictor source for a scenario (each run gets its own).
using SourceFactory = std::function<Result<std::unique_ptr<PredictorSource>>(const Workload&)>;

/// @brief What to evaluate.
struct SchedulerEvalOptions {
  std::vector<std::string> solvers = {"ga", "exhaustive", "greedy", "hillclimb"};
  std::uint64_t seed = 1;
  int threads = 2;
  bool oracle = true;  ///< compute gap_to_oracle_pct (an exhaustive sweep on the testbed)
  std::function<void(const std::string&)> progress;
};

/// @brief Runs every scenario with every solver and scores the decisions.
Result<std::vector<SchedulerEvalRow>> evaluate_scheduler(
    const std::vector<Workload>& scenarios, const Testbed& testbed, const SourceFactory& sources,
    const SchedulerEvalOptions& options);

nlohmann::json to_json(const SchedulerEvalRow& r);

}  // namespace corun
