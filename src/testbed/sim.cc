// The simulated shared GPU. One measure() call:
//   1. resolves every running model's settings, checks VRAM (failures are data);
//   2. derives each model's GPU phases from the catalog cost functions (roofline inputs);
//   3. solves the mutual contention as a damped fixed point over busy fractions, LLM decode
//      batch and the power-capped clock; the co-runners' on/off states are enumerated exactly
//      (2^N subsets), so nonlinear saturation is not averaged away;
//   4. turns contended service times into latency percentiles and throughput with closed-form
//      queueing, and adds seeded measurement noise.
// docs/testbed.md describes every effect with its equation and source.

#include "corun/testbed/sim.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "corun/core/rng.h"
#include "corun/testbed/gpu_model.h"
#include "llm_step.h"
#include "queueing.h"
#include "sim_params.h"

namespace corun {
namespace {

using gpu::contended;
using gpu::dram_latency;
using gpu::dram_stretch;
using gpu::Env;
using gpu::make_shape;
using gpu::PhaseTime;
using gpu::Shape;

// Noise stream of the aggregate GPU counters (model streams use the model index).
constexpr std::uint64_t kGpuNoiseStream = 0xC0FFEEULL;
// Upper bound on the fraction of time an LLM engine spends in other requests' prefills, so
// that the decode stall factor 1 / (1 - f) stays finite; beyond it the queue is overloaded.
constexpr double kMaxPrefillShare = 0.95;

// ---------------------------------------------------------------------------------------------
// Device view.

// The shared physics view of the device plus an unmanaged co-tenant: always active, it holds
// SMs and bandwidth, presses on L2, burns power and counts as one more workload for the
// launch delay.
struct DeviceModel : gpu::DeviceModel {
  gpu::Load bg;
};

DeviceModel device_model(const Device& d, const SimTruth& truth, const Conditions& c) {
  DeviceModel m;
  static_cast<gpu::DeviceModel&>(m) = gpu::device_model(
      d,
      gpu::Scales{truth.bandwidth, truth.compute, truth.l2_sensitivity, truth.launch, truth.power},
      c.power_cap_w);
  m.bg = gpu::cotenant_load(m, c.interference.sm_util, c.interference.bandwidth_util);
  return m;
}

// Euclidean norm of two non-negative times.
double norm2(double a, double b) { return std::sqrt(a * a + b * b); }

// ---------------------------------------------------------------------------------------------
// Steady-state helpers.

// Mean number of sequences in a decode step when at least one decodes (Poisson occupancy).
double busy_batch(double mean_batch, double cap) {
  if (mean_batch < 1e-9) return 1;
  return std::clamp(mean_batch / (1 - std::exp(-mean_batch)), 1.0, std::max(cap, 1.0));
}

// ---------------------------------------------------------------------------------------------
// One running model.

struct SimModel {
  std::size_t index = 0;  // in Workload::models
  const ModelSpec* spec = nullptr;
  Settings s;
  bool llm = false;
  double cap_sms = 1;

  // Offered load. Server models (vision, encoder, speech): a job is a batch; LLM: a request.
  // Closed loop (benchmark mode): no rate given, `in_flight` requests kept in flight, each
  // sent when the previous answer returns. A demand of 0 keeps one per server.
  bool closed_loop = false;
  int in_flight = 1;         // closed loop: requests in flight; those beyond `servers` queue
  double item_rate = 0;      // frames/s or requests/s offered to the GPU (after frame skip)
  double items_per_job = 1;
  double job_rate = 0;
  int servers = 1;         // concurrent jobs: request_concurrency, or fewer in flight
  double arrival_cv2 = 1;  // of jobs
  double item_cv2 = 1;     // of items (for counting noise)

