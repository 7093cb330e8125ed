// Solvers on a fitted MeanField surrogate: one planning decision per iteration for N = 5
// (paper-like, 78,732 joint configurations), 8, 12 and 16 models. The surrogate is fitted once per
// workload and regressor on simulator profiles (one standalone pass + 20·N co-runs), monotone
// in the co-runners' aggregate (GBDT with XGBoost's constraints, or linear with sign-
// constrained weights), so the exact solver's optimality proof holds. Counters: candidates
// evaluated, branch-and-bound nodes, predicted utility, whether optimality was proved.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>

#include "corun/catalog/catalog.h"
#include "corun/core/rng.h"
#include "corun/plan/node.h"
#include "corun/plan/solver.h"
#include "corun/profile/campaign.h"
#include "corun/runtime/controller.h"
#include "corun/runtime/corrected_predictor.h"
#include "corun/runtime/node_plan.h"
#include "corun/runtime/online_run.h"
#include "corun/runtime/renumbered_predictor.h"
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
      wl, profile::measure_plan(Context{.seed = 1}, wl, **tb, profile::Plan::kStandalone, 1, 10));
  if (!table) std::abort();
  const auto corun = profile::measure_plan(Context{.seed = 1}, wl, **tb, profile::Plan::kMeanField,
                                           20 * wl.models.size(), 10);
  surrogate::FitOptions o;
  o.regressor = regressor;
  o.monotone = true;
  auto s = surrogate::Surrogate::fit(Context{}, wl, *table, corun, o, {});  // seed 1
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

// Every solver with the two threads the controller and `corun plan` give it by default.
void solve(benchmark::State& state, const std::string& solver, const std::string& file,
           surrogate::RegressorKind regressor, int threads = 2) {
  const Fixture& fx = fixture(file, regressor);
  auto s = make_solver(solver);
  if (!s) std::abort();
  PlanResult last;
  for (auto _ : state) {
    auto r = (*s)->solve(Context{.seed = 1, .threads = threads}, *fx.problem, {});
    if (!r) {
      state.SkipWithError(r.error().message().c_str());
      return;
    }
    last = std::move(*r);
    benchmark::DoNotOptimize(last.utility);
  }
  state.counters["evaluated"] = static_cast<double>(last.stats.evaluated);
  state.counters["utility"] = last.utility;
  state.counters["feasible"] = last.feasible ? 1 : 0;
  state.counters["proved"] = last.stats.proved_optimal ? 1 : 0;
  state.counters["nodes"] = static_cast<double>(last.stats.nodes);
  state.counters["models"] = static_cast<double>(fx.w.models.size());
}

