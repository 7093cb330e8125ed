#pragma once

// Internal helpers shared by the solvers: batched evaluation with a memo, and plan assembly.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "corun/plan/objective.h"
#include "corun/plan/solver.h"

namespace corun::detail {

/// @brief Evaluates joint configurations in batches through the problem's predictor and keeps a
/// memo of fitness by configuration, so that a search never pays twice for the same candidate.
/// Not thread-safe: one per thread.
class Evaluator {
 public:
  /// @param threads batches of at least kParallelRows missing candidates are predicted on this
  /// many threads (the predictor is thread-safe), the rest on the caller's.
  explicit Evaluator(const PlanProblem& p, std::size_t batch = 256, int threads = 1);

  /// @brief Smallest batch worth a second thread (starting one costs tens of microseconds).
  static constexpr std::size_t kParallelRows = 32;

  /// @brief Fitness (PlanProblem::Score::fitness) of each of `rows` configurations.
  void fitness(std::span<const std::int32_t> configs, std::size_t rows, std::span<double> out);
  /// @brief Fitness of one configuration.
  double fitness(std::span<const std::int32_t> config);
  [[nodiscard]] std::uint64_t evaluated() const { return evaluated_; }

 private:
  const PlanProblem* p_;
  std::size_t n_;
  int threads_;
  std::vector<std::int32_t> pending_;
  std::vector<Predicted> predicted_;
  std::unordered_map<std::uint64_t, double> memo_;
  std::uint64_t evaluated_ = 0;
};

/// @brief What a branch and bound bounded in nodes found (see bounded_search).
struct BoundedSearch {
  JointConfig best;       ///< the best plan found (the incumbent when none beat it)
  bool improved = false;  ///< a plan better than the incumbent was found
  bool finished = false;  ///< the search ended within its budget: `best` is optimal (monotone)
  std::uint64_t nodes = 0;
  std::uint64_t evaluated = 0;
};

/// @brief The exact solver's branch and bound over a mean-field (aggregate) predictor, started
/// from a feasible `incumbent` of predicted `utility` and stopped after `node_budget` nodes (per
/// worker); nullopt when the predictor is not an aggregate one. `workers` > 1: the split search
/// the exact solver runs (the same plan; nodes and evaluations depend on the number of workers).
/// `recall` false: every feasibility check is predicted, none answered from the memo of loads
/// borne and refused (the same search, for more predictions: the memo's reference).
/// Deterministic.
std::optional<BoundedSearch> bounded_search(const PlanProblem& p, const JointConfig& incumbent,
                                            double utility, std::uint64_t node_budget,
                                            int workers = 1, bool recall = true);

/// @brief The GA; `bounded_polish` false: without its final bounded branch and bound (the exact
/// solver's own seed, which runs the full one after it).
std::unique_ptr<Solver> make_ga_solver(bool bounded_polish);

/// @brief Every bound of a search over a mean-field predictor predicts against a load shrunk by
/// this relative slack: a search adds loads up in another order than the predictor does, and
/// float rounding must not make a bound pessimistic (monotonicity makes a smaller load an
/// optimistic one).
inline constexpr float kBoundSlack = 1e-5f;

/// @brief Per active model m and local configuration l, an upper bound of the utility model m
/// can contribute in l to any feasible plan: its utility predicted against the least load the
/// other active models can add (shrunk by kBoundSlack), -inf where l breaks its SLA even
/// there. Empty rows for inactive models. nullopt unless the problem's predictor is an aggregate
/// one; bounds only where it is monotone() (otherwise a guide: the exact solver's heuristic
/// mode). `evaluated` counts the predictions.
std::optional<std::vector<std::vector<double>>> utility_bounds(const PlanProblem& p,
                                                               std::uint64_t* evaluated = nullptr);

/// @brief Milliseconds since `start`.
inline double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

/// @brief A configuration with inactive models set to kAbsent and active ones from `c`
/// (or 0 where `c` is absent or out of range).
JointConfig normalise(const PlanProblem& p, const JointConfig& c);

}  // namespace corun::detail
