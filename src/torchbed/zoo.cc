// The only translation unit that includes libtorch: catalog architectures as eager modules.

#include "zoo.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/torch.h>
#ifdef CORUN_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <vector>

#include "corun/core/check.h"

namespace corun::torchbed {

namespace {

using torch::Tensor;

torch::Device parse_device(const std::string& s) { return torch::Device(s); }

/// A linear layer in fp32, or dynamic int8 (quantized::linear_dynamic: weights int8 per
/// tensor, activations quantised on the fly), which is what libtorch offers on CPU.
class Linear {
 public:
  Linear() = default;
  Linear(std::int64_t in, std::int64_t out, bool bias, bool int8, const torch::TensorOptions& t)
      : Linear(torch::randn({out, in}, t) * (1.0 / std::sqrt(static_cast<double>(in))),
               bias ? torch::zeros({out}, t) : Tensor(), int8) {}
  Linear(Tensor weight, Tensor bias, bool int8) : weight_(std::move(weight)), bias_(std::move(bias)) {
    if (int8) pack();
  }
  [[nodiscard]] Tensor operator()(const Tensor& x) const {
    if (!packed_.isNone()) {
      static const auto op =
          c10::Dispatcher::singleton().findSchemaOrThrow("quantized::linear_dynamic", "");
      torch::jit::Stack stack{x.contiguous(), packed_, false};
      op.callBoxed(&stack);
      return stack[0].toTensor();
    }
    return torch::linear(x, weight_, bias_);
  }

 private:
  void pack() {
    const double scale = std::max(1e-8, weight_.abs().max().item<double>() / 127.0);
    const Tensor q = torch::quantize_per_tensor(weight_.contiguous(), scale, 0, torch::kQInt8);
    static const auto op =
        c10::Dispatcher::singleton().findSchemaOrThrow("quantized::linear_prepack", "");
    torch::jit::Stack stack{q, bias_.defined() ? c10::IValue(bias_) : c10::IValue()};
    op.callBoxed(&stack);
    packed_ = stack[0];
    weight_ = Tensor();
  }
  Tensor weight_, bias_;
  c10::IValue packed_;
};

Tensor rms_norm(const Tensor& x, const Tensor& w) {
  return x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6) * w;
}

/// Scaled dot-product attention of q [H, n, d] over k, v [Hkv, L, d] (grouped-query: each
/// key/value head serves H / Hkv query heads). `causal_offset` >= 0 masks key j > offset + i.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t causal_offset) {
  const std::int64_t groups = q.size(0) / k.size(0);
  const Tensor kk = groups > 1 ? k.repeat_interleave(groups, 0) : k;
  const Tensor vv = groups > 1 ? v.repeat_interleave(groups, 0) : v;
  Tensor s = torch::matmul(q, kk.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (causal_offset >= 0 && q.size(1) > 1) {
    const Tensor mask =
        torch::ones({q.size(1), k.size(1)}, torch::dtype(torch::kBool).device(q.device()))
            .triu(causal_offset + 1);
    s = s.masked_fill(mask, -1e9);
  }
  return torch::matmul(torch::softmax(s, -1), vv);
}

/// Rotary position embedding of x [H, n, d] for positions start..start+n-1.
Tensor rope(const Tensor& x, std::int64_t start) {
  const std::int64_t n = x.size(1), d = x.size(2), half = d / 2;
  const auto opts = torch::TensorOptions().dtype(x.dtype()).device(x.device());
  const Tensor inv = torch::pow(1e6, -torch::arange(0, half, opts) * 2.0 / static_cast<double>(d));
  const Tensor ang = torch::arange(start, start + n, opts).unsqueeze(1) * inv.unsqueeze(0);
  const Tensor c = ang.cos(), s = ang.sin();
  const Tensor x1 = x.narrow(2, 0, half), x2 = x.narrow(2, half, half);
  return torch::cat({x1 * c - x2 * s, x2 * c + x1 * s}, 2);
}

struct ConvStage {
  torch::nn::Conv2d conv{nullptr};
  int c_in = 0;
  int stride = 1;
  int conv_stride = 1;
  bool pooled = false;
};

struct DecoderLayer {
  Tensor ln1, ln2;
  Linear q, k, v, o, gate, up, down;
};

struct EncoderLayer {
  Linear qkv, o, ff1, ff2;
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
};

struct Sequence {
  std::vector<Tensor> k, v;  ///< per layer [Hkv, max_context, d]
  std::int64_t length = 0;
};

}  // namespace

