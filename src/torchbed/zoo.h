#pragma once

// The model zoo: catalog architectures built as libtorch modules with seeded random weights.
// This header is torch-free (pimpl) so that only zoo.cc includes <torch/torch.h>.

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "corun/catalog/model.h"
#include "corun/core/result.h"

namespace corun::torchbed {

/// @brief How a zoo model is built: numeric format, device and the seed of its weights.
struct ZooOptions {
  bool int8 = false;            ///< dynamic int8 linear layers (weights int8, activations fp32)
  std::string device = "cpu";  ///< a torch::Device string: "cpu", "cuda", "cuda:1"
  std::uint64_t seed = 1;
};

/// @brief One catalog architecture as runnable libtorch code. Vision models are built from
/// their conv layer list (each layer at the shape the cost model assumes), encoders and
/// decoders from their transformer dimensions. Decoders keep a real KV cache per sequence:
/// prefill appends a prompt block, decode appends one token to each listed sequence.
/// Not thread-safe: one worker process owns one model.
class ZooModel {
 public:
  /// @brief Builds `arch`. Fails for families or precisions it cannot run (int8 convolutions).
  static Result<std::unique_ptr<ZooModel>> build(const ModelArch& arch, const ZooOptions& o);
  ~ZooModel();
  ZooModel(const ZooModel&) = delete;
  ZooModel& operator=(const ZooModel&) = delete;

  /// @brief One forward pass over `batch` inputs; `size` is the image side (vision) or the
  /// sequence length (encoder). Returns when the result is computed (device synchronised).
  void forward(int batch, int size);

  /// @brief Decoder: opens a sequence whose cache holds up to `max_context` tokens.
  int open_sequence(int max_context);
  /// @brief Decoder: runs `tokens` prompt tokens of sequence `slot` through the model,
  /// appending their keys and values to its cache (one chunk of a chunked prefill).
  void prefill(int slot, int tokens);
  /// @brief Decoder: one decode step producing one token for each sequence in `slots`
  /// (linear layers batched, attention per sequence over its own cached context).
  void decode(std::span<const int> slots);
  /// @brief Decoder: frees the cache of `slot`.
  void close_sequence(int slot);
  /// @brief Decoder: tokens cached for `slot`.
  [[nodiscard]] int context(int slot) const;

 private:
  struct Impl;
  explicit ZooModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// @brief Sets this process's intra-op threads (once, before any work) and flushes denormals.
void init_torch_process(int threads);
/// @brief libtorch's build configuration (torch::show_config()) plus the BLAS library this
/// process loaded, for provenance.
std::string torch_config();
/// @brief Whether this libtorch build can run CUDA (false for CPU-only builds).
bool torch_cuda_available();

}  // namespace corun::torchbed
