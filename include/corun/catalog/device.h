#pragma once

#include <string>

#include "corun/catalog/precision.h"

namespace corun {

/// @brief The host CPU that a GPU sits in (where `cpu` placements and host work run).
struct HostCpu {
  std::string name;
  int cores = 0;                    ///< physical cores available to inference
  double clock_ghz = 0;             ///< sustained all-core clock
  double fp32_gflops_per_core = 0;  ///< peak FP32 (FMA = 2 FLOPs) per core at clock_ghz
  double mem_bandwidth_gbps = 0;    ///< host DRAM bandwidth, GB/s
  double tdp_w = 0;
  std::string source;  ///< where the numbers come from
};

/// @brief A GPU and its host. Every number comes from catalog/devices.yaml with a source.
struct Device {
  std::string name;          ///< catalog key, e.g. "rtx3090"
  std::string display_name;  ///< e.g. "NVIDIA GeForce RTX 3090"
  int sm_count = 0;
  double boost_clock_mhz = 0;   ///< clock at which the peaks below hold
  double base_clock_mhz = 0;    ///< lowest clock the power cap drives it to in practice
  double peak_fp32_tflops = 0;  ///< non-tensor FP32
  double peak_fp16_tflops = 0;  ///< dense FP16 tensor
  double peak_bf16_tflops = 0;  ///< dense BF16 tensor (0 when unsupported)
  double peak_int8_tops = 0;    ///< dense INT8 tensor
  double mem_bandwidth_gbps = 0;
  double l2_mb = 0;
  double vram_gb = 0;  ///< usable device memory (GB = 1e9 bytes)
  double tdp_w = 0;
  double idle_power_w = 0;
  double pcie_gbps = 0;         ///< host<->device, one direction, effective
  /// Sequential read of model files on the host (NVMe, or the page cache of a file read
  /// before): with pcie_gbps it bounds how fast a restarted server loads its weights. Optional
  /// in devices.yaml; the default is a PCIe 3.0 NVMe drive's sequential read.
  double storage_gbps = 3;
  bool unified_memory = false;  ///< GPU and CPU share DRAM (Jetson)
  HostCpu cpu;
  std::string source;

  /// @brief Peak math throughput for a precision in FLOP/s (AWQ runs FP16 math; BF16 without
  /// BF16 tensor cores runs at the FP32 rate, as frameworks emulate it there).
  [[nodiscard]] double peak_flops(Precision p) const;
  /// @brief Whether the GPU has native (tensor-core) math for `p`; false for BF16 on Volta.
  [[nodiscard]] bool has_native(Precision p) const;
  [[nodiscard]] double mem_bandwidth_bytes_per_s() const { return mem_bandwidth_gbps * 1e9; }
  [[nodiscard]] double vram_bytes() const { return vram_gb * 1e9; }
};

}  // namespace corun
