#include "nvml.h"

#include <type_traits>

#include "corun/catalog/nvml.h"

namespace corun::torchbed {

struct NvmlSampler::Api {
  std::unique_ptr<nvml::Library> lib;
  nvml::Return (*utilization)(nvml::Device, nvml::Utilization*) = nullptr;
  nvml::Return (*memory)(nvml::Device, nvml::Memory*) = nullptr;
  nvml::Return (*power)(nvml::Device, unsigned*) = nullptr;
  nvml::Return (*clock)(nvml::Device, int, unsigned*) = nullptr;
};

Result<std::unique_ptr<NvmlSampler>> NvmlSampler::open(const std::string& library,
                                                       unsigned index) {
  auto lib = nvml::Library::open(library, index);
  if (!lib) return lib.error();
  auto api = std::make_unique<Api>();
  api->lib = std::move(*lib);
  const char* missing = nullptr;  // the first entry point the library lacks
  auto bind = [&](auto& fn, const char* symbol) {
    fn = api->lib->symbol<std::remove_reference_t<decltype(fn)>>(symbol);
    if (fn == nullptr && missing == nullptr) missing = symbol;
  };
  bind(api->utilization, "nvmlDeviceGetUtilizationRates");
  bind(api->memory, "nvmlDeviceGetMemoryInfo");
  bind(api->power, "nvmlDeviceGetPowerUsage");
  bind(api->clock, "nvmlDeviceGetClockInfo");
  if (missing != nullptr) {
    return Error("NVML unavailable: " + library + " has no symbol " + missing,
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
  nvml::Utilization u{};
  nvml::Memory m{};
  unsigned milliwatts = 0, mhz = 0;
  const nvml::Device device = api_->lib->device();
  if (api_->utilization(device, &u) != 0 || api_->memory(device, &m) != 0) {
    return false;
  }
  // Power and clocks are not reported by every board (e.g. some MIG or vGPU setups): zero.
  if (api_->power(device, &milliwatts) != 0) milliwatts = 0;
  if (api_->clock(device, nvml::kClockSm, &mhz) != 0) mhz = 0;
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
