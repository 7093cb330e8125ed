#pragma once

// What each measurement window pays of the transitions under way: a transition's outage can be
// longer than a window and carries into the next ones, a make-before-break swap holds its old
// copy's VRAM until the new copy is up (and the new copy's start runs kernels beside everyone
// for its last seconds), and a copy that broke first warms up on its first live
// requests once it serves again. `corun run` keeps one ledger over its timeline; the hindsight
// oracle (eval/hindsight_oracle.h) keeps one per candidate transition, so both charge the
// same seconds.
//
// @code
// TransitionLedger ledger(w.models.size());
// ledger.begin(joint_transition(table, now, previous, config));
// MeasureOptions o(window_s, conditions);
// o.transitions = ledger.next_window(config, window_s);
// @endcode

#include <cstddef>
#include <vector>

#include "corun/space/transition.h"
#include "corun/testbed/testbed.h"

namespace corun {

class TransitionLedger {
 public:
  explicit TransitionLedger(std::size_t models);

  /// @brief Starts the reloads and restarts of `t` (a model that arrives or leaves is not a
  /// transition of a running copy; live changes cost nothing). A model already in a transition
  /// starts over with the new one.
  void begin(const JointTransition& t);

  /// @brief The charges of the next window of `window_s` seconds for the models that run in
  /// `config` (a model that does not run drops what it still owed), and advances the ledger.
  std::vector<TransitionCharge> next_window(const JointConfig& config, double window_s);

  /// @brief Whether nothing is under way.
  [[nodiscard]] bool idle() const;

 private:
  std::vector<double> outage_left_;   ///< seconds without a server still to come
  std::vector<double> swap_left_;     ///< seconds a make-before-break swap still holds two copies
  std::vector<double> swap_vram_;     ///< the old copy's bytes during the swap
  std::vector<double> swap_gpu_s_;    ///< the new copy's kernels run in the last seconds of it
  std::vector<double> swap_gpu_share_;
  std::vector<int> warmup_left_;      ///< requests of a copy that broke first still to warm up
  std::vector<double> warmup_slowdown_;
  std::vector<Actuation> begins_;     ///< a change begun since the last window (kNone: none)
};

}  // namespace corun
