#include "corun/mapping/profile.h"

#include <cstdio>

#include "corun/mapping/executor.h"

namespace corun::mapping {

std::string_view to_string(Preference p) {
  switch (p) {
    case Preference::kGpu:
      return "gpu-preferred";
    case Preference::kCpu:
      return "cpu-preferred";
    case Preference::kNeutral:
      return "device-neutral";
    case Preference::kAmbiguous:
      return "ambiguous";
  }
  return "?";
}

Preference classify_speedup(double s, const ProfileThresholds& th) {
  if (s >= th.clear) return Preference::kGpu;
  if (s <= 1.0 / th.clear) return Preference::kCpu;
  if (s >= 1.0 / th.neutral && s <= th.neutral) return Preference::kNeutral;
  return Preference::kAmbiguous;
}

namespace {

std::string fmt(const char* format, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

// Runs `tool` alone as a one-node DAG with ample VRAM, noise-free; returns milliseconds.
double standalone_ms(const ToolCatalog& tools, const Tool& tool, const Device& device,
                     Placement placement) {
  Scenario s;
  s.name = "profile-" + tool.name;
  s.kind = "serial";
  s.device = device.name;
  s.vram_budget_gb = tool.vram_bytes() / 1e9 + 1;
  s.nodes.push_back(ToolNode{tool.name, tool.name, {}, 0});
  auto problem = PlacementProblem::build(s, tools, device);
  CORUN_CHECK(problem.ok());
  Executor ex(*problem);
  const Mapping m = {placement};
  return ex.run(m).makespan_ms;
}

}  // namespace

std::vector<ToolProfile> profile_tools(const ToolCatalog& tools, const Device& device,
                                       const ProfileThresholds& th) {
  std::vector<ToolProfile> out;
  for (const Tool& t : tools.tools) {
    ToolProfile p;
    p.tool = t.name;
    p.display_name = t.display_name;
    p.has_gpu = t.has_gpu;
    p.vram_gb = t.vram_bytes() / 1e9;
    const ToolCost c = derive_cost(t, device, tools.model);
    p.cpu_ms = standalone_ms(tools, t, device, Placement::kCpu);
    if (!t.has_gpu) {
      p.preference = Preference::kNeutral;
      p.reason = "no GPU implementation: the same CPU code runs whatever the placement";
      out.push_back(std::move(p));
      continue;
    }
    p.gpu_ms = standalone_ms(tools, t, device, Placement::kGpuNow);
    p.gpu_compute_ms = c.compute_s() * 1e3;
    p.gpu_transfer_ms = (c.h2d_s + c.d2h_s) * 1e3;
    p.sm_demand = c.sm_demand;
    p.speedup = p.cpu_ms / *p.gpu_ms;
    p.preference = classify_speedup(p.speedup, th);
    const double compute_speedup = p.cpu_ms / std::max(1e-9, p.gpu_compute_ms);
    p.transfer_dominated =
        compute_speedup > 1 && p.speedup < 1 && p.gpu_transfer_ms > p.gpu_compute_ms;
    switch (p.preference) {
      case Preference::kGpu:
        p.reason = fmt("GPU %.1fx faster end to end", p.speedup);
        break;
      case Preference::kCpu:
        p.reason = p.transfer_dominated
                       ? fmt("PCIe transfers (%.1f ms) outweigh a %.1fx GPU compute advantage",
                             p.gpu_transfer_ms, compute_speedup)
                       : fmt("CPU %.1fx faster end to end", 1 / p.speedup);
        break;
      case Preference::kNeutral:
        p.reason =
            fmt("within %.0f %% either way (speedup %.2f)", (th.neutral - 1) * 100, p.speedup);
        break;
      case Preference::kAmbiguous:
        p.reason = p.speedup > 1
                       ? fmt("GPU only %.2fx faster alone: contention can flip it", p.speedup)
                       : fmt("CPU only %.2fx faster alone: an idle GPU can flip it", 1 / p.speedup);
        break;
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace corun::mapping
