#include "corun/mapping/executor.h"

#include <algorithm>
#include <cmath>

#include "corun/core/check.h"
#include "corun/core/rng.h"

namespace corun::mapping {

namespace {

// Remaining work below this (seconds of standalone time) counts as finished: far below any
// modelled phase, far above accumulated rounding.
constexpr double kDoneEps = 1e-12;

double noise_factor(std::uint64_t seed, std::size_t node, std::uint64_t side, double sigma) {
  Rng rng(derive_seed(seed, {node, side}));
  // Mean-one log-normal: observed = true x exp(sigma z - sigma^2 / 2).
  return std::exp(sigma * rng.normal() - 0.5 * sigma * sigma);
}

}  // namespace

Executor::Executor(const PlacementProblem& problem) : problem_(&problem) {
  const std::size_t n = problem.size();
  phase_.resize(n);
  segment_.resize(n);
  pending_.resize(n);
  remaining_.resize(n);
  rate_.resize(n);
  gpu_factor_.resize(n, 1.0);
  cpu_factor_.resize(n, 1.0);
  active_.reserve(n);
  queue_.reserve(n);
  ready_.reserve(n);
}

RunResult Executor::run(std::span<const Placement> mapping, const RunOptions& options) {
  CORUN_CHECK_MSG(problem_->validate(mapping).ok(), "Executor::run needs a validated mapping");
  RunResult r;
  r.seed = options.seed;
  r.noisy = options.noise;
  simulate<true>(mapping, options, &r);
  return r;
}

double Executor::makespan_s(std::span<const Placement> mapping, const RunOptions& options) {
  return simulate<false>(mapping, options, nullptr);
}

template <bool kTrace>
double Executor::simulate(std::span<const Placement> mapping, const RunOptions& options,
                          RunResult* out) {
  const PlacementProblem& p = *problem_;
  const std::size_t n = p.size();
  const Scenario& sc = p.scenario();
  const double budget = p.vram_budget_bytes();
  const double cores = std::max(1, p.device().cpu.cores);
  const gpu::DeviceModel& dev = p.gpu();
  const gpu::Load& bg = p.background();
  // The tools' MPS partition (PlacementProblem::set_tool_gpu_share); unconfined at 1.
  const bool confined = p.tool_gpu_share() < 1;
  const double partition = p.tool_gpu_share() * dev.sms;
  const double bg_cpu = sc.background.cpu_busy_cores / cores;

  const double sigma = options.noise ? sc.noise : 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    phase_[i] = kWaiting;
    pending_[i] = static_cast<int>(p.preds(i).size());
    gpu_factor_[i] = sigma > 0 && on_gpu(mapping[i]) ? noise_factor(options.seed, i, 0, sigma) : 1;
    cpu_factor_[i] = sigma > 0 && !on_gpu(mapping[i]) ? noise_factor(options.seed, i, 1, sigma) : 1;
  }
  if constexpr (kTrace) {
    out->tools.assign(n, ToolRun{});
    for (std::size_t i = 0; i < n; ++i) out->tools[i].placement = mapping[i];
  }
  active_.clear();
  queue_.clear();
  std::size_t queue_head = 0;
  ready_.clear();
  double vram_used = 0;
  double t = 0;
  burst_ = BurstLoad{};
  double burst_sm_s = 0, burst_bw_s = 0;
  bool burst_started = false;
  double last_end = 0;
  bool failed = false;

