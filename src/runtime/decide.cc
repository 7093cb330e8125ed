// The online controller's decisions: one prelude to every search, the search, admission around
// it, and what-ifs.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "controller_state.h"
#include "corun/core/check.h"
#include "corun/core/context.h"
#include "corun/plan/objective.h"
#include "corun/runtime/controller.h"
#include "corun/runtime/corrected_predictor.h"

namespace corun {

using detail::names_of;
using detail::sla_targets;

void Controller::ensure_learners_locked(const Workload& w, const ErrorPriors& priors,
                                        ModelStates& learners) {
  for (std::size_t m = 0; m < w.models.size() && m < learners.size(); ++m) {
    ModelState& l = *learners[m];
    if (l.ready) continue;
    for (Target t : surrogate::kAllTargets) {
      const std::size_t k = static_cast<std::size_t>(t);
      l.target[k] =
          TargetLearner(m < priors.size() ? priors[m][k] : ErrorPrior{}, options_.learning);
    }
    l.ready = true;
  }
}

double Controller::others_load_locked(std::size_t m, const JointConfig& config) const {
  double u = 0;
  for (std::size_t j = 0; j < config.size() && j < loads_.size(); ++j) {
    if (j == m || config[j] == kAbsent) continue;
    const auto l = static_cast<std::size_t>(config[j]);
    if (l < loads_[j].size()) u += loads_[j][l];
  }
  return u;
}

std::shared_ptr<const CorrectionTable> Controller::corrections_locked(
    const Workload& w, const ModelStates& learners, const std::vector<double>& static_margins,
    LoadTable loads, bool explore) const {
  auto t = std::make_shared<CorrectionTable>();
  const std::size_t n = w.models.size();
  t->at.resize(n);
  t->margins.resize(n);
  t->slope.assign(n, {});
  t->slope_var.assign(n, {});
  t->z.assign(n, {});
  t->load_now.assign(n, 0.0f);
  loads.resize(n);
  for (std::size_t m = 0; m < n; ++m) loads[m].resize(w.models[m].local_config_count(), 0.0f);
  t->loads = std::move(loads);
  // The co-runners' load each model sees in the plan in force (where the learners were taught).
  const bool same = plan_ && plan_names_ == names_of(w);
  for (std::size_t m = 0; m < n; ++m) {
    if (!same) continue;
    float u = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if (j != m && w.models[j].active) u += t->load(j, plan_->config[j]);
    }
    t->load_now[m] = u;
  }
  for (std::size_t m = 0; m < n; ++m) {
    const std::size_t count = w.models[m].local_config_count();
    t->at[m].assign(count, {});
    const ModelState& l = *learners[m];
    if (!options_.learning.enabled || !l.ready) {
      const double margin =
          std::clamp((m < static_margins.size() ? static_margins[m] : 0.0) + l.boost, 0.0,
                     options_.max_margin);
      t->margins[m].assign(count, Margin::uniform(margin));
      continue;
    }
    const double u = t->load_now[m];
    for (Target target : surrogate::kAllTargets) {
      const std::size_t k = static_cast<std::size_t>(target);
      const TargetLearner& tl = l.target[k];
      // Nothing measured yet: there is no load to extrapolate from.
      const bool taught = tl.observations() > 0;
      t->slope[m][k] = taught ? static_cast<float>(tl.slope()) : 0.0f;
      t->slope_var[m][k] = taught ? static_cast<float>(tl.slope_var()) : 0.0f;
      t->z[m][k] = static_cast<float>(tl.z());
    }
    t->margins[m].resize(count);
    for (std::size_t c = 0; c < count; ++c) {
      const auto li = static_cast<std::int32_t>(c);
      for (Target target : surrogate::kAllTargets) {
        const std::size_t k = static_cast<std::size_t>(target);
        const LogPrediction p = l.target[k].predict(li, u);
        double mean = p.mean;
        if (explore && target == Target::kThroughput && !w.models[m].sla.min_throughput) {
          // Optimism in the face of uncertainty (UCB), for the objective only: a configuration
          // whose throughput is not known yet is ranked as if it were explore_sd sds better,
          // so that a predictor that underrates it is found out by trying it. Latencies (the
          // SLAs) stay at their upper bounds, and a throughput floor (min_throughput) is not
          // relaxed.
          const double unknown = std::max(0.0, p.var - l.target[k].noise_var());
          mean += options_.learning.explore_sd * std::sqrt(unknown);
        }
        t->at[m][c][k] = {static_cast<float>(mean), static_cast<float>(p.var)};
      }
      Margin& g = t->margins[m][c];
      g.latency = l.target[static_cast<std::size_t>(Target::kLatencyP95)].margin(li, u);
      g.ttft = l.target[static_cast<std::size_t>(Target::kTtftP95)].margin(li, u);
      g.tpot = l.target[static_cast<std::size_t>(Target::kTpotP95)].margin(li, u);
    }
  }
  return t;
}