  // Phases.
  Shape main;                // forward pass, speech encoder, or all prefill chunks of a request
  double chunks = 1;         // LLM prefill chunks per request
  PhaseCost dec_lo, dec_hi;  // speech: decode step cost at batch dec_lo_b and dec_hi_b
  double dec_lo_b = 1, dec_hi_b = 1;
  const Device* device = nullptr;  // LLM: the catalog device (kernel parameters, peaks)
  double dec_context = 0;          // LLM: mean cached context of a decoding sequence
  Shape dec;                  // decode step at the current batch
  Shape dec_full;             // LLM decode step at full concurrency (capacity)
  double dec_lo_alone_s = 0;  // standalone decode step at batch dec_lo_b
  double dec_steps = 0;       // decode steps per job (speech); output tokens (LLM)
  // LLM KV cache (space.h, llm_kv_cache_bytes): the sequences it holds at their mean
  // occupancy, those the engine admits while a prompt fits, and the recompute of a preempted
  // sequence over its prefill.
  double kv_seqs = 1e300, kv_admit = 1e300, recompute_ratio = 0;
  double flops_per_s = 1, element_bytes = 2;

  // Fixed-point state.
  double u = 0;      // fraction of time at least one of its kernels is on the GPU
  double mult = 1;   // its own jobs running concurrently while busy
  double batch = 1;  // LLM: mean sequences in decode
  double rate = 0;   // jobs/s actually served
  PhaseTime t_main, t_dec, t_dec_full;
  double main_share = 1;  // fraction of its busy time in the main phase

