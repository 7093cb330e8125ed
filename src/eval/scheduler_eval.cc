#include "corun/eval/scheduler_eval.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "corun/core/stats.h"
#include "corun/eval/hindsight_oracle.h"
#include "corun/eval/robust_oracle.h"
#include "corun/runtime/controller.h"
#include "corun/space/space.h"

namespace corun {

namespace {

double median(std::vector<double> v) { return quantile(std::move(v), 0.5, NAN); }

// A plan "within X %" of the oracle: gaps are measured in % of the oracle's utility.
constexpr double kRecoveredPct = 3.0;
constexpr std::size_t kAllowedIntervals = 2;
constexpr std::size_t kSettledIntervals = 10;
constexpr std::size_t kStartIntervals = 3;

double gap_pct(double oracle, double got) {
  if (!(oracle > 0) || !std::isfinite(oracle)) return NAN;
  return 100.0 * std::max(0.0, oracle - got) / oracle;
}

}  // namespace

Status check_enumerable(const Workload& w, const SchedulerEvalOptions& options) {
  const ConfigCount joint = joint_config_count(w);
  if (joint.exact()) return {};
  std::vector<std::string> enumerating;
  if (options.oracle) enumerating.push_back("the robust oracle (--no-oracle)");
  if (options.exhaustive_gap) enumerating.push_back("the exhaustive gap (--no-exhaustive)");
  if (std::find(options.solvers.begin(), options.solvers.end(), "exhaustive") !=
      options.solvers.end()) {
    enumerating.push_back("the exhaustive solver (--solvers)");
  }
  if (enumerating.empty()) return {};
  std::string what;
  for (std::size_t i = 0; i < enumerating.size(); ++i) {
    what += (i == 0 ? "" : i + 1 == enumerating.size() ? " and " : ", ") + enumerating[i];
  }
  return Error(w.file + ": " + joint.to_string() +
               " joint configurations (more than 2^64) cannot be enumerated; turn off " + what);
}

namespace {

/// What one row's run leaves behind for scoring, beside its report: the gaps of each decision
/// and interval, and the timeline the hindsight oracle scores.
struct RowTrace {
  std::vector<double> gap_ex, gap_or, gap_or1;
  std::vector<double> interval_gap;
  std::vector<bool> truth_feasible;
  std::vector<HindsightInterval> timeline;
  std::vector<JointConfig> plans;
  std::vector<std::vector<double>> admitted_shares;
  Status failure;
};

/// The online loop's options for one row.
RunOptions row_run_options(const Workload& w, const SchedulerEvalOptions& options,
                           const std::string& solver, bool learning, bool aware) {
  RunOptions ro;
  ro.controller.solver = solver;
  ro.controller.learning = options.learning_options;
  ro.controller.learning.enabled = learning;
  ro.controller.admission.enabled = options.shed;
  ro.controller.transitions.aware = aware;
  if (auto it = options.refit_datasets.find(w.file); it != options.refit_datasets.end()) {
    ro.refit_dataset = it->second;
  }
  return ro;
}

/// Scores each decision against the exhaustive optimum of the same problem (same predictions,
/// margins and constraints), solved with seed 1 on `ctx`'s threads.
void watch_decisions(const Context& ctx, RunOptions& ro, RowTrace& trace, const std::string& solver,
                     const Solver& exhaustive, const SchedulerEvalOptions& options) {
  const Context exhaustive_ctx{.seed = 1, .threads = ctx.threads};
  ro.controller.on_decision = [&trace, &solver, &exhaustive, &options, exhaustive_ctx](
                                  const PlanProblem& p, const PlanResult& chosen) {
    if (solver == "exhaustive") {
      trace.gap_ex.push_back(0.0);
      return;
    }
    if (!options.exhaustive_gap) return;
    auto ex = exhaustive.solve(exhaustive_ctx, p, SolverOptions{});
    if (!ex) {
      trace.failure = ex.error();
      return;
    }
    if (ex->feasible && ex->utility > 0) {
      trace.gap_ex.push_back(100.0 * std::max(0.0, ex->utility - chosen.utility) / ex->utility);
    }
  };
}

/// Scores each interval's plan against the robust oracle's best for the workload and
/// conditions the testbed met, and keeps the timeline for the hindsight oracle.
void watch_intervals(RunOptions& ro, RowTrace& trace, RobustOracle& oracle,
                     const SchedulerEvalOptions& options) {
  ro.on_interval = [&trace, &oracle, &options](const IntervalRecord& iv, const Workload& now) {
    if (!options.oracle) return;
    trace.timeline.push_back({now, iv.conditions});
    trace.plans.push_back(iv.plan);
    trace.admitted_shares.push_back(iv.admitted);
    const auto best = oracle.best(now, iv.conditions);
    trace.truth_feasible.push_back(best.feasible);
    const bool any =
        std::any_of(iv.plan.begin(), iv.plan.end(), [](std::int32_t l) { return l != kAbsent; });
    if (!any) {
      trace.interval_gap.push_back(NAN);
      return;
    }
    // A plan that refuses part of some demand is measured as it runs.
    std::optional<Workload> runs;
    if (!iv.admitted.empty()) runs = admitted_workload(now, iv.admitted);
    const Workload* admitted = runs ? &*runs : nullptr;
    const RobustScore mine = oracle.score(now, iv.conditions, iv.plan, admitted);
    const double g = best.feasible ? gap_pct(best.utility, mine.earned) : NAN;
    trace.interval_gap.push_back(g);
    if (std::isfinite(g)) trace.gap_or.push_back(g);
    if (best.feasible_1) {
      trace.gap_or1.push_back(
          gap_pct(best.utility_1, oracle.score_1(now, iv.conditions, iv.plan, admitted)));
    }
  };
}

/// Measured utility, violations and infeasible intervals, counted on the report.
void count_intervals(SchedulerEvalRow& row, const RunReport& report, const RowTrace& trace) {
  row.sla_violations = report.sla_violations();
  row.refits = report.refits;
  row.shed_model_intervals = report.shed_model_intervals();
  double u = 0;
  std::size_t model_intervals = 0;
  for (std::size_t k = 0; k < report.intervals.size(); ++k) {
    const auto& iv = report.intervals[k];
    u += iv.measured_utility;
    model_intervals += iv.measured.models.size();
    if (!iv.feasible) ++row.infeasible_intervals;
    const auto b = static_cast<std::size_t>(std::count(iv.breach.begin(), iv.breach.end(), true));
    if (k >= kStartIntervals) row.violations_after_3 += b;
    if (k < trace.truth_feasible.size()) {
      if (trace.truth_feasible[k]) {
        row.violations_where_feasible += b;
      } else {
        ++row.infeasible_truth_intervals;
      }
    }
  }
  row.breach_rate = model_intervals > 0 ? static_cast<double>(row.sla_violations) /
                                              static_cast<double>(model_intervals)
                                        : 0;
  row.mean_measured_utility =
      report.intervals.empty() ? 0 : u / static_cast<double>(report.intervals.size());
}

/// Drift events: what the unseen changes cost, and how fast the loop recovered.
void score_drift(SchedulerEvalRow& row, const RunReport& report,
                 const std::vector<double>& interval_gap) {
  std::vector<std::size_t> starts;
  for (std::size_t k = 0; k < report.intervals.size(); ++k) {
    for (const auto& e : report.intervals[k].drift) {
      DriftOutcome o;
      o.t_s = report.intervals[k].t_s;
      o.event = e;
      row.drift.push_back(o);
      starts.push_back(k);
    }
  }
  for (std::size_t e = 0; e < row.drift.size(); ++e) {
    const std::size_t from = starts[e];
    const std::size_t to = e + 1 < starts.size() ? starts[e + 1] : report.intervals.size();
    DriftOutcome& o = row.drift[e];
    for (std::size_t k = from; k < to; ++k) {
      const auto& iv = report.intervals[k];
      const auto b = static_cast<std::size_t>(std::count(iv.breach.begin(), iv.breach.end(), true));
      (k - from < kAllowedIntervals ? o.breaches_within_2 : o.breaches_after_2) += b;
      if (k < interval_gap.size()) {
        const double g = interval_gap[k];
        if (o.recovery_intervals < 0 && std::isfinite(g) && g <= kRecoveredPct) {
          o.recovery_intervals = static_cast<int>(k - from);
        }
        if (k - from >= kSettledIntervals && std::isfinite(g)) {
          o.max_gap_from_10th_pct =
              std::isfinite(o.max_gap_from_10th_pct) ? std::max(o.max_gap_from_10th_pct, g) : g;
        }
      }
    }
  }
}

/// One scenario's oracles: the robust oracle scores each interval, the hindsight oracle the
/// whole timeline. The workload and conditions of every interval are the timeline's, the same
/// in every row, so the hindsight schedule is computed once per scenario.
struct ScenarioOracles {
  RobustOracle oracle;
  HindsightOracle hindsight;
  std::optional<HindsightSchedule> best_schedule;

