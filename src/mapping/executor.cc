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

RunResult Executor::run(std::span<const Placement> mapping) { return traced(mapping, nullptr); }

RunResult Executor::run(const Context& ctx, std::span<const Placement> mapping) {
  return traced(mapping, &ctx);
}

RunResult Executor::traced(std::span<const Placement> mapping, const Context* noise) {
  CORUN_CHECK_MSG(problem_->validate(mapping).ok(), "Executor::run needs a validated mapping");
  RunResult r;
  simulate<true>(mapping, noise, &r);
  return r;
}

double Executor::makespan_s(std::span<const Placement> mapping) {
  return simulate<false>(mapping, nullptr, nullptr);
}

double Executor::makespan_s(const Context& ctx, std::span<const Placement> mapping) {
  return simulate<false>(mapping, &ctx, nullptr);
}

/// @brief One run of a mapping: the event loop's state between events, over the executor's
/// scratch buffers. With kTrace it also records every tool's trace into `out`.
template <bool kTrace>
class Executor::Simulation {
 public:
  Simulation(Executor& ex, std::span<const Placement> mapping, const Context* noise, RunResult* out)
      : p_(*ex.problem_),
        n_(p_.size()),
        budget_(p_.vram_budget_bytes()),
        dev_(p_.gpu()),
        bg_(p_.background()),
        // The tools' MPS partition (PlacementProblem::set_tool_gpu_share); unconfined at 1.
        confined_(p_.tool_gpu_share() < 1),
        partition_(p_.tool_gpu_share() * dev_.sms),
        bg_cpu_(background_cpu_share(p_)),
        mapping_(mapping),
        noise_(noise),
        out_(out),
        phase_(ex.phase_),
        segment_(ex.segment_),
        pending_(ex.pending_),
        remaining_(ex.remaining_),
        rate_(ex.rate_),
        gpu_factor_(ex.gpu_factor_),
        cpu_factor_(ex.cpu_factor_),
        active_(ex.active_),
        queue_(ex.queue_),
        ready_(ex.ready_),
        burst_(ex.burst_) {}

  /// @brief Runs the event loop to the end; the makespan in seconds, or kFailed.
  double run() {
    reset();
    for (std::size_t i = 0; i < n_; ++i) {
      if (pending_[i] == 0) ready_.push_back(i);
    }
    admit();
    if (!kTrace && failed_) return Executor::kFailed;

    while (!active_.empty()) {
      // Rates of every active phase under the current sharing. The GPU segments computing now
      // are each other's co-runners, next to the background load, on the shared GPU model; the
      // power limiter sees each computing call's mean draw (activity, bandwidth) over its
      // compute step, as the simulator's sees a request's.
      const Sharing s = tally_sharing();
      std::size_t first = active_[0];
      const double dt = set_rates(s, &first);
      if (s.tools.active > 0) record_burst(s.tools, dt);
      t_ += dt;
      if constexpr (kTrace) record_corunners();
      advance(dt, first);
      admit();
      if (!kTrace && failed_) return Executor::kFailed;
    }
    CORUN_CHECK_MSG(queue_head_ == queue_.size(), "queued tool never fit: validation missed it");
    close_burst();
    if constexpr (kTrace) write_trace();
    return failed_ ? Executor::kFailed : last_end_;
  }

 private:
  /// What the active phases share between two events.
  struct Sharing {
    int uploads = 0;
    int downloads = 0;
    gpu::Load tools;  ///< the computing segments' load, paced to the partition
    double cpu_stretch = 1;
    double pace = 1;
    double clock = 1;
  };

  /// @brief The background's share of the host's cores.
  static double background_cpu_share(const PlacementProblem& p) {
    const double cores = std::max(1, p.device().cpu.cores);
    return p.scenario().background.cpu_busy_cores / cores;
  }

  /// @brief The phase after `ph` when `ph` has no work left.
  static std::uint8_t next_phase(std::uint8_t ph) {
    return (ph == kDownload || ph == kCpuRun) ? static_cast<std::uint8_t>(kDone)
                                              : static_cast<std::uint8_t>(ph + 1);
  }

