// What the online controller learns from each window it observes.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "controller_state.h"
#include "corun/core/check.h"
#include "corun/plan/objective.h"
#include "corun/runtime/controller.h"
#include "corun/runtime/corrected_predictor.h"

namespace corun {

using detail::kErrorAverageWeight;
using detail::kRecentWindows;
using detail::names_of;
using detail::primary_target;
using detail::sla_targets;

void Controller::learn_locked(std::size_t m, const LearningSample& s) {
  ModelState& l = *model_state_[m];
  ++l.observations;
  if (s.breach) ++l.breaches;
  if (options_.learning.enabled) {
    if (l.ready) {
      // Idempotent: live, the event already reopened them; in a replay, this is where it did.
      if (s.reopen) {
        for (auto& target : l.target) target.reopen();
      }
      for (Target t : surrogate::kAllTargets) {
        const double y = s.log_ratio[static_cast<std::size_t>(t)];
        if (std::isfinite(y)) {
          l.target[static_cast<std::size_t>(t)].observe(s.local, s.others_load, y, true, s.hint);
        }
      }
    }
  } else if (s.breach) {
    l.boost = std::min(options_.max_margin,
                       std::max(l.boost + options_.breach_margin_step,
                                s.under_prediction - 1 + options_.breach_margin_step));
  }
  if (std::isfinite(s.error)) {
    l.last_error = s.error;
    l.abs_error += kErrorAverageWeight * (std::abs(s.error) - l.abs_error);
  }
  if (s.share > 0 && s.share < 1 && std::isfinite(s.others_load)) {
    l.admission.remember({s.local, s.share, s.others_load, as_predicted(s.measured)},
                         options_.admission);
  }
}

/// Which models changed in a window, and which way: several together is a change of the GPU
/// (everyone's shared error moves), one alone a change of its configuration.
struct Controller::WindowChanges {
  std::vector<int> changed;  // per model: +1 slower, -1 faster than its learned error, 0 same
  int up = 0, down = 0, reporting = 0;
  int down_whole = 0, reporting_whole = 0;  // of them, models that run all of their demand
  // A model's first window has no shared error to tell its configuration's apart from.
  std::vector<bool> first_window;

