#include "llm_step.h"

#include <algorithm>
#include <cmath>

namespace corun::sim {
namespace {

constexpr double kTile = 128;

double tiles(double m, double n) { return std::ceil(m / kTile) * std::ceil(n / kTile); }

// Accumulates math kernels' tiles for the mean parallelism of the step.
struct Tiles {
  double sum = 0;
  double kernels = 0;
  void add(double count, double t) {
    sum += count * t;
    kernels += count;
  }
};

// A GEMM [rows x n] x [n x k]^T, `count` times, weights at `wbpp` bytes per parameter.
void gemm(KernelClassCost& c, Tiles& t, double rows, double n, double k, double count,
          double wbpp, double act) {
  if (rows <= 0) return;
  c.flops += count * 2 * rows * n * k;
  c.bytes += count * (n * k * wbpp + (rows * k + rows * n) * act);
  c.kernels += count;
  t.add(count, tiles(rows, n));
}

// Sums `times` executions of phase `b` into `a` (back-to-back prefill chunks): times, bytes
// and kernels add; per-kernel and per-second quantities are weighted by kernels and time.
void accumulate(gpu::Shape& a, const gpu::Shape& b, double times) {
  const double kernels = a.kernels + times * b.kernels;
  const double alone = a.alone_s + times * b.alone_s;
  if (kernels <= 0 || alone <= 0) return;
  const auto by_kernels = [&](double x, double y) {
    return (x * a.kernels + y * times * b.kernels) / kernels;
  };
  const auto by_time = [&](double x, double y) {
    return (x * a.alone_s + y * times * b.alone_s) / alone;
  };
  a.sms = by_time(a.sms, b.sms);
  a.kernel_fixed_s = by_kernels(a.kernel_fixed_s, b.kernel_fixed_s);
  a.alone_cv2 = by_time(a.alone_cv2, b.alone_cv2);
  a.l2_pressure = by_time(a.l2_pressure, b.l2_pressure);
  a.l2_sensitivity = by_time(a.l2_sensitivity, b.l2_sensitivity);
  a.compute_s += times * b.compute_s;
  a.memory_s += times * b.memory_s;
  a.bytes += times * b.bytes;
  a.kernels = kernels;
  a.alone_s = alone;
  a.bw_demand = by_time(a.bw_demand, b.bw_demand);
  const double both = a.compute_s + a.memory_s;
  a.compute_fraction = both > 0 ? a.compute_s / both : 0;
}

}  // namespace

LlmStepCost llm_step_cost(const ModelArch& m, const LlmBatch& b, Precision p) {
  const TransformerDims& d = m.decoder;
  const double act = activation_bytes_per_element(p);
  const double wbpp = weight_bytes_per_param(p);
  const double emb_bpp = p == Precision::kFp32 ? 4 : 2;  // LM head stays 16-bit when quantised
  const double layers = d.layers;
  const double h = d.hidden;
  const double q = static_cast<double>(d.heads) * d.head_dim;
  const double kv = static_cast<double>(d.kv_heads) * d.head_dim;
  const double up = static_cast<double>(d.intermediate) * (d.gated_mlp ? 2 : 1);
  const double inter = d.intermediate;
  const double seqs = std::max(0.0, b.decode_seqs);
  const double chunk = std::max(0.0, b.prefill_tokens);
  const double rows = seqs + chunk;
  LlmStepCost c;
  Tiles t;
  // Linear layers: one GEMM per projection over all rows of the step (decode tokens and the
  // prefill chunk share the weight read: the point of mixing them).
  gemm(c.linear, t, rows, q + 2 * kv, h, layers, wbpp, act);
  gemm(c.linear, t, rows, h, q, layers, wbpp, act);
  gemm(c.linear, t, rows, up, h, layers, wbpp, act);
  gemm(c.linear, t, rows, h, inter, layers, wbpp, act);
  // Attention: a paged decode kernel reads every decoding sequence's KV cache; a flash prefill
  // kernel computes the chunk's causal pairs over the cached prefix and the chunk; a
  // cache-write kernel appends the step's new K and V.
  const double ctx = std::max(0.0, b.decode_context);
  if (seqs > 0) {
    c.attention.flops += layers * 4 * d.heads * d.head_dim * seqs * (ctx + 1);
    c.attention.bytes += layers * (2 * seqs * q + seqs * (ctx + 1) * 2 * kv) * act;
    c.attention.kernels += layers;
    t.add(layers, seqs * d.kv_heads);
  }
  if (chunk > 0) {
    const double c0 = std::max(0.0, b.prefill_context);
    const double pairs = chunk * c0 + chunk * (chunk + 1) / 2;
    c.attention.flops += layers * 4 * d.heads * d.head_dim * pairs;
    c.attention.bytes += layers * (2 * chunk * q + (c0 + chunk) * 2 * kv) * act;
    c.attention.kernels += layers;
    t.add(layers, d.heads * std::ceil(chunk / kTile));
  }
  c.attention.bytes += layers * rows * 2 * kv * act;
  c.attention.kernels += layers;
  // Two norms, two residual adds, the gated activation and rotary embedding per layer; the
  // token embedding once.
  double ew_bytes = 2 * (2 * rows * h * act) + 2 * (3 * rows * h * act);
  ew_bytes += rows * (up + inter) * act;
  double ew_kernels = 5;
  if (d.position_embeddings == 0) {
    ew_bytes += 2 * rows * (q + kv) * act;
    ew_kernels += 1;
  }
  c.elementwise.bytes += layers * ew_bytes + 2 * rows * h * act;
  c.elementwise.kernels += layers * ew_kernels + 1;
  // Logits of the decoding sequences and of a chunk that completes its prompt.
  const double logits = seqs + (chunk > 0 && b.prefill_ends_prompt ? 1 : 0);
  if (logits > 0) {
    gemm(c.head, t, logits, d.vocab, h, 1, emb_bpp, act);
    c.head.bytes += (2 * logits * h + logits * static_cast<double>(d.vocab)) * act;
    c.head.kernels += 2;
  }
  c.ctas = t.kernels > 0 ? std::max(1.0, t.sum / t.kernels) : 1;
  return c;
}

const LlmKernelParams& llm_kernel_params(const Device& device) {
  const double per_sm_clock = device.peak_fp16_tflops * 1e12 /
                              (std::max(1, device.sm_count) *
                               std::max(1.0, device.boost_clock_mhz) * 1e6);
  return per_sm_clock >= kHopperTensorFlopsPerSmClock ? kLlmHopper : kLlmAmpere;
}

gpu::Shape make_llm_shape(const ModelArch& m, const LlmBatch& b, Precision p,
                          const Device& device, const gpu::DeviceModel& dev, double cap_sms,
                          LlmStepTimes* times) {
  const LlmStepCost c = llm_step_cost(m, b, p);
  const LlmKernelParams& k = llm_kernel_params(device);
  PhaseCost whole;
  for (const KernelClassCost* kc : {&c.linear, &c.attention, &c.elementwise, &c.head}) {
    whole.flops += kc->flops;
    whole.bytes += kc->bytes;
    whole.kernels += kc->kernels;
  }
  whole.ctas = c.ctas;
  // Parallelism, L2 and the rest of the shape as for any phase; the times are replaced below.
  gpu::Shape s = gpu::make_shape(whole, dev, gpu::sustained_flops(device, p) * dev.compute_scale,
                                 activation_bytes_per_element(p), cap_sms);
  const double sm_fraction = s.sms / dev.sms;
  const double reach = softmin(1.0, sm_fraction / kSmFractionForFullBandwidth);
  double peak = device.peak_flops(p);
  if (peak <= 0) peak = device.peak_fp32_tflops * 1e12;
  const double flops_s = std::max(peak, 1e9) * dev.compute_scale * sm_fraction;
  // dev.dram_bytes_s is kDramEfficiency of the datasheet, times the hidden bandwidth scale.
  const double bytes_s = dev.dram_bytes_s / kDramEfficiency * reach;
  const double gemm_eff = k.gemm_efficiency * (p == Precision::kAwq ? kAwqGemmEfficiencyRatio : 1);
  struct Part {
    const KernelClassCost& cost;
    double flops_eff, bytes_eff, fixed_s;
    double* out;
  };
  LlmStepTimes local;
  LlmStepTimes& tm = times != nullptr ? *times : local;
  const Part parts[] = {
      {c.linear, gemm_eff, k.gemv_bandwidth_efficiency, k.gemm_fixed_s, &tm.linear_s},
      {c.attention, k.attention_prefill_efficiency, k.attention_kv_bandwidth_efficiency,
       k.gemm_fixed_s, &tm.attention_s},
      {c.elementwise, 1, k.elementwise_bandwidth_efficiency, k.elementwise_fixed_s,
       &tm.elementwise_s},
      {c.head, gemm_eff, k.gemv_bandwidth_efficiency, k.gemm_fixed_s, &tm.head_s},
  };
  // Each class is its own roofline; the phase keeps their sum, split between math and memory
  // in proportion, so that co-runners stretch each part as they do for any phase.
  const double launch = dev.launch_scale * gpu::launch_delay_s(1);
  double compute = 0, memory = 0, roof = 0, fixed = 0;
  for (const Part& part : parts) {
    const double cs = part.cost.flops / (flops_s * part.flops_eff);
    const double ms = part.cost.bytes / (bytes_s * part.bytes_eff);
    const double fx = part.cost.kernels * part.fixed_s * dev.launch_scale;
    *part.out = part.cost.kernels * launch + fx + norm2(cs, ms);
    compute += cs;
    memory += ms;
    roof += norm2(cs, ms);
    fixed += fx;
  }
  const double combined = norm2(compute, memory);
  const double scale = combined > 0 ? roof / combined : 1;
  s.compute_s = compute * scale;
  s.memory_s = memory * scale;
  s.kernel_fixed_s = s.kernels > 0 ? fixed / s.kernels : 0;
  s.alone_s = s.kernels * (s.kernel_fixed_s + launch) + roof;
  s.bw_demand = s.bytes / dev.dram_bytes_s / s.alone_s;
  const double both = s.compute_s + s.memory_s;
  s.compute_fraction = both > 0 ? s.compute_s / both : 0;
  s.alone_cv2 = kLlmStepCv2;
  return s;
}

double kv_capacity_tokens(const ModelArch& m, Precision p, double kv_bytes) {
  const double per_token = kv_bytes_per_token(m, p);
  if (per_token <= 0) return 0;
  return std::max(0.0, kv_bytes) / per_token;
}

// The prefill of a `prompt`-token request in chunks of `chunk` tokens (the engine's token
// budget), alone on the engine, as one phase; `chunks` receives the number of chunks.
gpu::Shape llm_prefill_shape(const ModelArch& a, int prompt, int chunk_tokens, Precision p,
                             const Device& device, const gpu::DeviceModel& dev, double cap_sms,
                             double& chunks) {
  const int chunk = std::clamp(chunk_tokens, 1, prompt);
  const int full = prompt / chunk;
  const int rest = prompt % chunk;
  const auto step = [&](int tokens, int before, bool last) {
    sim::LlmBatch b;
    b.prefill_tokens = tokens;
    b.prefill_context = before;
    b.prefill_ends_prompt = last;
    return make_llm_shape(a, b, p, device, dev, cap_sms);
  };
  // Attention over the cached prefix is linear in it: the full chunks sum to `full` times
  // the mean of the first and the last one (the logits of the last chunk aside).
  gpu::Shape s;
  s.kernels = 0;
  s.sms = 0;
  const gpu::Shape first = step(chunk, 0, full == 1 && rest == 0);
  const gpu::Shape last = full > 1 ? step(chunk, (full - 1) * chunk, rest == 0) : first;
  accumulate(s, first, 0.5 * full);
  accumulate(s, last, 0.5 * full);
  if (rest > 0) accumulate(s, step(rest, full * chunk, true), 1);
  chunks = full + (rest > 0 ? 1 : 0);
  return s;
}


}  // namespace corun::sim

namespace corun::gpu {

LlmRequestShapes llm_request_shapes(const ModelArch& m, int prompt, int output, int chunk,
                                    Precision p, const Device& device, const DeviceModel& dev,
                                    double cap_sms) {
  LlmRequestShapes r;
  const int prompt_tokens = std::max(1, prompt);
  const int output_tokens = std::max(1, output);
  r.prefill = sim::llm_prefill_shape(m, prompt_tokens, chunk, p, device, dev, cap_sms, r.chunks);
  // The first token's host work (sampling, detokenisation, scheduling) runs on the CPU.
  r.prefill.host_s = sim::kLlmFirstTokenOverheadS;
  r.prefill.alone_s += r.prefill.host_s;
  sim::LlmBatch b;
  b.decode_seqs = 1;
  b.decode_context = prompt_tokens + 0.5 * output_tokens;
  r.decode = sim::make_llm_shape(m, b, p, device, dev, cap_sms);
  r.decode_steps = output_tokens;
  return r;
}

}  // namespace corun::gpu
