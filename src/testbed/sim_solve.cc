// The simulated GPU's contention, solved as a damped fixed point over busy fractions, LLM decode
// batch and the power-capped clock; the co-runners' on/off states are enumerated exactly (2^N
// subsets), so nonlinear saturation is not averaged away. Also the LLM engine's state, which
// the fixed point and the reports both read.

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "sim_internal.h"
#include "sim_params.h"

namespace corun::sim {

using gpu::contended;
using gpu::dram_latency;
using gpu::dram_stretch;
using gpu::Env;

namespace {

// Upper bound on the fraction of time an LLM engine spends in other requests' prefills, so
// that the decode stall factor 1 / (1 - f) stays finite; beyond it the queue is overloaded.
constexpr double kMaxPrefillShare = 0.95;

// ---------------------------------------------------------------------------------------------
// Steady-state helpers.

// Mean number of sequences in a decode step when at least one decodes (Poisson occupancy).
double busy_batch(double mean_batch, double cap) {
  if (mean_batch < 1e-9) return 1;
  return std::clamp(mean_batch / (1 - std::exp(-mean_batch)), 1.0, std::max(cap, 1.0));
}

// Exact expectation over co-runners' on/off states: P(T) for every subset T of running models
// and the SMs and bandwidth the members of T hold while active.
struct SubsetTables {
  int n = 0;
  bool exact = false;
  std::array<double, std::size_t{1} << sim::kMaxExactModels> prob{};
  std::array<double, std::size_t{1} << sim::kMaxExactModels> sms{};
  std::array<double, std::size_t{1} << sim::kMaxExactModels> bw{};

  void build(const std::vector<SimModel>& ms) {
    n = static_cast<int>(ms.size());
    exact = n <= sim::kMaxExactModels;
    if (!exact) return;
    prob[0] = 1;
    sms[0] = 0;
    bw[0] = 0;
    std::size_t size = 1;
    for (const SimModel& m : ms) {
      for (std::size_t t = 0; t < size; ++t) {
        prob[t + size] = prob[t] * m.u;
        prob[t] *= 1 - m.u;
        sms[t + size] = sms[t] + m.held_sms;
        bw[t + size] = bw[t] + m.bw;
      }
      size *= 2;
    }
  }
};

Env environment(const std::vector<SimModel>& ms, std::size_t i, const Shape& sh,
                const SubsetTables& tables, const DeviceModel& dev, const double* pair,
                double clock_ratio) {
  const SimModel& me = ms[i];
  // The others' expected load (mean field): exact for the L2 and launch terms, which are
  // linear in the on/off states; the SM and DRAM terms are not, and are replaced below by
  // their exact expectation over the co-runners' on/off states when the subsets are few.
  gpu::Load others = dev.bg;
  for (std::size_t j = 0; j < ms.size(); ++j) {
    if (j == i) continue;
    others.active += ms[j].u;
    others.sms += ms[j].u * ms[j].held_sms;
    others.bw += ms[j].u * ms[j].bw;
    others.press += ms[j].u * ms[j].press * pair[i * ms.size() + j];
  }
  Env e = gpu::environment(sh, me.cap_sms, me.mult, others, dev, clock_ratio);
  if (!tables.exact) return e;
  const double mine = std::min(me.cap_sms, me.mult * sh.sms);
  const double self_stretch = std::max(1.0, me.mult * sh.sms / me.cap_sms);
  const double my_bw = me.mult * sh.bw_demand;
  const double inv_dram = 1 / dram_stretch(my_bw);
  const double inv_sms = 1 / dev.sms;
  const gpu::Load& bg = dev.bg;
  double es = 0, es2 = 0, em = 0, em2 = 0, el = 0;
  // Subsets of the others: insert a zero at bit i of every (n-1)-bit number.
  const std::size_t bit = std::size_t{1} << i;
  const std::size_t low = bit - 1;
  const std::size_t count = std::size_t{1} << (tables.n - 1);
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t t = ((k & ~low) << 1) | (k & low);
    const double w = tables.prob[t] + tables.prob[t | bit];
    const double d = my_bw + bg.bw + tables.bw[t];
    const double s = std::max(1.0, (mine + bg.sms + tables.sms[t]) * inv_sms);
    const double m = dram_stretch(d) * inv_dram;
    el += w * dram_latency(d);
    es += w * s;
    es2 += w * s * s;
    em += w * m;
    em2 += w * m * m;
  }
  e.mem_latency = el / dram_latency(my_bw);
  e.sm_slow = self_stretch * es;
  e.sm_cv2 = std::max(0.0, es2 / (es * es) - 1);
  e.mem_slow = em;
  e.mem_cv2 = std::max(0.0, em2 / (em * em) - 1);
  return e;
}

// ---------------------------------------------------------------------------------------------
// LLM engine: continuous batching with chunked prefill, derived from contended phase times.

// The engine's state when a request's own prefill takes `t_pre` and preemptions add
// `recompute_s` of prefill work per request on average.
LlmState llm_state_at(const SimModel& m, double t_pre, double recompute_s) {
  LlmState st;
  const double c = m.servers;
  const double out = m.dec_steps;
  const double work = t_pre + recompute_s;
  const double t_dec = m.t_dec.total_s;
  const double b_busy = busy_batch(m.batch, c);
  st.prefill_work_s = work;
  // Work-conserving engine at full concurrency: each request costs its prefill plus its
  // share of `c`-sequence decode steps.
  st.capacity = 1 / (work + out * m.t_dec_full.total_s / c);
  const double rate = m.closed_loop ? st.capacity : std::min(m.item_rate, st.capacity);
  // A sequence decodes while others' prefill chunks run in between its steps; with one slot
  // nobody else is admitted.
  const double admitted = (c - 1) / c;
  st.prefill_share = std::min(kMaxPrefillShare, rate * work * admitted);
  st.tpot_s = t_dec / (1 - st.prefill_share);
  const double others = 1 - std::exp(-m.batch * admitted);
  // Pollaczek-Khinchine with deterministic service: wait behind a prefill in progress.
  st.prefill_wait_s = st.prefill_share * work / (2 * (1 - st.prefill_share));
  // Each prefill chunk starts at a step boundary: when others are decoding it first waits for
  // the residual of the step in progress (half a step on average).
  st.ttft_engine_s =
      t_pre + sim::kLlmFirstTokenOverheadS + m.chunks * 0.5 * t_dec * others + st.prefill_wait_s;
  // A preempted request holds its slot through its own recompute too.
  st.residence_s = st.ttft_engine_s + out * st.tpot_s + recompute_s;
  // Slots bound the rate too (Little: rate x residence <= c).
  st.rate = std::min(rate, c / st.residence_s);
  st.batch = m.closed_loop ? c : std::min(c, st.rate * out * st.tpot_s);
  st.busy = std::min(1.0, st.rate * (work + out * t_dec / b_busy));
  return st;
}

}  // namespace