struct ZooModel::Impl {
  ModelArch arch;
  torch::Device device{torch::kCPU};
  torch::TensorOptions opts;
  bool int8 = false;
  std::vector<ConvStage> convs;
  std::vector<EncoderLayer> enc;
  std::vector<DecoderLayer> dec;
  torch::nn::Embedding tokens{nullptr}, positions{nullptr};
  Tensor final_norm;
  Linear lm_head;
  std::map<int, Sequence> seqs;
  int next_slot = 0;

  void sync() const {
    if (device.is_cuda()) torch::cuda::synchronize(device.index() < 0 ? 0 : device.index());
  }

  void run_vision(int batch, int imgsz) {
    torch::NoGradGuard ng;
    Tensor x = torch::randn({batch, 3, imgsz, imgsz}, opts);
    for (auto& st : convs) {
      const std::int64_t side =
          st.pooled ? 1 : std::max<std::int64_t>(1, (imgsz * st.conv_stride + st.stride - 1) / st.stride);
      // Adapt the running tensor to the shape this layer reads (the catalog lists layers,
      // not the graph between them): channels are sliced or tiled, resolution pooled or
      // upsampled. These adapters are cheap next to the convolutions they feed.
      if (x.size(1) > st.c_in) {
        x = x.narrow(1, 0, st.c_in);
      } else if (x.size(1) < st.c_in) {
        const std::int64_t reps = (st.c_in + x.size(1) - 1) / x.size(1);
        x = x.repeat({1, reps, 1, 1}).narrow(1, 0, st.c_in);
      }
      if (x.size(2) > side) {
        x = torch::adaptive_avg_pool2d(x, {side, side});
      } else if (x.size(2) < side) {
        x = torch::upsample_nearest2d(x, {side, side});
      }
      x = torch::silu(st.conv->forward(x.contiguous()));
    }
    (void)x.sum().item<float>();
    sync();
  }

  void run_encoder(int batch, int seq) {
    torch::NoGradGuard ng;
    const auto& d = arch.encoder;
    const std::int64_t max_pos = std::max(1, d.position_embeddings);
    const Tensor ids = torch::randint(std::max(1, d.vocab), {batch, seq},
                                      torch::dtype(torch::kLong).device(device));
    const Tensor pos = torch::arange(seq, torch::dtype(torch::kLong).device(device)) % max_pos;
    Tensor x = tokens(ids) + positions(pos).unsqueeze(0);
    const std::int64_t h = d.heads, hd = d.head_dim;
    for (auto& l : enc) {
      const Tensor qkv = l.qkv(x).view({batch, seq, 3, h, hd}).permute({2, 0, 3, 1, 4});
      Tensor a = torch::matmul(qkv[0], qkv[1].transpose(-2, -1)) /
                 std::sqrt(static_cast<double>(hd));
      a = torch::matmul(torch::softmax(a, -1), qkv[2]).transpose(1, 2).reshape({batch, seq, h * hd});
      x = l.ln1(x + l.o(a));
      x = l.ln2(x + l.ff2(torch::gelu(l.ff1(x))));
    }
    (void)x.sum().item<float>();
    sync();
  }

  Tensor mlp(const DecoderLayer& l, const Tensor& x) const {
    const Tensor y = rms_norm(x, l.ln2);
    return l.down(torch::silu(l.gate(y)) * l.up(y));
  }