  // Co-runner view, recomputed every iteration.
  double held_sms = 0, bw = 0, press = 0, power_activity = 0;
};

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
// Setup.

// Squared CV of an LLM's request arrivals: 1 for a written rate (Poisson), the measured
// burstiness for a trace's (Demand::arrival_cv). It scales the queue's wait by (ca² + cs²) / 2
// (ggc_wait, Allen-Cunneen) and the noise of counted requests (a renewal process's count
// variance grows with ca²).
double request_arrival_cv2(const Demand& d) {
  const double cv = std::max(0.0, d.arrival_cv);
  return cv * cv;
}

double offered_rate(const ModelSpec& m) {
  if (m.demand.closed_loop()) return 0;
  const bool frames = m.arch.family == ModelFamily::kVision;
  const double primary = frames ? m.demand.fps : m.demand.rps;
  const double secondary = frames ? m.demand.rps : m.demand.fps;
  return std::max(0.0, primary > 0 ? primary : secondary);
}

// An LLM's decode step at `batch` sequences of its mean context.
Shape llm_decode_shape(const SimModel& m, double batch, const DeviceModel& dev) {
  sim::LlmBatch b;
  b.decode_seqs = std::max(1.0, batch);
  b.decode_context = m.dec_context;
  return sim::make_llm_shape(m.spec->arch, b, m.s.precision, *m.device, dev, m.cap_sms);
}

// The LLM's KV cache on `device`. A running sequence holds its prompt and the tokens it has
// generated: at its mean occupancy (prompt + half the output) the cache holds kv_seqs
// sequences, so slots beyond them never run at once. The engine admits a request whenever its
// prompt fits (vLLM's scheduler), up to kv_admit sequences, and when the admitted ones grow
// past the cache it preempts the newest and recomputes it later (vLLM's default recompute
// mode, docs "Preemption"): prompt plus generated tokens prefilled again.
void set_kv_cache(SimModel& m, const Device& device) {
  const ModelSpec& spec = *m.spec;
  // A demand without token lengths sizes no cache (space.h): nothing to hold, no limit.
  if (spec.demand.prompt_tokens + spec.demand.output_tokens <= 0) return;
  const double device_bytes = device.vram_bytes();
  m.kv_seqs = llm_kv_sequences(spec, m.s, device_bytes);
  const double tokens = sim::kv_capacity_tokens(spec.arch, m.s.precision,
                                                llm_kv_cache_bytes(spec, m.s, device_bytes));
  const double prompt = std::max(1.0, static_cast<double>(spec.demand.prompt_tokens));
  const double occupancy = spec.demand.prompt_tokens + 0.5 * spec.demand.output_tokens;
  m.kv_admit = std::min<double>(m.servers, tokens / prompt);
  m.recompute_ratio = occupancy / prompt;
  // A cache sized for every slot holds them all (the margin absorbs rounding of the division).
  m.servers = std::clamp(static_cast<int>(m.kv_seqs + 1e-9), 1, m.servers);
}

SimModel make_model(std::size_t index, const ModelSpec& spec, const Settings& s,
                    const Device& device, const DeviceModel& dev) {
  SimModel m;
  m.index = index;
  m.spec = &spec;
  m.s = s;
  m.llm = spec.arch.family == ModelFamily::kLlm;
  m.cap_sms = std::clamp(s.sm_share, 1.0, 100.0) / 100.0 * dev.sms;
  m.servers = std::max(1, s.request_concurrency);
  m.flops_per_s = gpu::sustained_flops(device, s.precision) * dev.compute_scale;
  m.element_bytes = activation_bytes_per_element(s.precision);
  const ModelArch& a = spec.arch;
  const Precision p = s.precision;
  const int batch = std::max(1, s.batch);
  const double offered = offered_rate(spec);
  m.closed_loop = offered <= 0;
  if (spec.demand.closed_loop()) {
    // N requests in flight occupy at most N servers (an LLM's decode batch is at most N);
    // the rest wait for a free one.
    m.in_flight = spec.demand.concurrency;
    m.servers = std::min(m.servers, m.in_flight);
  } else {
    m.in_flight = m.servers;
  }

  switch (a.family) {
    case ModelFamily::kVision: {
      const double keep = 1 - std::clamp(s.skip_rate, 0.0, 0.999);
      m.item_rate = offered * keep;
      m.items_per_job = batch;
      // Periodic camera: deterministic skipping keeps frames periodic; jitter averages over
      // the frames of a batch. Several streams merge into burstier arrivals, batched together.
      m.item_cv2 = sim::merged_frame_cv2(spec.streams.size());
      m.arrival_cv2 = m.item_cv2 / batch;
      m.main = make_shape(forward_cost(a, batch, s.imgsz, p), dev, m.flops_per_s, m.element_bytes,
                          m.cap_sms);
      break;
    }
    case ModelFamily::kEncoder:
    case ModelFamily::kSpeech: {
      m.item_rate = offered;
      m.items_per_job = batch;
      m.item_cv2 = 1;  // Poisson requests
      m.arrival_cv2 = 1.0 / batch;
      const gpu::ModelPhases ph = gpu::speech_phases(a, batch, 0, p);
      if (ph.decode_steps > 0) {
        m.dec_steps = ph.decode_steps;
        m.dec_lo = ph.decode;
        m.dec_hi = m.dec_lo;
        m.dec = make_shape(m.dec_lo, dev, m.flops_per_s, m.element_bytes, m.cap_sms);
      }
      m.main = make_shape(ph.main, dev, m.flops_per_s, m.element_bytes, m.cap_sms);
      break;
    }
    case ModelFamily::kLlm: {
      m.item_rate = offered;
      m.items_per_job = 1;
      m.item_cv2 = request_arrival_cv2(spec.demand);
      m.arrival_cv2 = m.item_cv2;
      const int prompt = std::max(1, spec.demand.prompt_tokens);
      const int output = std::max(1, spec.demand.output_tokens);
      m.device = &device;
      set_kv_cache(m, device);
      m.main = sim::llm_prefill_shape(a, prompt, s.prefill_chunk, p, device, dev, m.cap_sms, m.chunks);
      m.dec_steps = output;
      // Decode reads the KV cache of every sequence at its mean context (prompt + half the
      // output); the step is rebuilt at the current batch by the fixed point.
      m.dec_context = prompt + 0.5 * output;
      m.dec_lo_b = 1;
      m.dec_hi_b = m.servers;
      m.dec = llm_decode_shape(m, 1, dev);
      m.dec_full = llm_decode_shape(m, m.servers, dev);
      m.dec_lo_alone_s = m.dec.alone_s;
      break;
    }
  }
  m.job_rate = m.item_rate / m.items_per_job;
  return m;
}

// ---------------------------------------------------------------------------------------------
// LLM engine: continuous batching with chunked prefill, derived from contended phase times.

struct LlmState {
  double capacity = 0;        // requests/s at full concurrency
  double rate = 0;            // requests/s served
  double prefill_share = 0;   // others' prefill time per unit time while a sequence decodes
  double tpot_s = 0;          // mean time per output token
  double ttft_engine_s = 0;   // prefill plus interleaved decode steps, without slot wait
  double prefill_wait_s = 0;  // waiting behind another request's prefill
  double residence_s = 0;     // slot occupancy of one request
  double batch = 1;           // new mean decode batch
  double busy = 0;            // engine busy fraction
  double preempted = 0;       // fraction of requests preempted (KV cache full) and recomputed
  double prefill_work_s = 0;  // prefill per request, its share of recomputes included
};

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

struct GpuSolution {
  double clock_ratio = 1;
  double sm_util = 0;
  double mem_util = 0;  // fraction of datasheet bandwidth
  double power_w = 0;
};

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
  g.mem_util =
      std::min(sim::kDramEfficiency, bytes_s / dev.peak_dram_bytes_s + dev.bg.mem_util);
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

// ---------------------------------------------------------------------------------------------
// Reporting.

struct Noise {
  double median = 0, tail = 0, hiccup = 0, count = 0, ttft = 0, tpot = 0;
};

// Two independent standard normals from one Box-Muller transform (Rng::normal() discards the
// second one; this is the hot path of exhaustive sweeps).
std::pair<double, double> normal_pair(Rng& rng) {
  const double u1 = std::max(rng.uniform(), 1e-300);
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2 * std::numbers::pi * rng.uniform();
  return {r * std::cos(theta), r * std::sin(theta)};
}

Noise draw_noise(std::uint64_t seed, std::size_t model, std::uint64_t config_hash) {
  Rng rng(derive_seed(seed, {model, config_hash}));
  Noise n;
  std::tie(n.median, n.tail) = normal_pair(rng);
  std::tie(n.count, n.ttft) = normal_pair(rng);
  n.tpot = normal_pair(rng).first;
  n.hiccup = -std::log(1 - rng.uniform()) * sim::kTailHiccupMean;
  return n;
}

// Relative sampling error of an empirical q-quantile from n samples of a distribution with
// relative spread `spread` (standard deviation / median), in the normal approximation: the
// empirical CDF errs by sqrt(q (1 - q) / n), divided by the density phi(z_q) / sigma.
double quantile_error(double q, double samples, double spread) {
  const double z = q > 0.5 ? sim::kZ95 : 0.0;
  const double density = std::exp(-0.5 * z * z) / std::sqrt(2 * std::numbers::pi);
  // The normal approximation is used as a log-normal sigma; for wide, skewed distributions
  // (a p95 dominated by a queueing tail) it would spread the empirical p95 over two orders of
  // magnitude, far beyond what order statistics allow (the p95 of n draws stays between
  // neighbouring true quantiles). Cap it.
  return std::min(sim::kMaxQuantileSigma,
                  std::sqrt(q * (1 - q) / std::max(samples, 1.0)) / density * spread);
}

// Seeded measurement noise on a (p50, p95) pair: a run-to-run log-normal part plus the
// sampling error of quantiles over `samples` observations; p95 gets a heavier tail.
void add_latency_noise(double p50_s, double p95_s, double samples, const Noise& nz,
                       ModelMetrics& mm) {
  const double spread = p50_s > 0 ? std::max(0.0, p95_s - p50_s) / (sim::kZ95 * p50_s) : 0;
  const double s50 = norm2(sim::kMedianNoise, quantile_error(0.5, samples, spread));
  const double s95 = norm2(sim::kTailNoise, quantile_error(0.95, samples, spread));
  mm.latency_ms_p50 = 1e3 * p50_s * std::exp(s50 * nz.median);
  mm.latency_ms_p95 =
      std::max(1e3 * p95_s * std::exp(s95 * nz.tail) * (1 + nz.hiccup), mm.latency_ms_p50);
}

double spread(double a, double b, double c = 0) { return std::sqrt(a * a + b * b + c * c); }

void report_server(const SimModel& m, const MeasureOptions& o, const Noise& nz, ModelMetrics& mm) {
  const double service = m.t_main.total_s + m.dec_steps * m.t_dec.total_s;
  // Phases of one job see correlated co-runner states: their deviations add.
  const double sd = m.t_main.total_s * std::sqrt(m.t_main.cv2) +
                    m.dec_steps * m.t_dec.total_s * std::sqrt(m.t_dec.cv2);
  const double cs2 = service > 0 ? (sd / service) * (sd / service) : 0;
  double served = 0;
  double wait_mean = 0, wait_p50 = 0, wait_p95 = 0;
  double fill_mean = 0, fill_p50 = 0, fill_p95 = 0;
  if (m.closed_loop) {
    served = m.servers / service * m.items_per_job;
    // Every server is always busy, so each request waits for the (in_flight - servers) /
    // servers jobs ahead of it on its server: Little's law, in_flight / rate, for a closed
    // system without think time. A wait of `k` services has k times their variance.
    const double ahead = static_cast<double>(m.in_flight - m.servers) / m.servers;
    wait_mean = ahead * service;
    wait_p50 = wait_mean;
    wait_p95 = wait_mean + sim::kZ95 * service * std::sqrt(ahead * cs2);
  } else {
    const sim::WaitTime w =
        sim::ggc_wait(m.servers, m.job_rate, service, m.arrival_cv2, cs2, o.window_s);
    served = m.item_rate / std::max(1.0, w.utilisation);
    wait_mean = w.mean_s;
    wait_p50 = w.p50_s;
    wait_p95 = w.p95_s;
    // An item waits for the rest of its batch: uniform over 0..(batch-1) inter-arrivals.
    const double gap = m.item_rate > 0 ? 1 / m.item_rate : 0;
    const double fill = (m.items_per_job - 1) * gap;
    fill_mean = 0.5 * fill;
    fill_p50 = 0.5 * fill;
    fill_p95 = 0.95 * fill;
  }
  const double service_p95 = service * (1 + sim::kZ95 * std::sqrt(cs2));
  const double p50 = fill_p50 + wait_p50 + service;
  const double p95 = fill_mean + wait_mean + service +
                     spread(fill_p95 - fill_mean, wait_p95 - wait_mean, service_p95 - service);
  const double samples = std::max(1.0, served * o.window_s);
  add_latency_noise(p50, p95, samples, nz, mm);
  const double count_error = std::sqrt(m.item_cv2 / samples);
  mm.throughput = served * std::exp(std::min(count_error, 0.2) * nz.count);
}

void report_llm(const SimModel& m, const MeasureOptions& o, const Noise& nz, ModelMetrics& mm) {
  const LlmState st = llm_state(m);
  const double out = m.dec_steps;
  const double c = m.servers;
  // Slot queue: c slots, each held for a request's residence; the engine capacity bounds the
  // rate as well, so the effective service per slot is at least c / capacity.
  const double slot_service = std::max(st.residence_s, c / st.capacity);
  double wait_mean = 0, wait_p50 = 0, wait_p95 = 0, rate = st.rate;
  if (m.closed_loop) {
    // Requests beyond the slots wait for one: in_flight / rate per request (Little, closed
    // system), of which each slot's effective service is the request's own.
    const double ahead = static_cast<double>(m.in_flight - m.servers) / c;
    wait_mean = ahead * slot_service;
    wait_p50 = wait_mean;
    wait_p95 =
        wait_mean + sim::kZ95 * slot_service * std::sqrt(ahead * (m.t_main.cv2 + m.t_dec.cv2));
  } else {
    const sim::WaitTime w = sim::ggc_wait(m.servers, m.item_rate, slot_service, m.arrival_cv2,
                                          m.t_main.cv2 + m.t_dec.cv2, o.window_s);
    wait_mean = w.mean_s;
    wait_p50 = w.p50_s;
    wait_p95 = w.p95_s;
    rate = m.item_rate / std::max(1.0, w.utilisation);
  }
  // TTFT spread: prefill jitter and the exponential tail of waiting behind another prefill.
  const double t_pre = m.t_main.total_s;
  const double ttft_dev = spread(t_pre * sim::kZ95 * std::sqrt(m.t_main.cv2),
                                 2.0 * st.prefill_wait_s);  // exp tail: p95 ~ 3 x mean
  const double ttft_p95 = wait_p95 + st.ttft_engine_s + ttft_dev;
  // TPOT of one request: its decode steps stretch with co-runner states and with the batch it
  // shares (Poisson occupancy), plus the prefills admitted while it decodes (Poisson count).
  const double t_dec = m.t_dec.total_s;
  double slope = 0;  // contended seconds per extra sequence in a decode step
  if (m.dec_hi_b > m.dec_lo_b && m.dec.alone_s > 0) {
    slope = std::max(0.0, (m.dec_full.alone_s - m.dec_lo_alone_s) / (m.dec_hi_b - m.dec_lo_b)) *
            t_dec / m.dec.alone_s;
  }
  const double decode_s = out * st.tpot_s;
  const double stalls = rate * t_pre * (c - 1) / c * decode_s;
  const double tpot_dev = spread(t_dec * sim::kZ95 * std::sqrt(m.t_dec.cv2),
                                 sim::kZ95 * slope * std::sqrt(std::min(m.batch, c)),
                                 sim::kZ95 * std::sqrt(stalls) * t_pre / out);
  const double tpot_p95 = st.tpot_s + tpot_dev;
  const double e2e_p50 = wait_p50 + st.ttft_engine_s + decode_s;
  const double e2e_p95 = wait_mean + st.ttft_engine_s + decode_s +
                         spread(wait_p95 - wait_mean, ttft_dev, out * tpot_dev);
  const double samples = std::max(1.0, rate * o.window_s);
  add_latency_noise(e2e_p50, e2e_p95, samples, nz, mm);
  // TTFT and TPOT percentiles: run-to-run noise plus the sampling error of a p95 over the
  // window's requests, with each metric's own spread.
  const double ttft_mean = wait_mean + st.ttft_engine_s;
  const double ttft_spread = ttft_mean > 0 ? (ttft_p95 - ttft_mean) / (sim::kZ95 * ttft_mean) : 0;
  const double tpot_spread = tpot_dev / (sim::kZ95 * st.tpot_s);
  mm.ttft_ms_p95 =
      1e3 * ttft_p95 *
      std::exp(norm2(sim::kTailNoise, quantile_error(0.95, samples, ttft_spread)) * nz.ttft);
  mm.tpot_ms_p95 =
      1e3 * tpot_p95 *
      std::exp(norm2(sim::kTailNoise, quantile_error(0.95, samples, tpot_spread)) * nz.tpot);
  const double count_error = std::sqrt(m.item_cv2 / samples);
  mm.throughput = rate * out * std::exp(std::min(count_error, 0.2) * nz.count);
  mm.preemptions_per_request = st.preempted;
}

std::string gigabytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
  return buf;
}

std::uint64_t hash_config(std::span<const std::int32_t> config) {
  std::uint64_t h = 1469598103934665603ULL;
  for (std::int32_t c : config) h = mix64(h ^ static_cast<std::uint64_t>(c));
  return h;
}

/// The GPU load of the make-before-break swaps of a window: how long some new copy runs
/// kernels, and the share of the GPU they take then (their GPU-seconds over that time).
struct SwapLoad {
  double busy_s = 0;
  double share = 0;
};

SwapLoad swap_load(const MeasureOptions& o) {
  double gpu_seconds = 0;
  double busy = 0;
  for (const TransitionCharge& c : o.transitions) {
    gpu_seconds += c.swap_gpu_s * c.swap_gpu_share;
    busy += c.swap_gpu_s;
  }
  SwapLoad l;
  l.busy_s = std::min(busy, o.window_s);
  if (l.busy_s > 0) l.share = std::min(1.0, gpu_seconds / l.busy_s);
  return l;
}

/// A percentile of a window that ran as `calm` for part of its time and as `busy` for a share
/// f: it moves toward the busy one with the share of requests that saw it, fully once they
/// are more than its tail (`tail` 0.05 for a p95, 0.5 for a p50), the rule of
/// charge_transition's warm-up.
double blend_percentile(double calm, double busy, double f, double tail) {
  return calm + (busy - calm) * std::min(1.0, f / tail);
}

/// `calm` for (1 − f) of the window and `busy` for f: throughputs and GPU counters by time,
/// percentiles by blend_percentile.
Measurement blend(Measurement calm, const Measurement& busy, double f) {
  if (!calm.error.empty() || !busy.error.empty() || calm.models.size() != busy.models.size()) {
    return calm;
  }
  auto by_time = [f](double a, double b) { return (1 - f) * a + f * b; };
  for (std::size_t k = 0; k < calm.models.size(); ++k) {
    ModelMetrics& a = calm.models[k];
    const ModelMetrics& b = busy.models[k];
    if (!a.ok() || !b.ok()) continue;
    a.throughput = by_time(a.throughput, b.throughput);
    a.latency_ms_p50 = blend_percentile(a.latency_ms_p50, b.latency_ms_p50, f, 0.5);
    a.latency_ms_p95 = blend_percentile(a.latency_ms_p95, b.latency_ms_p95, f, 0.05);
    if (a.ttft_ms_p95 && b.ttft_ms_p95) {
      a.ttft_ms_p95 = blend_percentile(*a.ttft_ms_p95, *b.ttft_ms_p95, f, 0.05);
    }
    if (a.tpot_ms_p95 && b.tpot_ms_p95) {
      a.tpot_ms_p95 = blend_percentile(*a.tpot_ms_p95, *b.tpot_ms_p95, f, 0.05);
    }
  }
  calm.gpu.sm_util = by_time(calm.gpu.sm_util, busy.gpu.sm_util);
  calm.gpu.mem_bw_util = by_time(calm.gpu.mem_bw_util, busy.gpu.mem_bw_util);
  calm.gpu.power_w = by_time(calm.gpu.power_w, busy.gpu.power_w);
  calm.gpu.clock_mhz = by_time(calm.gpu.clock_mhz, busy.gpu.clock_mhz);
  return calm;
}

}  // namespace

