// Work of a model's GPU phases, derived from its architecture.
//
// Conventions: a multiply-add is 2 FLOPs; DRAM bytes are weights read once per pass plus every
// kernel's activation input read and output written (no cross-kernel cache reuse is assumed;
// the simulator models L2 separately); one kernel per convolution / GEMM / fused attention /
// elementwise op; `ctas` is the mean number of 128x128 output tiles over the math kernels
// (convolutions, GEMMs and attention), the parallelism a kernel offers the SMs.

#include <algorithm>
#include <cmath>

#include "corun/catalog/model.h"
#include "corun/core/check.h"
#include "corun/core/enum_names.h"

namespace corun {

namespace {

constexpr EnumNames<ModelFamily, 4> kFamilyNames{{{{ModelFamily::kVision, "vision"},
                                                   {ModelFamily::kEncoder, "encoder"},
                                                   {ModelFamily::kSpeech, "speech"},
                                                   {ModelFamily::kLlm, "llm"}}}};

}  // namespace

std::string_view to_string(ModelFamily f) { return kFamilyNames.name(f); }

std::optional<ModelFamily> parse_family(std::string_view s) { return kFamilyNames.parse(s); }

const std::vector<std::string>& family_names() {
  static const std::vector<std::string> names = kFamilyNames.names();
  return names;
}

PhaseCost& PhaseCost::operator+=(const PhaseCost& o) {
  // ctas is a per-kernel mean: combine weighted by kernel counts.
  const double k = kernels + o.kernels;
  ctas = k > 0 ? (ctas * kernels + o.ctas * o.kernels) / k : 0;
  flops += o.flops;
  bytes += o.bytes;
  kernels = k;
  return *this;
}

namespace {

constexpr double kTile = 128;

double tiles(double m, double n) { return std::ceil(m / kTile) * std::ceil(n / kTile); }

/// Bytes per parameter of embedding tables and LM heads: quantisation leaves them FP16.
double embedding_bytes_per_param(Precision p) { return p == Precision::kFp32 ? 4 : 2; }
/// Bytes per norm / bias parameter: never quantised below 16 bits.
double other_bytes_per_param(Precision p) { return p == Precision::kFp32 ? 4 : 2; }

/// Accumulates a phase kernel by kernel; the CTA mean covers math kernels only, because
/// elementwise kernels are sized to fill the GPU whatever the model.
class CostBuilder {
 public:
  explicit CostBuilder(Precision p)
      : act_(activation_bytes_per_element(p)),
        wbpp_(weight_bytes_per_param(p)),
        emb_bpp_(embedding_bytes_per_param(p)) {}

  [[nodiscard]] double act() const { return act_; }

  /// A GEMM [m x k] x [k x n], `count` times; weights at `weight_bpp` bytes per parameter.
  void gemm(double m, double n, double k, double count, double weight_bpp) {
    cost_.flops += repeat_ * count * 2 * m * n * k;
    cost_.bytes += repeat_ * count * (n * k * weight_bpp + (m * k + m * n) * act_);
    math(count, tiles(m, n));
  }
  /// A GEMM whose weights are quantised linear-layer weights.
  void linear(double m, double n, double k, double count = 1) { gemm(m, n, k, count, wbpp_); }
  /// A GEMM whose weights are an embedding table / LM head (kept FP16 when quantised).
  void head(double m, double n, double k) { gemm(m, n, k, 1, emb_bpp_); }

  /// `count` kernels of math with explicit totals (convolutions, fused attention).
  void math_kernel(double flops, double bytes, double count, double ctas) {
    cost_.flops += repeat_ * flops;
    cost_.bytes += repeat_ * bytes;
    math(count, ctas);
  }
  /// `count` elementwise kernels moving `bytes` in total.
  void elementwise(double count, double bytes) {
    cost_.kernels += repeat_ * count;
    cost_.bytes += repeat_ * bytes;
  }
  /// Everything added from now on happens `n` times (e.g. identical decode steps).
  void set_repeat(double n) { repeat_ = n; }

