#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "corun/space/space.h"
#include "corun/spec/workload.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief How a plan fared on the testbed over independent measurement windows.
struct RobustScore {
  double earned = 0;      ///< mean utility per window, a window breaching an SLA earning 0
  double utility = 0;     ///< mean measured utility per window, breaches or not
  std::size_t breaching_windows = 0;
  bool holds = false;     ///< SLAs held in at least the oracle's `hold` share of the windows
};

/// @brief The references plans are judged against, measured on the testbed itself (never on
/// predictions). The robust oracle is the best plan whose SLAs hold in at least `hold` (99 %)
/// of `windows` (20) independent measurement windows, ranked by mean measured utility; the
/// single-window oracle is the best plan that meets every SLA in one window with a fixed noise
/// seed, which can pick a plan that passed by luck. Both are cached per workload state and
/// testbed conditions. Thread-safe.
///
/// The robust search is exact without measuring every configuration 20 times: utility is at
/// most weight × quality × (1 − skip) summed over models (the served fraction is at most 1),
/// so candidates are visited in decreasing order of that bound and the search stops when the
/// bound falls to the best robust utility found. Candidates that miss an SLA by more than 50 %
/// in the single window are skipped: noise of that size does not occur in 20 windows.
class RobustOracle {
 public:
  /// @param candidates how many of the best robust plans best() keeps (Answer::candidates):
  /// 1 stops the search at the best one
  RobustOracle(const Testbed& testbed, double window_s, int threads, int windows = 20,
               double hold = 0.99, int candidates = 1);

  struct Answer {
    bool feasible = false;  ///< some plan holds (robust)
    JointConfig config;
    double utility = 0;     ///< its mean measured utility over the windows
    bool feasible_1 = false;  ///< some plan met every SLA in the single window
    JointConfig config_1;
    double utility_1 = 0;   ///< the single-window oracle's utility in its window
    /// The best robust plans with their mean measured utility, best first: up to the
    /// constructor's `candidates`, each found by the same exact search (a plan whose bound
    /// cannot beat the last one kept is not measured; with fewer than `candidates` found, the
    /// search goes on while the bound is above half the best).
    std::vector<std::pair<JointConfig, double>> candidates;
  };
  /// @brief The oracles for the workload as it is (active models, demands, SLAs) under
  /// `conditions`. Measures every joint configuration of the active models: the caller keeps
  /// their count exact (below 2^64; evaluate_scheduler() refuses larger scenarios).
  Answer best(const Workload& now, const Conditions& conditions);
  /// @brief `plan` measured over the oracle's windows. `admitted` (a plan that refuses part of
  /// some demand: admitted_workload()) is what runs; utility is counted against `now`.
  RobustScore score(const Workload& now, const Conditions& conditions, const JointConfig& plan,
                    const Workload* admitted = nullptr);
  /// @brief `plan` measured in the single-window oracle's window: its utility, 0 when it breaches.
  double score_1(const Workload& now, const Conditions& conditions, const JointConfig& plan,
                 const Workload* admitted = nullptr);

  /// @brief What the windows of a transition cost `plan`: its mean earned utility over the first
  /// charged_windows() windows with `charges` (testbed.h: TransitionCharge) minus the same
  /// windows without them (≤ 0 in expectation; the same seeds, so noise cancels).
  double transition_penalty(const Workload& now, const Conditions& conditions,
                            const JointConfig& plan, const std::vector<TransitionCharge>& charges,
                            const Workload* admitted = nullptr);
  /// @brief Windows a transition's penalty is measured over: min(windows, 100).
  [[nodiscard]] int charged_windows() const;

  /// @brief Windows measured so far (cost of the references).
  [[nodiscard]] std::uint64_t measurements() const;

 private:
  RobustScore measure_windows(const Workload& now, const Workload& runs, const Conditions& c,
                              const JointConfig& plan, int windows,
                              const std::vector<TransitionCharge>& charges = {});

  const Testbed& testbed_;
  double window_s_;
  int threads_;
  int windows_;
  double hold_;
  int candidates_;
  mutable std::mutex mutex_;
  std::map<std::string, Answer> best_;        // GUARDED_BY(mutex_)
  std::map<std::string, RobustScore> scores_;  // GUARDED_BY(mutex_)
  std::map<std::string, double> penalties_;    // GUARDED_BY(mutex_)
  std::uint64_t measurements_ = 0;             // GUARDED_BY(mutex_)
};

/// @brief What identifies a workload state for the references: active models, demands, SLAs.
std::string state_key(const Workload& w);

}  // namespace corun
