// How the online controller prices a change of the plan in force (TransitionOptions).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "controller_state.h"
#include "corun/core/check.h"
#include "corun/plan/objective.h"
#include "corun/runtime/controller.h"
#include "corun/runtime/corrected_predictor.h"

namespace corun {

using detail::sla_targets;

namespace {

/// Which models need a change: a measured breach asked for the decision (`breach`: every model
/// may move to stop it), an `active` model arrived, or the plan in force (`now`, absent for
/// inactive models) no longer holds a model's SLA as predicted now. For them the dwell and the
/// hysteresis band do not hold; the cost still does.
std::vector<bool> models_needing_change(const Workload& w, const Predictor& predictor,
                                        const std::vector<bool>& active, const JointConfig& now,
                                        const MarginTable& margins, bool breach) {
  const std::size_t n = w.models.size();
  std::vector<bool> needed(n, breach);
  bool arrival = false;
  for (std::size_t m = 0; m < n; ++m) {
    if (active[m] && now[m] == kAbsent) arrival = true;
  }
  if (arrival) {
    needed.assign(n, true);
    return needed;
  }
  std::vector<Predicted> pred(n);
  predictor.predict(now, 1, pred);
  for (std::size_t m = 0; m < n; ++m) {
    if (now[m] == kAbsent) continue;
    const Margin& g = margins[m][static_cast<std::size_t>(now[m])];
    if (sla_excess(w.models[m], pred[m], g) > 0) needed[m] = true;
  }
  return needed;
}

/// Whether the plan in force keeps every SLA it holds as predicted while a new copy's start-up
/// kernels keep `share` of the SMs and DRAM bandwidth busy (a make-before-break swap): each
/// model predicted with that load added to its co-runners' aggregate, as the tool-burst guard
/// predicts a burst. Memoised per share (one per stack); holds when the predictor cannot
/// express such a load.
class SwapRisk {
 public:
  SwapRisk(const Workload& w, const Predictor& predictor, const JointConfig& now,
           const MarginTable& margins)
      : w_(w),
        agg_(dynamic_cast<const AggregatePredictor*>(&predictor)),
        now_(now),
        margins_(margins) {}

  bool holds(double share) {
    for (const auto& [s, h] : memo_) {
      if (s == share) return h;
    }
    const bool h = holds_uncached(share);
    memo_.emplace_back(share, h);
    return h;
  }

 private:
  bool holds_uncached(double share) const {
    const std::size_t n = w_.models.size();
    const std::size_t d = agg_ != nullptr ? agg_->aggregate_dims() : 0;
    std::vector<float> load(d, 0.0f), total(d, 0.0f), others(d);
    if (agg_ == nullptr || !agg_->cotenant(share, share, load)) return true;
    std::vector<std::vector<float>> contrib(n);
    for (std::size_t m = 0; m < n; ++m) {
      if (now_[m] == kAbsent) continue;
      contrib[m].assign(d, 0.0f);
      agg_->contribution(m, now_[m], contrib[m]);
      for (std::size_t i = 0; i < d; ++i) total[i] += contrib[m][i];
    }
    for (std::size_t m = 0; m < n; ++m) {
      if (now_[m] == kAbsent) continue;
      const Margin& g = margins_[m][static_cast<std::size_t>(now_[m])];
      for (std::size_t i = 0; i < d; ++i) others[i] = total[i] - contrib[m][i];
      // A model that misses its SLA already loses its windows whether or not a swap runs:
      // only one the swap's load pushes past it counts against the swap.
      if (sla_excess(w_.models[m], agg_->predict_given(m, now_[m], others), g) > 0) continue;
      for (std::size_t i = 0; i < d; ++i) others[i] += load[i];
      if (sla_excess(w_.models[m], agg_->predict_given(m, now_[m], others), g) > 0) return false;
    }
    return true;
  }

