// The simulated shared GPU. One measure() call:
//   1. resolves every running model's settings, checks VRAM (failures are data);
//   2. derives each model's GPU phases from the catalog cost functions (roofline inputs);
//   3. solves the mutual contention as a damped fixed point over busy fractions, LLM decode
//      batch and the power-capped clock; the co-runners' on/off states are enumerated exactly
//      (2^N subsets), so nonlinear saturation is not averaged away;
//   4. turns contended service times into latency percentiles and throughput with closed-form
//      queueing, and adds seeded measurement noise.
// docs/testbed.md describes every effect with its equation and source.
// This file holds measure() and the blend of a window with a make-before-break swap; the steps
// are in sim_setup.cc, sim_solve.cc and sim_report.cc.

#include "corun/testbed/sim.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "corun/core/rng.h"
#include "corun/testbed/gpu_model.h"
#include "sim_internal.h"
#include "sim_params.h"

namespace corun {
namespace {

using sim::device_model;
using sim::DeviceModel;
using sim::draw_noise;
using sim::GpuSolution;
using sim::make_model;
using sim::Noise;
using sim::report_llm;
using sim::report_server;
using sim::SimModel;
using sim::solve;

// Noise stream of the aggregate GPU counters (model streams use the model index).
constexpr std::uint64_t kGpuNoiseStream = 0xC0FFEEULL;

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

SimTruth SimTruth::perturbed(const Context& ctx) {
  Rng rng(derive_seed(ctx.seed, {0x7e47ULL}));
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
  t.context = ctx;
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
      name_(truth.context.seed == 0 ? std::string("sim")
                                    : "sim:perturb=" + std::to_string(truth.context.seed)) {}

Measurement SimTestbed::measure(const Context& ctx, const Workload& w,
                                std::span<const std::int32_t> config,
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
    return blend(measure(ctx, w, config, calm), measure(ctx, w, config, busy),
                 load.busy_s / options.window_s);
  }
  Measurement out;
  out.testbed = std::string(name());
  out.device = w.device.name;
  const SimTruth truth = options.conditions.perturb_seed != 0
                             ? SimTruth::perturbed(Context{.seed = options.conditions.perturb_seed})
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
    const Noise nz = options.noise ? draw_noise(ctx.seed, ms[k].index, config_hash) : Noise{};
    if (ms[k].llm) {
      report_llm(ms[k], options, nz, out.models[k]);
    } else {
      report_server(ms[k], options, nz, out.models[k]);
    }
  }
  Rng rng(derive_seed(ctx.seed, {kGpuNoiseStream, config_hash}));
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
