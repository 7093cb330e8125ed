#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "corun/export/plan_input.h"

namespace corun::exporting {

/// @brief Which server runs a model: vLLM for the LLM family, Triton for the others.
enum class Server { kVllm, kTriton };

/// @brief Settings shared by every export format.
struct ExportOptions {
  /// Written into every file's header (provenance); tests pin it so that golden files hold.
  std::string generator;
  int base_port = 8000;  ///< the k-th exported model listens on base_port + k (host side)
  int device_index = 0;  ///< CUDA device the models share (MPS limit, compose reservation)
};

/// @brief ExportOptions with generator "corun VERSION (GIT HASH)".
ExportOptions default_export_options();

/// @brief What every format needs to know about one planned model, derived once from the
/// catalog cost model and the plan's knobs (see each field for how).
struct ModelDeployment {
  const ModelSpec* spec = nullptr;
  Settings settings;
  std::string settings_text;  ///< the searched knobs as corun writes them ("imgsz=480,...")
  Server server = Server::kTriton;
  int port = 0;  ///< host port: ExportOptions::base_port + position in the plan

  /// Device memory the plan budgets for the model: model_vram_bytes() of the space layer
  /// (weights at the chosen precision + activations of a batch at imgsz, or the KV cache of
  /// request_concurrency sequences of prompt + output tokens and one prefill chunk's
  /// activations, + 0.4 GB of CUDA context). The plan is feasible when these sum to at most
  /// the device's VRAM.
  double vram_bytes = 0;
  /// vram_bytes / device VRAM, rounded DOWN to 0.001 (at least 0.001): vLLM's
  /// --gpu-memory-utilization, a per-instance fraction of the GPU's total memory. Rounding
  /// down keeps the sum of the fractions of a feasible plan at or below 1.
  double vram_fraction = 0;
  /// vram_bytes in MiB, rounded UP: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT. Up, so that the MPS cap
  /// is never below what the server was told it may use (vram_fraction x VRAM).
  std::int64_t mps_mem_limit_mib = 0;
  /// sm_share rounded to the nearest integer in [1, 100]: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE.
  int mps_active_thread_percentage = 100;

  /// Vision: Ultralytics' integer frame stride (`vid_stride`, keep 1 frame in n) for the
  /// planned skip_rate s: n = ceil(1 / (1 - s)). Rounded UP so that the GPU never sees more
  /// frames than the plan budgeted: 0 -> 1, 0.5 -> 2, 0.33 -> 2 (1.49; keeps 50 % where the
  /// plan kept 67 %), 0.75 -> 4. 1 for other families.
  int vid_stride = 1;
  /// Inputs per second that reach the server under the plan: fps x (1 - skip_rate) for
  /// vision (the planned rate, not the vid_stride one), rps for the other families.
  double input_rate_per_s = 0;
  /// Triton's dynamic_batching max_queue_delay_microseconds: the time a batch of `batch`
  /// inputs takes to fill at input_rate_per_s, (batch - 1) / rate, rounded to the nearest
  /// microsecond. The first input of a batch waits for the batch - 1 after it; longer would
  /// only add latency, shorter would dispatch batches smaller than the plan's. 0 for batch 1
  /// or no demand.
  std::int64_t queue_delay_us = 0;
  /// LLMs: the longest sequence the plan serves (prompt_tokens + output_tokens), vLLM's
  /// --max-model-len; the KV cache in vram_bytes is sized for it. 0 when the demand names no
  /// lengths.
  int max_model_len = 0;
};

/// @brief The deployment of every model of a plan, in the plan's order.
/// @param plan a plan resolved against its workload (parse_plan_input)
/// @param options ports and device index
/// @return one entry per planned model; each `spec` points into `plan.workload`, so `plan`
/// must outlive the result
std::vector<ModelDeployment> plan_deployment(const PlanInput& plan, const ExportOptions& options);

}  // namespace corun::exporting
