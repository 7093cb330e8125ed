#include "corun/runtime/scheduler_eval.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "corun/core/rng.h"
#include "corun/core/stats.h"
#include "corun/runtime/testbed_predictor.h"

namespace corun {

namespace {

double median(std::vector<double> v) { return quantile(std::move(v), 0.5, 0.0); }
double p99(std::vector<double> v) { return quantile(std::move(v), 0.99, 0.0); }

// What the workload looks like now: the oracle depends on nothing else.
std::string state_key(const Workload& w) {
  std::string k;
  for (const auto& m : w.models) {
    k += m.active ? "1" : "0";
    k += ":" + std::to_string(m.demand.fps) + ":" + std::to_string(m.demand.rps) + ":" +
         std::to_string(m.demand.prompt_tokens) + ":" +
         std::to_string(m.sla.latency_ms_p95.value_or(0)) + ":" +
         std::to_string(m.sla.ttft_ms_p95.value_or(0)) + ":" +
         std::to_string(m.sla.tpot_ms_p95.value_or(0)) + ";";
  }
  return k;
}

constexpr std::uint64_t kOracleSeed = 0x0A4C1E;

}  // namespace

Result<std::vector<SchedulerEvalRow>> evaluate_scheduler(
    const std::vector<Workload>& scenarios, const Testbed& testbed, const SourceFactory& sources,
    const SchedulerEvalOptions& options) {
  std::vector<SchedulerEvalRow> rows;
  auto exhaustive = make_solver("exhaustive");
  if (!exhaustive) return exhaustive.error();
  for (const auto& w : scenarios) {
    std::map<std::string, double> oracle_cache;  // state -> best utility on the testbed
    for (const auto& solver : options.solvers) {
      if (options.progress) options.progress(w.file + " / " + solver);
      auto source = sources(w);
      if (!source) return source.error();
      std::vector<double> gap_ex, gap_or;
      ControllerOptions co;
      co.solver = solver;
      co.seed = options.seed;
      co.threads = options.threads;
      Status failure;
      co.on_decision = [&](const PlanProblem& p, const PlanResult& chosen, const IntervalRecord&) {
        // Same predictor, margins and constraints: how far from the exhaustive optimum?
        if (solver != "exhaustive") {
          auto ex = (*exhaustive)->solve(p, SolverOptions{1, options.threads, std::nullopt});
          if (!ex) {
            failure = ex.error();
            return;
          }
          if (ex->feasible && ex->utility > 0) {
            gap_ex.push_back(100.0 * std::max(0.0, ex->utility - chosen.utility) / ex->utility);
          }
        } else {
          gap_ex.push_back(0.0);
        }
        if (!options.oracle) return;
        // Ground truth: both plans scored on the testbed with one fixed seed.
        std::vector<bool> active(p.models());
        for (std::size_t m = 0; m < p.models(); ++m) active[m] = p.active(m);
        const TestbedPredictor truth(p.workload(), testbed, p.workload().timeline.interval_s,
                                     kOracleSeed);
        const PlanProblem gt(p.workload(), active, truth);
        const std::string key = state_key(p.workload());
        auto it = oracle_cache.find(key);
        if (it == oracle_cache.end()) {
          auto best = (*exhaustive)->solve(gt, SolverOptions{1, options.threads, std::nullopt});
          if (!best) {
            failure = best.error();
            return;
          }
          it = oracle_cache.emplace(key, best->feasible ? best->utility : NAN).first;
        }
        const PlanResult mine = evaluate_plan(gt, chosen.config, solver);
        if (std::isfinite(it->second) && it->second > 0) {
          const double got = mine.feasible ? mine.utility : 0.0;
          gap_or.push_back(100.0 * std::max(0.0, it->second - got) / it->second);
        }
      };
      auto report = run_online(w, testbed, **source, co);
      if (!report) return report.error().wrap(w.file);
      if (!failure.ok()) return failure.error().wrap(w.file);
      SchedulerEvalRow row;
      row.scenario = w.file;
      row.solver = solver;
      const auto d = report->decision_ms();
      row.decisions = d.size();
      row.decision_ms_p50 = median(d);
      row.decision_ms_p99 = p99(d);
      row.gap_to_exhaustive_pct = median(gap_ex);
      row.gap_to_oracle_pct = options.oracle ? median(gap_or) : NAN;
      row.sla_violations = report->sla_violations();
      double u = 0;
      for (const auto& iv : report->intervals) u += iv.measured_utility;
      row.mean_measured_utility =
          report->intervals.empty() ? 0 : u / static_cast<double>(report->intervals.size());
      rows.push_back(row);
    }
  }
  return rows;
}

nlohmann::json to_json(const SchedulerEvalRow& r) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  return {{"scenario", r.scenario},
          {"solver", r.solver},
          {"decisions", r.decisions},
          {"gap_to_exhaustive_pct", num(r.gap_to_exhaustive_pct)},
          {"gap_to_oracle_pct", num(r.gap_to_oracle_pct)},
          {"sla_violations", r.sla_violations},
          {"decision_ms_p50", r.decision_ms_p50},
          {"decision_ms_p99", r.decision_ms_p99},
          {"mean_measured_utility", r.mean_measured_utility}};
}

}  // namespace corun
