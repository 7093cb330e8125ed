#pragma once

// Synthetic devices and tools with round numbers, so that expected times can be computed by
// hand in each test's comments (never taken from the code under test).

#include "corun/catalog/catalog.h"
#include "corun/mapping/problem.h"
#include "corun/mapping/tools.h"

namespace corun::mapping::testing {

/// 100 SMs, 100 TFLOP/s FP16, 1000 GB/s, 10 GB/s PCIe; host: 10 cores x 100 GFLOP/s, 100 GB/s.
/// No clocks or power given: boost = base, so the power limiter cannot lower the clock.
inline Device round_device() {
  Device d;
  d.name = "round";
  d.sm_count = 100;
  d.peak_fp16_tflops = 100;
  d.peak_fp32_tflops = 50;
  d.mem_bandwidth_gbps = 1000;
  d.vram_gb = 100;
  d.pcie_gbps = 10;
  d.cpu.cores = 10;
  d.cpu.fp32_gflops_per_core = 100;
  d.cpu.mem_bandwidth_gbps = 100;
  return d;
}

/// Host side only (the GPU side is the shared GPU model): no CPU dispatch cost, full host
/// bandwidth efficiency, no noise.
inline ExecModel round_model() {
  ExecModel m;
  m.cpu_op_overhead_us = 0;
  m.cpu_mem_efficiency = 1;
  m.default_noise = 0;
  return m;
}

/// A tool of one GPU phase.
inline Tool phase_tool(const char* name, double flops, double bytes, double kernels, double ctas) {
  Tool t;
  t.name = name;
  t.display_name = name;
  t.phases = {ToolPhase{PhaseCost{flops, bytes, kernels, ctas}, 1}};
  t.flops = flops;
  t.bytes = bytes;
  t.cpu_bytes = bytes;
  t.ops = kernels;
  t.precision = Precision::kFp16;
  t.cpu_efficiency = 0.5;
  return t;
}

/// "conv": 1 TFLOP, 1 GB, 100 kernels of 100 tiles (fill the GPU); 2 GB of VRAM; 100 MB in,
/// 10 MB out. GPU times: tools_test.cc works them out by hand. CPU: 1e12 / (10 cores x
/// 100 GFLOP/s x 0.5) = 2 s on all 10 cores.
inline Tool conv_tool() {
  Tool t = phase_tool("conv", 1e12, 1e9, 100, 100);
  t.cpu_threads = 10;
  t.weights_bytes = 1e9;
  t.working_bytes = 1e9;
  t.input_bytes = 100e6;
  t.output_bytes = 10e6;
  return t;
}

/// "small": 10 GFLOP in 10 kernels of 2 tiles; 0.5 GB of VRAM; no copies. CPU: 1e10 /
/// (2 x 100e9 x 0.5) = 100 ms on 2 cores.
inline Tool small_tool() {
  Tool t = phase_tool("small", 1e10, 1e8, 10, 2);
  t.cpu_threads = 2;
  t.weights_bytes = 0.25e9;
  t.working_bytes = 0.25e9;
  return t;
}

/// "launch": no math, no bytes, 1000 kernels: pure per-kernel costs on the GPU, nothing on the
/// CPU.
inline Tool launch_tool() {
  Tool t = small_tool();
  t.name = "launch";
  t.phases = {ToolPhase{PhaseCost{0, 0, 1000, 1}, 1}};
  t.flops = 0;
  t.bytes = 0;
  t.cpu_bytes = 0;
  t.ops = 1000;
  return t;
}

inline ToolCatalog round_catalog() {
  ToolCatalog c;
  c.model = round_model();
  c.tools = {conv_tool(), small_tool(), launch_tool()};
  return c;
}

/// A scenario of the given (id, tool, predecessors) nodes.
inline Scenario make_scenario(std::vector<ToolNode> nodes, double budget_gb) {
  Scenario s;
  s.name = "test";
  s.kind = "contention";
  s.device = "round";
  s.vram_budget_gb = budget_gb;
  s.noise = 0;
  s.nodes = std::move(nodes);
  return s;
}

inline PlacementProblem make_problem(std::vector<ToolNode> nodes, double budget_gb,
                                     const ToolCatalog& catalog = round_catalog()) {
  auto p =
      PlacementProblem::build(make_scenario(std::move(nodes), budget_gb), catalog, round_device());
  return std::move(p).value();
}

}  // namespace corun::mapping::testing