  /// @brief Draws every node's noise and clears the scratch and the trace for a new run.
  void reset() {
    const double sigma = noise_ != nullptr ? p_.scenario().noise : 0.0;
    for (std::size_t i = 0; i < n_; ++i) {
      phase_[i] = kWaiting;
      pending_[i] = static_cast<int>(p_.preds(i).size());
      gpu_factor_[i] =
          sigma > 0 && on_gpu(mapping_[i]) ? noise_factor(noise_->seed, i, 0, sigma) : 1;
      cpu_factor_[i] =
          sigma > 0 && !on_gpu(mapping_[i]) ? noise_factor(noise_->seed, i, 1, sigma) : 1;
    }
    if constexpr (kTrace) {
      out_->tools.assign(n_, ToolRun{});
      for (std::size_t i = 0; i < n_; ++i) out_->tools[i].placement = mapping_[i];
    }
    active_.clear();
    queue_.clear();
    ready_.clear();
    burst_ = BurstLoad{};
  }

  /// @brief Moves node i into its next phase that has work, starting from `from`.
  void enter(std::size_t i, std::uint8_t from) {
    const ToolCost& c = p_.cost(i);
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
      ph = next_phase(ph);
    }
  }

  /// @brief Marks node i done now, frees its VRAM and readies the successors it unblocks.
  void finish(std::size_t i) {
    phase_[i] = kDone;
    if (on_gpu(mapping_[i])) vram_used_ -= p_.cost(i).vram_bytes;
    last_end_ = std::max(last_end_, t_);
    if constexpr (kTrace) {
      out_->tools[i].status = ToolRun::Status::kDone;
      out_->tools[i].end_ms = t_ * 1e3;
    }
    for (auto j : p_.succs(i)) {
      if (--pending_[j] == 0) ready_.push_back(j);
    }
  }

  /// @brief Makes node i active in its first phase with work, or finishes it on the spot.
  void activate(std::size_t i) {
    if (phase_[i] == kDone) {
      finish(i);
    } else {
      active_.push_back(i);
    }
  }

  /// @brief Takes node i's VRAM and starts its GPU path with the upload.
  void start_gpu(std::size_t i) {
    vram_used_ += p_.cost(i).vram_bytes;
    if constexpr (kTrace) {
      ToolRun& tr = out_->tools[i];
      tr.start_ms = t_ * 1e3;
      tr.queue_wait_ms = tr.start_ms - tr.ready_ms;
      tr.vram_pressure = tr.queue_wait_ms > 0 || budget_ - vram_used_ < 0.1 * budget_;
      out_->peak_vram_gb = std::max(out_->peak_vram_gb, vram_used_ / 1e9);
    }
    segment_[i] = 0;
    enter(i, kUpload);
    activate(i);
  }

  /// @brief Starts the queued tools, in FIFO order, while the head fits the free VRAM.
  void dequeue() {
    while (queue_head_ < queue_.size()) {
      const std::size_t i = queue_[queue_head_];
      if (vram_used_ + p_.cost(i).vram_bytes > budget_ * (1 + 1e-12)) break;
      ++queue_head_;
      start_gpu(i);
    }
  }

  /// @brief Fails gpu_now node i, which found too little VRAM free.
  void fail_out_of_vram(std::size_t i) {
    phase_[i] = kFailedPhase;
    failed_ = true;
    if constexpr (kTrace) {
      ToolRun& tr = out_->tools[i];
      tr.status = ToolRun::Status::kFailed;
      tr.start_ms = tr.end_ms = t_ * 1e3;
      tr.failure = "out of VRAM at " + std::to_string(t_ * 1e3) + " ms: needs " +
                   std::to_string(p_.cost(i).vram_bytes / 1e9) + " GB, " +
                   std::to_string((budget_ - vram_used_) / 1e9) + " GB free";
      out_->failures.push_back(p_.id(i) + ": " + tr.failure);
    }
  }

  /// @brief Starts, queues or fails the ready node i as its placement says.
  void admit_one(std::size_t i) {
    if constexpr (kTrace) out_->tools[i].ready_ms = t_ * 1e3;
    switch (mapping_[i]) {
      case Placement::kCpu:
        if constexpr (kTrace) out_->tools[i].start_ms = t_ * 1e3;
        enter(i, kCpuRun);
        activate(i);
        break;
      case Placement::kGpuNow:
        if (vram_used_ + p_.cost(i).vram_bytes > budget_ * (1 + 1e-12)) {
          fail_out_of_vram(i);
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

  /// @brief Handles every node in ready_ (in index order), including ones that become ready
  /// because a zero-work node finished on the spot.
  void admit() {
    for (;;) {
      // Queued tools that fit go first: they have waited longest.
      dequeue();
      if (ready_.empty()) break;
      const auto it = std::min_element(ready_.begin(), ready_.end());
      const std::size_t i = *it;
      ready_.erase(it);
      admit_one(i);
    }
  }

  /// @brief Counts the transfers, sums the computing segments' load and the CPU demand, and
  /// prices the GPU clock they run at.
  Sharing tally_sharing() const {
    Sharing s;
    double cpu_share = bg_cpu_, cpu_bw = 0;
    for (auto i : active_) {
      switch (phase_[i]) {
        case kUpload:
          ++s.uploads;
          break;
        case kDownload:
          ++s.downloads;
          break;
        case kCompute: {
          const gpu::Shape& sh = p_.cost(i).segments[segment_[i]].shape;
          s.tools.active += 1;
          s.tools.sms += sh.sms;
          s.tools.bw += sh.bw_demand;
          s.tools.press += sh.l2_pressure;
          s.tools.activity += p_.cost(i).power_activity;
          s.tools.mem_util += p_.cost(i).bw_demand;
          break;
        }
        case kCpuRun:
          cpu_share += p_.cost(i).cpu_core_share;
          cpu_bw += p_.cost(i).cpu_bw_demand;
          break;
        default:
          break;
      }
    }
    s.cpu_stretch = std::max({1.0, cpu_share, cpu_bw});
    // Tools squeezed into their partition run slower, and draw bandwidth and power at the
    // same reduced pace.
    s.pace = confined_ && s.tools.sms > partition_ ? partition_ / s.tools.sms : 1.0;
    s.tools.bw *= s.pace;
    s.tools.activity *= s.pace;
    s.tools.mem_util *= s.pace;
    s.clock = s.tools.active > 0
                  ? gpu::power_capped_clock(dev_, bg_.activity + s.tools.activity,
                                            bg_.mem_util + s.tools.mem_util * dev_.dram_bytes_s /
                                                               dev_.peak_dram_bytes_s)
                        .ratio
                  : 1.0;
    return s;
  }

  /// @brief The rate of computing node i's current segment next to the other computing
  /// segments and the background.
  double compute_rate(std::size_t i, const Sharing& s) const {
    const gpu::Load& tools = s.tools;
    const gpu::Shape& sh = p_.cost(i).segments[segment_[i]].shape;
    gpu::Load others = bg_;
    others.active += tools.active - 1;
    others.bw += tools.bw - sh.bw_demand * s.pace;
    others.press += tools.press - sh.l2_pressure;
    double cap = dev_.sms;
    if (confined_) {
      // One MPS client of share x SMs for every tool: each gets the partition in
      // proportion to what it asks, and the tools hold at most the partition.
      cap = partition_ * sh.sms / std::max(tools.sms, partition_);
      others.sms += std::min(tools.sms, partition_) - std::min(cap, sh.sms);
    } else {
      others.sms += tools.sms - sh.sms;
    }
    const double slowed =
        gpu::contended(sh, gpu::environment(sh, cap, 1, others, dev_, s.clock)).total_s;
    return slowed > 0 ? sh.alone_s / slowed : 1;
  }

  /// @brief Sets every active phase's rate; the time to the next phase end, whose node goes to
  /// `first`.
  double set_rates(const Sharing& s, std::size_t* first) {
    double dt = std::numeric_limits<double>::infinity();
    for (auto i : active_) {
      double rate = 1;
      switch (phase_[i]) {
        case kUpload:
          rate = 1.0 / s.uploads;
          break;
        case kDownload:
          rate = 1.0 / s.downloads;
          break;
        case kCompute:
          rate = compute_rate(i, s);
          break;
        case kCpuRun:
          rate = 1.0 / s.cpu_stretch;
          break;
        default:
          break;
      }
      rate_[i] = rate;
      const double need = remaining_[i] / rate;
      if (need < dt) {
        dt = need;
        *first = i;
      }
    }
    return dt;
  }

  /// @brief The tools' load on the GPU while they compute, integrated over the burst.
  void record_burst(const gpu::Load& tools, double dt) {
    const double held = confined_ ? std::min(tools.sms, partition_) : tools.sms;
    const double sm = std::min(1.0, held / dev_.sms);
    if (!burst_started_) burst_.start_ms = t_ * 1e3;
    burst_started_ = true;
    burst_.end_ms = (t_ + dt) * 1e3;
    burst_sm_s_ += dt * sm;
    burst_bw_s_ += dt * tools.bw;
    burst_.peak_sm_util = std::max(burst_.peak_sm_util, sm);
  }

  /// @brief Raises each active tool's count of the most others on the GPU at once.
  void record_corunners() {
    int on_gpu_now = 0;
    for (auto i : active_) on_gpu_now += (phase_[i] != kCpuRun) ? 1 : 0;
    for (auto i : active_) {
      const int others = on_gpu_now - ((phase_[i] != kCpuRun) ? 1 : 0);
      out_->tools[i].gpu_corunners = std::max(out_->tools[i].gpu_corunners, others);
    }
  }

  /// @brief Advances everyone by dt; collects phase completions (the argmin `first` exactly,
  /// others within eps) and drops the nodes that finished.
  void advance(double dt, std::size_t first) {
    std::size_t w = 0;
    for (std::size_t a = 0; a < active_.size(); ++a) {
      const std::size_t i = active_[a];
      remaining_[i] = i == first ? 0.0 : remaining_[i] - rate_[i] * dt;
      if (remaining_[i] <= kDoneEps && phase_[i] == kCompute &&
          segment_[i] + 1 < p_.cost(i).segments.size()) {
        // Next GPU segment of the same call (e.g. the decode steps after the prefill).
        ++segment_[i];
        enter(i, kCompute);
      }
      if (remaining_[i] <= kDoneEps) {
        enter(i, next_phase(phase_[i]));
        if (phase_[i] == kDone) {
          finish(i);
          continue;
        }
      }
      active_[w++] = i;
    }
    active_.resize(w);
  }

  /// @brief Turns the burst's integrals into mean utilisations over its span.
  void close_burst() {
    if (burst_.any()) {
      const double span_s = (burst_.end_ms - burst_.start_ms) * 1e-3;
      burst_.sm_util = burst_sm_s_ / span_s;
      burst_.bw_util = burst_bw_s_ / span_s;
    }
  }

  /// @brief Writes the run's totals into the trace and marks the tools that never ran.
  void write_trace() {
    out_->makespan_ms = last_end_ * 1e3;
    out_->burst = burst_;
    out_->failed = failed_;
    for (std::size_t i = 0; i < n_; ++i) {
      ToolRun& tr = out_->tools[i];
      if (phase_[i] == kWaiting) {
        tr.status = ToolRun::Status::kSkipped;
        tr.failure = "skipped: an upstream tool failed";
      }
    }
  }

  const PlacementProblem& p_;
  const std::size_t n_;
  const double budget_;
  const gpu::DeviceModel& dev_;
  const gpu::Load& bg_;
  const bool confined_;
  const double partition_;
  const double bg_cpu_;
  const std::span<const Placement> mapping_;
  const Context* const noise_;  // nullptr: an exact run
  RunResult* const out_;
  // The executor's scratch.
  std::vector<std::uint8_t>& phase_;
  std::vector<std::size_t>& segment_;
  std::vector<int>& pending_;
  std::vector<double>& remaining_;
  std::vector<double>& rate_;
  std::vector<double>& gpu_factor_;
  std::vector<double>& cpu_factor_;
  std::vector<std::size_t>& active_;
  std::vector<std::size_t>& queue_;
  std::vector<std::size_t>& ready_;
  BurstLoad& burst_;
  // The run's state between events.
  std::size_t queue_head_ = 0;
  double vram_used_ = 0;
  double t_ = 0;
  double burst_sm_s_ = 0, burst_bw_s_ = 0;
  bool burst_started_ = false;
  double last_end_ = 0;
  bool failed_ = false;
};

template <bool kTrace>
double Executor::simulate(std::span<const Placement> mapping, const Context* noise,
                          RunResult* out) {
  return Simulation<kTrace>(*this, mapping, noise, out).run();
}

template double Executor::simulate<true>(std::span<const Placement>, const Context*, RunResult*);
template double Executor::simulate<false>(std::span<const Placement>, const Context*, RunResult*);

}  // namespace corun::mapping
