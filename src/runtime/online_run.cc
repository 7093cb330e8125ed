#include "corun/runtime/online_run.h"

#include <algorithm>
#include <cmath>

#include "corun/core/rng.h"
#include "corun/core/strings.h"
#include "corun/plan/objective.h"
#include "corun/runtime/refit.h"
#include "corun/runtime/testbed_predictor.h"
#include "corun/runtime/transition_ledger.h"

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
                                                   std::uint64_t run_key,
                                                   std::uint64_t intervals) {
  auto ds = profile::Dataset::open(dataset, profile::Dataset::Mode::kCreate);
  if (!ds) return ds.error();
  const profile::CampaignSpec spec{profile::Plan::kOnline, run_key, std::string(testbed), window_s};
  auto id = ds->ensure_campaign(spec, w, workload_text, w.device.name, intervals);
  if (!id) return id.error().wrap("the online log");
  auto stored = ds->samples(*id);
  if (!stored) return stored.error();
  std::unique_ptr<OnlineLog> log(new OnlineLog(std::move(*ds), *id));
  log->stored_ = std::move(*stored);
  return log;
}

std::optional<Measurement> OnlineLog::find(std::uint64_t step, const JointConfig& config) const {
  for (const auto& s : stored_) {
    if (s.index == step && s.config == config) return s.measurement;
  }
  return std::nullopt;
}

Status OnlineLog::store(std::uint64_t step, const JointConfig& config, std::uint64_t seed,
                        const Measurement& m) {
  profile::SampleRecord rec;
  rec.index = step;
  rec.config = config;
  rec.measurement_seed = seed;
  rec.measurement = m;
  return ds_.insert(campaign_, rec);
}

// ---------------------------------------------------------------------------------------------
// The loop