  ScenarioOracles(const Context& ctx, const Testbed& testbed, double window,
                  const SchedulerEvalOptions& options)
      : oracle(testbed, window, ctx.threads, options.oracle_windows, 0.99,
               std::max(1, options.hindsight_candidates)),
        hindsight(oracle, ActuationTable::builtin(), window) {}
};

/// Runs one row (scenario, solver, learning, transitions) and scores it.
Result<SchedulerEvalRow> evaluate_row(const Context& ctx, const Workload& w, const Testbed& testbed,
                                      const SourceFactory& sources,
                                      const SchedulerEvalOptions& options, const Solver& exhaustive,
                                      ScenarioOracles& oracles, const std::string& solver,
                                      bool learning, bool aware) {
  auto source = sources(w);
  if (!source) return source.error();
  RowTrace trace;
  RunOptions ro = row_run_options(w, options, solver, learning, aware);
  watch_decisions(ctx, ro, trace, solver, exhaustive, options);
  watch_intervals(ro, trace, oracles.oracle, options);
  auto report = run_online(ctx, w, testbed, std::move(*source), ro);
  if (!report) return report.error().wrap(w.file);
  if (!trace.failure.ok()) return trace.failure.error().wrap(w.file);
  SchedulerEvalRow row;
  row.scenario = w.file;
  row.solver = solver;
  row.learning = learning;
  row.transitions_aware = aware;
  for (std::size_t c : report->changes(Actuation::kRestart)) row.restarts += c;
  for (std::size_t c : report->changes(Actuation::kReload)) row.reloads += c;
  for (double o : report->outage_s()) row.downtime_s += o;
  row.intervals = report->intervals.size();
  const auto d = report->decision_ms();
  row.decisions = d.size();
  row.decision_ms_p50 = quantile(d, 0.5, 0.0);
  row.decision_ms_p99 = quantile(d, 0.99, 0.0);
  row.gap_to_exhaustive_pct = median(trace.gap_ex);
  row.gap_to_oracle_pct = median(trace.gap_or);
  row.gap_to_oracle_1_pct = median(trace.gap_or1);
  row.interval_gap_pct = trace.interval_gap;
  if (options.oracle && options.hindsight_candidates > 0 && !trace.timeline.empty()) {
    auto& best = oracles.best_schedule;
    if (!best) best = oracles.hindsight.best(trace.timeline);
    row.hindsight_value = best->value;
    row.hindsight_restarts = best->restarts;
    row.run_value =
        oracles.hindsight.value(trace.timeline, trace.plans, trace.admitted_shares, best->planned);
    row.gap_to_hindsight_pct = gap_pct(row.hindsight_value, row.run_value);
  }
  count_intervals(row, *report, trace);
  score_drift(row, *report, trace.interval_gap);
  return row;
}

}  // namespace

Result<std::vector<SchedulerEvalRow>> evaluate_scheduler(const Context& ctx,
                                                         const std::vector<Workload>& scenarios,
                                                         const Testbed& testbed,
                                                         const SourceFactory& sources,
                                                         const SchedulerEvalOptions& options) {
  std::vector<SchedulerEvalRow> rows;
  auto exhaustive = make_solver("exhaustive");
  if (!exhaustive) return exhaustive.error();
  for (const auto& w : scenarios) {
    if (auto st = check_enumerable(w, options); !st.ok()) return st.error();
  }
  for (const auto& w : scenarios) {
    const double window = w.timeline.interval_s > 0 ? w.timeline.interval_s : 10;
    ScenarioOracles oracles(ctx, testbed, window, options);
    for (const bool learning : options.learning) {
      for (const bool aware : options.transitions) {
        for (const auto& solver : options.solvers) {
          if (options.progress) {
            options.progress(w.file + " / " + solver + " / learning " + (learning ? "on" : "off") +
                             " / transitions " + (aware ? "aware" : "ignore"));
          }
          auto row = evaluate_row(ctx, w, testbed, sources, options, **exhaustive, oracles, solver,
                                  learning, aware);
          if (!row) return row.error();
          rows.push_back(std::move(*row));
        }
      }
    }
  }
  return rows;
}

nlohmann::json to_json(const SchedulerEvalRow& r) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  nlohmann::json drift = nlohmann::json::array();
  for (const auto& d : r.drift) {
    drift.push_back({{"t_s", d.t_s},
                     {"event", d.event},
                     {"breaches_within_2", d.breaches_within_2},
                     {"breaches_after_2", d.breaches_after_2},
                     {"recovery_intervals", d.recovery_intervals},
                     {"max_gap_from_10th_pct", num(d.max_gap_from_10th_pct)}});
  }
  nlohmann::json gaps = nlohmann::json::array();
  for (const double g : r.interval_gap_pct) gaps.push_back(num(g));
  return {{"scenario", r.scenario},
          {"solver", r.solver},
          {"learning", r.learning ? "on" : "off"},
          {"transitions", r.transitions_aware ? "aware" : "ignore"},
          {"restarts", r.restarts},
          {"reloads", r.reloads},
          {"downtime_s", r.downtime_s},
          {"intervals", r.intervals},
          {"decisions", r.decisions},
          {"gap_to_exhaustive_pct", num(r.gap_to_exhaustive_pct)},
          {"gap_to_oracle_pct", num(r.gap_to_oracle_pct)},
          {"gap_to_oracle_1_pct", num(r.gap_to_oracle_1_pct)},
          {"gap_to_hindsight_pct", num(r.gap_to_hindsight_pct)},
          {"hindsight_value", num(r.hindsight_value)},
          {"run_value", num(r.run_value)},
          {"hindsight_restarts", r.hindsight_restarts},
          {"interval_gap_to_oracle_pct", gaps},
          {"sla_violations", r.sla_violations},
          {"violations_after_3", r.violations_after_3},
          {"violations_where_feasible", r.violations_where_feasible},
          {"infeasible_truth_intervals", r.infeasible_truth_intervals},
          {"breach_rate", r.breach_rate},
          {"infeasible_intervals", r.infeasible_intervals},
          {"shed_model_intervals", r.shed_model_intervals},
          {"drift", drift},
          {"decision_ms_p50", r.decision_ms_p50},
          {"decision_ms_p99", r.decision_ms_p99},
          {"mean_measured_utility", r.mean_measured_utility},
          {"refits", r.refits}};
}

}  // namespace corun
