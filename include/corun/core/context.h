#pragma once

#include <cstdint>
#include <initializer_list>

#include "corun/core/rng.h"

namespace corun {

/// @brief What a run passes down explicitly instead of globals: the seed every random stream
/// of the run derives from, and the thread budget of whatever it starts (solver workers,
/// profiling and evaluation tasks). The CLI builds one from --seed and --threads, `corun serve`
/// holds one for its lifetime, and each layer that draws a random number or starts a thread
/// takes it as its first argument (as XGBoost passes its `Context`). Options structs hold only
/// what is theirs. Cheap to copy; results never depend on `threads`.
///
/// @code
///   const Context ctx{.seed = 7, .threads = 4};   // or Context{} for the defaults
///   Controller controller(ctx, workload, std::move(source), ControllerOptions{});
///   auto r = (*solver)->solve(ctx.derived({decision_id}), problem);  // a stream of its own
/// @endcode
struct Context {
  /// The seed every verb and library entry point starts from unless told otherwise.
  static constexpr std::uint64_t kDefaultSeed = 1;
  /// The compute threads unless told otherwise: the cores of the smallest machine corun is
  /// built and tested on.
  static constexpr int kDefaultThreads = 2;

  std::uint64_t seed = kDefaultSeed;
  int threads = kDefaultThreads;

  /// @brief The context of one stream of this run: the same threads, the seed derived from
  /// this one and `ids` (derive_seed), so that each random decision is reproducible alone.
  [[nodiscard]] Context derived(std::initializer_list<std::uint64_t> ids) const {
    return {derive_seed(seed, ids), threads};
  }
};

}  // namespace corun