Result<RunReport> run_online(const Workload& w, const Testbed& testbed,
                             std::unique_ptr<PredictorSource> source, const RunOptions& options) {
  if (auto s = make_solver(options.controller.solver); !s) return s.error();
  RunReport report;
  report.workload = w.file;
  report.testbed = std::string(testbed.name());
  report.device = w.device.name;
  report.solver = options.controller.solver;
  report.seed = options.controller.seed;
  report.learning = options.controller.learning.enabled;
  report.breach_target = options.controller.learning.breach_target;
  report.source = source->describe();
  for (const auto& m : w.models) report.model_names.push_back(m.name);

  // The planner never sees drift events.
  Workload planner = w;
  std::erase_if(planner.timeline.events, [](const TimelineEvent& e) { return !e.planner_visible(); });
  // SLAs are judged per interval: a swap that breaches loses whole intervals.
  ControllerOptions controller_options = options.controller;
  if (w.timeline.interval_s > 0) controller_options.transitions.window_s = w.timeline.interval_s;
  Controller controller(planner, std::move(source), controller_options);

  std::unique_ptr<BackgroundRefit> refit;
  const std::size_t refit_every = options.controller.learning.refit_every;
  if (!options.refit_dataset.empty() && refit_every > 0 && options.controller.learning.enabled &&
      controller.fitted() != nullptr) {
    auto r = BackgroundRefit::open(
        options.refit_dataset,
        options.catalog != nullptr ? *options.catalog : Catalog::default_catalog(),
        *controller.fitted());
    if (!r) return r.error();
    refit = std::move(*r);
  }
  std::uint64_t refit_started = 0;

  const std::size_t n = w.models.size();
  const double interval = w.timeline.interval_s > 0 ? w.timeline.interval_s : 10;
  const double duration = w.timeline.duration_s > 0 ? w.timeline.duration_s : interval;
  Conditions conditions;
  std::size_t next_event = 0;
  JointConfig last_plan;
  // Transitions under way: what each window pays of them.
  TransitionLedger ledger(n);
  const ActuationTable& actuation = ActuationTable::builtin();
  // Trace demands: per model, the demand of each interval as the testbed meets it. The planner
  // is told an interval's demand only once the interval has ended, as telemetry would tell it.
  std::size_t steps = 0;
  while (static_cast<double>(steps) * interval < duration - 1e-9) ++steps;
  std::vector<std::vector<Demand>> replay(n);
  std::vector<Demand> told(n);  // the trace demand the planner was last told
  for (std::size_t m = 0; m < n; ++m) {
    if (!w.models[m].trace) continue;
    replay[m] = w.models[m].trace->intervals(interval, steps);
    told[m] = w.models[m].demand;
  }

  for (std::uint64_t step = 0; static_cast<double>(step) * interval < duration - 1e-9; ++step) {
    IntervalRecord rec;
    rec.t_s = static_cast<double>(step) * interval;
    controller.advance_to(rec.t_s);
    while (next_event < w.timeline.events.size() &&
           w.timeline.events[next_event].at_s <= rec.t_s + 1e-9) {
      const TimelineEvent& e = w.timeline.events[next_event++];
      if (e.planner_visible()) {
        rec.events.push_back(controller.apply(e));
      } else {
        rec.drift.push_back(conditions.apply(e));
      }
    }
    for (std::size_t m = 0; m < n && step > 0; ++m) {
      if (replay[m].empty() ||
          !demand_moved(told[m], replay[m][step - 1], options.trace_demand_band)) {
        continue;
      }
      TimelineEvent e;
      e.at_s = rec.t_s;
      e.kind = TimelineEvent::Kind::kDemand;
      e.model = m;
      e.demand = told[m] = replay[m][step - 1];
      e.line = w.models[m].line;
      rec.events.push_back(controller.apply(e));
    }
    rec.conditions = conditions;
    if (refit && refit->running() && step >= refit_started + 2) {
      auto s = refit->wait();
      if (s && *s) {
        if (auto st = controller.adopt(std::move(**s)); !st.ok()) return st.error().wrap("refit");
        rec.refit = true;
        ++report.refits;
      } else if (s) {
        // The run goes on with the fit it has; the failure is reported, not swallowed.
        rec.refit_error = (*s).error().what();
        ++report.refit_failures;
      }
    }
    const Workload now = controller.workload();
    // What the testbed meets: this interval's trace demands, which the planner has not seen.
    std::optional<Workload> replayed;
    for (std::size_t m = 0; m < n; ++m) {
      if (replay[m].empty()) continue;
      if (!replayed) replayed = now;
      replayed->models[m].demand = replay[m][step];
    }
    const Workload& truth = replayed ? *replayed : now;
    const bool any_active =
        std::any_of(now.models.begin(), now.models.end(), [](const ModelSpec& m) { return m.active; });
    if (any_active && (controller.replan_due() || !controller.plan())) {
      rec.reason = step == 0 ? std::string("start") : controller.due_reason();
      auto d = controller.replan(rec.reason);
      if (!d) return d.error().wrap("at t=" + format_number(rec.t_s));
      if (*d) {
        rec.replanned = true;
        rec.decision_ms = (*d)->decision_ms;
        rec.measure_ms = (*d)->measure_ms;
        rec.evaluated = (*d)->stats.evaluated;
      }
    }
    const auto plan = controller.plan();
    JointConfig config(n, kAbsent);
    if (plan) config = plan->config;
    for (std::size_t m = 0; m < n; ++m) {
      if (!now.models[m].active) config[m] = kAbsent;
    }
    rec.plan = config;
    rec.plan_changed = rec.replanned && config != last_plan;
    if (config != last_plan && last_plan.size() == n) {
      rec.transition = joint_transition(actuation, now, last_plan, config);
      ledger.begin(rec.transition);
    }
    last_plan = config;
    // What this window pays of the transitions under way.
    MeasureOptions mo(interval, 0, conditions, true);
    mo.transitions = ledger.next_window(config, interval);
    rec.in_transition.assign(n, false);
    rec.outage_s.assign(n, 0.0);
    for (const TransitionCharge& c : mo.transitions) {
      rec.in_transition[c.model] = true;
      rec.outage_s[c.model] = c.outage_s;
      rec.swap_gpu_s = std::max(rec.swap_gpu_s, c.swap_gpu_s);
    }
    const bool swap_kernels = rec.swap_gpu_s > 0;  // a new copy's start ran beside everyone
    if (plan) {
      rec.decision = plan->id;
      rec.predicted = plan->predicted;
      rec.margins = plan->margins;
      rec.feasible = plan->feasible;
      for (const auto& why : plan->infeasible) rec.infeasible.push_back(why.message());
      rec.admitted = plan->admitted;
      for (std::size_t m = 0; m < n; ++m) {
        if (config[m] != kAbsent) rec.predicted_utility += model_utility(now, m, config[m], rec.predicted[m]);
      }
    }
    // What runs: the plan's refused shares never reach the testbed; utility still counts
    // against the whole demand, so the refused share earns nothing.
    const Workload runs = admitted_workload(truth, rec.admitted);
    const std::uint64_t seed = derive_seed(options.controller.seed, {kIntervalStream, step});
    std::optional<Measurement> stored;
    if (options.log != nullptr) stored = options.log->find(step, config);
    if (stored) {
      rec.measured = std::move(*stored);
      rec.replayed = true;
      ++report.replayed;
    } else {
      mo.seed = seed;
      rec.measured = testbed.measure(runs, config, mo);
      if (options.log != nullptr) {
        if (auto st = options.log->store(step, config, seed, rec.measured); !st.ok()) {
          return st.error().wrap("storing interval " + std::to_string(step));
        }
      }
    }
    // A testbed that runs its transitions for real measured their downtime: it replaces the
    // charged seconds (a real restart can end before or after its modelled outage).
    for (const auto& mm : rec.measured.models) {
      if (mm.downtime_s && mm.model < n) rec.outage_s[mm.model] = *mm.downtime_s;
    }
    rec.breach.assign(n, false);
    for (const auto& mm : rec.measured.models) {
      if (config[mm.model] != kAbsent && mm.ok()) {
        rec.measured_utility += model_utility(truth, mm.model, config[mm.model], as_predicted(mm));
      }
    }
    if (plan) {
      // A window that paid a transition measured the swap, not the configuration; a window
      // whose trace demand left the band around the demand the plan was made for measured
      // another workload than the one predicted (telemetry tells the planner that demand at the
      // next decision). Either counts on ground truth, and is not learned from (nor does its
      // breach ask for a new plan).
      std::vector<ModelObservation> obs = observations(rec.measured, config);
      std::vector<ModelObservation> steady;
      for (const auto& o : obs) {
        const bool other_demand =
            !replay[o.model].empty() &&
            demand_moved(now.models[o.model].demand, replay[o.model][step],
                         options.trace_demand_band);
        if (rec.in_transition[o.model] || swap_kernels || other_demand) {
          rec.breach[o.model] = measured_breach(now.models[o.model], o);
        } else {
          steady.push_back(o);
        }
      }
      const auto r = controller.observe(steady, plan->id);
      for (std::size_t m = 0; m < n; ++m) {
        if (!rec.in_transition[m] && !swap_kernels && m < r.breach.size()) {
          rec.breach[m] = r.breach[m];
        }
      }
    }
    rec.learning = controller.learning_state();
    if (refit && mo.transitions.empty()) {  // a window of a swap measured the swap
      refit->add(runs, config, rec.measured, seed);
      if (!refit->running() && refit->pending() >= refit_every) {
        refit->start();
        refit_started = step;
      }
    }
    if (options.on_interval) options.on_interval(rec, truth);
    report.intervals.push_back(std::move(rec));
  }
  report.source_measurements = controller.source_measurements();
  return report;
}

}  // namespace corun
