#pragma once

// NVML, loaded at run time (dlopen): the one place corun binds the driver's libnvidia-ml, for
// GPU detection (catalog/gpu_detect.h) and the torch-cuda testbed's sampler. The build needs no
// NVIDIA headers or libraries; a host without the driver gets a reason instead of a handle.

#include <memory>
#include <string>

#include "corun/core/result.h"

namespace corun::nvml {

// The few NVML declarations corun uses, from the NVML API reference (nvml.h is not needed to
// build): every call returns an nvmlReturn_t, 0 = NVML_SUCCESS.
using Return = int;
using Device = struct DeviceOpaque*;
struct Memory {
  unsigned long long total, free, used;  // bytes (nvmlMemory_t)
};
struct Utilization {
  unsigned int gpu;     // percent of the sample period a kernel was executing
  unsigned int memory;  // percent of the sample period device memory was read or written
};
inline constexpr int kClockSm = 1;            // nvmlClockType_t NVML_CLOCK_SM
inline constexpr unsigned kNameBuffer = 96;   // NVML_DEVICE_NAME_V2_BUFFER_SIZE

/// @brief One GPU opened through NVML: the library loaded and initialised, the device's handle
/// taken; shut down and unloaded when destroyed. Not thread-safe.
class Library {
 public:
  /// @brief Loads `library` (libnvidia-ml.so.1, or what CORUN_NVML_LIBRARY names: see
  /// gpu_detect.h nvml_library()), calls nvmlInit_v2 and opens GPU `index`. The error (kind
  /// kResource) names what was missing: the library, an entry point, NVML's status.
  static Result<std::unique_ptr<Library>> open(const std::string& library, unsigned index);
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  /// @brief The library's entry point `name` as `Fn`, or null when it lacks it (an older
  /// driver: the caller says which field it could not read).
  template <typename Fn>
  [[nodiscard]] Fn symbol(const char* name) const {
    return reinterpret_cast<Fn>(raw_symbol(name));
  }
  [[nodiscard]] Device device() const { return device_; }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  Library() = default;
  [[nodiscard]] void* raw_symbol(const char* name) const;
  void* handle_ = nullptr;
  Return (*shutdown_)() = nullptr;
  bool initialised_ = false;
  Device device_ = nullptr;
  std::string path_;
};

}  // namespace corun::nvml
