#include "corun/runtime/online_run.h"

#include <algorithm>
#include <cmath>

#include "corun/core/rng.h"
#include "corun/core/strings.h"
#include "corun/plan/objective.h"
#include "corun/runtime/refit.h"
#include "corun/runtime/testbed_predictor.h"
#include "corun/runtime/transition_ledger.h"
#include "corun/testbed/sim.h"

namespace corun {

namespace {

// Whether demand `now` has moved from `told` by more than `band` (relative) in its request
// rate or a mean token length.
bool demand_moved(const Demand& told, const Demand& now, double band) {
  if (band <= 0) return !(told == now);
  const auto moved = [band](double was, double is) {
    return std::abs(is - was) > band * std::abs(was) + 1e-12;
  };
  return moved(told.rps, now.rps) || moved(told.fps, now.fps) ||
         moved(told.prompt_tokens, now.prompt_tokens) ||
         moved(told.output_tokens, now.output_tokens) || told.concurrency != now.concurrency;
}

// Noise stream of the interval measurements of a run.
constexpr std::uint64_t kIntervalStream = 0x7275;

double metric(const ModelMetrics& mm, Target t) {
  switch (t) {
    case Target::kLatencyP95:
      return mm.latency_ms_p95 > 0 ? mm.latency_ms_p95 : NAN;
    case Target::kTtftP95:
      return mm.ttft_ms_p95.value_or(NAN);
    case Target::kTpotP95:
      return mm.tpot_ms_p95.value_or(NAN);
    case Target::kThroughput:
      return mm.throughput;
  }
  return NAN;
}

}  // namespace

std::size_t RunReport::shed_model_intervals() const {
  std::size_t n = 0;
  for (const auto& iv : intervals) {
    n += static_cast<std::size_t>(
        std::count_if(iv.admitted.begin(), iv.admitted.end(), [](double a) { return a < 1; }));
  }
  return n;
}

std::size_t RunReport::sla_violations() const {
  std::size_t n = 0;
  for (const auto& iv : intervals) {
    n += static_cast<std::size_t>(std::count(iv.breach.begin(), iv.breach.end(), true));
  }
  return n;
}

std::vector<std::size_t> RunReport::changes(Actuation a) const {
  std::vector<std::size_t> out(model_names.size(), 0);
  for (const auto& iv : intervals) {
    for (const auto& s : iv.transition.steps) {
      if (s.from != kAbsent && s.change.action == a && s.model < out.size()) ++out[s.model];
    }
  }
  return out;
}

std::vector<double> RunReport::outage_s() const {
  std::vector<double> out(model_names.size(), 0.0);
  for (const auto& iv : intervals) {
    for (std::size_t m = 0; m < iv.outage_s.size() && m < out.size(); ++m) out[m] += iv.outage_s[m];
  }
  return out;
}

std::vector<double> RunReport::decision_ms() const {
  std::vector<double> out;
  for (const auto& iv : intervals) {
    if (iv.replanned) out.push_back(iv.decision_ms);
  }
  return out;
}

std::vector<ModelObservation> observations(const Measurement& m, const JointConfig& config) {
  std::vector<ModelObservation> out;
  for (const auto& mm : m.models) {
    if (mm.model >= config.size() || config[mm.model] == kAbsent) continue;
    ModelObservation o;
    o.model = mm.model;
    o.local = config[mm.model];
    o.failed = !mm.ok();
    if (mm.ok()) {
      for (Target t : surrogate::kAllTargets) {
        o.measured[static_cast<std::size_t>(t)] = metric(mm, t);
      }
    }
    out.push_back(o);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// OnlineLog

Result<std::unique_ptr<OnlineLog>> OnlineLog::open(const std::filesystem::path& dataset,
                                                   const Workload& w,
                                                   std::string_view workload_text,
                                                   std::string_view testbed, double window_s,
                                                   std::uint64_t key, std::uint64_t intervals) {
  auto ds = profile::Dataset::open(dataset, profile::Dataset::Mode::kCreate);
  if (!ds) return ds.error();
  const profile::CampaignSpec spec{profile::Plan::kOnline, Context{.seed = key},
                                   std::string(testbed), window_s};
  auto id = ds->ensure_campaign(spec, w, workload_text, w.device.name, intervals);
  if (!id) return id.error().wrap("the online log");
  auto stored = ds->samples(*id);
  if (!stored) return stored.error();
  std::unique_ptr<OnlineLog> log(new OnlineLog(std::move(*ds), *id));
  log->stored_ = std::move(*stored);
  return log;
}

Result<std::unique_ptr<OnlineLog>> OnlineLog::open_in(const std::filesystem::path& dir,
                                                      const Workload& w,
                                                      std::string_view workload_text,
                                                      std::string_view testbed, double window_s,
                                                      std::uint64_t key) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error("cannot create " + dir.string() + ": " + ec.message(), Error::Kind::kIo);
  const double duration = w.timeline.duration_s > 0 ? w.timeline.duration_s : window_s;
  return open(dir / "dataset.db", w, workload_text, testbed, window_s, key,
              static_cast<std::uint64_t>(std::ceil(duration / window_s)));
}

std::uint64_t OnlineLog::run_key(const Context& ctx, const ControllerOptions& c,
                                 const PredictorSource& source) {
  const LearningOptions& l = c.learning;
  std::string k = c.solver + "|" + (l.enabled ? "on" : "off") + "|" +
                  format_number(l.breach_target) + "|" + source.describe() + "|transitions " +
                  (c.transitions.aware ? "aware" : "ignore") + (c.admission.enabled ? "|shed" : "") +
                  (l.explore_sd > 0 ? "|x" + format_number(l.explore_sd) : std::string());
  if (const surrogate::Surrogate* s = source.fitted(); s != nullptr) {
    k += "|" + s->provenance().workload_hash + "|" + std::to_string(s->provenance().corun_samples) +
         "|" + std::to_string(s->provenance().context.seed) + "|" + (s->monotone() ? "m" : "u");
  }
  return derive_seed(ctx.seed, {fnv1a(k)});
}

std::optional<Measurement> OnlineLog::find(std::uint64_t step, const JointConfig& config) const {
  for (const auto& s : stored_) {
    if (s.index == step && s.config == config) return s.measurement;
  }
  return std::nullopt;
}

Status OnlineLog::store(std::uint64_t step, const JointConfig& config, const Context& interval,
                        const Measurement& m) {
  profile::SampleRecord rec;
  rec.index = step;
  rec.config = config;
  rec.measurement_seed = interval.seed;
  rec.measurement = m;
  return ds_.insert(campaign_, rec);
}

// ---------------------------------------------------------------------------------------------
// The loop

namespace {

/// One run of the online loop: the state that lives across intervals, and each interval's
/// steps in the order they happen (events, trace demands, refit, decision, transitions,
/// measurement, judgement and learning).
class OnlineLoop {
 public:
  OnlineLoop(const Workload& w, const Testbed& testbed, const RunOptions& options,
             Controller& controller, RunReport& report)
      : w_(w),
        testbed_(testbed),
        options_(options),
        controller_(controller),
        report_(report),
        n_(w.models.size()),
        interval_(w.timeline.interval_s > 0 ? w.timeline.interval_s : 10),
        ledger_(n_) {
    if (options_.gpu_activity && dynamic_cast<const SimTestbed*>(&testbed_) != nullptr) {
      unexplained_.emplace(*options_.gpu_activity);
    }
  }

  /// Opens the background refit when the run asks for one and the source has a fit to refit.
  Status open_refit() {
    if (options_.refit_dataset.empty() || refit_every() == 0 ||
        !options_.controller.learning.enabled || controller_.fitted() == nullptr) {
      return {};
    }
    auto r = BackgroundRefit::open(
        options_.refit_dataset,
        options_.catalog != nullptr ? *options_.catalog : Catalog::default_catalog(),
        *controller_.fitted());
    if (!r) return r.error();
    refit_ = std::move(*r);
    return {};
  }

  /// Trace demands: per model, the demand of each interval as the testbed meets it. The planner
  /// is told an interval's demand only once the interval has ended, as telemetry would tell it.
  void read_traces(std::size_t steps) {
    replay_.assign(n_, {});
    told_.assign(n_, Demand{});  // the trace demand the planner was last told
    for (std::size_t m = 0; m < n_; ++m) {
      if (!w_.models[m].trace) continue;
      replay_[m] = w_.models[m].trace->intervals(interval_, steps);
      told_[m] = w_.models[m].demand;
    }
  }

  /// Runs interval `step` and appends its record to the report.
  Status run_interval(std::uint64_t step) {
    IntervalRecord rec;
    rec.t_s = static_cast<double>(step) * interval_;
    controller_.advance_to(rec.t_s);
    apply_due_events(rec);
    tell_trace_demands(rec, step);
    rec.conditions = conditions_;
    if (auto s = adopt_finished_refit(rec, step); !s.ok()) return s;
    const Workload now = controller_.workload();
    // What the testbed meets: this interval's trace demands, which the planner has not seen.
    std::optional<Workload> replayed;
    for (std::size_t m = 0; m < n_; ++m) {
      if (replay_[m].empty()) continue;
      if (!replayed) replayed = now;
      replayed->models[m].demand = replay_[m][step];
    }
    const Workload& truth = replayed ? *replayed : now;
    if (auto s = decide_when_due(rec, now, step); !s.ok()) return s;
    const auto plan = controller_.plan();
    const JointConfig config = config_in_force(rec, now, plan.get());
    MeasureOptions mo(interval_, conditions_, true);
    charge_transitions(rec, config, mo);
    if (plan) record_plan(rec, now, config, *plan);
    // What runs: the plan's refused shares never reach the testbed; utility still counts
    // against the whole demand, so the refused share earns nothing.
    const Workload runs = admitted_workload(truth, rec.admitted);
    const Context interval = controller_.context().derived({kIntervalStream, step});
    if (auto s = measure(rec, runs, config, mo, interval, step); !s.ok()) return s;
    judge(rec, truth, now, config, plan.get(), step);
    watch_gpu_activity(rec, runs, config);
    rec.learning = controller_.learning_state();
    feed_refit(runs, config, rec, mo, interval, step);
    if (options_.on_interval) options_.on_interval(rec, truth);
    report_.intervals.push_back(std::move(rec));
    return {};
  }

 private:
  std::size_t refit_every() const { return options_.controller.learning.refit_every; }

  /// Applies the events due at the interval's start: workload events to the controller, drift
  /// events to the testbed's conditions only (the planner never sees drift).
  void apply_due_events(IntervalRecord& rec) {
    while (next_event_ < w_.timeline.events.size() &&
           w_.timeline.events[next_event_].at_s <= rec.t_s + 1e-9) {
      const TimelineEvent& e = w_.timeline.events[next_event_++];
      if (e.planner_visible()) {
        rec.events.push_back(controller_.apply(e));
      } else {
        rec.drift.push_back(conditions_.apply(e));
      }
    }
  }

  /// Tells the planner the previous interval's trace demand of each model whose demand left the
  /// band around what it was last told, as a demand event.
  void tell_trace_demands(IntervalRecord& rec, std::uint64_t step) {
    for (std::size_t m = 0; m < n_ && step > 0; ++m) {
      if (replay_[m].empty() ||
          !demand_moved(told_[m], replay_[m][step - 1], options_.trace_demand_band)) {
        continue;
      }
      TimelineEvent e;
      e.at_s = rec.t_s;
      e.kind = TimelineEvent::Kind::kDemand;
      e.model = m;
      e.demand = told_[m] = replay_[m][step - 1];
      e.line = w_.models[m].line;
      rec.events.push_back(controller_.apply(e));
    }
  }

  /// Adopts a background refit started at least two intervals ago once it has finished.
  Status adopt_finished_refit(IntervalRecord& rec, std::uint64_t step) {
    if (!refit_ || !refit_->running() || step < refit_started_ + 2) return {};
    auto s = refit_->wait();
    if (s && *s) {
      if (auto st = controller_.adopt(std::move(**s)); !st.ok()) return st.error().wrap("refit");
      rec.refit = true;
      ++report_.refits;
    } else if (s) {
      // The run goes on with the fit it has; the failure is reported, not swallowed.
      rec.refit_error = (*s).error().what();
      ++report_.refit_failures;
    }
    return {};
  }

  /// Asks the controller for a decision when one is due (or none is in force yet).
  Status decide_when_due(IntervalRecord& rec, const Workload& now, std::uint64_t step) {
    const bool any_active = std::any_of(now.models.begin(), now.models.end(),
                                        [](const ModelSpec& m) { return m.active; });
    if (!any_active || (!controller_.replan_due() && controller_.plan())) return {};
    rec.reason = step == 0 ? std::string("start") : controller_.due_reason();
    auto d = controller_.replan(rec.reason);
    if (!d) return d.error().wrap("at t=" + format_number(rec.t_s));
    if (*d) {
      rec.replanned = true;
      rec.decision_ms = (*d)->decision_ms;
      rec.measure_ms = (*d)->measure_ms;
      rec.evaluated = (*d)->stats.evaluated;
    }
    return {};
  }

  /// The plan's configuration of the active models, recorded with the transition from the
  /// previous interval's, which the ledger starts paying.
  JointConfig config_in_force(IntervalRecord& rec, const Workload& now, const Decision* plan) {
    JointConfig config(n_, kAbsent);
    if (plan) config = plan->config;
    for (std::size_t m = 0; m < n_; ++m) {
      if (!now.models[m].active) config[m] = kAbsent;
    }
    rec.plan = config;
    rec.plan_changed = rec.replanned && config != last_plan_;
    if (config != last_plan_ && last_plan_.size() == n_) {
      rec.transition = joint_transition(ActuationTable::builtin(), now, last_plan_, config);
      ledger_.begin(rec.transition);
    }
    last_plan_ = config;
    return config;
  }

  /// What this window pays of the transitions under way.
  void charge_transitions(IntervalRecord& rec, const JointConfig& config, MeasureOptions& mo) {
    mo.transitions = ledger_.next_window(config, interval_);
    rec.in_transition.assign(n_, false);
    rec.outage_s.assign(n_, 0.0);
    for (const TransitionCharge& c : mo.transitions) {
      rec.in_transition[c.model] = true;
      rec.outage_s[c.model] = c.outage_s;
      rec.swap_gpu_s = std::max(rec.swap_gpu_s, c.swap_gpu_s);
    }
  }

  /// Copies the decision in force and its predicted utility into the record.
  void record_plan(IntervalRecord& rec, const Workload& now, const JointConfig& config,
                   const Decision& plan) {
    rec.decision = plan.id;
    rec.predicted = plan.predicted;
    rec.margins = plan.margins;
    rec.feasible = plan.feasible;
    for (const auto& why : plan.infeasible) rec.infeasible.push_back(why.message());
    rec.admitted = plan.admitted;
    for (std::size_t m = 0; m < n_; ++m) {
      if (config[m] == kAbsent) continue;
      // A model refusing part of its demand earns on what it serves of all of it.
      const bool shed = m < plan.admitted.size() && plan.admitted[m] < 1;
      rec.predicted_utility += shed ? model_utility(now, m, config[m], rec.predicted[m])
                                    : planned_utility(now, m, config[m], rec.predicted[m]);
    }
  }

  /// Measures the interval on the testbed, or reads it back from the run's log, and stores it.
  Status measure(IntervalRecord& rec, const Workload& runs, const JointConfig& config,
                 MeasureOptions& mo, const Context& interval, std::uint64_t step) {
    std::optional<Measurement> stored;
    if (options_.log != nullptr) stored = options_.log->find(step, config);
    if (stored) {
      rec.measured = std::move(*stored);
      rec.replayed = true;
      ++report_.replayed;
    } else {
      rec.measured = testbed_.measure(interval, runs, config, mo);
      if (options_.log != nullptr) {
        if (auto st = options_.log->store(step, config, interval, rec.measured); !st.ok()) {
          return st.error().wrap("storing interval " + std::to_string(step));
        }
      }
    }
    // A testbed that runs its transitions for real measured their downtime: it replaces the
    // charged seconds (a real restart can end before or after its modelled outage).
    for (const auto& mm : rec.measured.models) {
      if (mm.downtime_s && mm.model < n_) rec.outage_s[mm.model] = *mm.downtime_s;
    }
    return {};
  }

  /// Counts the measured utility and breaches on ground truth, and lets the controller learn
  /// from the windows that measured the plan's configuration at the plan's demand.
  void judge(IntervalRecord& rec, const Workload& truth, const Workload& now,
             const JointConfig& config, const Decision* plan, std::uint64_t step) {
    const bool swap_kernels = rec.swap_gpu_s > 0;  // a new copy's start ran beside everyone
    rec.breach.assign(n_, false);
    for (const auto& mm : rec.measured.models) {
      if (config[mm.model] != kAbsent && mm.ok()) {
        rec.measured_utility += model_utility(truth, mm.model, config[mm.model], as_predicted(mm));
      }
    }
    if (!plan) return;
    // A window that paid a transition measured the swap, not the configuration; a window
    // whose trace demand left the band around the demand the plan was made for measured
    // another workload than the one predicted (telemetry tells the planner that demand at the
    // next decision). Either counts on ground truth, and is not learned from (nor does its
    // breach ask for a new plan).
    std::vector<ModelObservation> obs = observations(rec.measured, config);
    std::vector<ModelObservation> steady;
    for (const auto& o : obs) {
      const bool other_demand = !replay_[o.model].empty() &&
                                demand_moved(now.models[o.model].demand, replay_[o.model][step],
                                             options_.trace_demand_band);
      if (rec.in_transition[o.model] || swap_kernels || other_demand) {
        rec.breach[o.model] = measured_breach(now.models[o.model], o);
      } else {
        steady.push_back(o);
      }
    }
    const auto r = controller_.observe(steady, plan->id);
    for (std::size_t m = 0; m < n_; ++m) {
      if (!rec.in_transition[m] && !swap_kernels && m < r.breach.size()) {
        rec.breach[m] = r.breach[m];
      }
    }
  }

  /// Compares the window's measured GPU activity with the catalog twin's for the plan, as
  /// serve compares DCGM's (a window that paid a transition measured the swap: not compared),
  /// and tells the controller the unexplained load to plan with.
  void watch_gpu_activity(IntervalRecord& rec, const Workload& runs, const JointConfig& config) {
    if (unexplained_ && rec.measured.ok() && rec.swap_gpu_s == 0 &&
        std::none_of(rec.in_transition.begin(), rec.in_transition.end(),
                     [](bool b) { return b; }) &&
        std::any_of(config.begin(), config.end(), [](std::int32_t l) { return l != kAbsent; })) {
      const Measurement twin =
          twin_.measure(Context{}, runs, config, MeasureOptions(interval_, Conditions{}, false));
      if (twin.ok()) {
        rec.sm_active_predicted = twin.gpu.sm_util;
        unexplained_->observe(rec.measured.gpu.sm_util, twin.gpu.sm_util,
                              rec.measured.gpu.mem_bw_util, twin.gpu.mem_bw_util);
        if (options_.gpu_activity->plan_with) controller_.set_gpu_load(unexplained_->planned());
      }
    }
    rec.gpu_load = controller_.gpu_load();
  }

  /// Gives the background refit a window that measured the plan (a window of a swap measured
  /// the swap), and starts a refit once enough are pending.
  void feed_refit(const Workload& runs, const JointConfig& config, const IntervalRecord& rec,
                  const MeasureOptions& mo, const Context& interval, std::uint64_t step) {
    if (!refit_ || !mo.transitions.empty()) return;
    refit_->add(runs, config, rec.measured, interval);
    if (!refit_->running() && refit_->pending() >= refit_every()) {
      refit_->start();
      refit_started_ = step;
    }
  }

  const Workload& w_;
  const Testbed& testbed_;
  const RunOptions& options_;
  Controller& controller_;
  RunReport& report_;
  const std::size_t n_;
  const double interval_;
  std::unique_ptr<BackgroundRefit> refit_;
  std::uint64_t refit_started_ = 0;
  Conditions conditions_;
  std::size_t next_event_ = 0;
  JointConfig last_plan_;
  TransitionLedger ledger_;  // transitions under way: what each window pays of them
  std::vector<std::vector<Demand>> replay_;
  std::vector<Demand> told_;
  std::optional<UnexplainedLoad> unexplained_;  // RunOptions::gpu_activity
  SimTestbed twin_;  // the catalog's simulator, noise-free: what the plan should keep busy
};

}  // namespace

Result<RunReport> run_online(const Context& ctx, const Workload& w, const Testbed& testbed,
                             std::unique_ptr<PredictorSource> source, const RunOptions& options) {
  if (auto s = make_solver(options.controller.solver); !s) return s.error();
  if (options.gpu_activity) {
    if (auto s = check(*options.gpu_activity); !s.ok()) return s.error();
  }
  RunReport report;
  report.workload = w.file;
  report.testbed = std::string(testbed.name());
  report.device = w.device.name;
  report.solver = options.controller.solver;
  report.context = ctx;
  report.learning = options.controller.learning.enabled;
  report.breach_target = options.controller.learning.breach_target;
  report.source = source->describe();
  for (const auto& m : w.models) report.model_names.push_back(m.name);

  // The planner never sees drift events.
  Workload planner = w;
  std::erase_if(planner.timeline.events,
                [](const TimelineEvent& e) { return !e.planner_visible(); });
  // SLAs are judged per interval: a swap that breaches loses whole intervals.
  ControllerOptions controller_options = options.controller;
  if (w.timeline.interval_s > 0) controller_options.transitions.window_s = w.timeline.interval_s;
  Controller controller(ctx, planner, std::move(source), controller_options);

  OnlineLoop loop(w, testbed, options, controller, report);
  if (auto s = loop.open_refit(); !s.ok()) return s.error();
  const double interval = w.timeline.interval_s > 0 ? w.timeline.interval_s : 10;
  const double duration = w.timeline.duration_s > 0 ? w.timeline.duration_s : interval;
  std::size_t steps = 0;
  while (static_cast<double>(steps) * interval < duration - 1e-9) ++steps;
  loop.read_traces(steps);
  for (std::uint64_t step = 0; step < steps; ++step) {
    if (auto s = loop.run_interval(step); !s.ok()) return s.error();
  }
  report.source_measurements = controller.source_measurements();
  return report;
}

}  // namespace corun
