#include "corun/runtime/transition_ledger.h"

#include <algorithm>
#include <utility>

namespace corun {

TransitionLedger::TransitionLedger(std::size_t models)
    : outage_left_(models, 0.0),
      swap_left_(models, 0.0),
      swap_vram_(models, 0.0),
      swap_gpu_s_(models, 0.0),
      swap_gpu_share_(models, 0.0),
      warmup_left_(models, 0),
      warmup_slowdown_(models, 1.0),
      begins_(models, Actuation::kNone) {}

void TransitionLedger::begin(const JointTransition& t) {
  for (const auto& step : t.steps) {
    if (step.from == kAbsent || step.to == kAbsent) continue;  // arrivals, departures
    if (step.model >= outage_left_.size()) continue;
    const ModelTransition& c = step.change;
    if (c.action < Actuation::kReload) continue;
    const std::size_t m = step.model;
    outage_left_[m] = c.outage_s();
    swap_left_[m] = c.make_before_break ? c.downtime_s : 0;
    swap_vram_[m] = c.vram_old_bytes;
    swap_gpu_s_[m] = c.swap_kernel_s();
    swap_gpu_share_[m] = c.start_gpu_share;
    // A make-before-break swap warms its new copy up before traffic moves to it (Triton's
    // model_warmup, a readiness probe): only a copy that broke first warms up on live requests.
    warmup_left_[m] = c.make_before_break ? 0 : c.warmup_requests;
    warmup_slowdown_[m] = c.warmup_slowdown;
    begins_[m] = c.action;
  }
}

std::vector<TransitionCharge> TransitionLedger::next_window(const JointConfig& config,
                                                            double window_s) {
  std::vector<TransitionCharge> out;
  for (std::size_t m = 0; m < outage_left_.size(); ++m) {
    if (m >= config.size() || config[m] == kAbsent) {
      outage_left_[m] = swap_left_[m] = 0;
      warmup_left_[m] = 0;
      begins_[m] = Actuation::kNone;
      continue;
    }
    if (outage_left_[m] <= 0 && swap_left_[m] <= 0 && warmup_left_[m] <= 0 &&
        begins_[m] == Actuation::kNone) {
      continue;
    }
    TransitionCharge c;
    c.model = m;
    c.begins = std::exchange(begins_[m], Actuation::kNone);
    c.outage_s = std::min(outage_left_[m], window_s);
    if (swap_left_[m] > 0) {
      c.extra_vram_bytes = swap_vram_[m];
      // The new copy's kernels run in the last swap_gpu_s_ seconds of the swap: [R − g, R)
      // from the window's start, with R the swap's seconds left.
      const double r = swap_left_[m];
      c.swap_gpu_s = std::max(0.0, std::min(r, window_s) - std::max(0.0, r - swap_gpu_s_[m]));
      if (c.swap_gpu_s > 0) c.swap_gpu_share = swap_gpu_share_[m];
    }
    // Warm-up follows the outage (or the swap, whose new copy then takes the traffic).
    if (outage_left_[m] < window_s && swap_left_[m] < window_s) {
      c.warmup_requests = warmup_left_[m];
      c.warmup_slowdown = warmup_slowdown_[m];
      warmup_left_[m] = 0;
    }
    outage_left_[m] = std::max(0.0, outage_left_[m] - window_s);
    swap_left_[m] = std::max(0.0, swap_left_[m] - window_s);
    out.push_back(c);
  }
  return out;
}

bool TransitionLedger::idle() const {
  for (std::size_t m = 0; m < outage_left_.size(); ++m) {
    if (outage_left_[m] > 0 || swap_left_[m] > 0 || warmup_left_[m] > 0) return false;
  }
  return true;
}

}  // namespace corun
