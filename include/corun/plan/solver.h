#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/plan/objective.h"

namespace corun {

/// @brief How a solver runs besides its Context (seed, threads): an optional warm start.
struct SolverOptions {
  /// The plan in force, used by solvers that warm-start (GA, hill climbing). Entries for
  /// models that are not active are ignored.
  std::optional<JointConfig> warm_start;
};

/// @brief What a search cost.
struct SearchStats {
  std::uint64_t evaluated = 0;  ///< joint configurations whose predictions were computed
  std::uint64_t nodes = 0;      ///< branch-and-bound nodes (exact only)
  double elapsed_ms = 0;
  bool proved_optimal = false;  ///< exhaustive and exact prove optimality under the predictor
};

/// @brief A solver's answer: the plan, its predicted metrics and score, and search statistics.
/// When no configuration satisfies every constraint, `feasible` is false and `config` is the
/// least-violating one found.
struct PlanResult {
  std::string solver;
  JointConfig config;
  std::vector<Predicted> predicted;  ///< one per model (zeros for inactive models)
  double utility = 0;
  bool feasible = false;
  SearchStats stats;
};

/// @brief A search over joint configurations under a PlanProblem's predictor and constraints.
///
/// @code
///   SimTestbed sim;  // any Predictor will do: a compiled surrogate, the twin, a testbed
///   const TestbedPredictor truth(Context{}, w, sim, MeasureOptions{10, {}, false});
///   const PlanProblem p(w, std::vector<bool>(w.models.size(), true), truth);  // all active
///   Result<std::unique_ptr<Solver>> s = make_solver("exhaustive");  // one of solver_names()
///   if (!s) return s.error();                            // unknown names get a suggestion
///   Result<PlanResult> r = (*s)->solve(Context{.seed = 1, .threads = 2}, p, {});
///   if (!r) return r.error();
///   const JointConfig& plan = r->config;  // one local index per model; see r->feasible
/// @endcode
class Solver {
 public:
  virtual ~Solver() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// @param ctx the search's seed (GA, hill climbing) and worker threads; the answer does not
  /// depend on the threads
  virtual Result<PlanResult> solve(const Context& ctx, const PlanProblem& problem,
                                   const SolverOptions& options) const = 0;
};

/// @brief "exhaustive", "ga", "exact", "greedy", "hillclimb".
std::vector<std::string> solver_names();
Result<std::unique_ptr<Solver>> make_solver(std::string_view name);

/// @brief Predicts and scores one configuration (used to report a plan's predictions).
PlanResult evaluate_plan(const PlanProblem& problem, const JointConfig& config,
                         std::string solver);

}  // namespace corun