double Controller::planned_log_bound_locked(std::size_t m, std::int32_t l, Target t) const {
  const TargetLearner& tl = model_state_[m]->target[static_cast<std::size_t>(t)];
  const LogPrediction p = tl.predict(l, plan_ ? others_load_locked(m, plan_->config) : 0.0);
  return p.mean + tl.z() * std::sqrt(p.var);
}

Result<std::optional<Decision>> Controller::replan(const std::string& reason) {
  MutexLock planning(planner_mutex_);
  Workload w;
  std::uint64_t generation = 0;
  JointConfig warm;
  std::int64_t id = 1;
  {
    MutexLock lock(mutex_);
    w = workload_;
    generation = generation_;
    if (plan_ && plan_names_ == names_of(w)) warm = plan_->config;
    id = decisions_ + 1;
    pricing_ = pricing_locked(w, warm, reason);
  }
  const std::size_t n = w.models.size();
  // The source may measure first (standalone re-profiling of a changed demand on a real
  // testbed takes seconds): that time is reported apart from the search's.
  const auto start = std::chrono::steady_clock::now();
  double measure_ms = 0;
  double hook_ms = 0;  // options_.on_decision is not timed
  auto first = attempt(w, generation, warm, id, reason, &measure_ms, &hook_ms);
  if (!first) return first.error();
  if (!*first) return std::optional<Decision>();
  std::optional<Attempt> chosen = std::move(**first);
  // Admission also holds models whose share ceiling is below 1 to it when the search held them.
  std::vector<bool> probed;
  if (options_.admission.enabled) {
    std::vector<AdmissionState> states;
    {
      MutexLock lock(mutex_);
      if (generation != generation_) return std::optional<Decision>();
      for (std::size_t m = 0; m < n && m < model_state_.size(); ++m) {
        states.push_back(model_state_[m]->admission);
      }
    }
    // Without optimism: whether an admitted share keeps up is decided on its prediction.
    // Called by admit() within this scope: planner_mutex_ is held.
    const AdmissionSearch search = [&](const Workload& candidate,
                                       const JointConfig& from) CORUN_NO_THREAD_SAFETY_ANALYSIS {
      return attempt(candidate, generation, from, id, reason, &measure_ms, nullptr, false);
    };
    auto admitted = admit(w, std::move(*chosen), states, options_.admission, search);
    if (!admitted) return admitted.error();
    if (!*admitted) return std::optional<Decision>();
    chosen = std::move((*admitted)->chosen);
    probed = std::move((*admitted)->probed);
  }
  Decision& d = chosen->decision;
  d.decision_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() -
      hook_ms - measure_ms;
  d.measure_ms = measure_ms;

  if (!pricing_.from.empty()) {
    d.transition = joint_transition(ActuationTable::builtin(), w, pricing_.from, d.config);
  }
  pricing_ = {};

  MutexLock lock(mutex_);
  if (generation != generation_) return std::optional<Decision>();
  decisions_ = id;
  d.decision = id;
  const bool unchanged = plan_ && plan_names_ == names_of(w) && plan_->config == d.config &&
                         plan_->admitted == d.admitted;
  d.id = unchanged ? last_id_ : last_id_ + 1;
  for (const auto& step : d.transition.steps) {
    if (step.change.action >= Actuation::kReload && step.model < model_state_.size()) {
      model_state_[step.model]->changed_at_s = now_s_;
    }
  }
  for (std::size_t m = 0; m < n && m < model_state_.size(); ++m) {
    model_state_[m]->admission.decided(m < d.admitted.size() ? d.admitted[m] : 1.0,
                                       m < probed.size() && probed[m]);
  }
  plan_ = std::make_shared<const Decision>(d);
  last_id_ = d.id;
  plan_names_ = names_of(w);
  loads_ = chosen->table->loads;
  due_ = false;
  due_reason_.clear();
  planned_log_bound_.assign(n * kTargetCount, NAN);
  if (options_.learning.enabled) {
    for (std::size_t m = 0; m < n; ++m) {
      if (d.config[m] == kAbsent) continue;
      for (Target t : sla_targets(w.models[m])) {
        planned_log_bound_[m * kTargetCount + static_cast<std::size_t>(t)] =
            planned_log_bound_locked(m, d.config[m], t);
      }
    }
  }
  return std::optional<Decision>(std::move(d));
}

