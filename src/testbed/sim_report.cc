// The simulated GPU's reports: contended service times turned into latency percentiles and
// throughput with closed-form queueing, plus seeded measurement noise.

#include <algorithm>
#include <cmath>
#include <numbers>
#include <tuple>
#include <utility>

#include "corun/core/rng.h"
#include "queueing.h"
#include "sim_internal.h"
#include "sim_params.h"

namespace corun::sim {

namespace {

// Two independent standard normals from one Box-Muller transform (Rng::normal() discards the
// second one; this is the hot path of exhaustive sweeps).
std::pair<double, double> normal_pair(Rng& rng) {
  const double u1 = std::max(rng.uniform(), 1e-300);
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2 * std::numbers::pi * rng.uniform();
  return {r * std::cos(theta), r * std::sin(theta)};
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

}  // namespace

Noise draw_noise(std::uint64_t seed, std::size_t model, std::uint64_t config_hash) {
  Rng rng(derive_seed(seed, {model, config_hash}));
  Noise n;
  std::tie(n.median, n.tail) = normal_pair(rng);
  std::tie(n.count, n.ttft) = normal_pair(rng);
  n.tpot = normal_pair(rng).first;
  n.hiccup = -std::log(1 - rng.uniform()) * sim::kTailHiccupMean;
  return n;
}

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

}  // namespace corun::sim
