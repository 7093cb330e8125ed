#pragma once

#include <memory>

#include "corun/plan/predictor.h"
#include "corun/spec/workload.h"

namespace corun {

/// @brief `base` with every model predicted under a load outside the plan: `load` keeps a share
/// of the SMs and of the achievable DRAM bandwidth busy (a process corun does not plan, as
/// DCGM measured it: serve's unexplained load, docs/stack.md). The load is added to every
/// model's co-runners' aggregate through AggregatePredictor::cotenant(), so the result is an
/// AggregatePredictor with the base's contributions: monotone where the base is, and the exact
/// solver's bounds still hold (one constant added to every aggregate is a larger aggregate,
/// never a smaller one). Immutable and thread-safe like its base.
/// @return `base` itself when `load` is none or the base cannot express a load (not an
/// AggregatePredictor, or its cotenant() says no; `expressed` then says false)
std::unique_ptr<Predictor> make_loaded(std::unique_ptr<Predictor> base, const Interference& load,
                                       bool* expressed = nullptr);

/// @brief Whether `load` keeps anything busy.
[[nodiscard]] inline bool any_load(const Interference& load) {
  return load.sm_util > 0 || load.bandwidth_util > 0;
}

}  // namespace corun
