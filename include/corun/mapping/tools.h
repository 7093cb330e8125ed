#pragma once

// The AI tools an agent framework calls, described by what they compute (catalog/tools.yaml),
// and the cost model that turns a description into CPU and GPU times on a Device.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/catalog/device.h"
#include "corun/catalog/model.h"
#include "corun/catalog/precision.h"
#include "corun/core/result.h"
#include "corun/testbed/gpu_model.h"

namespace corun {
class Catalog;
}  // namespace corun

namespace corun::mapping {

/// @brief One GPU phase of a tool call, run `repeats` times back to back (a decode step).
struct ToolPhase {
  PhaseCost cost;
  double repeats = 1;
};

/// @brief A tool's call of a catalog LLM: its GPU work is engine steps whose shapes depend on
/// the device (gpu::llm_request_shapes), so they are built by derive_cost.
struct LlmCall {
  ModelArch arch;
  int prompt_tokens = 1;
  int output_tokens = 1;
  int prefill_chunk = 1;
};

/// @brief One AI tool: the work of one call, independent of where it runs. Times are never
/// typed in; derive_cost() computes them from these quantities and a Device through the GPU
/// model the simulator uses (testbed/gpu_model.h). A tool that calls a catalog model
/// (`model:` in tools.yaml) takes its phases and VRAM from that model's architecture at the
/// call's shape, exactly as the simulator does for a co-running model.
struct Tool {
  std::string name;          ///< catalog key, e.g. "object_detect"
  std::string display_name;  ///< e.g. "YOLO11m object detection (640 px)"
  std::string category;      ///< vision, speech, text, retrieval, generation
  std::string model;         ///< catalog model it calls ("" : described by its own numbers)
  std::string call;          ///< the call's shape, "audio_s=30", for reports ("" without model)
  std::vector<ToolPhase> phases;           ///< GPU work of one call, in order
  /// An LLM call: its GPU path is the simulator's engine steps; `phases` then only feed the
  /// totals below (the CPU implementation's work).
  std::optional<LlmCall> llm;
  double flops = 0;                        ///< floating-point operations per call (all phases)
  double bytes = 0;                        ///< DRAM bytes moved per call (all phases)
  double cpu_bytes = 0;                    ///< DRAM bytes of the CPU implementation (often = bytes)
  double ops = 0;                          ///< operators per call: GPU kernels, CPU op dispatches
  Precision precision = Precision::kFp16;  ///< GPU math precision
  double cpu_efficiency = 0;  ///< achieved fraction of peak CPU FLOP/s (framework quality)
  int cpu_threads = 1;        ///< cores its CPU implementation uses
  double weights_bytes = 0;   ///< VRAM held by weights while it runs on the GPU
  double working_bytes = 0;   ///< VRAM held by activations / workspace / KV while it runs
  double input_bytes = 0;     ///< host -> device bytes per GPU call
  double output_bytes = 0;    ///< device -> host bytes per GPU call
  bool has_gpu = true;        ///< false: only a CPU implementation exists
  std::string source;         ///< where the numbers come from

  /// @brief VRAM a GPU run of this tool holds from its start to its end.
  [[nodiscard]] double vram_bytes() const { return weights_bytes + working_bytes; }
};

/// @brief Host-side constants of the executor, declared once in catalog/tools.yaml
/// (`execution_model:`), each with its source there. The GPU side (launches, bandwidth,
/// interference, clock, PCIe) is the shared GPU model's.
struct ExecModel {
  double cpu_op_overhead_us = 0;  ///< framework dispatch per operator on the CPU
  double cpu_mem_efficiency = 0;  ///< achievable fraction of host DRAM bandwidth
  double default_noise = 0;       ///< log-normal sigma of observed phase times
};

/// @brief The tool catalog: the execution model and every tool, in file order.
struct ToolCatalog {
  ExecModel model;
  std::vector<Tool> tools;

  [[nodiscard]] const Tool* find(std::string_view name) const;
  [[nodiscard]] std::vector<std::string> names() const;
};

/// @brief Parses tools.yaml text; `model:` entries are resolved in `models`. Every problem
/// names the file, line and field path.
Result<ToolCatalog> parse_tool_catalog(std::string_view text, const std::string& file,
                                       const Catalog& models);

/// @brief The tools.yaml of `catalog`.
Result<ToolCatalog> tool_catalog(const Catalog& catalog);

/// @brief The tools.yaml of the default catalog (CORUN_CATALOG or the embedded one).
Result<ToolCatalog> default_tool_catalog();

/// @brief One GPU phase of a call as the shared GPU model sees it on a device.
struct GpuSegment {
  gpu::Shape shape;
  double repeats = 1;
};

/// @brief What one call costs on one device, alone, noise-free. The GPU path is three phases:
/// upload inputs, compute, download outputs; the compute phase is a sequence of GPU segments
/// whose contended times the shared GPU model gives.
struct ToolCost {
  bool has_gpu = false;
  double h2d_s = 0;                  ///< input upload over PCIe, alone
  double d2h_s = 0;                  ///< output download over PCIe, alone
  std::vector<GpuSegment> segments;  ///< GPU phases of the compute step
  double kernel_s = 0;               ///< roofline part of the compute step alone
  double kernels = 0;                ///< kernel count
  double launch_s = 0;               ///< per-kernel part (fixed cost + launch) alone
  double sm_demand = 0;              ///< mean fraction of all SMs kept busy during compute, alone
  double bw_demand = 0;  ///< mean fraction of achievable DRAM bandwidth during compute, alone
  /// SM power activity of the compute step, averaged over it alone: the power limiter reacts
  /// to a call's mean draw, as the simulator's to a request's.
  double power_activity = 0;
  double vram_bytes = 0;      ///< held from the start of the upload to the end of the download
  double cpu_s = 0;           ///< CPU implementation time on its threads, alone
  double cpu_core_share = 0;  ///< threads / host cores
  double cpu_bw_demand = 0;   ///< fraction of host DRAM bandwidth used while it runs, alone
  bool cpu_memory_bound = false;

  /// @brief Compute step alone at boost clock: kernels plus per-kernel costs.
  [[nodiscard]] double compute_s() const { return kernel_s + launch_s; }
  /// @brief Standalone end-to-end GPU time, transfers included (0 when there is no GPU path).
  [[nodiscard]] double gpu_s() const { return has_gpu ? h2d_s + compute_s() + d2h_s : 0; }
};

/// @brief Derives the standalone costs of `tool` on `device` from its description.
ToolCost derive_cost(const Tool& tool, const Device& device, const ExecModel& model);

}  // namespace corun::mapping
