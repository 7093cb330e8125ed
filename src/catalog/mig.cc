// MIG profiles: catalog/mig.yaml and the device a slice behaves as.
#include "corun/catalog/mig.h"

#include <algorithm>
#include <cmath>

#include "corun/core/strings.h"
#include "corun/core/yaml.h"

namespace corun {

namespace {

constexpr std::string_view kMigFile = "mig.yaml";

std::optional<MigGpu> parse_gpu(const YamlField& f, const std::string& device) {
  if (!f.expect_map()) return std::nullopt;
  f.check_keys({"compute_slices", "memory_slices", "source", "profiles"});
  MigGpu g;
  g.device = device;
  g.compute_slices = static_cast<int>(f.integer_at("compute_slices", 1, 64, true).value_or(7));
  g.memory_slices = static_cast<int>(f.integer_at("memory_slices", 1, 64, true).value_or(8));
  g.source = f.string_at("source", true).value_or("");
  const YamlField profiles = f["profiles"];
  if (!profiles.present()) {
    profiles.error("missing required field (the device's MIG profiles)");
    return std::nullopt;
  }
  if (!profiles.expect_map()) return std::nullopt;
  for (const auto& name : profiles.keys()) {
    const YamlField p = profiles[name];
    if (!p.expect_map()) continue;
    p.check_keys({"compute", "memory", "max_instances"});
    MigProfile prof;
    prof.name = name;
    prof.compute = static_cast<int>(p.integer_at("compute", 1, g.compute_slices, true).value_or(0));
    prof.memory = static_cast<int>(p.integer_at("memory", 1, g.memory_slices, true).value_or(0));
    prof.max_instances =
        static_cast<int>(p.integer_at("max_instances", 1, g.compute_slices, true).value_or(0));
    prof.compute_total = g.compute_slices;
    prof.memory_total = g.memory_slices;
    g.profiles.push_back(std::move(prof));
  }
  return g;
}

}  // namespace

const MigProfile* MigGpu::find(std::string_view name) const {
  for (const auto& p : profiles) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<std::string> MigGpu::profile_names() const {
  std::vector<std::string> out;
  for (const auto& p : profiles) out.push_back(p.name);
  return out;
}

std::string MigGpu::invalid_reason(const std::vector<MigProfile>& partition) const {
  int compute = 0;
  int memory = 0;
  std::map<std::string, int> count;
  for (const auto& p : partition) {
    compute += p.compute;
    memory += p.memory;
    ++count[p.name];
  }
  if (compute > compute_slices) {
    return "the slices need " + std::to_string(compute) + " compute slices, " + device +
           " has " + std::to_string(compute_slices);
  }
  if (memory > memory_slices) {
    return "the slices need " + std::to_string(memory) + " memory slices, " + device + " has " +
           std::to_string(memory_slices);
  }
  for (const auto& [name, n] : count) {
    const MigProfile* p = find(name);
    if (p != nullptr && n > p->max_instances) {
      return std::to_string(n) + " instances of " + name + ", at most " +
             std::to_string(p->max_instances) + " fit on " + device;
    }
  }
  return "";
}

Result<MigCatalog> MigCatalog::parse(std::string_view text, const std::string& file) {
  auto root = parse_yaml(text, file);
  if (!root) return root.error();
  Diagnostics diags;
  const YamlField top(*root, file, "", &diags);
  MigCatalog out;
  if (!top.expect_map()) return diags.to_error();
  top.check_keys({"gpus"});
  const YamlField gpus = top["gpus"];
  if (gpus.present() && gpus.expect_map()) {
    for (const auto& device : gpus.keys()) {
      if (auto g = parse_gpu(gpus[device], device)) out.gpus_.emplace(device, std::move(*g));
    }
  }
  if (!diags.empty()) return diags.to_error();
  return out;
}

Result<MigCatalog> MigCatalog::of(const Catalog& catalog) {
  const auto text = catalog.file(kMigFile);
  if (!text) return MigCatalog{};
  return parse(*text, std::string(kMigFile));
}

const MigGpu* MigCatalog::find(std::string_view device) const {
  auto it = gpus_.find(device);
  return it == gpus_.end() ? nullptr : &it->second;
}

Device mig_slice_device(const Device& gpu, const MigProfile& profile) {
  const double sm = profile.sm_fraction();
  const double mem = profile.memory_fraction();
  Device d = gpu;
  d.name = gpu.name + "/" + profile.name;
  d.display_name = gpu.display_name + " MIG " + profile.name;
  // Whole SMs: a compute slice is a fixed group of SMs, never a fraction of one.
  d.sm_count = std::max(1, static_cast<int>(std::floor(gpu.sm_count * sm)));
  const double math = static_cast<double>(d.sm_count) / gpu.sm_count;
  d.peak_fp32_tflops = gpu.peak_fp32_tflops * math;
  d.peak_fp16_tflops = gpu.peak_fp16_tflops * math;
  d.peak_bf16_tflops = gpu.peak_bf16_tflops * math;
  d.peak_int8_tops = gpu.peak_int8_tops * math;
  d.mem_bandwidth_gbps = gpu.mem_bandwidth_gbps * mem;
  d.l2_mb = gpu.l2_mb * mem;
  d.vram_gb = gpu.vram_gb * mem;
  d.tdp_w = gpu.tdp_w * sm;
  d.idle_power_w = gpu.idle_power_w * sm;
  d.source = gpu.source + "; MIG profile " + profile.name + " (catalog/mig.yaml)";
  return d;
}

}  // namespace corun