  const Workload& w_;
  const AggregatePredictor* agg_;
  const JointConfig& now_;
  const MarginTable& margins_;
  std::vector<std::pair<double, bool>> memo_;
};

}  // namespace

Status check(const TransitionOptions& o) {
  auto bad = [](const char* field, const char* why) {
    return Error(std::string("transitions.") + field + ": " + why, Error::Kind::kInvalidInput);
  };
  if (!(o.horizon_s >= 0 && o.horizon_s <= 1e6)) return bad("horizon_s", "must be in [0, 1e6]");
  if (!(o.default_horizon_s > 0 && o.default_horizon_s <= 1e6)) {
    return bad("default_horizon_s", "must be in (0, 1e6]");
  }
  if (!(o.min_horizon_s > 0 && o.min_horizon_s <= 1e6)) {
    return bad("min_horizon_s", "must be in (0, 1e6]");
  }
  if (!(o.min_dwell_s >= 0 && o.min_dwell_s <= 1e6)) {
    return bad("min_dwell_s", "must be in [0, 1e6]");
  }
  if (!(o.hysteresis_sd >= 0 && o.hysteresis_sd <= 10)) {
    return bad("hysteresis_sd", "must be in [0, 10]");
  }
  if (!(o.window_s > 0 && o.window_s <= 3600)) return bad("window_s", "must be in (0, 3600]");
  return {};
}

double Controller::horizon_locked() const {
  const TransitionOptions& o = options_.transitions;
  if (o.horizon_s > 0) return o.horizon_s;
  // The mean gap between the events seen, the prior counted as one gap before the first.
  double sum = o.default_horizon_s;
  double gaps = 1;
  double last = 0;
  for (double t : event_times_s_) {
    if (t <= 0) continue;  // what was there at the start is not a change
    sum += t - last;
    last = t;
    gaps += 1;
  }
  return std::max(o.min_horizon_s, sum / gaps);
}

Controller::Pricing Controller::pricing_locked(const Workload& w, const JointConfig& from,
                                               const std::string& reason) const {
  Pricing p;
  if (from.size() != w.models.size()) return p;
  p.from = from;  // the transition is reported either way
  if (!options_.transitions.aware) return p;
  p.on = true;
  p.needed = reason.rfind("breach", 0) == 0;
  p.horizon_s = horizon_locked();
  p.dwelling.assign(w.models.size(), false);
  p.band.assign(w.models.size(), 0.0);
  for (std::size_t m = 0; m < w.models.size() && m < model_state_.size(); ++m) {
    const ModelState& l = *model_state_[m];
    p.dwelling[m] = now_s_ - l.changed_at_s < options_.transitions.min_dwell_s;
    // One window's noise of the model's SLA metric in log space, as learned (its prior before).
    double noise_var = 0;
    for (Target t : sla_targets(w.models[m])) {
      noise_var = std::max(noise_var, l.target[static_cast<std::size_t>(t)].noise_var());
    }
    noise_var =
        std::max(noise_var, l.target[static_cast<std::size_t>(Target::kThroughput)].noise_var());
    p.band[m] = std::expm1(options_.transitions.hysteresis_sd * std::sqrt(noise_var));
  }
  return p;
}

void Controller::price_transitions(const Workload& w, const Predictor& predictor,
                                   const std::vector<bool>& active, MarginTable& margins,
                                   std::vector<std::vector<double>>& cost,
                                   std::vector<std::vector<bool>>& allowed,
                                   std::vector<std::vector<double>>& scale) const {
  cost.clear();
  allowed.clear();
  scale.clear();
  if (!pricing_.on) return;
  const std::size_t n = w.models.size();
  const JointConfig& from = pricing_.from;
  const ActuationTable& table = ActuationTable::builtin();
  JointConfig now = from;
  for (std::size_t m = 0; m < n; ++m) {
    if (!active[m]) now[m] = kAbsent;
  }
  const std::vector<bool> needed =
      models_needing_change(w, predictor, active, now, margins, pricing_.needed);
  SwapRisk swap_risk(w, predictor, now, margins);
  double held = 0;     // VRAM of the plan in force
  double serving = 0;  // utility per second of everyone in it, which a swap's kernels slow
  for (std::size_t m = 0; m < n; ++m) {
    if (from[m] == kAbsent) continue;
    const Settings a = w.models[m].settings(static_cast<std::size_t>(from[m]));
    held += model_vram_bytes(w.models[m], a, w.device.vram_bytes());
    if (active[m]) serving += w.models[m].weight * config_quality(w.models[m], a);
  }
  cost.resize(n);
  allowed.resize(n);
  scale.resize(n);
  bool restricted = false;
  for (std::size_t m = 0; m < n; ++m) {
    const ModelSpec& spec = w.models[m];
    const std::size_t count = spec.local_config_count();
    cost[m].assign(count, 0.0);
    allowed[m].assign(count, true);
    scale[m].assign(count, 1.0);
    if (from[m] == kAbsent || !active[m]) continue;
    const Settings a = spec.settings(static_cast<std::size_t>(from[m]));
    // The utility per second the model earns now, which a transition's seconds cost.
    const double value = spec.weight * config_quality(spec, a);
    const double rate = spec.demand.rps > 0 ? spec.demand.rps : spec.demand.fps;
    const double band = m < pricing_.band.size() ? pricing_.band[m] : 0.0;
    for (std::size_t l = 0; l < count; ++l) {
      if (static_cast<std::int32_t>(l) == from[m]) continue;
      ModelTransition t = model_transition(table, w.device, spec, a, spec.settings(l));
      if (t.action <= Actuation::kLive) continue;
      t.make_before_break = held + t.vram_new_bytes <= w.device.vram_bytes();
      // After a break: the model's own seconds without service and of warm-up. Under
      // make-before-break: the share of the GPU its new copy's kernels take from everyone.
      double lost = t.make_before_break ? t.swap_gpu_seconds() * serving : t.downtime_s * value;
      if (t.make_before_break && t.swap_kernel_s() > 0 && !swap_risk.holds(t.start_gpu_share)) {
        // A swap that pushes a model of the plan in force past its SLA loses every window its
        // kernels touch (a window that breaches earns nothing, as the evaluation counts it).
        const double win = options_.transitions.window_s;
        lost = std::max(lost, std::ceil(t.swap_kernel_s() / win) * win * serving);
      }
      if (!t.make_before_break && rate > 0 && t.warmup_slowdown > 1) {
        lost += t.warmup_requests / rate * (1 - 1 / t.warmup_slowdown) * value;
      }
      cost[m][l] = lost / pricing_.horizon_s;
      if (needed[m]) continue;
      // Hysteresis: leaving a configuration that holds for one that must be reloaded or
      // restarted asks the new one to pay even if it does one band of one window's noise
      // worse than predicted (latencies that much higher, throughput that much lower); a
      // bound that moved by less than that is not evidence.
      Margin& g = margins[m][l];
      for (double* k : {&g.latency, &g.ttft, &g.tpot}) *k = (1 + *k) * (1 + band) - 1;
      scale[m][l] = 1 / (1 + band);
      if (pricing_.dwelling[m]) {
        allowed[m][l] = false;
        restricted = true;
      }
    }
  }
  if (!restricted) allowed.clear();
}

}  // namespace corun
