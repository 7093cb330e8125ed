#pragma once

// A load outside the workload (a synthetic co-tenant, a tool burst) in the units of the
// MeanField aggregate: what one more co-runner of that SM share and bandwidth would add.

#include "corun/spec/workload.h"
#include "corun/surrogate/features.h"

namespace corun::surrogate {

/// @brief An unmanaged co-tenant on `device` holding `interference.sm_util` of the SMs and
/// `interference.bandwidth_util` of the achievable DRAM bandwidth (each clamped to [0, 1]), as
/// one more co-runner in the aggregate: count 1, its SM share, its bandwidth as a fraction of
/// the datasheet's (the unit of the profiles), no VRAM (what it holds is the VRAM budget's
/// business, not a slowdown), dynamic power in proportion to its SM share ((TDP - idle) x sm)
/// and occupancy 1 (it has work throughout). Zero when both shares are zero.
/// Thread-safety: pure.
Totals cotenant_totals(const Device& device, const Interference& interference);

}  // namespace corun::surrogate