  void run_prefill(Sequence& s, int n) {
    torch::NoGradGuard ng;
    const auto& d = arch.decoder;
    const std::int64_t h = d.heads, kvh = d.kv_heads, hd = d.head_dim, start = s.length;
    CORUN_CHECK(start + n <= s.k[0].size(1));
    const Tensor ids = torch::randint(d.vocab, {n}, torch::dtype(torch::kLong).device(device));
    Tensor x = tokens(ids);  // [n, hidden]
    for (std::size_t i = 0; i < dec.size(); ++i) {
      const auto& l = dec[i];
      const Tensor y = rms_norm(x, l.ln1);
      const Tensor q = rope(l.q(y).view({n, h, hd}).transpose(0, 1), start);
      const Tensor k = rope(l.k(y).view({n, kvh, hd}).transpose(0, 1), start);
      const Tensor v = l.v(y).view({n, kvh, hd}).transpose(0, 1);
      s.k[i].narrow(1, start, n).copy_(k);
      s.v[i].narrow(1, start, n).copy_(v);
      const Tensor a = attention(q, s.k[i].narrow(1, 0, start + n), s.v[i].narrow(1, 0, start + n),
                                 start);
      x = x + l.o(a.transpose(0, 1).reshape({n, h * hd}));
      x = x + mlp(l, x);
    }
    s.length = start + n;
    // Only the last position's logits are needed to sample the first token.
    (void)lm_head(rms_norm(x.narrow(0, n - 1, 1), final_norm)).argmax(-1).item<std::int64_t>();
    sync();
  }

  void run_decode(std::span<const int> slots) {
    torch::NoGradGuard ng;
    const auto& d = arch.decoder;
    const auto b = static_cast<std::int64_t>(slots.size());
    const std::int64_t h = d.heads, kvh = d.kv_heads, hd = d.head_dim;
    std::vector<Sequence*> ss;
    for (int slot : slots) {
      auto it = seqs.find(slot);
      CORUN_CHECK(it != seqs.end());
      CORUN_CHECK(it->second.length < it->second.k[0].size(1));
      ss.push_back(&it->second);
    }
    const Tensor ids = torch::randint(d.vocab, {b}, torch::dtype(torch::kLong).device(device));
    Tensor x = tokens(ids);  // [b, hidden]
    for (std::size_t i = 0; i < dec.size(); ++i) {
      const auto& l = dec[i];
      const Tensor y = rms_norm(x, l.ln1);
      const Tensor q = l.q(y).view({b, h, hd});
      const Tensor k = l.k(y).view({b, kvh, hd});
      const Tensor v = l.v(y).view({b, kvh, hd});
      std::vector<Tensor> outs;
      outs.reserve(ss.size());
      for (std::int64_t j = 0; j < b; ++j) {
        Sequence& s = *ss[static_cast<std::size_t>(j)];
        const std::int64_t pos = s.length;
        s.k[i].narrow(1, pos, 1).copy_(rope(k[j].unsqueeze(1), pos));
        s.v[i].narrow(1, pos, 1).copy_(v[j].unsqueeze(1));
        outs.push_back(attention(rope(q[j].unsqueeze(1), pos), s.k[i].narrow(1, 0, pos + 1),
                                 s.v[i].narrow(1, 0, pos + 1), -1)
                           .reshape({1, h * hd}));
      }
      x = x + l.o(torch::cat(outs, 0));
      x = x + mlp(l, x);
    }
    for (Sequence* s : ss) ++s->length;
    (void)lm_head(rms_norm(x, final_norm)).argmax(-1).sum().item<std::int64_t>();
    sync();
  }
};

ZooModel::ZooModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ZooModel::~ZooModel() = default;

