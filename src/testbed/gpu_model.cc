#include "corun/testbed/gpu_model.h"

#include <algorithm>
#include <cmath>

#include "corun/core/rng.h"
#include "sim_params.h"

namespace corun::gpu {
namespace {

using sim::norm2;
using sim::softmin;

// Sums phases executed back to back (prefill chunks): CTAs become the kernel-weighted mean.
void accumulate(PhaseCost& into, const PhaseCost& c, double times) {
  const double kernels = into.kernels + times * c.kernels;
  if (kernels > 0) into.ctas = (into.ctas * into.kernels + c.ctas * times * c.kernels) / kernels;
  into.flops += times * c.flops;
  into.bytes += times * c.bytes;
  into.kernels = kernels;
}

// Removes `times` executions of `c` from `from` (the inverse of accumulate, clamped at zero).
PhaseCost subtract(const PhaseCost& from, const PhaseCost& c, double times) {
  PhaseCost r;
  r.kernels = std::max(from.kernels - times * c.kernels, 1.0);
  r.flops = std::max(from.flops - times * c.flops, 0.0);
  r.bytes = std::max(from.bytes - times * c.bytes, 0.0);
  r.ctas = std::max((from.ctas * from.kernels - c.ctas * times * c.kernels) / r.kernels, 1.0);
  return r;
}

}  // namespace

DeviceModel device_model(const Device& d, const Scales& scales, double power_cap_w) {
  DeviceModel m;
  m.sms = std::max(1, d.sm_count);
  m.peak_dram_bytes_s = std::max(d.mem_bandwidth_bytes_per_s(), 1e9);
  m.dram_bytes_s = sim::kDramEfficiency * m.peak_dram_bytes_s * scales.bandwidth;
  m.l2_bytes = std::max(d.l2_mb, 0.1) * 1e6;
  m.l2_bytes_s = sim::kL2BandwidthPerDramBandwidth * m.peak_dram_bytes_s;
  m.boost_mhz = d.boost_clock_mhz > 0 ? d.boost_clock_mhz : 1000;
  m.base_mhz = d.base_clock_mhz > 0 ? std::min(d.base_clock_mhz, m.boost_mhz) : m.boost_mhz;
  m.tdp_w = d.tdp_w > 0 ? d.tdp_w : 300;
  m.idle_w = std::clamp(d.idle_power_w, 0.0, 0.9 * m.tdp_w);
  m.cap_w = power_cap_w > 0 ? std::clamp(power_cap_w, m.idle_w + 1, m.tdp_w) : m.tdp_w;
  m.pcie_bytes_s = std::max(1e9, d.pcie_gbps * 1e9);
  m.compute_scale = scales.compute;
  m.l2_scale = scales.l2_sensitivity;
  m.fixed_s = sim::kKernelFixedS * scales.launch;
  m.launch_scale = scales.launch;
  m.power_scale = scales.power;
  return m;
}

Load cotenant_load(const DeviceModel& dev, double sm_util, double bandwidth_util) {
  Load l;
  if (sm_util <= 0 && bandwidth_util <= 0) return l;
  const double sm = std::clamp(sm_util, 0.0, 1.0);
  l.active = 1;
  l.sms = sm * dev.sms;
  l.bw = std::clamp(bandwidth_util, 0.0, 1.0);
  l.press = sim::kCoTenantL2Pressure * sm;
  l.activity = sm * (sim::kStalledSmPower + 0.5 * (1 - sim::kStalledSmPower));
  l.mem_util = l.bw * dev.dram_bytes_s / dev.peak_dram_bytes_s;
  return l;
}

double sustained_flops(const Device& d, Precision p) {
  double peak = d.peak_flops(p);
  if (peak <= 0) peak = d.peak_fp32_tflops * 1e12;  // no such unit: emulated on CUDA cores
  if (peak <= 0) peak = 1e12;
  return peak * sim::compute_efficiency(p);
}

double launch_delay_s(double workloads) {
  const auto& t = sim::kLaunchDelayMs;
  const double n = std::max(1.0, workloads);
  const auto last = static_cast<double>(t.size());
  double ms = 0;
  if (n >= last) {
    ms = t.back() + (n - last) * (t.back() - t[t.size() - 2]);
  } else {
    const auto i = static_cast<std::size_t>(n);  // 1 <= i < 5: between t[i-1] and t[i]
    const double frac = n - static_cast<double>(i);
    ms = t[i - 1] + frac * (t[i] - t[i - 1]);
  }
  return ms * 1e-3;
}

double pcie_copy_s(double bytes, const DeviceModel& dev) {
  return bytes > 0 ? sim::kPcieCopyLatencyS + bytes / dev.pcie_bytes_s : 0;
}

double power_activity(double held_sms, double compute_fraction, const DeviceModel& dev) {
  return held_sms / dev.sms *
         (sim::kStalledSmPower + (1 - sim::kStalledSmPower) * compute_fraction);
}

Shape make_shape(const PhaseCost& c, const DeviceModel& dev, double flops_per_s,
                 double element_bytes, double cap_sms) {
  Shape s;
  s.kernels = std::max(c.kernels, 1.0);
  s.bytes = std::max(c.bytes, 0.0);
  const double flops = std::max(c.flops, 0.0);
  // Diminishing returns of SM share: a kernel with few thread blocks cannot occupy more SMs
  // than it has blocks, whatever MPS allows.
  s.sms = softmin(cap_sms, sim::kBlocksPerTile * std::max(c.ctas, 1.0));
  const double sm_fraction = s.sms / dev.sms;
  s.compute_s = flops / (flops_per_s * sm_fraction);
  const double reach = softmin(1.0, sm_fraction / sim::kSmFractionForFullBandwidth);
  const double full_bw_s = s.bytes / dev.dram_bytes_s;
  s.memory_s = full_bw_s / reach;
  s.kernel_fixed_s = dev.fixed_s;
  s.alone_cv2 = sim::kServiceCv2Alone;
  s.alone_s = s.kernels * (dev.fixed_s + dev.launch_scale * launch_delay_s(1)) +
              norm2(s.compute_s, s.memory_s);
  s.bw_demand = full_bw_s / s.alone_s;
  // L2 hit traffic: operand tiles re-read by the math loops. DRAM bytes stream through L2
  // once (weights of a decode step, KV): they are not reuse, and streaming loads are inserted
  // at evict-first priority, so they neither depend on L2 nor evict much.
  const double reuse = flops * element_bytes / sim::kTileEdge;
  const double reuse_fraction = reuse + s.bytes > 0 ? reuse / (reuse + s.bytes) : 0;
  s.l2_pressure = std::min(1.0, reuse / s.alone_s / dev.l2_bytes_s);
  // Working set of one kernel relative to L2: reuse is most at risk when it just fits, less
  // when it is tiny (hot lines survive) or far larger (it misses anyway).
  const double x = (s.bytes / s.kernels) / dev.l2_bytes;
  s.l2_sensitivity = dev.l2_scale * reuse_fraction * 2 * x / (1 + x * x);
  const double both = s.compute_s + s.memory_s;
  s.compute_fraction = both > 0 ? s.compute_s / both : 0;
  return s;
}

PhaseTime contended(const Shape& s, const Env& e) {
  // Every lost L2 hit becomes DRAM traffic; multi-stage operand pipelines of the math loops
  // hide most of the extra latency, so the compute part feels only a share of it.
  const double compute =
      s.compute_s * e.sm_slow * (1 + sim::kL2ComputeShare * e.l2) / e.clock_ratio;
  const double memory = s.memory_s * e.mem_slow * (1 + e.l2);
  const double roof = norm2(compute, memory);
  // The latency-bound part of each kernel (ramp-up, tail, dependent loads) runs in SM cycles
  // and waits on memory: it stretches with the clock, loaded DRAM latency, lost L2 hits and,
  // less than throughput-bound work, with warps of other clients co-resident on its SMs.
  const double latency_bound =
      s.kernel_fixed_s * (1 + e.l2) * e.mem_latency * std::sqrt(e.sm_slow) / e.clock_ratio;
  PhaseTime t;
  t.total_s = s.kernels * (latency_bound + e.launch_s) + roof + s.host_s;
  if (t.total_s > 0 && roof > 0) {
    // d ln t / d ln compute = compute^2 / (roof t); the same for memory.
    const double wc = compute * compute / (roof * t.total_s);
    const double wm = memory * memory / (roof * t.total_s);
    t.cv2 = wc * wc * e.sm_cv2 + wm * wm * e.mem_cv2;
  }
  t.cv2 += s.alone_cv2;
  return t;
}

Env environment(const Shape& me, double cap_sms, double mult, const Load& others,
                const DeviceModel& dev, double clock_ratio) {
  Env e;
  e.clock_ratio = clock_ratio;
  e.fixed_s = dev.fixed_s;
  const double want = mult * me.sms;
  const double mine = std::min(cap_sms, want);
  const double my_bw = mult * me.bw_demand;
  const double es = std::max(1.0, (mine + others.sms) / dev.sms);
  e.sm_slow = std::max(1.0, want / cap_sms) * es;
  e.mem_slow = dram_stretch(my_bw + others.bw) / dram_stretch(my_bw);
  e.mem_latency = dram_latency(my_bw + others.bw) / dram_latency(my_bw);
  e.l2 = l2_interference(me.l2_sensitivity, others.press);
  e.launch_s = dev.launch_scale * launch_delay_s(1 + others.active);
  return e;
}

double dram_stretch(double d) {
  const double load = std::min(d, 1.0);
  return std::max(1.0, d) * (1 + sim::kDramQueueGain * load * load);
}

double dram_latency(double d) {
  const double load = std::min(d, 1.0);
  return 1 + sim::kLoadedLatencyGain * load * load;
}

double l2_interference(double sensitivity, double load) {
  return sim::kL2OtherWeight * sensitivity * load / (1 + load);
}

double pair_factor(const ModelArch& victim, const ModelArch& aggressor) {
  const double base =
      sim::kFamilyPair[sim::family_index(victim.family)][sim::family_index(aggressor.family)];
  std::uint64_t h = fnv1a(victim.name);
  h = fnv1a(aggressor.name, h ^ 0x7CULL);
  const double unit = static_cast<double>(mix64(h) >> 11) * 0x1.0p-53;  // [0, 1)
  return base * (1 + sim::kPairJitter * (2 * unit - 1));
}

double power_at(const DeviceModel& dev, double sm_activity, double mem_util, double ratio) {
  return dev.idle_w +
         dev.power_scale * (dev.tdp_w - dev.idle_w) *
             (sim::kSmPowerFullLoad * sm_activity * std::pow(ratio, sim::kClockPowerExponent) +
              sim::kMemoryPowerFullLoad * mem_util);
}

Clock power_capped_clock(const DeviceModel& dev, double sm_activity, double mem_util) {
  const double activity = std::min(1.0, sm_activity);
  const double target = sim::kPowerCapSettle * dev.cap_w;
  double ratio = 1;
  if (power_at(dev, activity, mem_util, 1) > target && activity > 0) {
    const double budget = (target - dev.idle_w) / (dev.power_scale * (dev.tdp_w - dev.idle_w)) -
                          sim::kMemoryPowerFullLoad * mem_util;
    ratio = budget > 0 ? std::pow(budget / (sim::kSmPowerFullLoad * activity),
                                  1 / sim::kClockPowerExponent)
                       : 0;
  }
  Clock c;
  c.ratio = std::clamp(ratio, dev.base_mhz / dev.boost_mhz, 1.0);
  c.power_w = std::min(power_at(dev, activity, mem_util, c.ratio), dev.cap_w);
  return c;
}

ModelPhases speech_phases(const ModelArch& a, int batch, int size, Precision p) {
  ModelPhases ph;
  PhaseCost whole = forward_cost(a, batch, size, p);
  if (a.speech_decode_tokens > 0) {
    // forward_cost covers the whole request: the encoder plus T decode steps at the mean
    // self-attention context (T - 1) / 2. Split them: the encoder is compute-bound, the
    // decode memory- and launch-bound, and co-runners hurt the two differently.
    const double steps = a.speech_decode_tokens;
    ph.decode_steps = steps;
    ph.decode = decode_cost(a, batch, 0.5 * (steps - 1), p);
    whole = subtract(whole, ph.decode, steps);
  }
  ph.main = whole;
  return ph;
}

ModelPhases llm_phases(const ModelArch& a, int prompt_tokens, int output_tokens, int chunk_tokens,
                       Precision p) {
  ModelPhases ph;
  const int prompt = std::max(1, prompt_tokens);
  const int output = std::max(1, output_tokens);
  const int chunk = std::clamp(chunk_tokens, 1, prompt);
  const int full = prompt / chunk;
  const int rest = prompt % chunk;
  // Attention over the cached context is linear in it, so the full chunks sum exactly to
  // `full` times the mean of the first and the last one.
  const PhaseCost first = prefill_cost(a, chunk, 0, p);
  const PhaseCost last = full > 1 ? prefill_cost(a, chunk, (full - 1) * chunk, p) : first;
  accumulate(ph.main, lerp(first, last, 0.5), full);
  if (rest > 0) accumulate(ph.main, prefill_cost(a, rest, full * chunk, p), 1);
  ph.chunks = full + (rest > 0 ? 1 : 0);
  // Decode reads the KV cache of every sequence at its mean context (prompt + half the
  // output).
  ph.decode_steps = output;
  ph.decode = decode_cost(a, 1, prompt + 0.5 * output, p);
  return ph;
}

PhaseCost lerp(const PhaseCost& a, const PhaseCost& b, double t) {
  PhaseCost c;
  c.flops = a.flops + t * (b.flops - a.flops);
  c.bytes = a.bytes + t * (b.bytes - a.bytes);
  c.kernels = a.kernels + t * (b.kernels - a.kernels);
  c.ctas = a.ctas + t * (b.ctas - a.ctas);
  return c;
}

}  // namespace corun::gpu
