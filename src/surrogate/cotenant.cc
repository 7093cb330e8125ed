#include "corun/surrogate/cotenant.h"

#include <algorithm>

#include "corun/testbed/gpu_model.h"

namespace corun::surrogate {

Totals cotenant_totals(const Device& device, const Interference& interference) {
  const double sm = std::clamp(interference.sm_util, 0.0, 1.0);
  const double bw = std::clamp(interference.bandwidth_util, 0.0, 1.0);
  if (sm <= 0 && bw <= 0) return {};
  const gpu::DeviceModel dev = gpu::device_model(device);
  const double bw_to_datasheet =
      dev.peak_dram_bytes_s > 0 ? dev.dram_bytes_s / dev.peak_dram_bytes_s : 1;
  const double dynamic_power_w = std::max(0.0, device.tdp_w - device.idle_power_w);
  return {1.0, sm, bw * bw_to_datasheet, 0.0, sm * dynamic_power_w, 1.0};
}

}  // namespace corun::surrogate
