#include "corun/runtime/controller.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "corun/core/rng.h"
#include "corun/core/strings.h"
#include "corun/plan/objective.h"

namespace corun {

std::size_t RunReport::sla_violations() const {
  std::size_t n = 0;
  for (const auto& iv : intervals) n += static_cast<std::size_t>(std::count(iv.breach.begin(), iv.breach.end(), true));
  return n;
}

std::vector<double> RunReport::decision_ms() const {
  std::vector<double> out;
  for (const auto& iv : intervals) {
    if (iv.replanned) out.push_back(iv.decision_ms);
  }
  return out;
}

bool measured_meets_sla(const ModelSpec& m, const ModelMetrics& mm) {
  if (!mm.ok()) return false;
  return sla_excess(m, as_predicted(mm), 0.0) == 0;
}

Predicted as_predicted(const ModelMetrics& mm) {
  Predicted p;
  p.latency_ms_p95 = static_cast<float>(mm.latency_ms_p95);
  p.ttft_ms_p95 = static_cast<float>(mm.ttft_ms_p95.value_or(0));
  p.tpot_ms_p95 = static_cast<float>(mm.tpot_ms_p95.value_or(0));
  p.throughput = static_cast<float>(mm.throughput);
  return p;
}

namespace {

// Applies one event to the current workload; returns its description.
std::string apply_event(Workload& w, const TimelineEvent& e) {
  ModelSpec& m = w.models[e.model];
  switch (e.kind) {
    case TimelineEvent::Kind::kArrive:
      m.active = true;
      break;
    case TimelineEvent::Kind::kDepart:
      m.active = false;
      break;
    case TimelineEvent::Kind::kDemand:
    case TimelineEvent::Kind::kContext:
      m.demand = e.demand;
      break;
    case TimelineEvent::Kind::kSla:
      m.sla = e.sla;
      break;
  }
  return std::string(to_string(e.kind)) + " " + m.name;
}

// How much the measurement exceeded the prediction on the metrics the SLA constrains.
double under_prediction(const ModelSpec& m, const Predicted& predicted, const ModelMetrics& mm) {
  double ratio = 1;
  auto upd = [&](const std::optional<double>& limit, double pred, double meas) {
    if (limit && pred > 0) ratio = std::max(ratio, meas / pred);
  };
  upd(m.sla.latency_ms_p95, predicted.latency_ms_p95, mm.latency_ms_p95);
  upd(m.sla.ttft_ms_p95, predicted.ttft_ms_p95, mm.ttft_ms_p95.value_or(0));
  upd(m.sla.tpot_ms_p95, predicted.tpot_ms_p95, mm.tpot_ms_p95.value_or(0));
  return ratio;
}

}  // namespace

Result<RunReport> run_online(const Workload& w, const Testbed& testbed, PredictorSource& source,
                             const ControllerOptions& options,
                             const std::function<void(const IntervalRecord&)>& on_interval) {
  auto solver = make_solver(options.solver);
  if (!solver) return solver.error();
  RunReport report;
  report.workload = w.file;
  report.testbed = std::string(testbed.name());
  report.device = w.device.name;
  report.solver = options.solver;
  report.seed = options.seed;
  for (const auto& m : w.models) report.model_names.push_back(m.name);

  const std::size_t n = w.models.size();
  Workload cur = w;
  const double interval = w.timeline.interval_s > 0 ? w.timeline.interval_s : 10;
  const double duration = w.timeline.duration_s > 0 ? w.timeline.duration_s : interval;
  JointConfig plan(n, kAbsent);
  std::vector<Predicted> predicted(n);
  std::vector<double> boost(n, 0.0);
  std::unique_ptr<Predictor> predictor;
  std::unique_ptr<PlanProblem> problem;
  std::size_t next_event = 0;
  bool breached = false;
  bool changed = true;

  for (std::uint64_t step = 0; static_cast<double>(step) * interval < duration - 1e-9; ++step) {
    IntervalRecord rec;
    rec.t_s = static_cast<double>(step) * interval;
    while (next_event < cur.timeline.events.size() &&
           cur.timeline.events[next_event].at_s <= rec.t_s + 1e-9) {
      rec.events.push_back(apply_event(cur, cur.timeline.events[next_event++]));
      changed = true;
    }
    std::vector<bool> active(n);
    for (std::size_t m = 0; m < n; ++m) active[m] = cur.models[m].active;
    const bool any_active = std::find(active.begin(), active.end(), true) != active.end();
    if (changed) {
      auto p = source.predictor_for(cur);
      if (!p) return p.error().wrap("predicting for the workload at t=" + format_number(rec.t_s));
      predictor = std::move(*p);
    }
    if ((changed || breached) && any_active) {
      rec.replanned = true;
      rec.reason = step == 0 ? "start" : (changed ? "event" : "breach");
      std::vector<double> margins = source.margins(cur);
      margins.resize(n, 0.0);
      for (std::size_t m = 0; m < n; ++m) margins[m] += boost[m];
      problem = std::make_unique<PlanProblem>(cur, active, *predictor, margins);
      SolverOptions so{derive_seed(options.seed, {step}), options.threads, plan};
      const auto start = std::chrono::steady_clock::now();
      auto r = (*solver)->solve(*problem, so);
      rec.decision_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (!r) return r.error().wrap("planning at t=" + format_number(rec.t_s));
      rec.plan_changed = r->config != plan;
      plan = r->config;
      predicted = r->predicted;
      rec.evaluated = r->stats.evaluated;
      rec.predicted_utility = r->utility;
      if (options.on_decision) options.on_decision(*problem, *r, rec);
    } else if (problem) {
      rec.predicted_utility = problem->score(plan, predicted).utility;
    }
    for (std::size_t m = 0; m < n; ++m) {
      if (!active[m]) plan[m] = kAbsent;
    }
    rec.plan = plan;
    rec.predicted = predicted;
    rec.measured = testbed.measure(cur, plan, {interval, derive_seed(options.seed, {0x7275, step})});
    rec.breach.assign(n, false);
    breached = false;
    for (const auto& mm : rec.measured.models) {
      const ModelSpec& spec = cur.models[mm.model];
      if (problem && plan[mm.model] != kAbsent) {
        rec.measured_utility += problem->model_utility(mm.model, plan[mm.model], as_predicted(mm));
      }
      if (!measured_meets_sla(spec, mm)) {
        rec.breach[mm.model] = true;
        breached = true;
        const double ratio = under_prediction(spec, predicted[mm.model], mm);
        boost[mm.model] = std::max(boost[mm.model] + options.breach_margin_step,
                                   ratio - 1 + options.breach_margin_step);
      }
    }
    changed = false;
    if (on_interval) on_interval(rec);
    report.intervals.push_back(std::move(rec));
  }
  return report;
}

}  // namespace corun
