#pragma once

// NVML, loaded at run time (catalog/nvml.h): the GPU's own view of the aggregate state while
// workers run on it (torch-cuda). Optional by design: the build needs no NVIDIA headers or
// libraries, and a host without the driver's libnvidia-ml gets a reason instead of a sampler.

#include <memory>
#include <string>

#include "corun/core/result.h"
#include "corun/testbed/testbed.h"

namespace corun::torchbed {

/// @brief Samples one GPU through NVML (dlopen'd) and averages the samples into a GpuState:
/// sm_util = utilization.gpu (the fraction of time a kernel ran), mem_bw_util =
/// utilization.memory (the fraction of time device memory was read or written), vram_used_gb
/// = memory used, power_w = board power, clock_mhz = SM clock. Not thread-safe.
class NvmlSampler {
 public:
  /// @brief Loads `library` (the driver's "libnvidia-ml.so.1" by default), initialises NVML
  /// and opens GPU `index`; an error names what was missing (library, symbol, NVML status).
  static Result<std::unique_ptr<NvmlSampler>> open(const std::string& library = "libnvidia-ml.so.1",
                                                   unsigned index = 0);
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  /// @brief Starts a new average.
  void reset();
  /// @brief Takes one sample; false when NVML failed (the sample is skipped).
  bool sample();
  [[nodiscard]] int samples() const { return samples_; }
  /// @brief The mean of the samples since reset(); zeros when there were none.
  [[nodiscard]] GpuState mean() const;

 private:
  struct Api;
  NvmlSampler() = default;
  std::unique_ptr<Api> api_;
  int samples_ = 0;
  double gpu_ = 0, mem_ = 0, used_gb_ = 0, power_w_ = 0, clock_mhz_ = 0;
};

}  // namespace corun::torchbed