// One decision of the online controller (its corrections snapshot, calibrated margins, the
// GA warm-started from the plan in force, the feasibility check), learning off vs on and
// transitions ignored vs priced from the plan in force, after the controller has learned from
// 10 measured sim intervals of its own plans: what learning and transition pricing add to the
// decision path. The interval measurements happen before timing starts.
void decide(benchmark::State& state, const std::string& file, bool learning, bool aware) {
  const Fixture& fx = fixture(file);
  auto tb = make_testbed("sim");
  if (!tb) std::abort();
  ControllerOptions o;
  o.solver = "ga";
  o.learning.enabled = learning;
  o.transitions.aware = aware;
  const Context ctx{};  // seed 1 and 2 threads, as ControllerOptions{} had
  Controller c(ctx, fx.w,
               std::make_unique<SurrogateSource>(ctx, *fx.fitted, **tb, SurrogateSourceOptions{}),
               o);
  for (std::uint64_t k = 0; k < 10; ++k) {
    auto d = c.replan(k == 0 ? "start" : "learning");
    if (!d || !*d) std::abort();
    const auto m = (*tb)->measure(Context{.seed = 100 + k}, fx.w, (*d)->config, MeasureOptions(10));
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
  // The GA's bounded branch and bound: its nodes, and whether it proved the plan optimal (only
  // under a monotone predictor: learned slopes of the wrong sign make the corrected one not).
  state.counters["nodes"] = static_cast<double>(last->stats.nodes);
  state.counters["proved"] = last->stats.proved_optimal ? 1 : 0;
  // The GA stops when it converges, and learning changes the problem it solves (other margins,
  // other predictions): the time per candidate is what learning could add to the decision path.
  state.counters["us_per_candidate"] =
      1000.0 * last->decision_ms /
      static_cast<double>(std::max<std::uint64_t>(1, last->stats.evaluated));
}

// The hot path alone: a batch of 4,096 candidate joint configurations of scale-n8 predicted by
// the fitted surrogate, and by the same surrogate behind the online corrections of a decision
// (every model and configuration corrected, slopes and extrapolation charges on), and by the
// same surrogate walking its full forests rather than the forests specialised to each model's
// configuration (the path before batches used them; the same values). The cost of a correction
// does not depend on its values.
void predict_batch(benchmark::State& state, bool corrected, bool full_forests = false) {
  const Fixture& fx = fixture("scale-n8.yaml");
  // The same surrogate walking its full forests instead of the per-configuration ones.
  static const SurrogatePredictor unspecialised = [&] {
    auto c = fx.predictor->compiled();
    c.drop_specialized();
    return SurrogatePredictor(std::move(c));
  }();
  const std::size_t n = fx.w.models.size();
  constexpr std::size_t kRows = 4096;
  Rng rng(5);
  std::vector<std::int32_t> rows(kRows * n);
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t m = 0; m < n; ++m) {
      rows[r * n + m] = static_cast<std::int32_t>(rng.below(fx.w.models[m].local_config_count()));
    }
  }
  auto table = std::make_shared<CorrectionTable>();
  table->at.resize(n);
  table->loads.resize(n);
  table->margins.resize(n);
  table->slope.assign(n, {});
  table->slope_var.assign(n, {});
  table->z.assign(n, {});
  table->load_now.assign(n, 0.5f);
  for (std::size_t m = 0; m < n; ++m) {
    const std::size_t count = fx.w.models[m].local_config_count();
    table->at[m].assign(count, {});
    for (auto& per_config : table->at[m]) per_config.fill({0.1f, 0.01f});
    table->loads[m].assign(count, 0.2f);
    table->margins[m].assign(count, Margin{});
    table->slope[m].fill(0.05f);
    table->slope_var[m].fill(0.01f);
    table->z[m].fill(2.33f);
  }
  const std::unique_ptr<Predictor> wrapped = make_corrected(borrowed(*fx.predictor), table);
  const Predictor& p = corrected      ? *wrapped
                       : full_forests ? static_cast<const Predictor&>(unspecialised)
                                      : static_cast<const Predictor&>(*fx.predictor);
  std::vector<Predicted> out(kRows * n);
  for (auto _ : state) {
    p.predict(rows, kRows, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kRows));
}

// One node plan from nothing: which GPU each model runs on and its knobs, jointly (a new
// NodePlanner per iteration, so no per-GPU plan is cached from an earlier one), the per-GPU
// plans on the MeanField surrogate fitted for the node's device, the local search screened by
// `screen` ("" = none). Counters: per-GPU plans solved by the GA (and screened), predicted
// utility, whether the plan holds every SLA as predicted.
void node_plan(benchmark::State& state, const std::string& file, const std::string& screen) {
  const Fixture& fx = fixture(file);
  auto tb = make_testbed("sim");
  if (!tb) std::abort();
  const Context ctx{.seed = 1, .threads = 2};
  SurrogateSource source(ctx, *fx.fitted, **tb, SurrogateSourceOptions{});
  SourceUnitModels units(fx.w, source, source);
  auto solver = make_solver("ga");
  if (!solver) std::abort();
  NodePlan last;
  for (auto _ : state) {
    NodePlanOptions options;
    options.screen = screen;
    NodePlanner planner(ctx, fx.w, units, **solver, options);
    auto p = planner.plan();
    if (!p) {
      state.SkipWithError(p.error().message().c_str());
      return;
    }
    last = std::move(*p);
    benchmark::DoNotOptimize(last.utility);
  }
  state.counters["models"] = static_cast<double>(fx.w.models.size());
  state.counters["gpus"] = static_cast<double>(fx.w.node.gpus());
  state.counters["subplans"] = static_cast<double>(last.subplans);
  state.counters["screened"] = static_cast<double>(last.screened);
  state.counters["utility"] = last.utility;
  state.counters["feasible"] = last.feasible ? 1 : 0;
}