SimTruth SimTruth::perturbed(std::uint64_t seed) {
  Rng rng(derive_seed(seed, {0x7e47ULL}));
  auto draw = [&] {
    const double size = 0.1 + 0.3 * rng.uniform();
    return rng.uniform() < 0.5 ? 1 - size : 1 + size;
  };
  SimTruth t;
  t.bandwidth = draw();
  t.compute = draw();
  t.l2_sensitivity = draw();
  t.launch = draw();
  t.power = draw();
  t.seed = seed;
  return t;
}

std::string SimTruth::describe() const {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "bandwidth x%.2f, compute x%.2f, L2 sensitivity x%.2f, launch x%.2f, power x%.2f",
                bandwidth, compute, l2_sensitivity, launch, power);
  return buf;
}

SimTestbed::SimTestbed(SimTruth truth)
    : truth_(truth),
      name_(truth.seed == 0 ? std::string("sim") : "sim:perturb=" + std::to_string(truth.seed)) {}

Measurement SimTestbed::measure(const Workload& w, std::span<const std::int32_t> config,
                                const MeasureOptions& options) const {
  // A make-before-break swap's new copy runs kernels for part of the window, as a co-tenant
  // of everyone on the GPU (the old copy included): the window is measured without and with
  // that load, each for the time it lasted.
  if (const SwapLoad load = swap_load(options); load.busy_s > 0 && options.window_s > 0) {
    MeasureOptions calm = options;
    for (TransitionCharge& c : calm.transitions) c.swap_gpu_s = c.swap_gpu_share = 0;
    MeasureOptions busy = calm;
    Interference& i = busy.conditions.interference;
    i.sm_util = std::min(1.0, i.sm_util + load.share);
    i.bandwidth_util = std::min(1.0, i.bandwidth_util + load.share);
    return blend(measure(w, config, calm), measure(w, config, busy),
                 load.busy_s / options.window_s);
  }
  Measurement out;
  out.testbed = std::string(name());
  out.device = w.device.name;
  const SimTruth truth = options.conditions.perturb_seed != 0
                            ? SimTruth::perturbed(options.conditions.perturb_seed)
                            : truth_;
  const DeviceModel dev = device_model(w.device, truth, options.conditions);
  out.gpu.clock_mhz = dev.boost_mhz;
  out.gpu.power_w = dev.idle_w;
  if (config.size() != w.models.size()) {
    out.error = "configuration has " + std::to_string(config.size()) + " entries, workload has " +
                std::to_string(w.models.size()) + " models";
    return out;
  }

  std::vector<SimModel> ms;
  ms.reserve(w.models.size());
  double vram = 0;
  for (std::size_t i = 0; i < w.models.size(); ++i) {
    if (config[i] == kAbsent) continue;
    const ModelSpec& spec = w.models[i];
    if (config[i] < 0 || static_cast<std::size_t>(config[i]) >= spec.local_config_count()) {
      out.error = "model '" + spec.name + "': local configuration " + std::to_string(config[i]) +
                  " out of range (has " + std::to_string(spec.local_config_count()) + ")";
      out.models.clear();
      return out;
    }
    const auto local = static_cast<std::size_t>(config[i]);
    const Settings s = spec.settings(local);
    vram += model_vram_bytes(spec, s, w.device.vram_bytes());
    ModelMetrics mm;
    mm.model = i;
    mm.name = spec.name;
    mm.config = spec.describe(local);
    out.models.push_back(std::move(mm));
    ms.push_back(make_model(i, spec, s, w.device, dev));
  }
  out.gpu.vram_used_gb = vram / 1e9;
  if (vram > w.device.vram_bytes()) {
    // Failures are data: nothing ran; the need is reported so that the gap is visible.
    out.error = "out of memory: needs " + gigabytes(vram) + ", device has " +
                gigabytes(w.device.vram_bytes());
    for (auto& mm : out.models) mm.error = out.error;
    return out;
  }
  if (ms.empty()) return out;

  // Pair factors (victim row, aggressor column), fixed for this measurement.
  std::vector<double> pair(ms.size() * ms.size(), 1.0);
  for (std::size_t i = 0; i < ms.size(); ++i) {
    for (std::size_t j = 0; j < ms.size(); ++j) {
      if (i != j) pair[i * ms.size() + j] = gpu::pair_factor(ms[i].spec->arch, ms[j].spec->arch);
    }
  }
  const GpuSolution gpu = solve(ms, dev, pair.data());

  const std::uint64_t config_hash = hash_config(config);
  for (std::size_t k = 0; k < ms.size(); ++k) {
    const Noise nz = options.noise ? draw_noise(options.seed, ms[k].index, config_hash) : Noise{};
    if (ms[k].llm) {
      report_llm(ms[k], options, nz, out.models[k]);
    } else {
      report_server(ms[k], options, nz, out.models[k]);
    }
  }
  Rng rng(derive_seed(options.seed, {kGpuNoiseStream, config_hash}));
  const auto jitter = [&](double v) {
    return options.noise ? v * std::exp(sim::kGpuCounterNoise * rng.normal()) : v;
  };
  out.gpu.sm_util = std::clamp(jitter(gpu.sm_util), 0.0, 1.0);
  out.gpu.mem_bw_util = std::clamp(jitter(gpu.mem_util), 0.0, 1.0);
  out.gpu.power_w = std::min(jitter(gpu.power_w), dev.cap_w);
  out.gpu.clock_mhz = gpu.clock_ratio * dev.boost_mhz;
  // What the serving stack pays for transitions under way (corun run's loop says which).
  for (const TransitionCharge& c : options.transitions) {
    out.gpu.vram_used_gb += c.extra_vram_bytes / 1e9;
    for (auto& mm : out.models) {
      if (mm.model == c.model) charge_transition(w.models[c.model], c, options.window_s, mm);
    }
  }
  return out;
}

}  // namespace corun