  [[nodiscard]] PhaseCost finish() const {
    PhaseCost c = cost_;
    c.ctas = math_kernels_ > 0 ? cta_sum_ / math_kernels_ : 0;
    return c;
  }

 private:
  void math(double count, double ctas) {
    cost_.kernels += repeat_ * count;
    math_kernels_ += repeat_ * count;
    cta_sum_ += repeat_ * count * ctas;
  }

  double act_;
  double wbpp_;
  double emb_bpp_;
  PhaseCost cost_;
  double math_kernels_ = 0;
  double cta_sum_ = 0;
  double repeat_ = 1;
};

// ---------------------------------------------------------------------------------------
// CNNs

/// Output side of a layer for an input of side `size` (padding rounds up, as in PyTorch's
/// "same" convolutions).
double out_side(const ConvLayer& l, int size) {
  return l.pooled ? 1.0 : std::ceil(static_cast<double>(size) / l.stride);
}

double in_side(const ConvLayer& l, int size) {
  return l.pooled ? 1.0 : out_side(l, size) * l.conv_stride;
}

double conv_weights(const ConvLayer& l) {
  return static_cast<double>(l.kernel) * l.kernel * (static_cast<double>(l.c_in) / l.groups) *
         l.c_out;
}

PhaseCost cnn_forward(const ModelArch& m, int batch, int size, Precision p) {
  CostBuilder b(p);
  for (const ConvLayer& l : m.conv_layers) {
    const double ho = out_side(l, size);
    const double hi = in_side(l, size);
    const double positions = batch * ho * ho;
    const double reps = l.repeats;
    const double flops = reps * 2 * conv_weights(l) * positions;
    const double bytes =
        reps * (conv_weights(l) * weight_bytes_per_param(p) + l.c_out * other_bytes_per_param(p) +
                batch * (l.c_in * hi * hi + l.c_out * ho * ho) * b.act());
    b.math_kernel(flops, bytes, reps, tiles(positions, l.c_out));
  }
  // Pooling, residual adds, concats: each moves about one feature map; counted as kernels
  // only, since the convolutions already account for every feature map once in and out.
  b.elementwise(m.aux_kernels, 0);
  return b.finish();
}

double cnn_activation_bytes(const ModelArch& m, int batch, int size, Precision p) {
  double peak = 0;
  for (const ConvLayer& l : m.conv_layers) {
    const double ho = out_side(l, size);
    const double hi = in_side(l, size);
    peak = std::max(peak, l.c_in * hi * hi + l.c_out * ho * ho);
  }
  return peak * batch * activation_bytes_per_element(p);
}

// ---------------------------------------------------------------------------------------
// Transformers

double q_width(const TransformerDims& d) { return static_cast<double>(d.heads) * d.head_dim; }
double kv_width(const TransformerDims& d) { return static_cast<double>(d.kv_heads) * d.head_dim; }
double mlp_up_width(const TransformerDims& d) {
  return static_cast<double>(d.intermediate) * (d.gated_mlp ? 2 : 1);
}

/// Linear-layer weights of one layer (self-attention and MLP; cross-attention separately).
double layer_linear_params(const TransformerDims& d) {
  const double h = d.hidden;
  return h * (q_width(d) + 2 * kv_width(d)) + q_width(d) * h + h * mlp_up_width(d) +
         static_cast<double>(d.intermediate) * h;
}

/// Cross-attention weights of one decoder layer: Q and O on the decoder side, K and V
/// projecting the encoder output.
double cross_linear_params(const TransformerDims& d) {
  const double h = d.hidden;
  return 2 * h * q_width(d) + 2 * h * kv_width(d);
}

/// Cross-attention context of a speech decoder: the encoder positions it attends over.
struct CrossContext {
  double frames = 0;
};

/// Adds `d.layers` layers processing `tokens` new tokens for each of `batch` sequences.
/// `attn_pairs`: query-key pairs per sequence and head. `kv_read`: cached tokens per sequence
/// whose K and V come from DRAM. `kv_write`: new K and V are appended to a cache.
void add_layers(CostBuilder& b, const TransformerDims& d, double batch, double tokens,
                double attn_pairs, double kv_read, bool kv_write, const CrossContext* cross) {
  const double rows = batch * tokens;
  const double h = d.hidden;
  const double act = b.act();
  const double layers = d.layers;
  const double attn_ctas = batch * d.heads * std::ceil(tokens / kTile);

  b.linear(rows, q_width(d) + 2 * kv_width(d), h, layers);
  // Fused (flash) attention: QK^T and AV, reading Q and the K/V of the attended tokens,
  // writing the output; scores stay on chip.
  const double attn_flops = 2 * 2 * batch * d.heads * d.head_dim * attn_pairs;
  const double attn_bytes =
      (2 * rows * q_width(d) + batch * (kv_read + tokens) * 2 * kv_width(d)) * act;
  b.math_kernel(layers * attn_flops, layers * attn_bytes, layers, attn_ctas);
  if (kv_write) b.elementwise(0, layers * rows * 2 * kv_width(d) * act);
  b.linear(rows, h, q_width(d), layers);
  double elementwise_kernels = 4;  // two norms, two residual adds
  if (cross != nullptr) {
    b.linear(rows, q_width(d), h, layers);
    const double cross_flops = 2 * 2 * batch * d.heads * d.head_dim * tokens * cross->frames;
    const double cross_bytes =
        (2 * rows * q_width(d) + batch * cross->frames * 2 * kv_width(d)) * act;
    b.math_kernel(layers * cross_flops, layers * cross_bytes, layers, attn_ctas);
    b.linear(rows, h, q_width(d), layers);
    elementwise_kernels += 2;  // its norm and residual add
  }
  b.linear(rows, mlp_up_width(d), h, layers);
  b.linear(rows, h, d.intermediate, layers);
  // Norms and adds read and write one hidden vector per row; the activation reads the up
  // projection and writes the intermediate; RoPE rewrites Q and K.
  double ew_bytes = elementwise_kernels * 2 * rows * h * act;
  ew_bytes += rows * (mlp_up_width(d) + d.intermediate) * act;
  elementwise_kernels += 1;
  if (d.position_embeddings == 0) {
    ew_bytes += 2 * rows * (q_width(d) + kv_width(d)) * act;
    elementwise_kernels += 1;
  }
  b.elementwise(layers * elementwise_kernels, layers * ew_bytes);
}

/// Token embedding lookup (and learned position add) for `rows` rows.
void add_embedding(CostBuilder& b, const TransformerDims& d, double rows) {
  b.elementwise(d.position_embeddings > 0 ? 2 : 1, 2 * rows * d.hidden * b.act());
}

/// Final norm, LM head over `rows` rows, and sampling (softmax / argmax over the logits).
void add_lm_head(CostBuilder& b, const TransformerDims& d, double rows) {
  b.elementwise(1, 2 * rows * d.hidden * b.act());
  b.head(rows, d.vocab, d.hidden);
  b.elementwise(1, rows * static_cast<double>(d.vocab) * b.act());
}

/// One decode step of a decoder stack: `batch` sequences, `context` cached tokens each.
void add_decode_step(CostBuilder& b, const TransformerDims& d, double batch, double context,
                     const CrossContext* cross) {
  add_embedding(b, d, batch);
  add_layers(b, d, batch, 1, context + 1, context, true, cross);
  add_lm_head(b, d, batch);
}

/// A causal prefill of `tokens` after `context_before` cached tokens, for `batch` sequences.
PhaseCost prefill_impl(const TransformerDims& d, int batch, int tokens, int context_before,
                       Precision p) {
  CostBuilder b(p);
  const double t = tokens;
  const double c0 = context_before;
  // Causal mask: token i attends to the c0 cached tokens and to tokens 1..i of the chunk.
  const double pairs = t * c0 + t * (t + 1) / 2;
  add_embedding(b, d, batch * t);
  add_layers(b, d, batch, t, pairs, c0, true, nullptr);
  add_lm_head(b, d, batch);  // logits of the last token only (vLLM, llama.cpp)
  return b.finish();
}

/// Peak working set of `tokens` rows through one layer, plus one layer's attention scores
/// over `context` keys (counted as if materialised: a conservative bound for flash kernels).
double transformer_activation_bytes(const TransformerDims& d, double batch, double tokens,
                                    double context, Precision p) {
  const double rows = batch * tokens;
  const double widest = std::max(
      {mlp_up_width(d), q_width(d) + 2 * kv_width(d), static_cast<double>(d.intermediate)});
  const double scores = batch * d.heads * tokens * context;
  return (rows * (d.hidden + widest) + scores) * activation_bytes_per_element(p);
}

int default_size(const ModelArch& m, int size) {
  if (size > 0) return size;
  return m.family == ModelFamily::kVision ? m.reference_size : m.default_seq_len;
}

/// Whisper-style audio stem: conv1d k3 over 2F mel frames, then conv1d k3 stride 2 to F.
void add_audio_stem(CostBuilder& b, const ModelArch& m, double batch, double frames) {
  const double h = m.encoder.hidden;
  b.linear(batch * 2 * frames, h, 3.0 * m.audio_mel_bins);
  b.linear(batch * frames, h, 3 * h);
  b.elementwise(2, 2 * batch * 3 * frames * h * b.act());  // GELU after each
}

PhaseCost speech_forward(const ModelArch& m, int batch, int frames, Precision p) {
  CostBuilder b(p);
  const double bt = batch;
  const double f = frames;
  add_audio_stem(b, m, bt, f);
  b.elementwise(1, 2 * bt * f * m.encoder.hidden * b.act());  // learned position add
  add_layers(b, m.encoder, bt, f, f * f, 0, false, nullptr);
  b.elementwise(1, 2 * bt * f * m.encoder.hidden * b.act());  // final encoder norm
  // Each decoder layer projects the encoder output to its cross-attention K and V once.
  b.linear(bt * f, 2 * kv_width(m.decoder), m.decoder.hidden, m.decoder.layers);
  // Decode: the self-attention cache grows from 0 to T-1; its mean is (T-1)/2, and every
  // term of a step is linear in the context, so T steps = T x one step at the mean.
  const double steps = m.speech_decode_tokens;
  if (steps > 0) {
    const CrossContext cross{f};
    b.set_repeat(steps);
    add_decode_step(b, m.decoder, bt, (steps - 1) / 2, &cross);
  }
  return b.finish();
}

PhaseCost encoder_forward(const ModelArch& m, int batch, int tokens, Precision p) {
  CostBuilder b(p);
  const double t = tokens;
  add_embedding(b, m.encoder, batch * t);
  b.elementwise(1, 2 * batch * t * m.encoder.hidden * b.act());  // embedding LayerNorm
  add_layers(b, m.encoder, batch, t, t * t, 0, false, nullptr);
  return b.finish();
}

const TransformerDims& decoder_of(const ModelArch& m) {
  CORUN_CHECK_MSG(m.decoder.layers > 0, m.name.c_str());
  return m.decoder;
}

/// Parameters of one transformer stack. `lm_head`: the stack ends in a vocabulary projection
/// (decoders); encoders (BERT, Whisper's audio encoder) are counted without their task heads.
ParamCounts stack_params(const TransformerDims& d, bool cross_attention, bool lm_head) {
  ParamCounts c;
  if (d.layers <= 0) return c;
  const double h = d.hidden;
  double per_layer = layer_linear_params(d);
  double norms = 2 * h;
  if (cross_attention) {
    per_layer += cross_linear_params(d);
    norms += h;
  }
  c.linear = d.layers * per_layer;
  c.other = d.layers * norms + h;  // + the final norm
  c.embedding = (static_cast<double>(d.vocab) + d.position_embeddings) * h;
  if (lm_head && !d.tied_embeddings) c.embedding += static_cast<double>(d.vocab) * h;
  return c;
}

}  // namespace

ParamCounts param_counts(const ModelArch& m) {
  ParamCounts c;
  switch (m.family) {
    case ModelFamily::kVision:
      for (const ConvLayer& l : m.conv_layers) {
        c.linear += l.repeats * conv_weights(l);
        c.other += static_cast<double>(l.repeats) * l.c_out;  // folded batch-norm bias
      }
      break;
    case ModelFamily::kEncoder:
      c = stack_params(m.encoder, false, false);
      break;
    case ModelFamily::kLlm:
      c = stack_params(m.decoder, false, true);
      break;
    case ModelFamily::kSpeech: {
      const ParamCounts enc = stack_params(m.encoder, false, false);
      const ParamCounts dec = stack_params(m.decoder, true, true);
      const double h = m.encoder.hidden;
      const double stem = 3.0 * m.audio_mel_bins * h + 3 * h * h;
      c.linear = enc.linear + dec.linear + stem;
      c.embedding = enc.embedding + dec.embedding;
      c.other = enc.other + dec.other + 2 * h;  // + stem biases
      break;
    }
  }
  return c;
}

double param_count(const ModelArch& m) { return param_counts(m).total(); }

double weight_bytes(const ModelArch& m, Precision p) {
  const ParamCounts c = param_counts(m);
  return c.linear * weight_bytes_per_param(p) + c.embedding * embedding_bytes_per_param(p) +
         c.other * other_bytes_per_param(p);
}

PhaseCost forward_cost(const ModelArch& m, int batch, int size, Precision p) {
  CORUN_CHECK(batch >= 1);
  size = default_size(m, size);
  switch (m.family) {
    case ModelFamily::kVision:
      return cnn_forward(m, batch, size, p);
    case ModelFamily::kEncoder:
      return encoder_forward(m, batch, size, p);
    case ModelFamily::kSpeech:
      return speech_forward(m, batch, size, p);
    case ModelFamily::kLlm:
      return prefill_impl(decoder_of(m), batch, size, 0, p);
  }
  return {};
}

double activation_bytes(const ModelArch& m, int batch, int size, Precision p) {
  CORUN_CHECK(batch >= 1);
  size = default_size(m, size);
  switch (m.family) {
    case ModelFamily::kVision:
      return cnn_activation_bytes(m, batch, size, p);
    case ModelFamily::kEncoder:
      return transformer_activation_bytes(m.encoder, batch, size, size, p);
    case ModelFamily::kLlm:
      return transformer_activation_bytes(m.decoder, batch, size, size, p);
    case ModelFamily::kSpeech: {
      // The conv stem's first output (2F positions) can exceed a layer's working set.
      const double stem = batch * 2.0 * size * (m.audio_mel_bins + m.encoder.hidden) *
                          activation_bytes_per_element(p);
      const double enc = transformer_activation_bytes(m.encoder, batch, size, size, p);
      const double dec = transformer_activation_bytes(m.decoder, batch, 1, size, p);
      return std::max({stem, enc, dec});
    }
  }
  return 0;
}

PhaseCost prefill_cost(const ModelArch& m, int tokens, int context_before, Precision p) {
  CORUN_CHECK(tokens >= 1 && context_before >= 0);
  return prefill_impl(decoder_of(m), 1, tokens, context_before, p);
}

PhaseCost decode_cost(const ModelArch& m, int batch, double mean_context, Precision p) {
  CORUN_CHECK(batch >= 1 && mean_context >= 0);
  CostBuilder b(p);
  if (m.family == ModelFamily::kSpeech) {
    const CrossContext cross{static_cast<double>(m.default_seq_len)};
    add_decode_step(b, decoder_of(m), batch, mean_context, &cross);
  } else {
    add_decode_step(b, decoder_of(m), batch, mean_context, nullptr);
  }
  return b.finish();
}

double kv_bytes_per_token(const ModelArch& m, Precision p) {
  const TransformerDims& d = m.decoder;
  if (d.layers <= 0) return 0;
  return 2.0 * d.layers * kv_width(d) * activation_bytes_per_element(p);
}

}  // namespace corun
