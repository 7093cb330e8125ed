#pragma once

// Synthetic devices and tools with round numbers, so that expected times can be computed by
// hand in each test's comments (never taken from the code under test).

#include "corun/catalog/catalog.h"
#include "corun/mapping/problem.h"
#include "corun/mapping/tools.h"

namespace corun::mapping::testing {

/// 100 SMs, 100 TFLOP/s FP16, 1000 GB/s, 10 GB/s PCIe; host: 10 cores x 100 GFLOP/s, 100 GB/s.
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

/// Launch 10 us per kernel; extra delay 0, 0, 10 us with 0, 1, 2 co-runners (then +10 each);
/// no PCIe latency, no CPU dispatch cost, full bandwidth efficiency, 10 % interference per
/// co-runner, no noise.
inline ExecModel round_model() {
  ExecModel m;
  m.launch_overhead_us = 10;
  m.launch_delay_us = {0, 0, 10};
  m.cpu_op_overhead_us = 0;
  m.pcie_latency_us = 0;
  m.gpu_mem_efficiency = 1;
  m.cpu_mem_efficiency = 1;
  m.interference_per_corunner = 0.1;
  m.default_noise = 0;
  return m;
}

/// "conv": 1 TFLOP, 1 GB, 100 kernels filling all SMs at 50 % efficiency; 2 GB of VRAM;
/// 100 MB in, 10 MB out. GPU: upload 10 ms, kernels 20 ms (math) + launches 1 ms, download
/// 1 ms = 32 ms. CPU: 1e12 / (10 cores x 100 GFLOP/s x 0.5) = 2 s on all 10 cores.
inline Tool conv_tool() {
  Tool t;
  t.name = "conv";
  t.display_name = "conv";
  t.flops = 1e12;
  t.bytes = 1e9;
  t.cpu_bytes = 1e9;
  t.ops = 100;
  t.ctas = 100;
  t.precision = Precision::kFp16;
  t.gpu_efficiency = 0.5;
  t.cpu_efficiency = 0.5;
  t.cpu_threads = 10;
  t.weights_bytes = 1e9;
  t.working_bytes = 1e9;
  t.input_bytes = 100e6;
  t.output_bytes = 10e6;
  return t;
}

/// "small": 10 GFLOP on 10 % of the SMs at 50 % -> 2 ms of kernels + 0.1 ms of launches; 0.5 GB
/// of VRAM; no copies. CPU: 1e10 / (2 x 100e9 x 0.5) = 100 ms on 2 cores.
inline Tool small_tool() {
  Tool t = conv_tool();
  t.name = "small";
  t.flops = 1e10;
  t.bytes = 1e8;
  t.cpu_bytes = 1e8;
  t.ops = 10;
  t.ctas = 10;
  t.cpu_threads = 2;
  t.weights_bytes = 0.25e9;
  t.working_bytes = 0.25e9;
  t.input_bytes = 0;
  t.output_bytes = 0;
  return t;
}

/// "launch": no math, no bytes, 1000 kernels: 10 ms of pure launch gaps alone.
inline Tool launch_tool() {
  Tool t = small_tool();
  t.name = "launch";
  t.flops = 0;
  t.bytes = 0;
  t.cpu_bytes = 0;
  t.ops = 1000;
  t.ctas = 1;
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