LlmState llm_state(const SimModel& m) {
  const double t_pre = m.t_main.total_s;
  LlmState st = llm_state_at(m, t_pre, 0);
  // KV cache: the load keeps `load` requests in the engine (Little); it admits up to kv_admit
  // of them while their prompts fit, and those beyond kv_seqs are preempted once they grow
  // and recomputed (each its prompt and half its output, on average).
  const double load = m.closed_loop ? m.in_flight : m.item_rate * st.residence_s;
  const double held = std::min(load, m.kv_admit);
  if (held <= m.kv_seqs) return st;
  const double preempted = (held - m.kv_seqs) / held;
  st = llm_state_at(m, t_pre, preempted * m.recompute_ratio * t_pre);
  st.preempted = preempted;
  return st;
}

// ---------------------------------------------------------------------------------------------
// The fixed point.

namespace {

GpuSolution gpu_power(const std::vector<SimModel>& ms, const DeviceModel& dev) {
  GpuSolution g;
  double activity = dev.bg.activity, sm = dev.bg.sms / dev.sms, bytes_s = 0;
  for (const SimModel& m : ms) {
    sm += m.u * m.held_sms / dev.sms;
    activity += m.u * m.power_activity;
    double bytes_per_job = m.main.bytes;
    if (m.llm) {
      bytes_per_job += m.dec_steps * m.dec.bytes / busy_batch(m.batch, m.servers);
    } else {
      bytes_per_job += m.dec_steps * m.dec.bytes;
    }
    bytes_s += m.rate * bytes_per_job;
  }
  g.sm_util = std::min(1.0, sm);
  activity = std::min(1.0, activity);
  g.mem_util = std::min(sim::kDramEfficiency, bytes_s / dev.peak_dram_bytes_s + dev.bg.mem_util);
  const gpu::Clock clock = gpu::power_capped_clock(dev, activity, g.mem_util);
  g.clock_ratio = clock.ratio;
  g.power_w = clock.power_w;
  return g;
}

// Co-runner view of each model: what it holds while active, weighted by phase time.
void update_views(std::vector<SimModel>& ms, const DeviceModel& dev) {
  for (SimModel& m : ms) {
    const double wm = m.main_share;
    const double wd = 1 - wm;
    const bool has_dec = m.dec_steps > 0;
    const double dec_w = has_dec ? wd : 0;
    const double main_w = has_dec ? wm : 1;
    m.held_sms = std::min(m.cap_sms, m.mult * (main_w * m.main.sms + dec_w * m.dec.sms));
    m.bw = m.mult * (main_w * m.main.bw_demand + dec_w * m.dec.bw_demand);
    m.press = m.mult * (main_w * m.main.l2_pressure + dec_w * m.dec.l2_pressure);
    const double cf = main_w * m.main.compute_fraction + dec_w * m.dec.compute_fraction;
    m.power_activity = gpu::power_activity(m.held_sms, cf, dev);
  }
}

}  // namespace