  // Moves node i into its next phase that has work, starting from `from`.
  auto enter = [&](std::size_t i, std::uint8_t from) {
    const ToolCost& c = p.cost(i);
    std::uint8_t ph = from;
    for (;;) {
      double work = 0;
      switch (ph) {
        case kUpload:
          work = c.h2d_s * gpu_factor_[i];
          break;
        case kCompute:
          // The first GPU segment with work, from the current one on.
          for (; segment_[i] < c.segments.size(); ++segment_[i]) {
            const GpuSegment& g = c.segments[segment_[i]];
            work = g.repeats * g.shape.alone_s * gpu_factor_[i];
            if (work > 0) break;
          }
          break;
        case kDownload:
          work = c.d2h_s * gpu_factor_[i];
          break;
        case kCpuRun:
          work = c.cpu_s * cpu_factor_[i];
          break;
        default:
          break;
      }
      if (ph == kDone || work > 0) {
        phase_[i] = ph;
        remaining_[i] = work;
        return;
      }
      ph = (ph == kDownload || ph == kCpuRun) ? static_cast<std::uint8_t>(kDone)
                                              : static_cast<std::uint8_t>(ph + 1);
    }
  };
  auto finish = [&](std::size_t i) {
    phase_[i] = kDone;
    if (on_gpu(mapping[i])) vram_used -= p.cost(i).vram_bytes;
    last_end = std::max(last_end, t);
    if constexpr (kTrace) {
      out->tools[i].status = ToolRun::Status::kDone;
      out->tools[i].end_ms = t * 1e3;
    }
    for (auto j : p.succs(i)) {
      if (--pending_[j] == 0) ready_.push_back(j);
    }
  };
  auto start_gpu = [&](std::size_t i) {
    vram_used += p.cost(i).vram_bytes;
    if constexpr (kTrace) {
      ToolRun& tr = out->tools[i];
      tr.start_ms = t * 1e3;
      tr.queue_wait_ms = tr.start_ms - tr.ready_ms;
      tr.vram_pressure = tr.queue_wait_ms > 0 || budget - vram_used < 0.1 * budget;
      out->peak_vram_gb = std::max(out->peak_vram_gb, vram_used / 1e9);
    }
    segment_[i] = 0;
    enter(i, kUpload);
    if (phase_[i] == kDone) {
      finish(i);
    } else {
      active_.push_back(i);
    }
  };
  auto dequeue = [&] {
    while (queue_head < queue_.size()) {
      const std::size_t i = queue_[queue_head];
      if (vram_used + p.cost(i).vram_bytes > budget * (1 + 1e-12)) break;
      ++queue_head;
      start_gpu(i);
    }
  };
  // Handles every node in ready_ (in index order), including ones that become ready because
  // a zero-work node finished on the spot.
  auto admit = [&] {
    for (;;) {
      // Queued tools that fit go first: they have waited longest.
      dequeue();
      if (ready_.empty()) break;
      const auto it = std::min_element(ready_.begin(), ready_.end());
      const std::size_t i = *it;
      ready_.erase(it);
      if constexpr (kTrace) out->tools[i].ready_ms = t * 1e3;
      switch (mapping[i]) {
        case Placement::kCpu:
          if constexpr (kTrace) out->tools[i].start_ms = t * 1e3;
          enter(i, kCpuRun);
          if (phase_[i] == kDone) {
            finish(i);
          } else {
            active_.push_back(i);
          }
          break;
        case Placement::kGpuNow:
          if (vram_used + p.cost(i).vram_bytes > budget * (1 + 1e-12)) {
            phase_[i] = kFailedPhase;
            failed = true;
            if constexpr (kTrace) {
              ToolRun& tr = out->tools[i];
              tr.status = ToolRun::Status::kFailed;
              tr.start_ms = tr.end_ms = t * 1e3;
              tr.failure = "out of VRAM at " + std::to_string(t * 1e3) + " ms: needs " +
                           std::to_string(p.cost(i).vram_bytes / 1e9) + " GB, " +
                           std::to_string((budget - vram_used) / 1e9) + " GB free";
              out->failures.push_back(p.id(i) + ": " + tr.failure);
            }
          } else {
            start_gpu(i);
          }
          break;
        case Placement::kGpuQueue:
          phase_[i] = kQueued;
          queue_.push_back(i);
          break;
      }
    }
  };

  for (std::size_t i = 0; i < n; ++i) {
    if (pending_[i] == 0) ready_.push_back(i);
  }
  admit();
  if (!kTrace && failed) return Executor::kFailed;

