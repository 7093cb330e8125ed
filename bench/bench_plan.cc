// Solvers on a fitted MeanField surrogate: one planning decision per iteration for N = 5
// (paper-like, 78,732 joint configurations), 8 and 12 models. The surrogate is fitted once per
// workload and regressor on simulator profiles (one standalone pass + 20·N co-runs), monotone
// in the co-runners' aggregate (GBDT with XGBoost's constraints, or linear with sign-
// constrained weights), so the exact solver's optimality proof holds. Counters: candidates
// evaluated, branch-and-bound nodes, predicted utility, whether optimality was proved.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>

#include "corun/catalog/catalog.h"
#include "corun/plan/solver.h"
#include "corun/profile/campaign.h"
#include "corun/runtime/controller.h"
#include "corun/runtime/online_run.h"
#include "corun/runtime/surrogate_source.h"
#include "corun/surrogate/surrogate.h"

namespace corun {
namespace {

struct Fixture {
  Workload w;
  std::unique_ptr<surrogate::Surrogate> fitted;
  std::unique_ptr<SurrogatePredictor> predictor;
  std::unique_ptr<PlanProblem> problem;
};

const Fixture& fixture(const std::string& file,
                       surrogate::RegressorKind regressor = surrogate::RegressorKind::kGbdt) {
  static std::map<std::pair<std::string, surrogate::RegressorKind>, std::unique_ptr<Fixture>> cache;
  auto& slot = cache[{file, regressor}];
  if (slot) return *slot;
  slot = std::make_unique<Fixture>();
  auto w = load_workload(std::string(CORUN_SOURCE_DIR) + "/workloads/" + file,
                         Catalog::default_catalog());
  if (!w) std::abort();
  slot->w = std::move(*w);
  const Workload& wl = slot->w;
  auto tb = make_testbed("sim");
  if (!tb) std::abort();
  auto table = surrogate::StandaloneTable::from_samples(
      wl, profile::measure_plan(wl, **tb, profile::Plan::kStandalone, 1, 1, 10));
  if (!table) std::abort();
  const auto corun =
      profile::measure_plan(wl, **tb, profile::Plan::kMeanField, 20 * wl.models.size(), 1, 10);
  surrogate::FitOptions o;
  o.regressor = regressor;
  o.monotone = true;
  auto s = surrogate::Surrogate::fit(wl, *table, corun, o, {});
  if (!s) std::abort();
  auto c = surrogate::CompiledSurrogate::compile(*s, wl);
  if (!c) std::abort();
  slot->fitted = std::make_unique<surrogate::Surrogate>(std::move(*s));
  slot->predictor = std::make_unique<SurrogatePredictor>(std::move(*c));
  std::vector<double> margins(wl.models.size());
  for (std::size_t m = 0; m < wl.models.size(); ++m) {
    const auto& sig = slot->predictor->compiled();
    margins[m] = std::max(
        0.0, static_cast<double>(sig.upper95_factor(m, wl.models[m].arch.family == ModelFamily::kLlm
                                                           ? surrogate::Target::kTpotP95
                                                           : surrogate::Target::kLatencyP95)) -
                 1.0);
  }
  slot->problem = std::make_unique<PlanProblem>(wl, std::vector<bool>(wl.models.size(), true),
                                                *slot->predictor, margins);
  return *slot;
}

void solve(benchmark::State& state, const std::string& solver, const std::string& file,
           surrogate::RegressorKind regressor) {
  const Fixture& fx = fixture(file, regressor);
  auto s = make_solver(solver);
  if (!s) std::abort();
  PlanResult last;
  for (auto _ : state) {
    auto r = (*s)->solve(*fx.problem, {1, 2, std::nullopt});
    if (!r) {
      state.SkipWithError(r.error().message().c_str());
      return;
    }
    last = std::move(*r);
    benchmark::DoNotOptimize(last.utility);
  }
  state.counters["evaluated"] = static_cast<double>(last.stats.evaluated);
  state.counters["utility"] = last.utility;
  state.counters["proved"] = last.stats.proved_optimal ? 1 : 0;
  state.counters["nodes"] = static_cast<double>(last.stats.nodes);
  state.counters["models"] = static_cast<double>(fx.w.models.size());
}

// One decision of the online controller (its corrections snapshot, calibrated margins, the
// GA warm-started from the plan in force, the feasibility check), learning off vs on, after the
// controller has learned from 10 measured sim intervals of its own plans: what learning adds
// to the decision path. The interval measurements happen before timing starts.
void decide(benchmark::State& state, const std::string& file, bool learning) {
  const Fixture& fx = fixture(file);
  auto tb = make_testbed("sim");
  if (!tb) std::abort();
  ControllerOptions o;
  o.solver = "ga";
  o.learning.enabled = learning;
  Controller c(fx.w,
               std::make_unique<SurrogateSource>(*fx.fitted, **tb, SurrogateSourceOptions{}), o);
  for (std::uint64_t k = 0; k < 10; ++k) {
    auto d = c.replan(k == 0 ? "start" : "learning");
    if (!d || !*d) std::abort();
    const auto m = (*tb)->measure(fx.w, (*d)->config, MeasureOptions(10, 100 + k));
    c.observe(observations(m, (*d)->config), (*d)->id);
  }
  std::shared_ptr<const Decision> last;
  for (auto _ : state) {
    auto d = c.replan("bench");
    if (!d || !*d) {
      state.SkipWithError("no decision");
      return;
    }
    last = std::make_shared<const Decision>(std::move(**d));
    benchmark::DoNotOptimize(last);
  }
  state.counters["models"] = static_cast<double>(fx.w.models.size());
  state.counters["evaluated"] = static_cast<double>(last->stats.evaluated);
  state.counters["search_ms"] = last->decision_ms;
}

// One mean-field prediction of one model against a given aggregate load: the unit of work of
// the exact solver. Cycles over every model and local configuration of the N = 8 workload.
void BM_PredictGiven(benchmark::State& state) {
  const Fixture& fx = fixture("scale-n8.yaml");
  const SurrogatePredictor& pr = *fx.predictor;
  const std::size_t n = fx.w.models.size();
  std::vector<float> others(pr.aggregate_dims(), 0), mine(pr.aggregate_dims());
  for (std::size_t m = 0; m < n; ++m) {
    pr.contribution(m, 0, mine);
    for (std::size_t k = 0; k < others.size(); ++k) others[k] += mine[k];
  }
  std::vector<std::pair<std::size_t, std::int32_t>> cases;
  for (std::size_t m = 0; m < n; ++m) {
    for (std::size_t l = 0; l < fx.w.models[m].local_config_count(); ++l) {
      cases.emplace_back(m, static_cast<std::int32_t>(l));
    }
  }
  std::size_t i = 0;
  for (auto _ : state) {
    const auto [m, l] = cases[i++ % cases.size()];
    benchmark::DoNotOptimize(pr.predict_given(m, l, others));
  }
}
BENCHMARK(BM_PredictGiven);

void register_all() {
  const std::vector<std::pair<std::string, std::string>> workloads = {
      {"N5", "paper-n5.yaml"}, {"N8", "scale-n8.yaml"}, {"N12", "scale-n12.yaml"}};
  const std::vector<std::pair<std::string, surrogate::RegressorKind>> regressors = {
      {"gbdt", surrogate::RegressorKind::kGbdt}, {"linear", surrogate::RegressorKind::kLinear}};
  for (const auto& [reg_label, regressor] : regressors) {
    for (const auto& [label, file] : workloads) {
      for (const std::string solver : {"ga", "exact", "greedy", "hillclimb", "exhaustive"}) {
        // Exhaustive enumerates every joint configuration: only N = 5 is tractable.
        if (solver == "exhaustive" && label != "N5") continue;
        // The heuristics do not depend on the regressor's cost structure: GBDT only.
        if ((solver == "greedy" || solver == "hillclimb") && reg_label != "gbdt") continue;
        benchmark::RegisterBenchmark(
            ("BM_Solve/" + reg_label + "/" + solver + "/" + label).c_str(),
            [solver, file, regressor](benchmark::State& st) { solve(st, solver, file, regressor); })
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->MinTime(0.5);
      }
    }
  }
}

void register_decisions() {
  for (const auto& [label, file] : std::vector<std::pair<std::string, std::string>>{
           {"N5", "paper-n5.yaml"}, {"N8", "scale-n8.yaml"}}) {
    for (const bool learning : {false, true}) {
      benchmark::RegisterBenchmark(
          ("BM_Decide/ga/" + label + (learning ? "/learning_on" : "/learning_off")).c_str(),
          [file, learning](benchmark::State& st) { decide(st, file, learning); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.5);
    }
  }
}

const bool registered = (register_all(), register_decisions(), true);

}  // namespace
}  // namespace corun
