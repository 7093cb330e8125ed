#include "corun/runtime/controller.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <numeric>
#include <utility>

#include "corun/core/check.h"
#include "corun/core/json_number.h"
#include "corun/core/rng.h"
#include "corun/core/strings.h"
#include "corun/plan/objective.h"
#include "corun/runtime/corrected_predictor.h"
#include "shed_evidence.h"

namespace corun {

namespace {

// Admission control's ceiling (AIMD, as TCP's congestion window, halved on a loss): a shed
// model that breaches as measured at share f, or measures there what the planner's own test
// would refuse (the measured value times 1 + its margin above the SLA), admits at most
// kShareBackoff x f from then on, even where a later search would hold all of its demand;
// after kShareCleanWindows windows that held, the ceiling climbs back by kShareStep, up to
// kShareRetry x the smallest share that breached: climbing back to a share that breached would
// breach again. A demand, context or SLA change lifts it. The prediction alone would admit the
// breaching share again: near its capacity a model's latency turns steeply with its own load,
// which corrections learned on the co-runners' load do not capture.
constexpr double kShareBackoff = 0.5;
constexpr double kShareStep = 1.0 / 32;
constexpr int kShareCleanWindows = 3;
constexpr double kShareRetry = 0.9;

// Measured evidence against an admission (detail::refuted): near its capacity a model's latency
// turns too steeply with its own load for a correction learned at one share to carry to
// another, so a shed model's recent windows are checked against each share the search admits.
// The last kShedWindows windows of each model count.
constexpr std::size_t kShedWindows = 16;

// Weight of one observation in the moving average of a model's absolute prediction error.
constexpr double kErrorAverageWeight = 0.1;
// Windows of the current workload kept to re-base the learners on a refit surrogate.
constexpr std::size_t kRecentWindows = 64;

// The SLA latency targets of a model, most binding first by convention (TTFT, then TPOT, then
// request latency).
std::vector<Target> sla_targets(const ModelSpec& m) {
  std::vector<Target> out;
  if (m.arch.family == ModelFamily::kLlm) {
    if (m.sla.ttft_ms_p95) out.push_back(Target::kTtftP95);
    if (m.sla.tpot_ms_p95) out.push_back(Target::kTpotP95);
  }
  if (m.sla.latency_ms_p95) out.push_back(Target::kLatencyP95);
  return out;
}

// The target whose error a model reports: its first SLA latency, else its family's latency.
Target primary_target(const ModelSpec& m) {
  const auto t = sla_targets(m);
  if (!t.empty()) return t.front();
  return m.arch.family == ModelFamily::kLlm ? Target::kTtftP95 : Target::kLatencyP95;
}

}  // namespace

bool measured_breach(const ModelSpec& m, const ModelObservation& o) {
  if (o.failed) return true;
  auto over = [&](const std::optional<double>& limit, Target t) {
    const double v = o.measured[static_cast<std::size_t>(t)];
    return limit && std::isfinite(v) && v > *limit;
  };
  if (m.arch.family == ModelFamily::kLlm &&
      (over(m.sla.ttft_ms_p95, Target::kTtftP95) || over(m.sla.tpot_ms_p95, Target::kTpotP95))) {
    return true;
  }
  if (over(m.sla.latency_ms_p95, Target::kLatencyP95)) return true;
  const double thr = o.measured[static_cast<std::size_t>(Target::kThroughput)];
  return m.sla.min_throughput && std::isfinite(thr) && thr < *m.sla.min_throughput;
}

namespace {

std::vector<std::string> names_of(const Workload& w) {
  std::vector<std::string> out;
  for (const auto& m : w.models) out.push_back(m.name);
  return out;
}

}  // namespace

struct Controller::Learners {
  std::string key;
  std::array<TargetLearner, kTargetCount> target;
  bool ready = false;  // priors applied (at the first decision that saw the model)
  double boost = 0;    // learning off: margin grown by breaches
  double abs_error = 0;
  double last_error = 0;
  std::uint64_t observations = 0;
  std::uint64_t breaches = 0;
  bool reopened = false;  // reopened since its last sample: the next sample says so
  // Admission control's ceiling on the share of its demand (ControllerOptions::shed): a share
  // that breached as measured is not admitted again; see kShareBackoff.
  double share_cap = 1;
  double share_bad = 1;  // the smallest share that breached since the ceiling was last lifted
  int share_clean = 0;   // windows that held at an admitted share since the ceiling last moved

  // When its last reload- or restart-class change was put in force (TransitionOptions).
  double changed_at_s = -std::numeric_limits<double>::infinity();

  bool probe_due = false;  // paused: the next decision runs it at the smallest share
  bool probing = false;    // the plan in force runs it as a probe
  // Its recent windows at a share below 1 (kShedWindows): see refuted().
  std::deque<detail::ShedWindow> shed_windows;

