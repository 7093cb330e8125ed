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

/// vLLM's --max-model-len without max_prompt_tokens/max_output_tokens in the demand: this
/// multiple of the mean prompt + output length, rounded up to kMaxModelLenGranule. The mean
/// alone rejects every request longer than average (vLLM refuses a prompt + max_tokens above
/// max_model_len); 4x covers a long-tailed length distribution whose tail the workload does
/// not state. Set the maxima in the demand to be exact (docs/formats.md).
inline constexpr int kMaxModelLenMeanMultiple = 4;
/// --max-model-len is rounded up to a multiple of this many tokens (a whole number of vLLM's
/// 16-token KV blocks, and a round number a reader recognises).
inline constexpr int kMaxModelLenGranule = 256;
/// Device memory a vLLM server uses beyond --gpu-memory-utilization: vLLM captures CUDA graphs
/// (one per batch size up to --max-num-seqs) after it has sized the KV cache, outside that
/// fraction (docs.vllm.ai, "Conserving Memory": CUDA graphs "take up extra memory in the GPU";
/// --enforce-eager turns them off). 512 MiB covers a small model's graphs at the batch sizes
/// vLLM captures by default; corun adds it to the server's MPS memory limit and keeps it free.
inline constexpr double kCudaGraphHeadroomBytes = 512.0 * 1024 * 1024;
/// A model's admission gateway listens this far above the base port (8000: gateways from 9000).
inline constexpr int kGatewayPortOffset = 1000;
/// The smallest CUDA_MPS_PINNED_DEVICE_MEM_LIMIT corun writes for a process: 1 GiB, a CUDA
/// context with cuBLAS/cuDNN and TensorRT's runtime loaded. The context alone takes a few
/// hundred MiB of device memory (its kernels' code and the runtime's heaps: CUDA C++
/// Programming Guide, "Lazy Loading"), and the libraries TensorRT loads add their own
/// (TensorRT Developer Guide, "Memory Usage of TensorRT": CUDA context and library memory
/// outside the engine). An estimate, not a measurement per GPU; a limit below it fails at
/// start-up whatever the model's own budget (Triton got 394-510 MiB before this floor).
inline constexpr std::int64_t kMpsMemoryFloorMib = 1024;

/// @brief What every format needs to know about one planned model, derived once from the
/// catalog cost model and the plan's knobs (see each field for how).
struct ModelDeployment {
  const ModelSpec* spec = nullptr;
  Settings settings;
  std::string settings_text;  ///< the searched knobs as corun writes them ("imgsz=480,...")
  Server server = Server::kTriton;
  /// Host port: ExportOptions::base_port + position in the plan for a vLLM server; for a
  /// Triton model, the port of the GPU's one Triton server (that of the plan's first Triton
  /// model), where it is reached as /v2/models/NAME.
  int port = 0;
  /// Host port of the model's admission gateway (admission.conf), used when admitted < 1:
  /// ExportOptions::base_port + kGatewayPortOffset + position in the plan.
  int gateway_port = 0;

  /// Device memory the plan budgets for the model: model_vram_bytes() of the space layer
  /// (weights at the chosen precision + activations of a batch at imgsz, or the KV cache of
  /// request_concurrency sequences of prompt + output tokens and one prefill chunk's
  /// activations, + 0.4 GB of CUDA context). The plan is feasible when these sum to at most
  /// the device's VRAM.
  double vram_bytes = 0;
  /// vLLM's --gpu-memory-utilization, a per-instance fraction of the GPU's total memory:
  /// vram_bytes / device VRAM rounded DOWN to 0.001 (at least 0.001), so that the fractions
  /// of a feasible plan sum to at most 1. For an LLM whose KV cache at max_model_len does not
  /// fit that budget (kv_bytes_at_max_len), raised to cover it, rounded UP to 0.001, as far as
  /// the memory no model of the plan budgets allows (the GPU's slack, less every vLLM
  /// server's kCudaGraphHeadroomBytes); beyond it, `warnings` says so.
  double vram_fraction = 0;
  /// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT of the model's own process, in MiB, rounded UP:
  /// vLLM: vram_fraction x VRAM + kCudaGraphHeadroomBytes; Triton models: vram_bytes (the
  /// Triton server of the GPU, which hosts them all, gets their sum: triton_server()); at
  /// least kMpsMemoryFloorMib for a vLLM process. Up, so that the MPS cap is never below what
  /// the server was told it may use.
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
  /// LLMs: vLLM's --max-model-len, the longest prompt + output a request may have:
  /// max_prompt_tokens + max_output_tokens of the demand when it gives them (either one
  /// missing: its mean x kMaxModelLenMeanMultiple; a mean that a context event raised above
  /// its maximum: the mean), else kMaxModelLenMeanMultiple x (mean prompt + mean output);
  /// rounded up to kMaxModelLenGranule. 0 when the demand names no lengths.
  int max_model_len = 0;
  /// LLMs: the device memory of the plan's budget with the KV cache of request_concurrency
  /// sequences of max_model_len tokens instead of the mean length (vLLM admits that many
  /// full-length sequences at once only if their KV cache fits).
  double kv_bytes_at_max_len = 0;
  /// The admitted share of the model's demand in the plan (1: all of it; 0: paused). Below 1,
  /// the export writes a rate limit at the gateway in front of the model (admission.conf).
  double admitted = 1;
  /// What does not deploy as planned, in words, for the files' headers: e.g. a KV cache at
  /// max_model_len that the GPU cannot hold at the planned concurrency.
  std::vector<std::string> warnings;
};

/// @brief The one Triton server of a GPU: it hosts every Triton-served model of the plan on
/// that GPU (one process, so one MPS client: its limits cover all of them).
struct TritonServer {
  std::vector<std::size_t> models;  ///< indices into the plan_deployment() result
  int port = 0;                     ///< host port: the port of its first model
  /// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT in MiB: the sum of its models' mps_mem_limit_mib (each
  /// counts its own 0.4 GB CUDA context, one process has one: the sum errs high), at least
  /// kMpsMemoryFloorMib.
  std::int64_t mps_mem_limit_mib = 0;
  /// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: the sum of its models' percentages, at most 100. MPS
  /// caps a process, not a model: inside one Triton the models share the sum of their shares
  /// (Triton has no per-model SM cap).
  int mps_active_thread_percentage = 100;
};

/// @brief The Triton server of the plan's GPU; its `models` is empty when no model of the plan
/// is served by Triton.
TritonServer triton_server(const std::vector<ModelDeployment>& models);

/// @brief The deployment of every model of a plan, in the plan's order.
/// @param plan a plan resolved against its workload (parse_plan_input)
/// @param options ports and device index
/// @return one entry per planned model; each `spec` points into `plan.workload`, so `plan`
/// must outlive the result
std::vector<ModelDeployment> plan_deployment(const PlanInput& plan, const ExportOptions& options);

}  // namespace corun::exporting
