#pragma once

// The GPU a process runs on, read through NVML (`corun serve --device auto`), and the catalog
// device it is. NVML is loaded at run time (dlopen of libnvidia-ml.so.1, or the file
// CORUN_NVML_LIBRARY names): corun builds and runs without it.
//
// @code
// auto gpu = corun::read_gpu_nvml(corun::nvml_library(), 0);
// if (gpu.ok()) {
//   if (auto name = corun::catalog_device_for_gpu(gpu->name)) use(*name);
//   else std::puts(corun::device_overlay_entry(*gpu).c_str());  // for a catalog overlay
// }
// @endcode

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "corun/core/result.h"

namespace corun {

class Catalog;

/// @brief One product name NVML reports (nvmlDeviceGetName, nvidia-smi's "Name") and the
/// catalog device it is.
struct GpuProductName {
  std::string_view nvml_name;  ///< as NVML reports it
  std::string_view device;     ///< catalog device name
  std::string_view source;     ///< where the name was seen
};

/// @brief The product-name table, every catalog GPU that NVML can report (a Jetson has no NVML).
std::span<const GpuProductName> gpu_product_names();

/// @brief The catalog device of the GPU NVML names `product` (surrounding spaces ignored,
/// letter case as NVML reports it); none for a GPU the table does not know.
std::optional<std::string> catalog_device_for_gpu(std::string_view product);

/// @brief What NVML says of one GPU. 0 (or -1 for mig_enabled) where it could not be read;
/// `unread` names the fields NVML did not give.
struct DetectedGpu {
  std::string name;
  double memory_bytes = 0;     ///< nvmlDeviceGetMemoryInfo total
  unsigned max_sm_clock_mhz = 0;  ///< nvmlDeviceGetMaxClockInfo(NVML_CLOCK_SM)
  double power_limit_w = 0;    ///< nvmlDeviceGetPowerManagementDefaultLimit
  int mig_enabled = -1;        ///< nvmlDeviceGetMigMode current: 1 on, 0 off, -1 unknown
  std::vector<std::string> unread;
};

/// @brief The NVML library corun loads: CORUN_NVML_LIBRARY when set, else libnvidia-ml.so.1.
std::string nvml_library();

/// @brief Reads GPU `index` through the NVML library at `library`. Errors (kResource) when
/// the library cannot be loaded or initialised or has no such GPU.
Result<DetectedGpu> read_gpu_nvml(const std::string& library, unsigned index);

/// @brief A devices.yaml entry (docs/catalog.md) for a GPU the catalog lacks, under `key`:
/// the fields NVML gave filled in, every other field the catalog needs listed as a comment to
/// fill from the datasheet.
std::string device_overlay_entry(const DetectedGpu& gpu, std::string_view key = "my-gpu");

/// @brief `corun serve --device auto`: the catalog device of GPU 0, or an error that names the
/// flag (kInvalidInput: exit 2) when NVML cannot be read or the catalog lacks the GPU (then
/// with device_overlay_entry's text, to add it with --catalog).
Result<std::string> detect_catalog_device(const Catalog& catalog, const std::string& library);

}  // namespace corun