// One mean-field prediction of one model against a given aggregate load: the unit of work of
// the exact solver. Cycles over every model and local configuration of the N = 8 workload, at
// one aggregate: after the first cycle every call is a cell the workspace remembers, so this
// measures a remembered prediction (a cell seen for the first time walks its forest, as
// predict_batch/base does per row).
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
      {"N5", "paper-n5.yaml"},
      {"N8", "scale-n8.yaml"},
      {"N12", "scale-n12.yaml"},
      {"N16", "scale-n16.yaml"},
      {"N16v2", "scale-n16-v2.yaml"}};
  const std::vector<std::pair<std::string, surrogate::RegressorKind>> regressors = {
      {"gbdt", surrogate::RegressorKind::kGbdt}, {"linear", surrogate::RegressorKind::kLinear}};
  for (const auto& [reg_label, regressor] : regressors) {
    for (const auto& [label, file] : workloads) {
      for (const std::string solver : {"ga", "exact", "greedy", "hillclimb", "exhaustive"}) {
        // Exhaustive enumerates every joint configuration: only N = 5 is tractable.
        if (solver == "exhaustive" && label != "N5") continue;
        // The exact solver on the GBDT surrogate at N = 16 runs for minutes (8.4 M predictions
        // on this 2-core machine, `corun plan workloads/scale-n16.yaml --solver exact`).
        if (solver == "exact" && label == "N16" && reg_label == "gbdt") continue;
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
  // Beside the exact solver's split search over two threads: the same search on one.
  benchmark::RegisterBenchmark("BM_Solve/gbdt/exact/N12/threads:1",
                               [](benchmark::State& st) {
                                 solve(st, "exact", "scale-n12.yaml",
                                       surrogate::RegressorKind::kGbdt, 1);
                               })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->MinTime(0.5);
}

void register_decisions() {
  for (const auto& [label, file] : std::vector<std::pair<std::string, std::string>>{
           {"N5", "paper-n5.yaml"}, {"N8", "scale-n8.yaml"}}) {
    // Side by side: each of learning off and on with transitions ignored and priced.
    for (const bool learning : {false, true}) {
      for (const bool aware : {false, true}) {
        benchmark::RegisterBenchmark(
            ("BM_Decide/ga/" + label + (learning ? "/learning_on" : "/learning_off") +
             (aware ? "/transitions_aware" : "/transitions_ignore"))
                .c_str(),
            [file, learning, aware](benchmark::State& st) { decide(st, file, learning, aware); })
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->MinTime(0.5);
      }
    }
  }
}

BENCHMARK_CAPTURE(predict_batch, base, false)->Unit(benchmark::kMillisecond)->MinTime(2);
BENCHMARK_CAPTURE(predict_batch, full_forests, false, true)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2);
BENCHMARK_CAPTURE(predict_batch, corrected, true)->Unit(benchmark::kMillisecond)->MinTime(2);

void register_node_plans() {
  for (const auto& [label, file] :
       std::vector<std::pair<std::string, std::string>>{{"8gpu/N32", "scale-node-8gpu-n32.yaml"}}) {
    // Side by side: the search screened by the greedy per-GPU plan (the default), and every
    // candidate planned by the GA (before screening; one iteration: it takes minutes).
    benchmark::RegisterBenchmark(("BM_NodePlan/gbdt/" + label + "/screen:greedy").c_str(),
                                 [file](benchmark::State& st) { node_plan(st, file, "greedy"); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(3);
    benchmark::RegisterBenchmark(("BM_NodePlan/gbdt/" + label + "/screen:none").c_str(),
                                 [file](benchmark::State& st) { node_plan(st, file, ""); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(1);
  }
}

const bool registered = (register_all(), register_decisions(), register_node_plans(), true);

}  // namespace
}  // namespace corun
