#pragma once

// Placement evaluation: the brute-force oracle, each policy's final mapping judged against
// it, and a seeded generator of random tool DAGs for wider tests.
//
// "Optimal" (docs/placement.md): a policy's final mapping is run once by the executor
// WITHOUT noise (its true makespan under the model); the oracle is the smallest noise-free
// makespan over every valid mapping, failures excluded. The mapping is optimal when it did not
// fail and its true makespan is at most (1 + tolerance) x the oracle's, tolerance 1 %. Noise
// only affects what the exploring policies observe, never the judgement.
//
// Next to a co-running plan the oracle is CONSTRAINED: the smallest makespan among the
// mappings whose burst the plan's testbed measures as breaking no co-runner's SLA (ground
// truth, never a prediction); an optimal mapping must also break none, as measured.

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/mapping/agent.h"
#include "corun/mapping/policy.h"
#include "corun/mapping/problem.h"

namespace corun::mapping {

/// @brief The best mapping by noise-free exhaustive search.
struct Oracle {
  Mapping mapping;
  double makespan_ms = 0;
  std::uint64_t mappings = 0;  ///< valid mappings examined
  /// Next to a co-running plan: the best makespan ignoring the co-runners (the unconstrained
  /// optimum), and how many mappings' bursts the testbed measured to find the constrained one.
  std::optional<double> unconstrained_makespan_ms;
  std::uint64_t bursts_measured = 0;
};

/// @brief Runs every valid mapping without noise; errors when there are more than
/// `max_mappings` or when every mapping fails. With a co-running plan, measures the bursts of
/// the mappings in increasing makespan order on the plan's testbed and returns the first that
/// breaks no co-runner's SLA (an error when none does, or the testbed fails).
Result<Oracle> brute_force_oracle(const PlacementProblem& problem,
                                  std::uint64_t max_mappings = 1000000);

/// @brief Noise-free makespan of a valid mapping in ms (+infinity when a tool fails).
double true_makespan_ms(const PlacementProblem& problem, const Mapping& mapping);

/// @brief One row of `corun eval placement`.
struct PlacementRow {
  std::string scenario;
  std::string kind;
  std::string policy;
  bool optimal = false;
  double makespan_ms = 0;  ///< true (noise-free) makespan of the final mapping
  double oracle_makespan_ms = 0;
  std::uint64_t executions = 0;  ///< DAG runs spent exploring
  bool failed = false;           ///< the final mapping fails (out of VRAM) without noise
  std::string mapping;           ///< "id=placement ..."
  std::optional<double> predicted_makespan_ms;
  std::string error;  ///< the policy could not decide (e.g. too many arms)
  /// Next to a co-running plan: the co-runners' SLAs breached while the final mapping's burst
  /// runs, MEASURED on the plan's testbed (nullopt: no co-running plan). Ground truth only.
  std::optional<std::vector<SlaOutcome>> corunner_breaches;
  /// The same SLAs as the co-runner guard PREDICTS them for that burst (nullopt: no guard).
  std::optional<std::vector<SlaOutcome>> predicted_corunner_breaches;
  std::optional<double> unconstrained_oracle_makespan_ms;  ///< next to a co-running plan
  std::size_t excluded = 0;  ///< mappings the policy set aside to protect the co-runners
};

nlohmann::json to_json(const PlacementRow& row);

/// @brief What to evaluate.
struct EvalOptions {
  std::vector<std::string> policies = {"all-gpu", "heft", "dmda", "bandit", "brute-force", "agent"};
  std::shared_ptr<Agent> agent;  ///< for "agent"; defaults to a BuiltinAgent
  double tolerance = 0.01;
  int threads = 1;  ///< problems evaluated in parallel (agents must then be thread-safe)
};

/// @brief The co-runners' SLAs measured on their testbed while `mapping`'s tool burst (its
/// noise-free run) occupies the GPU; nullopt when `problem` has no co-running plan.
Result<std::optional<std::vector<SlaOutcome>>> measure_corunners_during(
    const PlacementProblem& problem, const Mapping& mapping);

/// @brief The co-runners' SLAs the guard PREDICTS broken by `mapping`'s noise-free burst;
/// nullopt when `problem` has no guard.
std::optional<std::vector<SlaOutcome>> predict_corunners_during(const PlacementProblem& problem,
                                                                const Mapping& mapping);

/// @brief Judges one policy's decision on one problem against its oracle.
PlacementRow judge(const PlacementProblem& problem, const Oracle& oracle, Policy& policy,
                   double tolerance);

/// @brief Every policy on every problem: rows in problem order, then policy order. A policy
/// that fails to decide gets a row with `error` set and optimal = false.
Result<std::vector<PlacementRow>> evaluate(const std::vector<PlacementProblem>& problems,
                                           const EvalOptions& options);

/// @brief Settings of the random scenario generator.
struct GeneratorOptions {
  int min_tools = 4;
  int max_tools = 8;
};

/// @brief A random tool DAG (seeded): 4-8 tools as a chain, a fan-out/fan-in or a layered
/// DAG, drawn from the whole catalog or (half the time) from the tools whose placement is
/// contested; half get an ample VRAM budget, half a budget of 25-70 % of their summed GPU
/// footprints; 30 % run next to a background GPU tenant.
/// `ctx.seed` draws the scenario, and becomes the scenario's own seed (Scenario::seed).
Scenario generate_scenario(const Context& ctx, const ToolCatalog& tools, const Device& device,
                           const GeneratorOptions& options = {});

}  // namespace corun::mapping
