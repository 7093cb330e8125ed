#pragma once

// The AI tools an agent framework calls, described by what they compute (catalog/tools.yaml),
// and the cost model that turns a description into CPU and GPU times on a Device.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/catalog/device.h"
#include "corun/catalog/precision.h"
#include "corun/core/result.h"

namespace corun {
class Catalog;
}  // namespace corun

namespace corun::mapping {

/// @brief One AI tool: the work of one call, independent of where it runs. Times are never
/// typed in; derive_cost() computes them from these quantities and a Device.
struct Tool {
  std::string name;          ///< catalog key, e.g. "object_detect"
  std::string display_name;  ///< e.g. "YOLO11m object detection (640 px)"
  std::string category;      ///< vision, speech, text, retrieval, generation
  double flops = 0;          ///< floating-point operations per call (multiply-add = 2)
  double bytes = 0;          ///< DRAM bytes moved per call (weights + activations)
  double cpu_bytes = 0;      ///< DRAM bytes of the CPU implementation (often = bytes)
  double ops = 0;            ///< operators per call: GPU kernel launches, CPU op dispatches
  double ctas = 0;           ///< mean thread blocks per kernel: how many SMs a kernel fills
  Precision precision = Precision::kFp16;  ///< GPU math precision
  double gpu_efficiency = 0;               ///< achieved fraction of peak FLOP/s on the SMs it fills
  double cpu_efficiency = 0;  ///< achieved fraction of peak CPU FLOP/s (framework quality)
  int cpu_threads = 1;        ///< cores its CPU implementation uses
  double weights_bytes = 0;   ///< VRAM held by weights while it runs on the GPU
  double working_bytes = 0;   ///< VRAM held by activations / workspace while it runs
  double input_bytes = 0;     ///< host -> device bytes per GPU call
  double output_bytes = 0;    ///< device -> host bytes per GPU call
  bool has_gpu = true;        ///< false: only a CPU implementation exists
  std::string source;         ///< where the numbers come from

  /// @brief VRAM a GPU run of this tool holds from its start to its end.
  [[nodiscard]] double vram_bytes() const { return weights_bytes + working_bytes; }
};

/// @brief Constants of the executor's device model, declared once in catalog/tools.yaml
/// (`execution_model:`), each with its source there.
struct ExecModel {
  double launch_overhead_us = 0;  ///< framework dispatch + launch per kernel, alone
  /// Extra scheduling delay per kernel with 1, 2, ... co-running GPU workloads (index 0 =
  /// alone). Beyond the table it grows linearly with the last step.
  std::vector<double> launch_delay_us;
  double cpu_op_overhead_us = 0;         ///< framework dispatch per operator on the CPU
  double pcie_latency_us = 0;            ///< fixed cost of one host<->device copy
  double gpu_mem_efficiency = 0;         ///< achievable fraction of peak DRAM bandwidth
  double cpu_mem_efficiency = 0;         ///< achievable fraction of host DRAM bandwidth
  double interference_per_corunner = 0;  ///< L2/cache slowdown of kernels per GPU co-runner
  double default_noise = 0;              ///< log-normal sigma of observed phase times

  /// @brief Extra per-kernel delay (seconds) when `corunners` other GPU workloads run.
  [[nodiscard]] double launch_delay_s(int corunners) const;
};

/// @brief The tool catalog: the execution model and every tool, in file order.
struct ToolCatalog {
  ExecModel model;
  std::vector<Tool> tools;

  [[nodiscard]] const Tool* find(std::string_view name) const;
  [[nodiscard]] std::vector<std::string> names() const;
};

/// @brief Parses tools.yaml text. Every problem names the file, line and field path.
Result<ToolCatalog> parse_tool_catalog(std::string_view text, const std::string& file);

/// @brief The tools.yaml of `catalog`.
Result<ToolCatalog> tool_catalog(const Catalog& catalog);

/// @brief The tools.yaml of the default catalog (CORUN_CATALOG or the embedded one).
Result<ToolCatalog> default_tool_catalog();

/// @brief What one call costs on one device, alone, noise-free. The GPU path is three phases:
/// upload inputs, compute, download outputs; its compute phase splits into kernel time (which
/// contention slows by processor sharing) and launch gaps (which co-runners lengthen).
struct ToolCost {
  bool has_gpu = false;
  double h2d_s = 0;           ///< input upload over PCIe, alone
  double d2h_s = 0;           ///< output download over PCIe, alone
  double kernel_s = 0;        ///< roofline time of the kernels on the SMs they fill
  double kernels = 0;         ///< kernel count (launch gaps scale with it)
  double launch_s = 0;        ///< kernels x (launch overhead + alone scheduling delay)
  double sm_demand = 0;       ///< fraction of all SMs kept busy during the compute phase, alone
  double bw_demand = 0;       ///< fraction of DRAM bandwidth used during the compute phase, alone
  double vram_bytes = 0;      ///< held from the start of the upload to the end of the download
  double cpu_s = 0;           ///< CPU implementation time on its threads, alone
  double cpu_core_share = 0;  ///< threads / host cores
  double cpu_bw_demand = 0;   ///< fraction of host DRAM bandwidth used while it runs, alone
  bool cpu_memory_bound = false;

  /// @brief Compute phase alone: kernels plus launch gaps.
  [[nodiscard]] double compute_s() const { return kernel_s + launch_s; }
  /// @brief Standalone end-to-end GPU time, transfers included (0 when there is no GPU path).
  [[nodiscard]] double gpu_s() const { return has_gpu ? h2d_s + compute_s() + d2h_s : 0; }
};

/// @brief Derives the standalone costs of `tool` on `device` from its description.
ToolCost derive_cost(const Tool& tool, const Device& device, const ExecModel& model);

}  // namespace corun::mapping
