#pragma once

#include <cstdint>

namespace corun {

/// @brief What a run passes down explicitly instead of globals: seed and thread budget.
struct Context {
  std::uint64_t seed = 1;
  int threads = 1;
};

}  // namespace corun
