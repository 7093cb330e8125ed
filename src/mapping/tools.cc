#include "corun/mapping/tools.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "corun/catalog/catalog.h"
#include "corun/core/strings.h"
#include "corun/core/yaml.h"

namespace corun::mapping {

double ExecModel::launch_delay_s(int corunners) const {
  if (launch_delay_us.empty()) return 0;
  const int n = static_cast<int>(launch_delay_us.size());
  if (corunners < n) return launch_delay_us[static_cast<std::size_t>(corunners)] * 1e-6;
  // Past the measured range the delay keeps growing by the last measured step per workload.
  const double last = launch_delay_us.back();
  const double step = n >= 2 ? last - launch_delay_us[static_cast<std::size_t>(n - 2)] : 0.0;
  return (last + step * (corunners - n + 1)) * 1e-6;
}

const Tool* ToolCatalog::find(std::string_view name) const {
  for (const auto& t : tools) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::vector<std::string> ToolCatalog::names() const {
  std::vector<std::string> out;
  out.reserve(tools.size());
  for (const auto& t : tools) out.push_back(t.name);
  return out;
}

namespace {

constexpr double kMega = 1e6;
constexpr double kGiga = 1e9;
constexpr double kHuge = 1e30;

void parse_model(const YamlField& f, ExecModel& m) {
  if (!f.expect_map()) return;
  f.check_keys({"launch_overhead_us", "launch_delay_us", "cpu_op_overhead_us", "pcie_latency_us",
                "gpu_mem_efficiency", "cpu_mem_efficiency", "interference_per_corunner", "noise"});
  m.launch_overhead_us = f.number_at("launch_overhead_us", 0, 1000, true).value_or(0);
  m.cpu_op_overhead_us = f.number_at("cpu_op_overhead_us", 0, 1000, true).value_or(0);
  m.pcie_latency_us = f.number_at("pcie_latency_us", 0, 1e5, true).value_or(0);
  m.gpu_mem_efficiency = f.number_at("gpu_mem_efficiency", 0.05, 1, true).value_or(1);
  m.cpu_mem_efficiency = f.number_at("cpu_mem_efficiency", 0.05, 1, true).value_or(1);
  m.interference_per_corunner = f.number_at("interference_per_corunner", 0, 1, true).value_or(0);
  m.default_noise = f.number_at("noise", 0, 0.5, true).value_or(0);
  const YamlField d = f["launch_delay_us"];
  if (!d.present()) {
    d.error("missing required field");
    return;
  }
  if (!d.expect_sequence()) return;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const auto v = d.at(i).number(0, 1e4);
    if (v) m.launch_delay_us.push_back(*v);
  }
  for (std::size_t i = 1; i < m.launch_delay_us.size(); ++i) {
    if (m.launch_delay_us[i] < m.launch_delay_us[i - 1]) {
      d.at(i).error("launch delays must not decrease with more co-runners");
    }
  }
}

std::optional<Tool> parse_tool(const YamlField& f, const std::string& name) {
  if (!f.expect_map()) return std::nullopt;
  f.check_keys({"display_name", "category", "gpu", "gflops", "dram_gb", "cpu_dram_gb", "ops",
                "ctas", "precision", "gpu_efficiency", "cpu_efficiency", "cpu_threads",
                "weights_mb", "working_mb", "input_mb", "output_mb", "source"});
  const Diagnostics* diags = f.diagnostics();
  const std::size_t before = diags ? diags->items().size() : 0;
  Tool t;
  t.name = name;
  t.display_name = f.string_at("display_name", true).value_or("");
  t.category = f.string_at("category", true).value_or("");
  t.source = f.string_at("source", true).value_or("");
  if (f["gpu"].present()) t.has_gpu = f["gpu"].boolean().value_or(true);
  t.flops = f.number_at("gflops", 0, 1e6, true).value_or(0) * kGiga;
  t.bytes = f.number_at("dram_gb", 0, 1e4, true).value_or(0) * kGiga;
  t.cpu_bytes = f["cpu_dram_gb"].present()
                    ? f.number_at("cpu_dram_gb", 0, 1e4, false).value_or(0) * kGiga
                    : t.bytes;
  t.cpu_efficiency = f.number_at("cpu_efficiency", 1e-4, 1, true).value_or(1);
  t.cpu_threads = static_cast<int>(f.integer_at("cpu_threads", 1, 1024, true).value_or(1));
  t.ops = f.number_at("ops", 0, 1e7, true).value_or(0);
  // GPU-only fields are required exactly when a GPU implementation exists.
  const bool gpu = t.has_gpu;
  t.ctas = f.number_at("ctas", 1, 1e7, gpu).value_or(1);
  t.gpu_efficiency = f.number_at("gpu_efficiency", 1e-4, 1, gpu).value_or(1);
  t.weights_bytes = f.number_at("weights_mb", 0, 1e6, gpu).value_or(0) * kMega;
  t.working_bytes = f.number_at("working_mb", 0, 1e6, gpu).value_or(0) * kMega;
  t.input_bytes = f.number_at("input_mb", 0, 1e6, gpu).value_or(0) * kMega;
  t.output_bytes = f.number_at("output_mb", 0, 1e6, gpu).value_or(0) * kMega;
  if (const YamlField p = f["precision"]; p.present()) {
    if (const auto s = p.string()) {
      const auto prec = parse_precision(*s);
      if (!prec) {
        p.error("unknown precision '" + *s + "'" + did_you_mean(*s, precision_names()));
      } else {
        t.precision = *prec;
      }
    }
  } else if (gpu) {
    p.error("missing required field");
  }
  if (diags && diags->items().size() > before) return std::nullopt;
  return t;
}

}  // namespace

Result<ToolCatalog> parse_tool_catalog(std::string_view text, const std::string& file) {
  auto root = parse_yaml(text, file);
  if (!root) return root.error();
  Diagnostics diags;
  const YamlField top(*root, file, "", &diags);
  ToolCatalog cat;
  if (!top.expect_map()) return diags.to_error();
  top.check_keys({"version", "execution_model", "tools"});
  top.integer_at("version", 1, 1, true);
  if (const YamlField m = top["execution_model"]; m.present()) {
    parse_model(m, cat.model);
  } else {
    m.error("missing required field");
  }
  const YamlField tools = top["tools"];
  if (!tools.present()) {
    tools.error("missing required field");
  } else if (tools.expect_map()) {
    for (const auto& key : tools.keys()) {
      if (auto t = parse_tool(tools[key], key)) cat.tools.push_back(std::move(*t));
    }
    if (cat.tools.empty() && diags.empty()) tools.error("must list at least one tool");
  }
  if (!diags.empty()) return diags.to_error();
  return cat;
}

Result<ToolCatalog> default_tool_catalog() { return tool_catalog(Catalog::default_catalog()); }

Result<ToolCatalog> tool_catalog(const Catalog& catalog) {
  const auto text = catalog.file("tools.yaml");
  if (!text) return Error("the catalog has no tools.yaml", Error::Kind::kNotFound);
  return parse_tool_catalog(*text, "tools.yaml");
}

ToolCost derive_cost(const Tool& tool, const Device& device, const ExecModel& model) {
  ToolCost c;
  c.has_gpu = tool.has_gpu;
  c.vram_bytes = tool.vram_bytes();
  // CPU: the slower of math on the tool's threads and its DRAM traffic on their share of the
  // host's bandwidth (a few threads cannot saturate all channels).
  const HostCpu& cpu = device.cpu;
  const int cores = std::max(1, cpu.cores);
  const double threads = std::min(tool.cpu_threads, cores);
  const double cpu_math_s =
      tool.flops / std::max(1.0, threads * cpu.fp32_gflops_per_core * kGiga * tool.cpu_efficiency);
  const double host_bw = cpu.mem_bandwidth_gbps * kGiga * model.cpu_mem_efficiency;
  const double cpu_mem_s = tool.cpu_bytes / std::max(1.0, host_bw * threads / cores);
  c.cpu_s = std::max(cpu_math_s, cpu_mem_s) + tool.ops * model.cpu_op_overhead_us * 1e-6;
  c.cpu_memory_bound = cpu_mem_s > cpu_math_s;
  c.cpu_core_share = threads / cores;
  // Bandwidth the CPU run draws from the whole host, as a fraction of it.
  c.cpu_bw_demand = c.cpu_s > 0 ? (tool.cpu_bytes / std::max(1.0, host_bw)) / c.cpu_s : 0;
  if (!tool.has_gpu) return c;

  // GPU: roofline on the SMs the kernels fill, plus per-kernel launch gaps, plus PCIe copies.
  const double pcie = std::max(1.0, device.pcie_gbps * kGiga);
  const double latency = model.pcie_latency_us * 1e-6;
  c.h2d_s = tool.input_bytes > 0 ? latency + tool.input_bytes / pcie : 0;
  c.d2h_s = tool.output_bytes > 0 ? latency + tool.output_bytes / pcie : 0;
  const double fill = std::min(1.0, tool.ctas / std::max(1, device.sm_count));
  const double peak = device.peak_flops(tool.precision);
  const double math_s = peak > 0 ? tool.flops / (peak * tool.gpu_efficiency * fill) : kHuge;
  const double mem_s =
      tool.bytes / std::max(1.0, device.mem_bandwidth_bytes_per_s() * model.gpu_mem_efficiency);
  c.kernel_s = std::max(math_s, mem_s);
  c.kernels = tool.ops;
  c.launch_s = tool.ops * (model.launch_overhead_us * 1e-6 + model.launch_delay_s(0));
  const double compute = c.compute_s();
  if (compute > 0) {
    c.sm_demand = fill * c.kernel_s / compute;
    c.bw_demand = mem_s / compute;
  }
  return c;
}

}  // namespace corun::mapping
