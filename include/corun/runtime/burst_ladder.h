#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/plan/objective.h"
#include "corun/plan/solver.h"
#include "corun/runtime/infeasibility.h"
#include "corun/runtime/surrogate_source.h"
#include "corun/spec/workload.h"
#include "corun/surrogate/surrogate.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief One planning decision of one GPU, made with a declared tool burst's load in the
/// predictions or without it, and everything it refers to (the problem holds references).
struct BurstAttempt {
  /// The share of the ladder (an index into BurstLadderInputs::loads) whose burst the decision
  /// belongs to; none when the workload declares no tools.
  std::optional<std::size_t> burst;
  std::unique_ptr<SurrogateSource> source;
  std::unique_ptr<Predictor> predictor;
  std::vector<double> margins;
  std::unique_ptr<PlanProblem> problem;
  DegradedPlan degraded;

  /// Every SLA holds as predicted, none given up.
  [[nodiscard]] bool feasible() const { return degraded.result.feasible && degraded.why.empty(); }
};

/// @brief What every decision of one GPU's ladder reads.
struct BurstLadderInputs {
  const Context& ctx;  ///< the solver's seed and threads
  const Workload& w;
  const surrogate::Surrogate& surrogate;  ///< fitted for `w`
  const Solver& solver;
  const Testbed& testbed;           ///< re-profiles changed demands
  const std::vector<bool>& active;  ///< per model: running now
  /// The tool burst's load at each share the ladder may try (loads[i] at shares[i]); empty
  /// when the workload declares no tools.
  const std::vector<Interference>& loads;
  double window_s = 10;
};

/// @brief Where the ladder of the tools' shares stopped.
struct BurstLadder {
  std::unique_ptr<BurstAttempt> steady;  ///< solved only when a burst plan misses an SLA
  std::vector<double> tried;             ///< the shares tried, in order
  std::unique_ptr<BurstAttempt> chosen;  ///< the attempt that stands
  bool room = false;                     ///< the chosen plan leaves the burst room
};

/// @brief Whether a plan made with the burst in the predictions leaves the burst room: every
/// SLA holds at its margin; or, when some cannot even without the burst (the steady plan gives
/// them up, `steady`), the burst gives up no other, and each given-up SLA still holds at the
/// point prediction (no margin) during the burst: the burst costs nothing the steady plan had.
bool leaves_room(const Workload& w, const BurstAttempt& a, const BurstAttempt& steady);

/// @brief One decision: with the burst at share i in the predictions (`planned`), or without it.
Result<std::unique_ptr<BurstAttempt>> solve_burst_attempt(const BurstLadderInputs& in,
                                                          std::size_t i, bool planned);

/// @brief Solves down the ladder of `shares` (largest first) until a plan leaves the burst
/// room; with `plan_burst` false, one decision without the burst stands. The last attempt
/// stands when none leaves room (corun plan; docs/placement.md).
///
/// @code
///   const BurstLadderInputs in{ctx, w, fitted, *solver, testbed, active, loads, 10};
///   auto ladder = climb_burst_ladder(in, {1.0, 0.5, 0.25}, true);
///   if (ladder && ladder->room) use(ladder->chosen->degraded.result.config);
/// @endcode
Result<BurstLadder> climb_burst_ladder(const BurstLadderInputs& in,
                                       const std::vector<double>& shares, bool plan_burst);

}  // namespace corun