Result<std::optional<Controller::Prepared>> Controller::prepare(const Workload& w, bool own,
                                                                const std::uint64_t* generation,
                                                                bool explore, double* measure_ms) {
  const auto measure_start = std::chrono::steady_clock::now();
  auto base = source_->predictor_under(w, gpu_load());
  if (!base) return base.error().wrap("predicting for the workload");
  const ErrorPriors priors = source_->priors(w);
  const std::vector<double> static_margins = source_->margins(w);
  LoadTable loads = source_->loads(w);
  if (measure_ms) {
    *measure_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - measure_start)
            .count();
  }
  Prepared p;
  p.base = std::shared_ptr<Predictor>(std::move(*base));
  MutexLock lock(mutex_);
  if (generation && *generation != generation_) return std::optional<Prepared>();
  if (own) {
    ensure_learners_locked(w, priors, model_state_);
    p.table = corrections_locked(w, model_state_, static_margins, std::move(loads), explore);
    return std::optional<Prepared>(std::move(p));
  }
  // Copies of what was learned of the models `w` shares with the workload: priors may be
  // applied to them (ensure_learners_locked) without touching the controller's own.
  ModelStates learners;
  for (const auto& m : w.models) {
    const std::string key = model_key(m);
    std::unique_ptr<ModelState> l;
    for (std::size_t i = 0; i < workload_.models.size() && i < model_state_.size(); ++i) {
      if (workload_.models[i].name == m.name && model_state_[i] && model_state_[i]->key == key) {
        l = std::make_unique<ModelState>(*model_state_[i]);
        break;
      }
    }
    if (!l) {
      l = std::make_unique<ModelState>();
      l->key = key;
    }
    learners.push_back(std::move(l));
  }
  ensure_learners_locked(w, priors, learners);
  p.table = corrections_locked(w, learners, static_margins, std::move(loads), explore);
  return std::optional<Prepared>(std::move(p));
}

Result<std::optional<Controller::Attempt>> Controller::attempt(
    const Workload& w, std::uint64_t generation, const JointConfig& warm, std::int64_t id,
    const std::string& reason, double* measure_ms, double* hook_ms, bool explore) {
  auto p = prepare(w, /*own=*/true, &generation, explore, measure_ms);
  if (!p) return p.error();
  if (!*p) return std::optional<Attempt>();
  Attempt a;
  a.table = (*p)->table;
  auto searched = search(w, (*p)->base, a.table, warm, id, reason, hook_ms, true);
  if (!searched) return searched.error();
  a.decision = std::move(*searched);
  return std::optional<Attempt>(std::move(a));
}

Result<Decision> Controller::search(const Workload& w, const std::shared_ptr<Predictor>& base,
                                    const std::shared_ptr<const CorrectionTable>& table,
                                    const JointConfig& warm, std::int64_t id,
                                    const std::string& reason, double* hook_ms, bool priced) {
  const std::size_t n = w.models.size();
  const std::unique_ptr<Predictor> predictor = make_corrected(base, table);
  std::vector<bool> active(n);
  for (std::size_t m = 0; m < n; ++m) active[m] = w.models[m].active;
  // Transition costs, dwell and hysteresis (TransitionOptions), from the plan in force.
  MarginTable margins = table->margins;
  std::vector<std::vector<double>> cost;
  std::vector<std::vector<bool>> allowed;
  std::vector<std::vector<double>> scale;
  if (priced) price_transitions(w, *predictor, active, margins, cost, allowed, scale);
  PlanProblem problem(w, active, *predictor, std::move(margins));
  if (!cost.empty()) {
    problem.set_transitions(std::move(cost), std::move(allowed), std::move(scale));
  }
  SolverOptions so;
  if (warm.size() == n) so.warm_start = warm;
  auto solved =
      solve_degrading(ctx_.derived({static_cast<std::uint64_t>(id)}), problem, *solver_, so);
  if (!solved) return solved.error().wrap("planning");
  if (hook_ms != nullptr && options_.on_decision) {
    const auto hook_start = std::chrono::steady_clock::now();
    options_.on_decision(problem, solved->result);
    *hook_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - hook_start)
            .count();
  }
  Decision d;
  d.id = id;
  d.reason = reason;
  d.source = source_->describe();
  d.config = solved->result.config;
  d.config.resize(n, kAbsent);
  d.predicted = solved->result.predicted;
  d.predicted.resize(n);
  d.base.resize(n);
  d.margins.resize(n);
  for (std::size_t m = 0; m < n; ++m) {
    if (!active[m]) d.config[m] = kAbsent;
    const std::int32_t l = d.config[m];
    if (l == kAbsent) {
      d.predicted[m] = Predicted{};
      continue;
    }
    // The margin the configuration is judged by, without the hysteresis band of a change.
    d.margins[m] = table->margins[m][static_cast<std::size_t>(l)];
  }
  // The source's own predictions of the plan (the learners learn log(measured / base)), and the
  // corrections at the plan's own loads without any extrapolation charge.
  {
    std::vector<Predicted> base_out(n);
    base->predict(d.config, 1, base_out);
    for (std::size_t m = 0; m < n; ++m) {
      if (d.config[m] == kAbsent) continue;
      d.base[m] = base_out[m];
    }
  }
  d.predicted_utility = solved->result.utility;
  if (!problem.transition_costs().empty()) {
    for (std::size_t m = 0; m < n; ++m) {
      if (d.config[m] != kAbsent) d.transition_cost += problem.transition_cost(m, d.config[m]);
    }
    d.predicted_utility += d.transition_cost;  // gross: the costs are reported apart
    d.horizon_s = pricing_.horizon_s;
  }
  d.feasible = solved->result.feasible && solved->why.empty();
  d.infeasible = solved->why;
  d.best_effort = solved->best_effort;
  d.stats = solved->result.stats;
  return d;
}

