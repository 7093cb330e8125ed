#include "corun/catalog/gpu_detect.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <type_traits>

#include "corun/catalog/catalog.h"
#include "corun/catalog/nvml.h"
#include "corun/core/strings.h"

namespace corun {
namespace {

// Names as NVML's nvmlDeviceGetName returns them (nvidia-smi prints the same string in its
// "Name" column and as "Product Name" of `nvidia-smi -q`). Drivers since R510 prefix data-center
// boards with "NVIDIA"; the V100's name keeps "Tesla".
constexpr std::array<GpuProductName, 7> kProductNames{{
    {"NVIDIA GeForce RTX 3090", "rtx3090",
     "nvidia-smi in noonghunna/club-3090#1127 (GitHub issue)"},
    {"Tesla V100-SXM2-32GB", "v100", "nvidia-smi -q Product Name in NVIDIA/nvidia-docker#1076"},
    {"NVIDIA A100-SXM4-80GB", "a100-80gb",
     "vllm-project/vllm#10026 (A100-SXM4-80GB); the 40 GB board prints NVIDIA "
     "A100-SXM4-40GB (nvidia-smi in bottlerocket-os/bottlerocket-core-kit#834)"},
    {"NVIDIA L4", "l4", "NVIDIA's naming, as nvidia-smi -q prints NVIDIA L40S "
                        "(isaac-sim/IsaacSim#228); not seen in a cited log"},
    {"NVIDIA H200", "h200", "nvidia-smi -q Product Name in NVIDIA/mig-parted#120"},
    {"NVIDIA H100 80GB HBM3", "h100-sxm", "nvidia-smi in NVIDIA/nccl#1264, wilicc/gpu-burn#114"},
    {"NVIDIA H100 PCIe", "h100-pcie", "NVIDIA's naming; not seen in a cited log"},
}};

std::string fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

std::span<const GpuProductName> gpu_product_names() { return kProductNames; }

std::optional<std::string> catalog_device_for_gpu(std::string_view product) {
  const std::string name(trim(product));
  for (const auto& p : kProductNames) {
    if (p.nvml_name == name) return std::string(p.device);
  }
  return std::nullopt;
}

std::string nvml_library() {
  const char* env = std::getenv("CORUN_NVML_LIBRARY");
  return env != nullptr && *env != '\0' ? env : "libnvidia-ml.so.1";
}

Result<DetectedGpu> read_gpu_nvml(const std::string& library, unsigned index) {
  auto opened = nvml::Library::open(library, index);
  if (!opened) return opened.error();
  const nvml::Library& lib = **opened;
  const nvml::Device device = lib.device();
  const auto get_name = lib.symbol<nvml::Return (*)(nvml::Device, char*, unsigned)>(
      "nvmlDeviceGetName");
  if (get_name == nullptr) {
    return Error("NVML unavailable: " + library + " has no symbol nvmlDeviceGetName",
                 Error::Kind::kResource);
  }
  DetectedGpu g;
  std::array<char, nvml::kNameBuffer> name{};
  if (get_name(device, name.data(), nvml::kNameBuffer) != 0) {
    return Error("NVML: nvmlDeviceGetName failed for GPU " + std::to_string(index),
                 Error::Kind::kResource);
  }
  g.name = trim(name.data());
  const auto memory =
      lib.symbol<nvml::Return (*)(nvml::Device, nvml::Memory*)>("nvmlDeviceGetMemoryInfo");
  nvml::Memory m{};
  if (memory != nullptr && memory(device, &m) == 0) {
    g.memory_bytes = static_cast<double>(m.total);
  } else {
    g.unread.emplace_back("vram_gb");
  }
  const auto clock =
      lib.symbol<nvml::Return (*)(nvml::Device, int, unsigned*)>("nvmlDeviceGetMaxClockInfo");
  if (clock == nullptr || clock(device, nvml::kClockSm, &g.max_sm_clock_mhz) != 0) {
    g.max_sm_clock_mhz = 0;
    g.unread.emplace_back("boost_clock_mhz");
  }
  const auto power = lib.symbol<nvml::Return (*)(nvml::Device, unsigned*)>(
      "nvmlDeviceGetPowerManagementDefaultLimit");
  unsigned milliwatts = 0;
  if (power != nullptr && power(device, &milliwatts) == 0) {
    g.power_limit_w = milliwatts / 1000.0;
  } else {
    g.unread.emplace_back("tdp_w");
  }
  const auto mig = lib.symbol<nvml::Return (*)(nvml::Device, unsigned*, unsigned*)>(
      "nvmlDeviceGetMigMode");
  unsigned current = 0, pending = 0;
  if (mig != nullptr && mig(device, &current, &pending) == 0) {
    g.mig_enabled = current != 0 ? 1 : 0;
  }  // not supported (a GPU without MIG): stays unknown, which is not a catalog field
  return g;
}

std::string device_overlay_entry(const DetectedGpu& gpu, std::string_view key) {
  std::string out = "devices:\n  " + std::string(key) + ":\n";
  out += "    display_name: " + gpu.name + "    # NVML nvmlDeviceGetName\n";
  if (gpu.memory_bytes > 0) {
    out += "    vram_gb: " + fixed2(gpu.memory_bytes / 1e9) + "    # NVML memory total\n";
  }
  if (gpu.max_sm_clock_mhz > 0) {
    out += "    boost_clock_mhz: " + std::to_string(gpu.max_sm_clock_mhz) +
           "    # NVML max SM clock\n";
  }
  if (gpu.power_limit_w > 0) {
    out += "    tdp_w: " + fixed2(gpu.power_limit_w) + "    # NVML default power limit\n";
  }
  out += "    # NVML does not give these; fill them from the datasheet (docs/catalog.md):\n";
  std::vector<std::string> missing = gpu.unread;
  for (const char* f : {"sm_count", "base_clock_mhz", "peak_fp32_tflops", "peak_fp16_tflops",
                        "peak_bf16_tflops", "peak_int8_tops", "mem_bandwidth_gbps", "l2_mb",
                        "idle_power_w", "pcie_gbps", "storage_gbps", "cpu", "source"}) {
    missing.emplace_back(f);
  }
  out += "    #   " + join(missing, ", ") + "\n";
  return out;
}

Result<std::string> detect_catalog_device(const Catalog& catalog, const std::string& library) {
  auto gpu = read_gpu_nvml(library, 0);
  if (!gpu) {
    return Error("--device auto: " + gpu.error().what() +
                     "; name the GPU instead (--device NAME, one of " +
                     join(catalog.device_names(), ", ") + ")",
                 Error::Kind::kInvalidInput);
  }
  const auto name = catalog_device_for_gpu(gpu->name);
  if (name && catalog.find_device(*name) != nullptr) return *name;
  std::string unread = gpu->unread.empty() ? "" : " (NVML did not give " +
                                                      join(gpu->unread, ", ") + ")";
  return Error("--device auto: the catalog has no device for '" + gpu->name + "'" + unread +
                   ". Save this entry as DIR/devices.yaml, fill in what NVML does not give, and "
                   "run with --catalog DIR --device my-gpu:\n" +
                   device_overlay_entry(*gpu),
               Error::Kind::kInvalidInput);
}

}  // namespace corun
