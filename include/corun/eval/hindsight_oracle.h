#pragma once

// The hindsight oracle: the best schedule of plans over a whole run, knowing every interval's
// workload and testbed conditions in advance, that pays the same transition costs as the run
// (runtime/transition_ledger.h). Dynamic programming over the intervals, on each interval's best
// robust candidates (RobustOracle::Answer::candidates) and the candidates it could keep from the
// interval before. Everything is measured on the testbed, never predicted.
//
// The value of a schedule is the sum over intervals of its plan's mean earned utility per
// window (RobustOracle::score: a window that breaches an SLA earns 0), plus, for each change,
// the penalty of the windows its transition charges (RobustOracle::transition_penalty), assuming
// the plan then stays until the transition is paid. value() scores any schedule — a run's — with
// the same function, so the gap between the two compares like with like.
//
// @code
// RobustOracle robust(testbed, window_s, threads, 1000, 0.99, 3);
// HindsightOracle hindsight(robust, ActuationTable::builtin(), window_s);
// std::vector<HindsightInterval> run = ...;           // each interval's workload and conditions
// const HindsightSchedule best = hindsight.best(run);
// const double mine = hindsight.value(run, plans, admitted);
// @endcode

#include <cstddef>
#include <vector>

#include "corun/eval/robust_oracle.h"
#include "corun/space/transition.h"

namespace corun {

/// @brief One interval of a run: the workload as it stood and the testbed's conditions.
struct HindsightInterval {
  Workload now;
  Conditions conditions;
};

/// @brief The hindsight oracle's schedule.
struct HindsightSchedule {
  std::vector<JointConfig> plans;  ///< per interval; empty where no robust plan holds
  /// Sum over the intervals it plans of the mean earned utility per window, net of the
  /// transition penalties (utility × intervals).
  double value = 0;
  std::vector<bool> planned;  ///< per interval: some robust plan held (counted in value)
  std::size_t restarts = 0;
  std::size_t reloads = 0;
};

class HindsightOracle {
 public:
  /// @param keep at most this many of the previous interval's candidates carried into the next
  /// (the ones with the best value so far), so that the schedule can keep a plan that is no
  /// longer among an interval's best
  HindsightOracle(RobustOracle& robust, const ActuationTable& table, double window_s,
                  std::size_t keep = 6);

  /// @brief The best schedule over `intervals`.
  HindsightSchedule best(const std::vector<HindsightInterval>& intervals);

  /// @brief The value of `plans` (one per interval) by the same function, over the intervals
  /// `counted` says (the oracle's `planned`). `admitted` (per interval, may be empty) is what a
  /// plan that refuses part of some demand runs (controller.h: admitted_workload).
  double value(const std::vector<HindsightInterval>& intervals,
               const std::vector<JointConfig>& plans,
               const std::vector<std::vector<double>>& admitted,
               const std::vector<bool>& counted);

 private:
  // The value interval k adds when `to` follows `from` (empty: no plan before), with the
  // penalty of the windows the transition charges from k on.
  double step_value(const std::vector<HindsightInterval>& intervals, std::size_t k,
                    const JointConfig& from, const JointConfig& to,
                    const std::vector<double>* admitted);

  RobustOracle& robust_;
  const ActuationTable& table_;
  double window_s_;
  std::size_t keep_;
};

}  // namespace corun
