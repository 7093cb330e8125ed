#pragma once

// The load a run's tools put on the GPU while they compute: what the models co-running on
// that GPU feel during a tool burst.

namespace corun::mapping {

/// @brief What the tools put on the GPU while any of them computed: the load co-running
/// models feel during the burst.
struct BurstLoad {
  double start_ms = 0;  ///< first GPU compute of the run
  double end_ms = 0;    ///< last GPU compute ends
  double sm_util = 0;   ///< time-averaged fraction of the SMs the tools held (capped at 1)
  double bw_util = 0;   ///< time-averaged DRAM demand, units of the achievable bandwidth
  double peak_sm_util = 0;

  /// @brief Whether any tool computed on the GPU.
  [[nodiscard]] bool any() const { return end_ms > start_ms; }
};

}  // namespace corun::mapping