  // Its demand, context or SLA changed, or the GPU became faster: what breached or was measured
  // before says nothing of it now.
  void lift_share_cap() {
    share_cap = share_bad = 1;
    shed_windows.clear();
  }

  // The model's operating point moved: see TargetLearner::reopen.
  void reopen() {
    reopened = true;
    if (!ready) return;  // its priors are still to come
    for (auto& t : target) t.reopen();
  }
};

// Recent windows of the current workload: their configuration and what was measured.
struct Controller::Recent {
  std::deque<std::pair<JointConfig, std::vector<ModelObservation>>> windows;
};

std::string Controller::model_key(const ModelSpec& m) {
  std::string k = m.arch.name;
  for (const auto& knob : m.knobs) {
    k += "|" + std::string(knob_decl(knob.id).name) + "=";
    for (double v : knob.values) k += format_knob_value(knob.id, v) + ",";
  }
  return k;
}

Controller::Controller(Workload w, std::unique_ptr<PredictorSource> source,
                       ControllerOptions options)
    : options_(std::move(options)),
      source_(std::move(source)),
      workload_(std::move(w)),
      recent_(std::make_unique<Recent>()) {
  CORUN_CHECK(source_ != nullptr);
  auto solver = make_solver(options_.solver);
  CORUN_CHECK_MSG(solver.ok(), "the controller's solver name is checked by its callers");
  solver_ = std::move(*solver);
  for (const auto& m : workload_.models) {
    learners_.push_back(std::make_unique<Learners>());
    learners_.back()->key = model_key(m);
  }
  plan_names_ = names_of(workload_);
}

Controller::~Controller() = default;

// ---------------------------------------------------------------------------------------------
// The workload

std::string Controller::apply(const TimelineEvent& e) {
  CORUN_CHECK_MSG(e.planner_visible(), "drift events act on the testbed, not on the planner");
  MutexLock lock(mutex_);
  ModelSpec& m = workload_.models[e.model];
  switch (e.kind) {
    case TimelineEvent::Kind::kArrive:
      m.active = true;
      break;
    case TimelineEvent::Kind::kDepart:
      m.active = false;
      break;
    case TimelineEvent::Kind::kDemand:
    case TimelineEvent::Kind::kContext:
      if (!(m.demand == e.demand) && options_.learning.enabled) learners_[e.model]->reopen();
      m.demand = e.demand;
      learners_[e.model]->lift_share_cap();
      break;
    case TimelineEvent::Kind::kSla:
      m.sla = e.sla;
      learners_[e.model]->lift_share_cap();
      break;
    default:
      break;
  }
  ++generation_;
  event_times_s_.push_back(now_s_);
  due_ = true;
  due_reason_ = "event";
  recent_->windows.clear();
  return std::string(to_string(e.kind)) + " " + m.name;
}

void Controller::set_workload(Workload w) {
  MutexLock lock(mutex_);
  std::vector<std::unique_ptr<Learners>> next;
  for (const auto& m : w.models) {
    std::unique_ptr<Learners> l;
    const std::string key = model_key(m);
    for (std::size_t i = 0; i < workload_.models.size(); ++i) {
      if (workload_.models[i].name == m.name && learners_[i] && learners_[i]->key == key) {
        l = std::move(learners_[i]);
        if (!(workload_.models[i].demand == m.demand) && options_.learning.enabled) l->reopen();
        break;
      }
    }
    if (!l) {
      l = std::make_unique<Learners>();
      l->key = key;
    }
    next.push_back(std::move(l));
  }
  learners_ = std::move(next);
  workload_ = std::move(w);
  ++generation_;
  event_times_s_.push_back(now_s_);
  due_ = true;
  due_reason_ = "models";
  recent_->windows.clear();
}

void Controller::advance_to(double now_s) {
  MutexLock lock(mutex_);
  now_s_ = std::max(now_s_, now_s);
}

Workload Controller::workload() const {
  MutexLock lock(mutex_);
  return workload_;
}

bool Controller::replan_due() const {
  MutexLock lock(mutex_);
  return due_;
}

std::string Controller::due_reason() const {
  MutexLock lock(mutex_);
  return due_reason_;
}

std::shared_ptr<const Decision> Controller::plan() const {
  MutexLock lock(mutex_);
  return plan_;
}

const surrogate::Surrogate* Controller::fitted() const {
  MutexLock planning(planner_mutex_);
  return source_->fitted();
}

std::size_t Controller::source_measurements() const {
  MutexLock planning(planner_mutex_);
  return source_->measurements_taken();
}

// ---------------------------------------------------------------------------------------------
// Deciding

void Controller::ensure_learners_locked(const Workload& w, const ErrorPriors& priors,
                                        LearnerSet& learners) {
  for (std::size_t m = 0; m < w.models.size() && m < learners.size(); ++m) {
    Learners& l = *learners[m];
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
    const Workload& w, const LearnerSet& learners, const std::vector<double>& static_margins,
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
    const Learners& l = *learners[m];
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
  const TargetLearner& tl = learners_[m]->target[static_cast<std::size_t>(t)];
  const LogPrediction p = tl.predict(l, plan_ ? others_load_locked(m, plan_->config) : 0.0);
  return p.mean + tl.z() * std::sqrt(p.var);
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
  for (std::size_t m = 0; m < w.models.size() && m < learners_.size(); ++m) {
    const Learners& l = *learners_[m];
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
  // Which models need a change: a measured breach asked for the decision (every model may move
  // to stop it), a model arrived, or the plan in force no longer holds a model's SLA as
  // predicted now. For them the dwell and the hysteresis band do not hold; the cost still does.
  std::vector<bool> needed(n, pricing_.needed);
  {
    JointConfig now = from;
    bool arrival = false;
    for (std::size_t m = 0; m < n; ++m) {
      if (!active[m]) now[m] = kAbsent;
      if (active[m] && now[m] == kAbsent) arrival = true;
    }
    if (arrival) {
      needed.assign(n, true);
    } else {
      std::vector<Predicted> pred(n);
      predictor.predict(now, 1, pred);
      for (std::size_t m = 0; m < n; ++m) {
        if (now[m] == kAbsent) continue;
        const Margin& g = margins[m][static_cast<std::size_t>(now[m])];
        if (sla_excess(w.models[m], pred[m], g) > 0) needed[m] = true;
      }
    }
  }
  double held = 0;     // VRAM of the plan in force
  double serving = 0;  // utility per second of everyone in it, which a swap's kernels slow
  for (std::size_t m = 0; m < n; ++m) {
    if (from[m] == kAbsent) continue;
    const Settings a = w.models[m].settings(static_cast<std::size_t>(from[m]));
    held += model_vram_bytes(w.models[m], a);
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
  // shed() also holds models whose share ceiling is below 1 to it when the search held them.
  if (options_.shed) {
    auto shed_attempt = shed(w, std::move(*chosen), generation, id, reason, &measure_ms);
    if (!shed_attempt) return shed_attempt.error();
    if (!*shed_attempt) return std::optional<Decision>();
    chosen = std::move(**shed_attempt);
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
    if (step.change.action >= Actuation::kReload && step.model < learners_.size()) {
      learners_[step.model]->changed_at_s = now_s_;
    }
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

Result<std::optional<Controller::Attempt>> Controller::attempt(
    const Workload& w, std::uint64_t generation, const JointConfig& warm, std::int64_t id,
    const std::string& reason, double* measure_ms, double* hook_ms, bool explore) {
  const auto measure_start = std::chrono::steady_clock::now();
  auto base = source_->predictor_for(w);
  if (!base) return base.error().wrap("predicting for the workload");
  const ErrorPriors priors = source_->priors(w);
  const std::vector<double> static_margins = source_->margins(w);
  LoadTable loads = source_->loads(w);
  *measure_ms +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - measure_start)
          .count();
  Attempt a;
  {
    MutexLock lock(mutex_);
    if (generation != generation_) return std::optional<Attempt>();
    ensure_learners_locked(w, priors, learners_);
    a.table = corrections_locked(w, learners_, static_margins, std::move(loads), explore);
  }
  const std::shared_ptr<Predictor> base_predictor(std::move(*base));
  auto searched = search(w, base_predictor, a.table, warm, id, reason, hook_ms, true);
  if (!searched) return searched.error();
  a.decision = std::move(*searched);
  return std::optional<Attempt>(std::move(a));
}

namespace {

// Bisection steps of the admitted share: 1/32 of the demand.
constexpr int kShedSteps = 5;

// Whether refusing part of a model's demand can help it: a rate demand (a closed loop is the
// client's to throttle) and no throughput floor (refusing work lowers throughput).
bool sheddable(const ModelSpec& m) {
  return !m.demand.closed_loop() && !m.sla.min_throughput && (m.demand.fps > 0 || m.demand.rps > 0);
}

// Predicted served fraction below which an admitted share counts as overloading its model: a
// queue that cannot keep up grows through the window, and its latency with it, whatever a
// steady-state prediction of that latency says. Not 1: predicted throughputs carry the
// co-run slowdown of the surrogate's ratio even where the model keeps up with its demand.
constexpr double kStableServed = 0.9;

// Whether model `m` in configuration `local` keeps up with `share` of its demand at
// `throughput` (predicted or measured): its served fraction of the admitted demand, frame
// skipping aside, is at least kStableServed.
bool keeps_up(const ModelSpec& m, std::int32_t local, double share, double throughput) {
  const Settings s = m.settings(static_cast<std::size_t>(local));
  const double keep = m.arch.family == ModelFamily::kVision ? 1 - s.skip_rate : 1.0;
  return served_fraction(m, s, throughput / share) >= kStableServed * keep;
}

// Whether a candidate holds model m at `share` of the demand `spec` states: its SLA holds as
// predicted at its margin, and its predicted throughput keeps up with what it admits.
bool holds_admitted(const ModelSpec& spec, double share, const Decision& d, std::size_t m) {
  if (d.best_effort[m] || d.config[m] == kAbsent) return false;
  return keeps_up(spec, d.config[m], share, d.predicted[m].throughput);
}

// Whether model `spec` run at `share` of its demand fell behind it in window `o`.
bool overloaded(const ModelSpec& spec, double share, const ModelObservation& o) {
  const double thr = o.measured[static_cast<std::size_t>(Target::kThroughput)];
  if (!std::isfinite(thr) || share <= 0) return false;
  return !keeps_up(spec, o.local, share, thr);
}

void scale_demand(ModelSpec& m, double share) {
  m.demand.fps *= share;
  m.demand.rps *= share;
}

}  // namespace

Workload admitted_workload(const Workload& w, std::span<const double> admitted) {
  Workload out = w;
  for (std::size_t m = 0; m < out.models.size() && m < admitted.size(); ++m) {
    if (admitted[m] >= 1) continue;
    if (admitted[m] <= 0) {
      out.models[m].active = false;
    } else {
      scale_demand(out.models[m], admitted[m]);
    }
  }
  return out;
}

Result<std::optional<Controller::Attempt>> Controller::shed(const Workload& w, Attempt first,
                                                            std::uint64_t generation,
                                                            std::int64_t id,
                                                            const std::string& reason,
                                                            double* measure_ms) {
  const std::size_t n = w.models.size();
  std::vector<double> caps(n, 1.0);
  std::vector<double> bad(n, 1.0);
  std::vector<bool> probe(n, false);
  std::vector<std::deque<detail::ShedWindow>> evidence(n);
  {
    MutexLock lock(mutex_);
    if (generation != generation_) return std::optional<Attempt>();
    for (std::size_t m = 0; m < n && m < learners_.size(); ++m) {
      caps[m] = learners_[m]->share_cap;
      bad[m] = learners_[m]->share_bad;
      probe[m] = learners_[m]->probe_due;
      evidence[m] = learners_[m]->shed_windows;
    }
  }
  // The models given up, and those the search held whose ceiling is below 1: a share that
  // measured beyond its SLA is not admitted again, whatever the prediction at all of the demand.
  std::vector<std::size_t> order;
  for (std::size_t m = 0; m < n && m < first.decision.best_effort.size(); ++m) {
    if (!sheddable(w.models[m]) || first.decision.config[m] == kAbsent) continue;
    if (first.decision.best_effort[m] || caps[m] < 1) order.push_back(m);
  }
  if (order.empty()) return std::optional<Attempt>(std::move(first));
  // Heaviest first: the models the objective values most keep the most of their demand.
  const auto heaviest_first = [&](std::size_t a, std::size_t b) {
    return w.models[a].weight > w.models[b].weight;
  };
  std::stable_sort(order.begin(), order.end(), heaviest_first);
  const std::vector<Infeasibility> why = first.decision.infeasible;
  // Whether candidate `d` admits `share` of model m's demand against what m measured before.
  auto contradicted = [&](std::size_t m, double share, const Attempt& a) {
    const Decision& d = a.decision;
    if (evidence[m].empty() || d.config[m] == kAbsent || m >= d.margins.size() || !a.table) {
      return false;
    }
    double u = 0;
    for (std::size_t j = 0; j < d.config.size(); ++j) {
      if (j != m) u += a.table->load(j, d.config[j]);  // an absent model's is 0
    }
    return detail::refuted(w.models[m], evidence[m], d.config[m], share, u, d.margins[m]);
  };
  std::vector<bool> probed(n, false);
  std::vector<double> admitted(n, 1.0);
  Workload runs = w;
  Attempt chosen = std::move(first);
  std::vector<bool> queued(n, false);
  for (const std::size_t m : order) queued[m] = true;
  for (std::size_t next = 0; next < order.size(); ++next) {
    const std::size_t m = order[next];
    // An earlier model's refusals may have let it hold.
    if (!chosen.decision.best_effort[m] && caps[m] >= 1) continue;
    double lo = 0;
    double hi = 1;
    std::optional<Attempt> best;
    std::optional<Attempt> smallest;  // the last candidate, when every share failed
    // Below a ceiling left by a measured breach, the ceiling itself is tried first.
    const bool capped = caps[m] < 1;
    for (int k = capped ? -1 : 0; k < kShedSteps; ++k) {
      const double share = k < 0 ? caps[m] : 0.5 * (lo + hi);
      Workload candidate = runs;
      scale_demand(candidate.models[m], share);
      // Without optimism: whether an admitted share keeps up is decided on its prediction.
      auto a = attempt(candidate, generation, chosen.decision.config, id, reason, measure_ms,
                       nullptr, false);
      if (!a) return a.error().wrap("admitting part of " + w.models[m].name + "'s demand");
      if (!*a) return std::optional<Attempt>();
      if (holds_admitted(runs.models[m], share, (*a)->decision, m) &&
          !contradicted(m, share, **a)) {
        lo = share;
        best = std::move(**a);
        if (k < 0) break;  // the ceiling holds: nothing above it is admitted
      } else {
        hi = share;
        if (k + 1 == kShedSteps) smallest = std::move(**a);
      }
    }
    const double probe_share = hi;
    if (best) {
      scale_demand(runs.models[m], lo);
      admitted[m] = lo;
      chosen = std::move(*best);
    } else if (smallest && (probe[m] || sla_excess(runs.models[m], smallest->decision.predicted[m],
                                                   Margin{}) <= 0)) {
      // Its prediction holds at the smallest share and only its margin does not, or a paused
      // model's probe is due (see observe(): the GPU became faster): it runs there best effort,
      // so that it is observed and its margin or its correction can move (a paused model is
      // never observed, and would stay paused on the prediction that paused it).
      scale_demand(runs.models[m], probe_share);
      admitted[m] = probe_share;
      probed[m] = probe[m];
      chosen = std::move(*smallest);
    } else {
      runs.models[m].active = false;
      admitted[m] = 0;
      auto a =
          attempt(runs, generation, chosen.decision.config, id, reason, measure_ms, nullptr, false);
      if (!a) return a.error().wrap("pausing " + w.models[m].name);
      if (!*a) return std::optional<Attempt>();
      chosen = std::move(**a);
    }
    // The plan that admits this share may leave another model best effort that the first
    // search held: it is shed in turn, rather than run with all of its demand unheld.
    std::vector<std::size_t> pushed_out;
    for (std::size_t j = 0; j < n && j < chosen.decision.best_effort.size(); ++j) {
      if (!queued[j] && chosen.decision.best_effort[j] && sheddable(w.models[j])) {
        pushed_out.push_back(j);
        queued[j] = true;
      }
    }
    std::stable_sort(pushed_out.begin(), pushed_out.end(), heaviest_first);
    order.insert(order.end(), pushed_out.begin(), pushed_out.end());
  }
  Decision& d = chosen.decision;
  // Utility counts against what was asked for: the refused share earns nothing.
  d.predicted_utility = 0;
  for (std::size_t m = 0; m < n; ++m) {
    if (d.config[m] == kAbsent) continue;
    d.predicted_utility += model_utility(w, m, d.config[m], d.predicted[m]);
  }
  // Why each shed model could not be held with all of its demand, and what it admits instead;
  // the models that still run best effort keep the reasons of the last search.
  std::vector<Infeasibility> merged;
  for (const auto& i : why) {
    if (admitted[i.model] < 1) {
      merged.push_back(i);
      merged.back().admitted = admitted[i.model];
    }
  }
  for (const auto& i : d.infeasible) {
    const bool known = std::any_of(why.begin(), why.end(),
                                   [&](const Infeasibility& k) { return k.model == i.model; });
    if (admitted[i.model] >= 1) {
      merged.push_back(i);
    } else if (!known) {  // pushed out by another model's admitted share
      merged.push_back(i);
      merged.back().admitted = admitted[i.model];
    }
  }
  for (std::size_t m = 0; m < n; ++m) {
    const auto listed = [&](const Infeasibility& i) { return i.model == m; };
    if (admitted[m] >= 1 || d.config[m] == kAbsent || m >= d.margins.size() ||
        std::any_of(merged.begin(), merged.end(), listed)) {
      continue;
    }
    // Held as predicted, but below its ceiling.
    merged.push_back(
        measured_ceiling(w.models[m], m, d.config[m], d.predicted[m], d.margins[m], bad[m]));
    merged.back().admitted = admitted[m];
  }
  std::stable_sort(
      merged.begin(), merged.end(),
      [](const Infeasibility& a, const Infeasibility& b) { return a.model < b.model; });
  d.infeasible = std::move(merged);
  d.feasible = false;  // some demand is refused
  d.admitted = std::move(admitted);
  {
    MutexLock lock(mutex_);
    if (generation != generation_) return std::optional<Attempt>();
    for (std::size_t m = 0; m < n && m < learners_.size(); ++m) {
      if (!probed[m]) continue;
      learners_[m]->probe_due = false;
      learners_[m]->probing = true;
    }
  }
  return std::optional<Attempt>(std::move(chosen));
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
  so.seed = derive_seed(options_.seed, {static_cast<std::uint64_t>(id)});
  so.threads = options_.threads;
  if (warm.size() == n) so.warm_start = warm;
  auto solved = solve_degrading(problem, *solver_, so);
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
  auto base = source_->predictor_for(w);
  if (!base) return base.error().wrap("predicting for the workload");
  const ErrorPriors priors = source_->priors(w);
  const std::vector<double> static_margins = source_->margins(w);
  LoadTable loads = source_->loads(w);
  std::shared_ptr<const CorrectionTable> table;
  JointConfig warm;
  std::int64_t id = 1;
  {
    MutexLock lock(mutex_);
    // Copies of what was learned of the models `w` shares with the workload: the what-if may
    // apply priors to them (ensure_learners_locked) without touching the controller's own.
    LearnerSet learners;
    for (const auto& m : w.models) {
      const std::string key = model_key(m);
      std::unique_ptr<Learners> l;
      for (std::size_t i = 0; i < workload_.models.size() && i < learners_.size(); ++i) {
        if (workload_.models[i].name == m.name && learners_[i] && learners_[i]->key == key) {
          l = std::make_unique<Learners>(*learners_[i]);
          break;
        }
      }
      if (!l) {
        l = std::make_unique<Learners>();
        l->key = key;
      }
      learners.push_back(std::move(l));
    }
    ensure_learners_locked(w, priors, learners);
    table = corrections_locked(w, learners, static_margins, std::move(loads));
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
  }
  auto d = search(w, std::shared_ptr<Predictor>(std::move(*base)), table, warm, id, reason,
                  /*hook_ms=*/nullptr, /*priced=*/false);
  if (!d) return d.error();
  d->decision_ms =
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
  auto base = source_->predictor_for(w);
  if (!base) return base.error();
  const ErrorPriors priors = source_->priors(w);
  const std::vector<double> static_margins = source_->margins(w);
  LoadTable loads = source_->loads(w);
  std::shared_ptr<const CorrectionTable> table;
  {
    MutexLock lock(mutex_);
    ensure_learners_locked(w, priors, learners_);
    table = corrections_locked(w, learners_, static_margins, std::move(loads));
  }
  const std::shared_ptr<Predictor> base_predictor(std::move(*base));
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

// ---------------------------------------------------------------------------------------------
// Learning

void Controller::learn_locked(std::size_t m, const LearningSample& s) {
  Learners& l = *learners_[m];
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
    l.shed_windows.push_back({s.local, s.share, s.others_load, detail::as_predicted(s.measured)});
    if (l.shed_windows.size() > kShedWindows) l.shed_windows.pop_front();
  }
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
  // Which models changed in this window, and which way: several together is a change of the
  // GPU (everyone's shared error moves), one alone a change of its configuration.
  std::vector<int> changed(n, 0);
  int up = 0, down = 0, reporting = 0;
  int down_whole = 0, reporting_whole = 0;  // of them, models that run all of their demand
  if (options_.learning.enabled) {
    for (const ModelObservation& o : obs) {
      if (o.model >= n || d.config[o.model] == kAbsent || o.local != d.config[o.model]) continue;
      const Learners& l = *learners_[o.model];
      if (!l.ready) continue;
      ++reporting;
      const double u =
          std::isfinite(o.others_load) ? o.others_load : others_load_locked(o.model, d.config);
      for (Target t : sla_targets(workload_.models[o.model])) {
        const std::size_t k = static_cast<std::size_t>(t);
        const double y = log_ratio(o.measured[k], field(d.base[o.model], t));
        if (!l.target[k].is_change(o.local, u, y)) continue;
        changed[o.model] = y > l.target[k].predict(o.local, u).mean ? 1 : -1;
        break;
      }
      if (changed[o.model] > 0) ++up;
      if (changed[o.model] < 0) ++down;
      // The evidence that the GPU became faster comes from models served whole: a shed model
      // runs near its capacity, where a window's latency swings without any change of the GPU.
      if (o.model < d.admitted.size() && d.admitted[o.model] < 1) continue;
      ++reporting_whole;
      if (changed[o.model] < 0) ++down_whole;
    }
  }
  // A model's first window has no shared error to tell its configuration's apart from.
  std::vector<bool> first_window(n, false);
  for (std::size_t m = 0; m < n; ++m) {
    const TargetLearner& t =
        learners_[m]->target[static_cast<std::size_t>(primary_target(workload_.models[m]))];
    first_window[m] = t.observations() == 0;
  }
  auto hint_for = [&](std::size_t m) {
    using Hint = TargetLearner::ChangeHint;
    if (changed[m] == 0 || reporting < 2 || first_window[m]) return Hint::kUnknown;
    const int together = changed[m] > 0 ? up : down;
    return together >= 2 && 2 * together >= reporting ? Hint::kShared : Hint::kConfig;
  };
  for (const ModelObservation& o : obs) {
    if (o.model >= n || d.config[o.model] == kAbsent || o.local != d.config[o.model]) {
      ++r.stale;
      continue;
    }
    const std::size_t m = o.model;
    const ModelSpec& spec = workload_.models[m];
    LearningSample s;
    s.model = spec.name;
    s.model_key = learners_[m]->key;
    s.local = o.local;
    s.others_load = std::isfinite(o.others_load) ? o.others_load : others_load_locked(m, d.config);
    s.hint = hint_for(m);
    s.reopen = std::exchange(learners_[m]->reopened, false);
    s.breach = measured_breach(spec, o);
    s.share = m < d.admitted.size() ? d.admitted[m] : 1.0;
    s.measured = o.measured;
    for (Target t : surrogate::kAllTargets) {
      const std::size_t k = static_cast<std::size_t>(t);
      s.log_ratio[k] = log_ratio(o.measured[k], field(d.base[m], t));
    }
    if (m < d.admitted.size() && d.admitted[m] < 1 && overloaded(spec, d.admitted[m], o)) {
      // An admitted share its model could not keep up with: the queue grew through the window
      // and its latencies with it. That says the share was too large, not how wrong the
      // steady-state prediction is: learning it would inflate every later prediction.
      for (Target t : sla_targets(spec)) s.log_ratio[static_cast<std::size_t>(t)] = NAN;
    }
    for (Target t : sla_targets(spec)) {
      const double v = o.measured[static_cast<std::size_t>(t)];
      const float p = field(d.predicted[m], t);
      if (std::isfinite(v) && p > 0 && p < 1e8f) {
        s.under_prediction = std::max(s.under_prediction, v / p);
      }
    }
    const Target pt = primary_target(spec);
    const double v = o.measured[static_cast<std::size_t>(pt)];
    const float p = field(d.predicted[m], pt);
    if (std::isfinite(v) && p > 0 && p < 1e8f) s.error = v / p - 1;
    learn_locked(m, s);
    if (m < d.admitted.size() && d.admitted[m] > 0 && d.admitted[m] < 1) {
      Learners& l = *learners_[m];
      const bool probed_window = std::exchange(l.probing, false);
      if (probed_window && !r.replan) {
        // One window: what it measured decides what runs next.
        r.replan = true;
        r.reason = "probe " + spec.name;
      }
      // A window admitted on the planner's test (a probe was not) that measured what the test
      // would refuse counts as a breach: the prediction that admitted the share is refuted.
      const bool refused = !probed_window && m < d.margins.size() &&
                           sla_excess(spec, detail::as_predicted(o.measured), d.margins[m]) > 0;
      if (s.breach || refused) {
        l.share_bad = std::min(l.share_bad, d.admitted[m]);
        l.share_cap = std::min(l.share_cap, d.admitted[m]) * kShareBackoff;
        l.share_clean = 0;
      } else if (++l.share_clean >= kShareCleanWindows) {
        l.share_cap =
            std::max(l.share_cap, std::min(l.share_cap + kShareStep, kShareRetry * l.share_bad));
        l.share_clean = 0;
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
  // The GPU became faster for most models at once (a co-tenant left, a power cap was lifted):
  // the ceilings breaches left on shed models were measured on a slower GPU, and a paused model
  // — never measured, so never corrected — may fit now. As a circuit breaker's half-open state,
  // each paused model runs one probe window at the smallest share; what it measures decides.
  if (options_.learning.enabled && down_whole >= 2 && 2 * down_whole >= reporting_whole &&
      d.admitted.size() == n) {
    for (std::size_t m = 0; m < n; ++m) {
      if (d.admitted[m] >= 1 || !workload_.models[m].active) continue;
      Learners& l = *learners_[m];
      l.lift_share_cap();
      if (d.admitted[m] <= 0) l.probe_due = true;
      if (!r.replan) {
        r.replan = true;
        r.reason = "faster GPU";
      }
    }
  }
  if (!window.empty()) {
    recent_->windows.emplace_back(d.config, std::move(window));
    if (recent_->windows.size() > kRecentWindows) recent_->windows.pop_front();
  }
  if (options_.learning.enabled && !r.replan && planned_log_bound_.size() == n * kTargetCount) {
    const double step = std::log1p(options_.learning.replan_bound_change);
    for (std::size_t m = 0; m < n && !r.replan; ++m) {
      // Models run best effort count too: what was learned may make their SLA holdable again.
      if (d.config[m] == kAbsent || !learners_[m]->ready) continue;
      for (Target t : sla_targets(workload_.models[m])) {
        const double before = planned_log_bound_[m * kTargetCount + static_cast<std::size_t>(t)];
        if (!std::isfinite(before)) continue;
        if (std::abs(planned_log_bound_locked(m, d.config[m], t) - before) > step) {
          r.replan = true;
          r.reason = "learning";
          break;
        }
      }
    }
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
  ensure_learners_locked(workload_, priors, learners_);
  for (const LearningSample& s : samples) {
    for (std::size_t m = 0; m < workload_.models.size(); ++m) {
      if (workload_.models[m].name == s.model && learners_[m]->key == s.model_key) {
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
  auto base = source_->predictor_for(w);
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
  for (std::size_t m = 0; m < learners_.size(); ++m) {
    Learners& l = *learners_[m];
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
      if (o.model >= n || !learners_[o.model]->ready) continue;
      for (Target t : surrogate::kAllTargets) {
        const std::size_t k = static_cast<std::size_t>(t);
        const double y = log_ratio(o.measured[k], field(pred[o.model], t));
        if (std::isfinite(y)) {
          learners_[o.model]->target[k].observe(o.local, o.others_load, y, false);
        }
      }
    }
  }
  return {};
}

void Controller::restore(Decision d) {
  MutexLock lock(mutex_);
  const std::size_t n = workload_.models.size();
  d.config.resize(n, kAbsent);
  d.predicted.resize(n);
  d.base.resize(n);
  d.margins.resize(n);
  d.best_effort.resize(n, false);
  last_id_ = std::max(last_id_, d.id);
  decisions_ = std::max({decisions_, d.id, d.decision});
  plan_ = std::make_shared<const Decision>(std::move(d));
  plan_names_ = names_of(workload_);
  planned_log_bound_.assign(n * kTargetCount, NAN);
  due_ = false;
  due_reason_.clear();
}

void Controller::continue_after(std::int64_t last, std::int64_t last_decision) {
  MutexLock lock(mutex_);
  last_id_ = std::max(last_id_, last);
  decisions_ = std::max({decisions_, last, last_decision});
}

nlohmann::json to_json(const LearningSample& s) {
  nlohmann::json y = nlohmann::json::array();
  for (double v : s.log_ratio) y.push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json());
  nlohmann::json measured = nlohmann::json::array();
  for (double v : s.measured) {
    measured.push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json());
  }
  return {{"model", s.model},
          {"key", s.model_key},
          {"local", s.local},
          {"others_load",
           std::isfinite(s.others_load) ? nlohmann::json(s.others_load) : nlohmann::json()},
          {"hint", static_cast<int>(s.hint)},
          {"log_ratio", y},
          {"under_prediction", s.under_prediction},
          {"breach", s.breach},
          {"error", std::isfinite(s.error) ? nlohmann::json(s.error) : nlohmann::json()},
          {"reopen", s.reopen},
          {"share", s.share},
          {"measured", measured}};
}

Result<LearningSample> learning_sample_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Error("a learning sample must be a JSON object");
  LearningSample s;
  try {
    s.model = j.at("model").get<std::string>();
    s.model_key = j.at("key").get<std::string>();
    s.local = json_number<std::int32_t>(j.at("local"));
    s.others_load = j.contains("others_load") && j["others_load"].is_number()
                        ? j["others_load"].get<double>()
                        : NAN;
    const int hint = json_number_or(j, "hint", 0);
    if (hint < 0 || hint > 2) return Error("hint: expected 0, 1 or 2");
    s.hint = static_cast<TargetLearner::ChangeHint>(hint);
    const auto& y = j.at("log_ratio");
    if (!y.is_array() || y.size() != kTargetCount) return Error("log_ratio: expected 4 values");
    for (std::size_t k = 0; k < kTargetCount; ++k) {
      s.log_ratio[k] = y[k].is_number() ? y[k].get<double>() : NAN;
    }
    s.under_prediction = j.at("under_prediction").get<double>();
    s.breach = j.at("breach").get<bool>();
    s.error = j.at("error").is_number() ? j.at("error").get<double>() : NAN;
    s.reopen = j.value("reopen", false);  // absent in state stored before it existed
    // Absent in state stored before they existed: served whole, nothing measured.
    s.share = json_number_or(j, "share", 1.0);
    if (!(s.share >= 0 && s.share <= 1)) return Error("share: expected a number in [0, 1]");
    if (j.contains("measured")) {
      const auto& v = j.at("measured");
      if (!v.is_array() || v.size() != kTargetCount) return Error("measured: expected 4 values");
      for (std::size_t k = 0; k < kTargetCount; ++k) {
        if (v[k].is_null()) continue;
        if (!v[k].is_number() || !(v[k].get<double>() >= 0)) {
          return Error("measured[" + std::to_string(k) + "]: expected a number >= 0 or null");
        }
        s.measured[k] = v[k].get<double>();
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return Error(std::string("malformed learning sample: ") + e.what());
  }
  return s;
}

std::vector<ModelLearningState> Controller::learning_state() const {
  MutexLock lock(mutex_);
  std::vector<ModelLearningState> out(workload_.models.size());
  for (std::size_t m = 0; m < out.size(); ++m) {
    const Learners& l = *learners_[m];
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
