#pragma once

// One step of an LLM serving engine on the simulated GPU, from calibrated parts: the step's
// kernels are split by class (linear layers, attention, elementwise, LM head), each class has
// its own roofline and per-kernel cost for the device generation (sim_params.h,
// LlmKernelParams), and the sum becomes a gpu::Shape that the contention model treats like
// any other phase. A step may mix a prefill chunk with the decode batch (continuous batching
// under a token budget). Private to src/testbed; tested in tests/testbed/llm_step_test.cc and
// compared with public measurements by `corun eval llm-physics`.

#include "corun/catalog/device.h"
#include "corun/catalog/model.h"
#include "corun/catalog/precision.h"
#include "corun/testbed/gpu_model.h"
#include "sim_params.h"

namespace corun::sim {

/// @brief What one engine step processes.
struct LlmBatch {
  double decode_seqs = 0;      ///< sequences decoding one token each
  double decode_context = 0;   ///< their mean cached context, tokens
  double prefill_tokens = 0;   ///< prompt tokens of one prefill chunk (0: none)
  double prefill_context = 0;  ///< tokens of that prompt already cached before the chunk
  /// Logits are computed for the decode sequences and for a chunk that ends its prompt.
  bool prefill_ends_prompt = true;
};

/// @brief Work of one kernel class in a step.
struct KernelClassCost {
  double flops = 0;
  double bytes = 0;
  double kernels = 0;
};

/// @brief A step's work by kernel class.
struct LlmStepCost {
  KernelClassCost linear;       ///< QKV, output, MLP up (gate+up) and down projections
  KernelClassCost attention;    ///< flash prefill and paged decode attention, KV-cache writes
  KernelClassCost elementwise;  ///< norms, rotary embedding, activation, residual adds, embedding
  KernelClassCost head;         ///< final norm, LM head and sampling
  double ctas = 1;              ///< mean 128x128 output tiles per math kernel (parallelism)
};

/// @brief The work of `b` on model `m` in precision `p`.
LlmStepCost llm_step_cost(const ModelArch& m, const LlmBatch& b, Precision p);

/// @brief The kernel parameters of `device`'s generation.
const LlmKernelParams& llm_kernel_params(const Device& device);

/// @brief Standalone time of each kernel class of a step, seconds (launch delay included).
struct LlmStepTimes {
  double linear_s = 0;
  double attention_s = 0;
  double elementwise_s = 0;
  double head_s = 0;
  [[nodiscard]] double total_s() const { return linear_s + attention_s + elementwise_s + head_s; }
};

/// @brief The step `b` of model `m` as a phase on `dev` (the physics view of `device`), its MPS
/// client capped at `cap_sms` SMs; `times` (optional) receives the per-class standalone times.
gpu::Shape make_llm_shape(const ModelArch& m, const LlmBatch& b, Precision p,
                          const Device& device, const gpu::DeviceModel& dev, double cap_sms,
                          LlmStepTimes* times = nullptr);

/// @brief The prefill of a `prompt`-token request in chunks of `chunk_tokens` (the engine's
/// token budget, clamped to [1, prompt]), alone on the engine, as one phase; `chunks` receives
/// the number of chunks.
gpu::Shape llm_prefill_shape(const ModelArch& a, int prompt, int chunk_tokens, Precision p,
                             const Device& device, const gpu::DeviceModel& dev, double cap_sms,
                             double& chunks);

/// @brief Tokens of KV cache that `kv_bytes` hold for model `m` in precision `p`.
double kv_capacity_tokens(const ModelArch& m, Precision p, double kv_bytes);

}  // namespace corun::sim
