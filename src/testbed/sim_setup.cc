// The simulated GPU's setup: the device view under the hidden truth and the conditions, and each
// running model's settings, offered load and standalone phases from the catalog cost functions.

#include <algorithm>
#include <cmath>

#include "llm_step.h"
#include "sim_internal.h"
#include "sim_params.h"

namespace corun::sim {

using gpu::make_shape;

DeviceModel device_model(const Device& d, const SimTruth& truth, const Conditions& c) {
  DeviceModel m;
  static_cast<gpu::DeviceModel&>(m) = gpu::device_model(
      d,
      gpu::Scales{truth.bandwidth, truth.compute, truth.l2_sensitivity, truth.launch, truth.power},
      c.power_cap_w);
  m.bg = gpu::cotenant_load(m, c.interference.sm_util, c.interference.bandwidth_util);
  return m;
}

// ---------------------------------------------------------------------------------------------
// Setup.

namespace {

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

}  // namespace

// An LLM's decode step at `batch` sequences of its mean context.
Shape llm_decode_shape(const SimModel& m, double batch, const DeviceModel& dev) {
  sim::LlmBatch b;
  b.decode_seqs = std::max(1.0, batch);
  b.decode_context = m.dec_context;
  return sim::make_llm_shape(m.spec->arch, b, m.s.precision, *m.device, dev, m.cap_sms);
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
      m.main =
          sim::llm_prefill_shape(a, prompt, s.prefill_chunk, p, device, dev, m.cap_sms, m.chunks);
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

}  // namespace corun::sim