Result<std::unique_ptr<ZooModel>> ZooModel::build(const ModelArch& arch, const ZooOptions& o) {
  try {
    torch::manual_seed(o.seed);
    auto impl = std::make_unique<Impl>();
    impl->arch = arch;
    impl->device = parse_device(o.device);
    impl->opts = torch::TensorOptions().dtype(torch::kFloat32).device(impl->device);
    impl->int8 = o.int8;
    if (o.int8 && impl->device.is_cuda()) {
      return Error("int8 dynamic quantisation runs on CPU only", Error::Kind::kResource);
    }
    if (o.int8) {
      const auto& engines = at::globalContext().supportedQEngines();
      if (std::find(engines.begin(), engines.end(), at::QEngine::ONEDNN) != engines.end()) {
        at::globalContext().setQEngine(at::QEngine::ONEDNN);
      } else if (std::find(engines.begin(), engines.end(), at::QEngine::QNNPACK) != engines.end()) {
        at::globalContext().setQEngine(at::QEngine::QNNPACK);
      } else {
        return Error("this libtorch has no quantised engine for int8", Error::Kind::kResource);
      }
    }
#ifdef CORUN_TORCH_CUDA
    // One stream per model: each worker process runs its kernels on its own pool stream.
    if (impl->device.is_cuda()) {
      c10::cuda::setCurrentCUDAStream(c10::cuda::getStreamFromPool(false, impl->device.index()));
    }
#endif
    auto& m = *impl;
    switch (arch.family) {
      case ModelFamily::kVision: {
        if (o.int8) {
          return Error("int8 needs static quantisation for convolutions; libtorch's dynamic "
                       "int8 covers linear layers only",
                       Error::Kind::kResource);
        }
        for (const auto& l : arch.conv_layers) {
          for (int r = 0; r < l.repeats; ++r) {
            ConvStage st;
            st.c_in = l.c_in;
            st.stride = l.stride;
            st.conv_stride = l.conv_stride;
            st.pooled = l.pooled;
            st.conv = torch::nn::Conv2d(torch::nn::Conv2dOptions(l.c_in, l.c_out, l.kernel)
                                            .stride(l.conv_stride)
                                            .padding(l.kernel / 2)
                                            .groups(l.groups)
                                            .bias(false));
            st.conv->to(m.device);
            st.conv->eval();
            m.convs.push_back(std::move(st));
          }
        }
        break;
      }
      case ModelFamily::kEncoder: {
        const auto& d = arch.encoder;
        const std::int64_t inner = std::int64_t{d.heads} * d.head_dim;
        m.tokens = torch::nn::Embedding(std::max(1, d.vocab), d.hidden);
        m.positions = torch::nn::Embedding(std::max(1, d.position_embeddings), d.hidden);
        m.tokens->to(m.device);
        m.positions->to(m.device);
        for (int i = 0; i < d.layers; ++i) {
          EncoderLayer l;
          l.qkv = Linear(d.hidden, 3 * inner, true, o.int8, m.opts);
          l.o = Linear(inner, d.hidden, true, o.int8, m.opts);
          l.ff1 = Linear(d.hidden, d.intermediate, true, o.int8, m.opts);
          l.ff2 = Linear(d.intermediate, d.hidden, true, o.int8, m.opts);
          l.ln1 = torch::nn::LayerNorm(torch::nn::LayerNormOptions({d.hidden}));
          l.ln2 = torch::nn::LayerNorm(torch::nn::LayerNormOptions({d.hidden}));
          l.ln1->to(m.device);
          l.ln2->to(m.device);
          m.enc.push_back(std::move(l));
        }
        break;
      }
      case ModelFamily::kLlm: {
        const auto& d = arch.decoder;
        if (d.kv_heads <= 0 || d.heads % d.kv_heads != 0) {
          return Error("decoder heads must be a multiple of kv_heads");
        }
        const std::int64_t q_dim = std::int64_t{d.heads} * d.head_dim;
        const std::int64_t kv_dim = std::int64_t{d.kv_heads} * d.head_dim;
        m.tokens = torch::nn::Embedding(d.vocab, d.hidden);
        m.tokens->to(m.device);
        for (int i = 0; i < d.layers; ++i) {
          DecoderLayer l;
          l.ln1 = torch::ones({d.hidden}, m.opts);
          l.ln2 = torch::ones({d.hidden}, m.opts);
          l.q = Linear(d.hidden, q_dim, true, o.int8, m.opts);
          l.k = Linear(d.hidden, kv_dim, true, o.int8, m.opts);
          l.v = Linear(d.hidden, kv_dim, true, o.int8, m.opts);
          l.o = Linear(q_dim, d.hidden, false, o.int8, m.opts);
          l.gate = Linear(d.hidden, d.intermediate, false, o.int8, m.opts);
          l.up = Linear(d.hidden, d.intermediate, false, o.int8, m.opts);
          l.down = Linear(d.intermediate, d.hidden, false, o.int8, m.opts);
          m.dec.push_back(std::move(l));
        }
        m.final_norm = torch::ones({d.hidden}, m.opts);
        // Tied embeddings share the token table; otherwise the head has its own weights.
        m.lm_head = d.tied_embeddings
                        ? Linear(m.tokens->weight.detach(), Tensor(), o.int8)
                        : Linear(d.hidden, d.vocab, false, o.int8, m.opts);
        break;
      }
      case ModelFamily::kSpeech:
        return Error("speech models are not in the libtorch zoo yet", Error::Kind::kResource);
    }
    return std::unique_ptr<ZooModel>(new ZooModel(std::move(impl)));
  } catch (const std::exception& e) {
    return Error(std::string("libtorch: ") + e.what(), Error::Kind::kResource);
  }
}

