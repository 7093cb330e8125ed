#include "nvml.h"

#include <dlfcn.h>

namespace corun::torchbed {

namespace {

// The few NVML declarations used here, from the NVML API reference (nvml.h is not needed
// to build): every call returns an nvmlReturn_t, 0 = NVML_SUCCESS.
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlUtilization {
  unsigned int gpu;     // percent of the sample period a kernel was executing
  unsigned int memory;  // percent of the sample period device memory was read or written
};
struct NvmlMemory {
  unsigned long long total, free, used;  // bytes
};
constexpr int kNvmlClockSm = 1;  // nvmlClockType_t NVML_CLOCK_SM

}  // namespace

struct NvmlSampler::Api {
  void* lib = nullptr;
  NvmlDevice device = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*handle_by_index)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*power)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  bool initialised = false;

  ~Api() {
    if (initialised && shutdown != nullptr) shutdown();
    if (lib != nullptr) ::dlclose(lib);
  }
};

Result<std::unique_ptr<NvmlSampler>> NvmlSampler::open(const std::string& library,
                                                       unsigned index) {
  auto api = std::make_unique<Api>();
  api->lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api->lib == nullptr) {
    const char* why = ::dlerror();
    return Error("NVML unavailable: cannot load " + library + (why ? std::string(": ") + why : ""),
                 Error::Kind::kResource);
  }
  const char* missing = nullptr;  // the first entry point the library lacks
  auto bind = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(api->lib, symbol));
    if (fn == nullptr && missing == nullptr) missing = symbol;
  };
  bind(api->init, "nvmlInit_v2");
  bind(api->shutdown, "nvmlShutdown");
  bind(api->handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  bind(api->utilization, "nvmlDeviceGetUtilizationRates");
  bind(api->memory, "nvmlDeviceGetMemoryInfo");
  bind(api->power, "nvmlDeviceGetPowerUsage");
  bind(api->clock, "nvmlDeviceGetClockInfo");
  if (missing != nullptr) {
    return Error("NVML unavailable: " + library + " has no symbol " + missing,
                 Error::Kind::kResource);
  }
  if (const NvmlReturn r = api->init(); r != 0) {
    return Error("NVML unavailable: nvmlInit_v2 returned " + std::to_string(r),
                 Error::Kind::kResource);
  }
  api->initialised = true;
  if (const NvmlReturn r = api->handle_by_index(index, &api->device); r != 0) {
    return Error("NVML: no GPU " + std::to_string(index) + " (status " + std::to_string(r) + ")",
                 Error::Kind::kResource);
  }
  std::unique_ptr<NvmlSampler> s(new NvmlSampler());
  s->api_ = std::move(api);
  return s;
}

NvmlSampler::~NvmlSampler() = default;

void NvmlSampler::reset() {
  samples_ = 0;
  gpu_ = mem_ = used_gb_ = power_w_ = clock_mhz_ = 0;
}

bool NvmlSampler::sample() {
  NvmlUtilization u{};
  NvmlMemory m{};
  unsigned milliwatts = 0, mhz = 0;
  if (api_->utilization(api_->device, &u) != 0 || api_->memory(api_->device, &m) != 0) {
    return false;
  }
  // Power and clocks are not reported by every board (e.g. some MIG or vGPU setups): zero.
  if (api_->power(api_->device, &milliwatts) != 0) milliwatts = 0;
  if (api_->clock(api_->device, kNvmlClockSm, &mhz) != 0) mhz = 0;
  ++samples_;
  gpu_ += u.gpu / 100.0;
  mem_ += u.memory / 100.0;
  used_gb_ += static_cast<double>(m.used) / 1e9;
  power_w_ += milliwatts / 1000.0;
  clock_mhz_ += mhz;
  return true;
}

GpuState NvmlSampler::mean() const {
  GpuState g;
  if (samples_ == 0) return g;
  const double n = samples_;
  g.sm_util = gpu_ / n;
  g.mem_bw_util = mem_ / n;
  g.vram_used_gb = used_gb_ / n;
  g.power_w = power_w_ / n;
  g.clock_mhz = clock_mhz_ / n;
  return g;
}

}  // namespace corun::torchbed