Result<Decision> Controller::plan_for(const Workload& w, const std::string& reason) {
  MutexLock planning(planner_mutex_);
  const auto start = std::chrono::steady_clock::now();
  JointConfig warm;
  std::int64_t id = 1;
  // The admission state of the models `w` shares with the workload (by name and catalog key):
  // a what-if admits what the next decision would.
  std::vector<AdmissionState> states(w.models.size());
  {
    MutexLock lock(mutex_);
    // Warm start from the plan in force, its models first in the same order (a new one last).
    if (plan_ && plan_names_ == names_of(workload_)) {
      const auto names = names_of(w);
      if (names.size() >= plan_names_.size() &&
          std::equal(plan_names_.begin(), plan_names_.end(), names.begin())) {
        warm = plan_->config;
        warm.resize(names.size(), 0);
      }
    }
    id = last_id_ + 1;
    for (std::size_t m = 0; m < w.models.size(); ++m) {
      const std::string key = model_key(w.models[m]);
      for (std::size_t i = 0; i < workload_.models.size() && i < model_state_.size(); ++i) {
        if (workload_.models[i].name == w.models[m].name && model_state_[i]->key == key) {
          states[m] = model_state_[i]->admission;
          break;
        }
      }
    }
  }
  // Called within this scope only: planner_mutex_ is held.
  auto search_for = [&](const Workload& x, const JointConfig& from, bool explore)
                        CORUN_NO_THREAD_SAFETY_ANALYSIS -> Result<std::optional<Attempt>> {
    auto p = prepare(x, /*own=*/false, /*generation=*/nullptr, explore, nullptr);
    if (!p) return p.error();
    Attempt a;
    a.table = (*p)->table;
    auto d = search(x, (*p)->base, a.table, from, id, reason, /*hook_ms=*/nullptr,
                    /*priced=*/false);
    if (!d) return d.error();
    a.decision = std::move(*d);
    return std::optional<Attempt>(std::move(a));
  };
  auto first = search_for(w, warm, /*explore=*/true);
  if (!first) return first.error();
  Attempt chosen = std::move(**first);
  if (options_.admission.enabled) {
    const AdmissionSearch search_admitted =
        [&](const Workload& x, const JointConfig& from)
            CORUN_NO_THREAD_SAFETY_ANALYSIS { return search_for(x, from, /*explore=*/false); };
    auto admitted = admit(w, std::move(chosen), states, options_.admission, search_admitted);
    if (!admitted) return admitted.error();
    // search_for never drops a search: nothing here is published.
    CORUN_CHECK(admitted->has_value());
    chosen = std::move((*admitted)->chosen);
  }
  Decision d = std::move(chosen.decision);
  d.decision_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return d;
}

Result<Controller::WhatIf> Controller::what_if(const JointConfig& config) {
  MutexLock planning(planner_mutex_);
  const Workload w = workload();
  const std::size_t n = w.models.size();
  if (config.size() != n) {
    return Error("a configuration of " + std::to_string(config.size()) + " models for " +
                 std::to_string(n));
  }
  auto p = prepare(w, /*own=*/true, /*generation=*/nullptr, /*explore=*/true, nullptr);
  if (!p) return p.error();
  const std::shared_ptr<const CorrectionTable> table = (*p)->table;
  const std::shared_ptr<Predictor> base_predictor = (*p)->base;
  const auto predictor = make_corrected(base_predictor, table);
  std::vector<bool> active(n);
  for (std::size_t m = 0; m < n; ++m) active[m] = config[m] != kAbsent;
  const PlanProblem problem(w, active, *predictor, table->margins);
  WhatIf out;
  out.predicted.resize(n);
  predictor->predict(config, 1, out.predicted);
  const auto score = problem.score(config, out.predicted);
  out.utility = score.utility;
  out.feasible = score.feasible();
  out.margins.resize(n);
  out.excess.assign(n, 0.0);
  for (std::size_t m = 0; m < n; ++m) {
    if (config[m] == kAbsent) continue;
    out.margins[m] = problem.margin(m, config[m]);
    out.excess[m] = problem.excess(m, config[m], out.predicted[m]);
  }
  return out;
}

}  // namespace corun