void ZooModel::forward(int batch, int size) {
  if (impl_->arch.family == ModelFamily::kVision) {
    impl_->run_vision(batch, size);
  } else {
    impl_->run_encoder(batch, size);
  }
}

int ZooModel::open_sequence(int max_context) {
  const auto& d = impl_->arch.decoder;
  Sequence s;
  for (int i = 0; i < d.layers; ++i) {
    s.k.push_back(torch::zeros({d.kv_heads, max_context, d.head_dim}, impl_->opts));
    s.v.push_back(torch::zeros({d.kv_heads, max_context, d.head_dim}, impl_->opts));
  }
  const int slot = impl_->next_slot++;
  impl_->seqs.emplace(slot, std::move(s));
  return slot;
}

void ZooModel::prefill(int slot, int tokens) {
  auto it = impl_->seqs.find(slot);
  CORUN_CHECK(it != impl_->seqs.end());
  impl_->run_prefill(it->second, tokens);
}

void ZooModel::decode(std::span<const int> slots) {
  if (!slots.empty()) impl_->run_decode(slots);
}

void ZooModel::close_sequence(int slot) { impl_->seqs.erase(slot); }

int ZooModel::context(int slot) const {
  auto it = impl_->seqs.find(slot);
  CORUN_CHECK(it != impl_->seqs.end());
  return static_cast<int>(it->second.length);
}

void init_torch_process(int threads) {
  at::set_num_interop_threads(1);
  at::set_num_threads(std::max(1, threads));
  // Random weights through deep stacks drift towards denormals, which are slow on x86.
  at::globalContext().setFlushDenormal(true);
}

std::string torch_config() {
  std::string blas = "unknown";
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto p = line.find('/');
    if (p == std::string::npos) continue;
    const std::string path = line.substr(p);
    if (path.find("blas") != std::string::npos) {
      blas = path;
      break;
    }
  }
  return "libtorch " + std::string(TORCH_VERSION) + "; BLAS loaded: " + blas + "; " +
         torch::show_config();
}

bool torch_cuda_available() { return torch::cuda::is_available(); }

}  // namespace corun::torchbed