  while (!active_.empty()) {
    // Rates of every active phase under the current sharing. The GPU segments computing now
    // are each other's co-runners, next to the background load, on the shared GPU model; the
    // power limiter sees each computing call's mean draw (activity, bandwidth) over its
    // compute step, as the simulator's sees a request's.
    int uploads = 0, downloads = 0;
    double cpu_share = bg_cpu, cpu_bw = 0;
    gpu::Load tools;
    for (auto i : active_) {
      switch (phase_[i]) {
        case kUpload:
          ++uploads;
          break;
        case kDownload:
          ++downloads;
          break;
        case kCompute: {
          const gpu::Shape& sh = p.cost(i).segments[segment_[i]].shape;
          tools.active += 1;
          tools.sms += sh.sms;
          tools.bw += sh.bw_demand;
          tools.press += sh.l2_pressure;
          tools.activity += p.cost(i).power_activity;
          tools.mem_util += p.cost(i).bw_demand;
          break;
        }
        case kCpuRun:
          cpu_share += p.cost(i).cpu_core_share;
          cpu_bw += p.cost(i).cpu_bw_demand;
          break;
        default:
          break;
      }
    }
    const double cpu_stretch = std::max({1.0, cpu_share, cpu_bw});
    // Tools squeezed into their partition run slower, and draw bandwidth and power at the
    // same reduced pace.
    const double pace = confined && tools.sms > partition ? partition / tools.sms : 1.0;
    tools.bw *= pace;
    tools.activity *= pace;
    tools.mem_util *= pace;
    const double clock =
        tools.active > 0 ? gpu::power_capped_clock(dev, bg.activity + tools.activity,
                                                   bg.mem_util + tools.mem_util * dev.dram_bytes_s /
                                                                     dev.peak_dram_bytes_s)
                               .ratio
                         : 1.0;
    double dt = std::numeric_limits<double>::infinity();
    std::size_t first = active_[0];
    for (auto i : active_) {
      double rate = 1;
      switch (phase_[i]) {
        case kUpload:
          rate = 1.0 / uploads;
          break;
        case kDownload:
          rate = 1.0 / downloads;
          break;
        case kCompute: {
          const gpu::Shape& sh = p.cost(i).segments[segment_[i]].shape;
          gpu::Load others = bg;
          others.active += tools.active - 1;
          others.bw += tools.bw - sh.bw_demand * pace;
          others.press += tools.press - sh.l2_pressure;
          double cap = dev.sms;
          if (confined) {
            // One MPS client of share x SMs for every tool: each gets the partition in
            // proportion to what it asks, and the tools hold at most the partition.
            cap = partition * sh.sms / std::max(tools.sms, partition);
            others.sms += std::min(tools.sms, partition) - std::min(cap, sh.sms);
          } else {
            others.sms += tools.sms - sh.sms;
          }
          const double slowed =
              gpu::contended(sh, gpu::environment(sh, cap, 1, others, dev, clock)).total_s;
          rate = slowed > 0 ? sh.alone_s / slowed : 1;
          break;
        }
        case kCpuRun:
          rate = 1.0 / cpu_stretch;
          break;
        default:
          break;
      }
      rate_[i] = rate;
      const double need = remaining_[i] / rate;
      if (need < dt) {
        dt = need;
        first = i;
      }
    }
    if (tools.active > 0) {
      // The tools' load on the GPU while they compute, integrated over the burst.
      const double held = confined ? std::min(tools.sms, partition) : tools.sms;
      const double sm = std::min(1.0, held / dev.sms);
      if (!burst_started) burst_.start_ms = t * 1e3;
      burst_started = true;
      burst_.end_ms = (t + dt) * 1e3;
      burst_sm_s += dt * sm;
      burst_bw_s += dt * tools.bw;
      burst_.peak_sm_util = std::max(burst_.peak_sm_util, sm);
    }
    t += dt;
    if constexpr (kTrace) {
      int on_gpu_now = 0;
      for (auto i : active_) on_gpu_now += (phase_[i] != kCpuRun) ? 1 : 0;
      for (auto i : active_) {
        const int others = on_gpu_now - ((phase_[i] != kCpuRun) ? 1 : 0);
        out->tools[i].gpu_corunners = std::max(out->tools[i].gpu_corunners, others);
      }
    }
    // Advance everyone; collect phase completions (the argmin exactly, others within eps).
    std::size_t w = 0;
    for (std::size_t a = 0; a < active_.size(); ++a) {
      const std::size_t i = active_[a];
      remaining_[i] = i == first ? 0.0 : remaining_[i] - rate_[i] * dt;
      if (remaining_[i] <= kDoneEps && phase_[i] == kCompute &&
          segment_[i] + 1 < p.cost(i).segments.size()) {
        // Next GPU segment of the same call (e.g. the decode steps after the prefill).
        ++segment_[i];
        enter(i, kCompute);
      }
      if (remaining_[i] <= kDoneEps) {
        const std::uint8_t next = (phase_[i] == kDownload || phase_[i] == kCpuRun)
                                      ? static_cast<std::uint8_t>(kDone)
                                      : static_cast<std::uint8_t>(phase_[i] + 1);
        enter(i, next);
        if (phase_[i] == kDone) {
          finish(i);
          continue;
        }
      }
      active_[w++] = i;
    }
    active_.resize(w);
    admit();
    if (!kTrace && failed) return Executor::kFailed;
  }
  CORUN_CHECK_MSG(queue_head == queue_.size(), "queued tool never fit: validation missed it");
  if (burst_.any()) {
    const double span_s = (burst_.end_ms - burst_.start_ms) * 1e-3;
    burst_.sm_util = burst_sm_s / span_s;
    burst_.bw_util = burst_bw_s / span_s;
  }

  if constexpr (kTrace) {
    out->makespan_ms = last_end * 1e3;
    out->burst = burst_;
    out->failed = failed;
    for (std::size_t i = 0; i < n; ++i) {
      ToolRun& tr = out->tools[i];
      if (phase_[i] == kWaiting) {
        tr.status = ToolRun::Status::kSkipped;
        tr.failure = "skipped: an upstream tool failed";
      }
    }
  }
  return failed ? Executor::kFailed : last_end;
}

template double Executor::simulate<true>(std::span<const Placement>, const RunOptions&, RunResult*);
template double Executor::simulate<false>(std::span<const Placement>, const RunOptions&,
                                          RunResult*);

}  // namespace corun::mapping