GpuSolution solve(std::vector<SimModel>& ms, const DeviceModel& dev, const double* pair) {
  GpuSolution gpu;
  // Start from standalone service.
  for (SimModel& m : ms) {
    m.t_main = {m.main.alone_s, m.main.alone_cv2};
    m.t_dec = {m.dec.alone_s, m.dec.alone_cv2};
    m.t_dec_full = {m.dec_full.alone_s, m.dec_full.alone_cv2};
    const double service = m.main.alone_s + m.dec_steps * m.dec.alone_s /
                                                (m.llm ? std::max(1.0, 0.5 * m.servers) : 1.0);
    m.u = m.closed_loop ? 1 : std::min(1.0, m.job_rate * service);
    m.batch = m.llm ? (m.closed_loop ? m.servers : 1.0) : 1.0;
  }
  double clock = 1;
  double damping = sim::kDampingStart;
  double last_delta = 1e300;
  SubsetTables tables;
  for (int it = 0; it < sim::kMaxIterations; ++it) {
    for (SimModel& m : ms) {
      if (m.llm) {
        m.dec = llm_decode_shape(m, busy_batch(m.batch, m.servers), dev);
      }
    }
    update_views(ms, dev);
    tables.build(ms);
    double delta = 0;
    // Contended times from the current state (Jacobi: all from the same state).
    for (std::size_t i = 0; i < ms.size(); ++i) {
      SimModel& m = ms[i];
      m.t_main = contended(m.main, environment(ms, i, m.main, tables, dev, pair, clock));
      if (m.dec_steps > 0) {
        const Env e = environment(ms, i, m.dec, tables, dev, pair, clock);
        m.t_dec = contended(m.dec, e);
        if (m.llm) m.t_dec_full = contended(m.dec_full, e);
      }
    }
    // Queue-level response: busy fractions, own concurrency, LLM batch.
    for (SimModel& m : ms) {
      double u = 0, mult = 1, batch = m.batch, main_share = 1;
      if (m.llm) {
        const LlmState st = llm_state(m);
        u = st.busy;
        batch = st.batch;
        m.rate = st.rate;
        const double pre = st.rate * st.prefill_work_s;
        main_share = u > 0 ? std::clamp(pre / std::max(u, 1e-12), 0.0, 1.0) : 1;
      } else {
        const double service = m.t_main.total_s + m.dec_steps * m.t_dec.total_s;
        const double load = m.closed_loop ? m.servers : m.job_rate * service;
        u = std::min(1.0, load);
        mult = std::clamp(load, 1.0, static_cast<double>(m.servers));
        m.rate = std::min(m.closed_loop ? 1e300 : m.job_rate, m.servers / service);
        main_share = m.t_main.total_s / service;
      }
      delta = std::max({delta, std::abs(u - m.u), std::abs(batch - m.batch) / m.servers,
                        std::abs(mult - m.mult) / m.servers});
      m.u += damping * (u - m.u);
      m.mult += damping * (mult - m.mult);
      m.batch += damping * (batch - m.batch);
      m.main_share = main_share;
    }
    update_views(ms, dev);
    gpu = gpu_power(ms, dev);
    delta = std::max(delta, std::abs(gpu.clock_ratio - clock));
    clock += damping * (gpu.clock_ratio - clock);
    if (delta < sim::kTolerance) break;
    // Strongly coupled co-runners (saturated SMs, the power cap) make the plain iteration
    // oscillate: damp harder whenever a step fails to contract.
    if (delta > last_delta) damping = std::max(sim::kDampingMin, 0.5 * damping);
    last_delta = delta;
  }
  gpu.clock_ratio = clock;
  return gpu;
}

}  // namespace corun::sim
