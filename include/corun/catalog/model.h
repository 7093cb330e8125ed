#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/catalog/precision.h"

namespace corun {

/// @brief What kind of work a model does per request; decides its knobs and metrics.
/// kVision: one forward pass per frame (CNN detector/classifier), metric latency.
/// kEncoder: one forward pass per request over a token sequence (BERT), metric latency.
/// kSpeech: encoder over an audio window plus a short autoregressive decode, metric latency.
/// kLlm: decoder-only transformer; prefill then decode with a KV cache, metrics TTFT and TPOT.
enum class ModelFamily { kVision, kEncoder, kSpeech, kLlm };

std::string_view to_string(ModelFamily f);
/// @brief The family called `s` (exact match), or none.
std::optional<ModelFamily> parse_family(std::string_view s);
/// @brief Every family name, in enum order: vision, encoder, speech, llm.
const std::vector<std::string>& family_names();

/// @brief Work of one GPU phase, derived from the architecture (never typed in).
struct PhaseCost {
  double flops = 0;    ///< floating-point operations (multiply-add = 2)
  double bytes = 0;    ///< DRAM bytes moved: weights read + activations written/read (+ KV)
  double kernels = 0;  ///< kernel launches
  double ctas = 0;     ///< mean thread blocks per kernel (128x128 output tiles): parallelism

  PhaseCost& operator+=(const PhaseCost& o);
  /// @brief FLOPs per DRAM byte.
  [[nodiscard]] double intensity() const { return bytes > 0 ? flops / bytes : 0; }
};

/// @brief One convolution (or conv-like) layer of a CNN at the reference input size.
struct ConvLayer {
  int c_in = 0;
  int c_out = 0;
  int kernel = 1;
  int stride = 1;  ///< output stride of this layer relative to the network input
  int groups = 1;
  int repeats = 1;      ///< identical copies of this layer
  int conv_stride = 1;  ///< the convolution's own stride: its input sits at stride / conv_stride
  bool pooled = false;  ///< after global pooling: 1x1 output whatever the input size
};

/// @brief Transformer dimensions (decoder-only LLM, encoder, or each half of enc-dec).
struct TransformerDims {
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int intermediate = 0;
  int vocab = 0;
  bool gated_mlp = false;  ///< SwiGLU (3 matrices) vs GELU MLP (2 matrices)
  bool tied_embeddings = false;
  int position_embeddings = 0;  ///< learned absolute positions (0: rotary, no table)
};

/// @brief A published checkpoint of one precision variant of a catalog model, as a serving stack
/// loads it (e.g. vLLM's `--model`). Only models a serving stack downloads by name carry them.
struct ModelCheckpoint {
  Precision precision = Precision::kFp16;
  std::string hf_id;   ///< Hugging Face repository, "Qwen/Qwen2.5-1.5B-Instruct-AWQ"
  std::string source;  ///< where the id and what it holds were read (model card)
};

/// @brief A catalog model: its architecture, from which FLOPs, bytes, kernels and memory are
/// derived, plus published facts kept only to check the derivation and to score quality.
struct ModelArch {
  std::string name;  ///< catalog key, e.g. "yolo11s"
  std::string display_name;
  ModelFamily family = ModelFamily::kVision;
  std::vector<Precision> precisions;  ///< variants that exist for this model

  // CNNs (kVision): layers at reference_size; FLOPs scale with input area.
  int reference_size = 640;
  std::vector<ConvLayer> conv_layers;
  int aux_kernels = 0;  ///< non-convolution kernels per pass (pooling, adds, concat, pre/post)
  // Transformers (kEncoder, kLlm; kSpeech uses encoder + decoder).
  TransformerDims encoder;       ///< kEncoder, kSpeech
  TransformerDims decoder;       ///< kLlm, kSpeech
  int default_seq_len = 128;     ///< kEncoder tokens per request; kSpeech encoder frames
  int speech_decode_tokens = 0;  ///< kSpeech: tokens decoded per request
  int audio_mel_bins = 0;        ///< kSpeech: mel channels into the conv stem (2 frames/position)

  // Published facts, each cited in the catalog (used by tests and the objective).
  double published_params_m = 0;  ///< millions of parameters
  double published_gflops = 0;    ///< at reference_size (vision) or default_seq_len
  double quality = 0;             ///< e.g. COCO mAP50-95 at reference size, or task score
  std::string quality_metric;     ///< what `quality` measures (higher is better)
  std::string source;
  /// Published checkpoints by precision (a subset of `precisions`; empty for models that a
  /// serving stack builds from its own export, such as TensorRT engines of YOLO11).
  std::vector<ModelCheckpoint> checkpoints;

  /// @brief The checkpoint of precision `p`, or nullptr when none is catalogued.
  [[nodiscard]] const ModelCheckpoint* checkpoint(Precision p) const;
};

/// @brief Parameters by how quantisation stores them.
struct ParamCounts {
  double linear = 0;     ///< matmul / convolution weights: quantised by AWQ and INT8
  double embedding = 0;  ///< token and position tables, and an untied LM head: stay FP16
  double other = 0;      ///< norms and biases: never below 16 bits (FP32 models: 32)
  [[nodiscard]] double total() const { return linear + embedding + other; }
};

/// @brief Parameter counts derived from the architecture.
ParamCounts param_counts(const ModelArch& m);
/// @brief Parameter count derived from the architecture.
double param_count(const ModelArch& m);
/// @brief Bytes of weights stored in `p` (AWQ/INT8 quantise linear layers only; embeddings
/// stay FP16).
double weight_bytes(const ModelArch& m, Precision p);

/// @brief One forward pass over `batch` inputs. `size` is the image side for kVision, the
/// sequence length for kEncoder and the encoder frames for kSpeech (<= 0: the default).
/// kSpeech includes the speech_decode_tokens decode steps; kLlm is a prefill of `size`
/// tokens (default_seq_len) for each of `batch` sequences.
PhaseCost forward_cost(const ModelArch& m, int batch, int size, Precision p);
/// @brief Peak activation working memory of forward_cost's pass.
double activation_bytes(const ModelArch& m, int batch, int size, Precision p);

/// @brief LLM prefill of `tokens` new tokens after `context_before` cached ones (one chunk).
PhaseCost prefill_cost(const ModelArch& m, int tokens, int context_before, Precision p);
/// @brief One LLM decode step for `batch` sequences whose mean context is `mean_context`.
PhaseCost decode_cost(const ModelArch& m, int batch, double mean_context, Precision p);
/// @brief KV-cache bytes per token of context (all layers, K and V).
double kv_bytes_per_token(const ModelArch& m, Precision p);

}  // namespace corun