  [[nodiscard]] TargetLearner::ChangeHint hint_for(std::size_t m) const {
    using Hint = TargetLearner::ChangeHint;
    if (changed[m] == 0 || reporting < 2 || first_window[m]) return Hint::kUnknown;
    const int together = changed[m] > 0 ? up : down;
    return together >= 2 && 2 * together >= reporting ? Hint::kShared : Hint::kConfig;
  }
};

Controller::WindowChanges Controller::window_changes_locked(std::span<const ModelObservation> obs,
                                                            const Decision& d) const {
  const std::size_t n = workload_.models.size();
  WindowChanges c;
  c.changed.assign(n, 0);
  if (options_.learning.enabled) {
    for (const ModelObservation& o : obs) {
      if (o.model >= n || d.config[o.model] == kAbsent || o.local != d.config[o.model]) continue;
      const ModelState& l = *model_state_[o.model];
      if (!l.ready) continue;
      ++c.reporting;
      const double u =
          std::isfinite(o.others_load) ? o.others_load : others_load_locked(o.model, d.config);
      for (Target t : sla_targets(workload_.models[o.model])) {
        const std::size_t k = static_cast<std::size_t>(t);
        const double y = log_ratio(o.measured[k], field(d.base[o.model], t));
        if (!l.target[k].is_change(o.local, u, y)) continue;
        c.changed[o.model] = y > l.target[k].predict(o.local, u).mean ? 1 : -1;
        break;
      }
      if (c.changed[o.model] > 0) ++c.up;
      if (c.changed[o.model] < 0) ++c.down;
      // The evidence that the GPU became faster comes from models served whole: a shed model
      // runs near its capacity, where a window's latency swings without any change of the GPU.
      if (o.model < d.admitted.size() && d.admitted[o.model] < 1) continue;
      ++c.reporting_whole;
      if (c.changed[o.model] < 0) ++c.down_whole;
    }
  }
  c.first_window.assign(n, false);
  for (std::size_t m = 0; m < n; ++m) {
    const TargetLearner& t =
        model_state_[m]->target[static_cast<std::size_t>(primary_target(workload_.models[m]))];
    c.first_window[m] = t.observations() == 0;
  }
  return c;
}

LearningSample Controller::sample_locked(const ModelObservation& o, const Decision& d,
                                         const WindowChanges& changes) {
  const std::size_t m = o.model;
  const ModelSpec& spec = workload_.models[m];
  LearningSample s;
  s.model = spec.name;
  s.model_key = model_state_[m]->key;
  s.local = o.local;
  s.others_load = std::isfinite(o.others_load) ? o.others_load : others_load_locked(m, d.config);
  s.hint = changes.hint_for(m);
  s.reopen = std::exchange(model_state_[m]->reopened, false);
  s.breach = measured_breach(spec, o);
  s.share = m < d.admitted.size() ? d.admitted[m] : 1.0;
  s.measured = o.measured;
  for (Target t : surrogate::kAllTargets) {
    const std::size_t k = static_cast<std::size_t>(t);
    s.log_ratio[k] = log_ratio(o.measured[k], field(d.base[m], t));
  }
  if (m < d.admitted.size() && d.admitted[m] < 1 &&
      overloaded(spec, d.admitted[m], o, options_.admission)) {
    // An admitted share its model could not keep up with: the queue grew through the window
    // and its latencies with it. That says the share was too large, not how wrong the
    // steady-state prediction is: learning it would inflate every later prediction.
    for (Target t : sla_targets(spec)) s.log_ratio[static_cast<std::size_t>(t)] = NAN;
  }
  for (Target t : sla_targets(spec)) {
    const double v = o.measured[static_cast<std::size_t>(t)];
    const float p = field(d.predicted[m], t);
    if (std::isfinite(v) && usable_prediction(p)) {
      s.under_prediction = std::max(s.under_prediction, v / p);
    }
  }
  const Target pt = primary_target(spec);
  const double v = o.measured[static_cast<std::size_t>(pt)];
  const float p = field(d.predicted[m], pt);
  if (std::isfinite(v) && usable_prediction(p)) s.error = v / p - 1;
  return s;
}

void Controller::probe_paused_when_gpu_faster_locked(const Decision& d,
                                                     const WindowChanges& changes,
                                                     ObservationResult& r) {
  const std::size_t n = workload_.models.size();
  // The GPU became faster for most models at once (a co-tenant left, a power cap was lifted):
  // the ceilings breaches left on shed models were measured on a slower GPU, and a paused model
  // — never measured, so never corrected — may fit now. As a circuit breaker's half-open state,
  // each paused model runs one probe window at the smallest share; what it measures decides.
  if (!options_.learning.enabled || changes.down_whole < 2 ||
      2 * changes.down_whole < changes.reporting_whole || d.admitted.size() != n) {
    return;
  }
  for (std::size_t m = 0; m < n; ++m) {
    if (d.admitted[m] >= 1 || !workload_.models[m].active) continue;
    model_state_[m]->admission.gpu_faster();
    if (!r.replan) {
      r.replan = true;
      r.reason = "faster GPU";
    }
  }
}

void Controller::probe_paused_after_wait_locked(const Decision& d, ObservationResult& r) {
  const std::size_t n = workload_.models.size();
  // A paused model is never measured, so what paused it is never corrected: once it has waited
  // its probe wait (AdmissionOptions::probe_after_s, doubled by each probe that failed), it
  // runs one probe window at the smallest share, as a circuit breaker's half-open timeout. Only
  // learning lets what the probe measures change what runs next.
  if (!options_.learning.enabled || d.admitted.size() != n) return;
  for (std::size_t m = 0; m < n; ++m) {
    if (d.admitted[m] > 0 || !workload_.models[m].active) continue;
    if (model_state_[m]->admission.paused_at(now_s_, options_.admission) && !r.replan) {
      r.replan = true;
      r.reason = "probe " + workload_.models[m].name;
    }
  }
}

bool Controller::learning_moved_a_bound_locked(const Decision& d) const {
  const std::size_t n = workload_.models.size();
  const double step = std::log1p(options_.learning.replan_bound_change);
  for (std::size_t m = 0; m < n; ++m) {
    // Models run best effort count too: what was learned may make their SLA holdable again.
    if (d.config[m] == kAbsent || !model_state_[m]->ready) continue;
    for (Target t : sla_targets(workload_.models[m])) {
      const double before = planned_log_bound_[m * kTargetCount + static_cast<std::size_t>(t)];
      if (!std::isfinite(before)) continue;
      if (std::abs(planned_log_bound_locked(m, d.config[m], t) - before) > step) return true;
    }
  }
  return false;
}

ObservationResult Controller::observe(std::span<const ModelObservation> obs, std::int64_t plan_id,
                                      std::vector<LearningSample>* samples) {
  MutexLock lock(mutex_);
  ObservationResult r;
  const std::size_t n = workload_.models.size();
  r.breach.assign(n, false);
  if (!plan_ || plan_id != plan_->id || plan_names_ != names_of(workload_)) {
    r.stale = obs.size();
    return r;
  }
  const Decision& d = *plan_;
  std::vector<ModelObservation> window;
  const WindowChanges changes = window_changes_locked(obs, d);
  for (const ModelObservation& o : obs) {
    if (o.model >= n || d.config[o.model] == kAbsent || o.local != d.config[o.model]) {
      ++r.stale;
      continue;
    }
    const std::size_t m = o.model;
    const ModelSpec& spec = workload_.models[m];
    const LearningSample s = sample_locked(o, d, changes);
    learn_locked(m, s);
    if (m < d.admitted.size() && d.admitted[m] > 0 && d.admitted[m] < 1) {
      const bool failed_test =
          m < d.margins.size() && sla_excess(spec, as_predicted(o.measured), d.margins[m]) > 0;
      const bool probe = model_state_[m]->admission.measured(d.admitted[m], s.breach, failed_test,
                                                             options_.admission);
      if (probe && !r.replan) {
        // One window: what it measured decides what runs next.
        r.replan = true;
        r.reason = "probe " + spec.name;
      }
    }
    if (samples) samples->push_back(s);
    window.push_back(o);
    window.back().others_load = s.others_load;
    ++r.learned;
    r.breach[m] = s.breach;
    const bool known = m < d.best_effort.size() && d.best_effort[m];
    if (s.breach && !known && !r.replan) {
      r.replan = true;
      r.reason = "breach " + spec.name;
    }
  }
  probe_paused_when_gpu_faster_locked(d, changes, r);
  probe_paused_after_wait_locked(d, r);
  if (!window.empty()) {
    recent_->windows.emplace_back(d.config, std::move(window));
    if (recent_->windows.size() > kRecentWindows) recent_->windows.pop_front();
  }
  if (options_.learning.enabled && !r.replan && planned_log_bound_.size() == n * kTargetCount &&
      learning_moved_a_bound_locked(d)) {
    r.replan = true;
    r.reason = "learning";
  }
  if (r.replan) {
    due_ = true;
    due_reason_ = r.reason;
  }
  return r;
}

Status Controller::replay(std::span<const LearningSample> samples) {
  MutexLock planning(planner_mutex_);
  Workload w = workload();
  if (!w.models.empty()) {
    auto base = source_->predictor_for(w);
    if (!base) return base.error().wrap("replaying learning samples");
  }
  const ErrorPriors priors = source_->priors(w);
  MutexLock lock(mutex_);
  ensure_learners_locked(workload_, priors, model_state_);
  for (const LearningSample& s : samples) {
    for (std::size_t m = 0; m < workload_.models.size(); ++m) {
      if (workload_.models[m].name == s.model && model_state_[m]->key == s.model_key) {
        learn_locked(m, s);
        break;
      }
    }
  }
  return {};
}

Status Controller::adopt(surrogate::Surrogate refit) {
  MutexLock planning(planner_mutex_);
  if (auto st = source_->adopt(std::move(refit)); !st.ok()) return st;
  Workload w = workload();
  auto base = source_->predictor_under(w, gpu_load());
  if (!base) return base.error().wrap("re-basing on the refit surrogate");
  const ErrorPriors priors = source_->priors(w);
  MutexLock lock(mutex_);
  ++generation_;
  due_ = true;
  due_reason_ = "refit";
  if (!options_.learning.enabled) return {};
  // The learners corrected the old surrogate: restart them from the new one's priors, keeping
  // the conformal level and the noise they measured, and replay the recent windows of this
  // workload against it.
  for (std::size_t m = 0; m < model_state_.size(); ++m) {
    ModelState& l = *model_state_[m];
    if (!l.ready) continue;
    for (std::size_t k = 0; k < kTargetCount; ++k) {
      l.target[k].restart(m < priors.size() ? priors[m][k] : ErrorPrior{});
    }
  }
  const std::size_t n = w.models.size();
  std::vector<Predicted> pred(n);
  for (const auto& [config, window] : recent_->windows) {
    if (config.size() != n) continue;
    (*base)->predict(config, 1, pred);
    for (const ModelObservation& o : window) {
      if (o.model >= n || !model_state_[o.model]->ready) continue;
      for (Target t : surrogate::kAllTargets) {
        const std::size_t k = static_cast<std::size_t>(t);
        const double y = log_ratio(o.measured[k], field(pred[o.model], t));
        if (std::isfinite(y)) {
          model_state_[o.model]->target[k].observe(o.local, o.others_load, y, false);
        }
      }
    }
  }
  return {};
}

std::vector<ModelLearningState> Controller::learning_state() const {
  MutexLock lock(mutex_);
  std::vector<ModelLearningState> out(workload_.models.size());
  for (std::size_t m = 0; m < out.size(); ++m) {
    const ModelState& l = *model_state_[m];
    ModelLearningState& s = out[m];
    s.last_error = l.last_error;
    s.abs_error = l.abs_error;
    s.observations = l.observations;
    s.breaches = l.breaches;
    if (plan_ && m < plan_->margins.size() && plan_names_ == names_of(workload_)) {
      // The margins of the metrics its SLA constrains (the others are not planned with).
      for (Target t : sla_targets(workload_.models[m])) {
        const Margin& g = plan_->margins[m];
        s.margin = std::max(s.margin, t == Target::kTtftP95   ? g.ttft
                                      : t == Target::kTpotP95 ? g.tpot
                                                              : g.latency);
      }
    }
    if (l.ready) {
      const TargetLearner& t =
          l.target[static_cast<std::size_t>(primary_target(workload_.models[m]))];
      s.z = t.z();
      s.noise_sd = std::sqrt(t.noise_var());
      s.shared_error = t.shared();
      s.misses = t.misses();
    }
  }
  return out;
}

}  // namespace corun
