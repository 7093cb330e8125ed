#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "../../src/plan/search.h"
#include "corun/catalog/catalog.h"
#include "corun/core/rng.h"
#include "corun/plan/node.h"
#include "corun/plan/solver.h"
#include "synthetic.h"

namespace corun::solvers_test {
namespace {

Workload load(const std::string& name) {
  auto w = load_workload(std::string(CORUN_SOURCE_DIR) + "/workloads/" + name,
                         Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << w.error().what();
  return std::move(w).value();
}

// The workload with every latency SLA (latency, TTFT, TPOT p95) multiplied by `scale`.
Workload with_slas_scaled(Workload w, double scale) {
  for (auto& m : w.models) {
    for (auto* v : {&m.sla.latency_ms_p95, &m.sla.ttft_ms_p95, &m.sla.tpot_ms_p95}) {
      if (v->has_value()) **v *= scale;
    }
  }
  return w;
}

PlanResult solve(const std::string& solver, const PlanProblem& p, std::uint64_t seed = 1) {
  auto s = make_solver(solver);
  EXPECT_TRUE(s.ok());
  auto r = (*s)->solve(Context{.seed = seed, .threads = 2}, p, SolverOptions{});
  EXPECT_TRUE(r.ok()) << r.error().what();
  return std::move(r).value();
}

// A predictor given as an explicit table: two models, two configurations each.
class TablePredictor final : public Predictor {
 public:
  [[nodiscard]] std::size_t models() const override { return 2; }
  void predict(std::span<const std::int32_t> c, std::size_t rows,
               std::span<Predicted> out) const override {
    for (std::size_t r = 0; r < rows; ++r) {
      const int a = c[2 * r];
      const int b = c[2 * r + 1];
      // Latency of each model: 20 ms alone, +25 ms when the other runs its large config (1).
      out[2 * r].latency_ms_p95 = static_cast<float>(20 + (b == 1 ? 25 : 0) + (a == 1 ? 10 : 0));
      out[2 * r + 1].latency_ms_p95 = static_cast<float>(20 + (a == 1 ? 25 : 0) + (b == 1 ? 10 : 0));
      out[2 * r].throughput = 30;
      out[2 * r + 1].throughput = 30;
    }
  }
};

TEST(Solvers, HandWorkedTwoModelExample) {
  // Two cameras, imgsz 320 (config 0) or 640 (config 1), SLA 50 ms each. By hand: (1,1) gives
  // 20+25+10 = 55 ms > 50 for both (infeasible); (1,0) gives 30 ms and 45 ms (feasible);
  // (0,1) likewise; (0,0) is feasible but lower quality. The optimum upgrades the model with
  // the larger mAP gain: yolo11m gains more from 320->640 in absolute mAP than yolo11n.
  auto w = parse_workload(R"(device: rtx3090
models:
  - {name: a, model: yolo11n, knobs: {imgsz: [320, 640]}, demand: {fps: 30}, sla: {latency_ms_p95: 50}}
  - {name: b, model: yolo11m, knobs: {imgsz: [320, 640]}, demand: {fps: 30}, sla: {latency_ms_p95: 50}}
)", "t.yaml", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  TablePredictor pred;
  PlanProblem p(*w, {true, true}, pred);
  for (const char* s : {"exhaustive", "ga", "hillclimb", "exact"}) {
    SCOPED_TRACE(s);
    if (std::string(s) == "exact") continue;  // the table predictor has no aggregate form
    const PlanResult r = solve(s, p);
    EXPECT_TRUE(r.feasible);
    EXPECT_EQ(r.config, (JointConfig{0, 1}));
  }
  // Greedy places one model at a time and never revisits: it upgrades whichever it places
  // first, a feasible but not optimal plan here.
  const PlanResult g = solve("greedy", p);
  EXPECT_TRUE(g.feasible);
  EXPECT_EQ(g.config[0] + g.config[1], 1);
  // With a 10 % margin, 45 ms * 1.1 = 49.5 still fits; with 20 %, 54 > 50 and only (0,0) holds.
  PlanProblem tight(*w, {true, true}, pred, {0.2, 0.2});
  EXPECT_EQ(solve("exhaustive", tight).config, (JointConfig{0, 0}));
}

TEST(Solvers, InfeasibleProblemsReturnTheLeastViolatingPlan) {
  auto w = parse_workload(R"(device: rtx3090
models:
  - {name: a, model: yolo11n, knobs: {imgsz: [320, 640]}, demand: {fps: 30}, sla: {latency_ms_p95: 5}}
  - {name: b, model: yolo11m, knobs: {imgsz: [320, 640]}, demand: {fps: 30}, sla: {latency_ms_p95: 5}}
)", "t.yaml", Catalog::default_catalog());
  ASSERT_TRUE(w.ok());
  TablePredictor pred;
  PlanProblem p(*w, {true, true}, pred);
  const PlanResult r = solve("exhaustive", p);
  EXPECT_FALSE(r.feasible);
  EXPECT_EQ(r.config, (JointConfig{0, 0}));  // 20 ms each: the smallest excess
}

// A model none of whose configurations meets its SLA even with every other model at its
// lightest: the exact solver has nothing to branch on for it, and must say infeasible (with
// the GA's least-violating plan) rather than search. The synthetic yolo latency is at least
// 4 ms alone (4 + 10·px²·…), so a 1 ms SLA can never hold.
TEST(Solvers, ExactReturnsTheLeastViolatingPlanWhenAModelCanNeverMeetItsSla) {
  auto w = parse_workload(R"(device: rtx3090
models:
  - {name: a, model: yolo11n, knobs: {imgsz: [320, 640]}, demand: {fps: 30}, sla: {latency_ms_p95: 1}}
  - {name: b, model: yolo11m, knobs: {imgsz: [320, 640]}, demand: {fps: 30}, sla: {latency_ms_p95: 500}}
  - {name: c, model: yolo11s, knobs: {imgsz: [320, 640]}, demand: {fps: 30}, sla: {latency_ms_p95: 500}}
)", "t.yaml", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  testing::SyntheticPredictor pred(*w);
  PlanProblem p(*w, {true, true, true}, pred);
  const PlanResult ex = solve("exhaustive", p);
  ASSERT_FALSE(ex.feasible);
  const PlanResult exact = solve("exact", p);
  EXPECT_FALSE(exact.feasible);
  EXPECT_EQ(exact.config.size(), 3u);
}

TEST(Solvers, ExactAndGaMatchExhaustiveOnThePaperSpace) {
  const Workload w = load("paper-n5.yaml");
  testing::SyntheticPredictor pred(w);
  PlanProblem p(w, std::vector<bool>(5, true), pred);
  ASSERT_EQ(p.candidate_count().value(), 78732u);
  const PlanResult ex = solve("exhaustive", p);
  ASSERT_TRUE(ex.feasible);
  EXPECT_EQ(ex.stats.evaluated, 78732u);
  const PlanResult exact = solve("exact", p);
  EXPECT_TRUE(exact.stats.proved_optimal);
  EXPECT_NEAR(exact.utility, ex.utility, 1e-6 * ex.utility);
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const PlanResult ga = solve("ga", p, seed);
    EXPECT_TRUE(ga.feasible);
    EXPECT_GE(ga.utility, ex.utility * (1 - 0.001)) << "seed " << seed;
    EXPECT_LT(ga.stats.evaluated, 78732u / 4);
  }
  for (const char* s : {"greedy", "hillclimb"}) {
    const PlanResult r = solve(s, p);
    EXPECT_LE(r.utility, ex.utility + 1e-9) << s;  // nobody beats the exhaustive optimum
  }
}

// Feasible plans' fitness is their utility, 0 included; every infeasible plan's is below it,
// however small its excess, and a VRAM overflow ranks below an SLA excess of the same size.
TEST(Solvers, FitnessTellsFeasiblePlansFromInfeasibleOnes) {
  PlanProblem::Score idle;  // nothing planned: utility 0, feasible
  EXPECT_TRUE(is_feasible_fitness(idle.fitness()));
  PlanProblem::Score near{500.0, 1e-9, true};
  EXPECT_FALSE(is_feasible_fitness(near.fitness()));
  EXPECT_LT(near.fitness(), idle.fitness());
  PlanProblem::Score vram{500.0, 1e-9, false};
  EXPECT_FALSE(is_feasible_fitness(vram.fitness()));
  EXPECT_LT(vram.fitness(), near.fitness());
  NodePlan none;
  none.feasible = false;
  none.excess = 3;
  EXPECT_FALSE(is_feasible_fitness(none.fitness()));
}

// The exact solver's cuts (lazy forward checking, the knapsack relaxations) must never cut the
// optimum: across SLAs from tight to loose, it finds exhaustive's utility on every one.
TEST(Solvers, ExactMatchesExhaustiveFromTightToLooseSlas) {
  const Workload base = load("paper-n5.yaml");
  int feasible = 0;
  for (const double scale : {0.4, 0.55, 0.7, 0.85, 1.0, 1.3, 2.0}) {
    const Workload w = with_slas_scaled(base, scale);
    testing::SyntheticPredictor pred(w);
    PlanProblem p(w, std::vector<bool>(5, true), pred);
    const PlanResult ex = solve("exhaustive", p);
    const PlanResult exact = solve("exact", p);
    EXPECT_EQ(exact.feasible, ex.feasible) << "SLA scale " << scale;
    if (!ex.feasible) continue;
    ++feasible;
    EXPECT_TRUE(exact.stats.proved_optimal) << "SLA scale " << scale;
    EXPECT_NEAR(exact.utility, ex.utility, 1e-6 * ex.utility) << "SLA scale " << scale;
    // The solver starts from the GA's plan, which is often already optimal: the branch and
    // bound alone, from no incumbent, must find the optimum itself.
    const auto alone = detail::bounded_search(p, {}, -std::numeric_limits<double>::infinity(),
                                              std::uint64_t{1} << 40);
    ASSERT_TRUE(alone.has_value());
    EXPECT_TRUE(alone->finished);
    ASSERT_TRUE(alone->improved) << "SLA scale " << scale;
    const PlanResult found = evaluate_plan(p, alone->best, "exact");
    EXPECT_TRUE(found.feasible) << "SLA scale " << scale;
    EXPECT_NEAR(found.utility, ex.utility, 1e-6 * ex.utility) << "SLA scale " << scale;
  }
  EXPECT_GE(feasible, 4);  // the sweep must exercise the bounds on feasible problems
}

// The exact solver splits its search over its threads (the subtrees below depth 1 dealt round
// robin): from no incumbent, so that plans improve inside the tasks, the split finds the same
// plan as the sequential search, whatever the number of workers, and a run with a given number
// of workers spends exactly what another does (nothing depends on the timing). And the memo of
// loads each configuration bore and refused, from which the search answers most feasibility
// checks, changes nothing but the predictions made: the same nodes and plan as the search that
// predicts every check (a memo that answered "borne" too readily visits other nodes even where
// it keeps the plan).
TEST(Solvers, ExactSplitSearchFindsTheSequentialPlanWithAnyWorkers) {
  const Workload base = load("scale-n8.yaml");
  int compared = 0;
  for (const double scale : {0.7, 1.0, 1.5}) {
    const Workload w = with_slas_scaled(base, scale);
    testing::SyntheticPredictor pred(w);
    PlanProblem p(w, std::vector<bool>(w.models.size(), true), pred);
    const double none = -std::numeric_limits<double>::infinity();
    constexpr std::uint64_t kBudget = std::uint64_t{1} << 40;
    const auto one = detail::bounded_search(p, {}, none, kBudget, 1);
    ASSERT_TRUE(one.has_value() && one->finished);
    const auto every = detail::bounded_search(p, {}, none, kBudget, 1, /*recall=*/false);
    ASSERT_TRUE(every.has_value() && every->finished);
    EXPECT_EQ(one->best, every->best) << "scale " << scale;
    EXPECT_EQ(one->nodes, every->nodes) << "scale " << scale;
    if (!one->improved) continue;
    ++compared;
    EXPECT_LT(one->evaluated, every->evaluated) << "scale " << scale;
    for (const int workers : {2, 3}) {
      const auto split = detail::bounded_search(p, {}, none, kBudget, workers);
      ASSERT_TRUE(split.has_value() && split->finished);
      EXPECT_EQ(split->best, one->best) << "scale " << scale << ", " << workers << " workers";
      const auto again = detail::bounded_search(p, {}, none, kBudget, workers);
      EXPECT_EQ(again->nodes, split->nodes) << "scale " << scale << ", " << workers << " workers";
      EXPECT_EQ(again->evaluated, split->evaluated);
    }
    // The solver itself, one thread or two: the same plan.
    auto exact = make_solver("exact");
    ASSERT_TRUE(exact.ok());
    auto a = (*exact)->solve(Context{.seed = 1, .threads = 1}, p, SolverOptions{});
    auto b = (*exact)->solve(Context{.seed = 1, .threads = 2}, p, SolverOptions{});
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->config, b->config) << "scale " << scale;
    EXPECT_TRUE(a->stats.proved_optimal && b->stats.proved_optimal);
  }
  EXPECT_GE(compared, 2);
}

// The GA ends with the exact solver's branch and bound cut after a few thousand nodes: where
// that search finishes, the GA's plan is the optimum and it says so (before it never did).
TEST(Solvers, GaProvesItsPlanWhereItsBoundedSearchFinishes) {
  const Workload w = load("paper-n5.yaml");
  testing::SyntheticPredictor pred(w);
  PlanProblem p(w, std::vector<bool>(5, true), pred);
  const PlanResult ex = solve("exhaustive", p);
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const PlanResult ga = solve("ga", p, seed);
    EXPECT_TRUE(ga.stats.proved_optimal) << "seed " << seed;
    EXPECT_GT(ga.stats.nodes, 0u);
    EXPECT_NEAR(ga.utility, ex.utility, 1e-9 * ex.utility) << "seed " << seed;
  }
  const Workload w8 = load("scale-n8.yaml");
  testing::SyntheticPredictor pred8(w8);
  PlanProblem p8(w8, std::vector<bool>(8, true), pred8);
  const PlanResult exact = solve("exact", p8);
  ASSERT_TRUE(exact.stats.proved_optimal);
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const PlanResult ga = solve("ga", p8, seed);
    EXPECT_NEAR(ga.utility, exact.utility, 1e-9 * exact.utility) << "seed " << seed;
    EXPECT_EQ(ga.stats.proved_optimal, ga.stats.nodes < 3000u) << "seed " << seed;
  }
}

// The same predictions without the mean-field structure: solvers see a plain Predictor.
class OpaquePredictor final : public Predictor {
 public:
  explicit OpaquePredictor(const Predictor& p) : p_(p) {}
  [[nodiscard]] std::size_t models() const override { return p_.models(); }
  void predict(std::span<const std::int32_t> c, std::size_t rows,
               std::span<Predicted> out) const override {
    p_.predict(c, rows, out);
  }

 private:
  const Predictor& p_;
};

// The GA's polish skips the moves whose utility bound cannot beat the plan it climbs from
// (monotone mean-field predictors only). Skipping them must not change a single step: the plan
// is the one the unpruned polish (the same predictions, seen through a plain Predictor) finds,
// for fewer predictions.
TEST(Solvers, GaPolishSkipsOnlyMovesItsBoundsRuleOut) {
  const Workload base = load("scale-n12.yaml");
  int compared = 0;
  for (const double scale : {0.7, 1.0, 1.5}) {
    const Workload w = with_slas_scaled(base, scale);
    testing::SyntheticPredictor pred(w);
    ASSERT_TRUE(pred.monotone());
    const OpaquePredictor opaque(pred);
    PlanProblem bounded(w, std::vector<bool>(w.models.size(), true), pred);
    PlanProblem plain(w, std::vector<bool>(w.models.size(), true), opaque);
    const auto ub = detail::utility_bounds(bounded);
    ASSERT_TRUE(ub.has_value());
    ASSERT_FALSE(detail::utility_bounds(plain).has_value());
    // What the pruning rests on: in every plan, a model that meets its SLA contributes no more
    // than its bound (random plans, most of them loaded well above the least).
    Rng rng(7);
    JointConfig c(w.models.size());
    std::vector<Predicted> q(w.models.size());
    int checked = 0, above = 0;
    for (int trial = 0; trial < 2000; ++trial) {
      for (std::size_t m = 0; m < c.size(); ++m) {
        c[m] = static_cast<std::int32_t>(rng.below(bounded.local_count(m)));
      }
      pred.predict(c, 1, q);
      for (std::size_t m = 0; m < c.size(); ++m) {
        if (bounded.excess(m, c[m], q[m]) > 0) continue;
        ++checked;
        above += bounded.model_utility(m, c[m], q[m]) > (*ub)[m][static_cast<std::size_t>(c[m])];
      }
    }
    EXPECT_GT(checked, 1000) << "scale " << scale;
    EXPECT_EQ(above, 0) << "scale " << scale << ": utilities above their bound";
    for (std::uint64_t seed = 1; seed <= 2; ++seed) {
      const PlanResult a = solve("ga", bounded, seed);
      const PlanResult b = solve("ga", plain, seed);
      EXPECT_EQ(a.config, b.config) << "scale " << scale << ", seed " << seed;
      EXPECT_EQ(a.utility, b.utility) << "scale " << scale << ", seed " << seed;
      if (!a.feasible) continue;
      ++compared;
      EXPECT_LT(a.stats.evaluated, b.stats.evaluated) << "scale " << scale << ", seed " << seed;
    }
  }
  EXPECT_GE(compared, 4);
}

TEST(Solvers, ExhaustiveRefusesASpaceBeyondTwoToThe64) {
  // 30 cameras x (8 image sizes x 16 skip rates) = 128^30 = 2^210 joint configurations.
  std::string y = "device: rtx3090\nmodels:\n";
  for (int i = 0; i < 30; ++i) {
    y += "  - {name: cam" + std::to_string(i) +
         ", model: yolo11n, knobs: {imgsz: [320, 352, 384, 416, 448, 480, 512, 544], "
         "skip_rate: [0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, "
         "0.65, 0.7, 0.75]}, demand: {fps: 1}, sla: {latency_ms_p95: 100}}\n";
  }
  auto w = parse_workload(y, "wide.yaml", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  testing::SyntheticPredictor pred(*w);
  PlanProblem p(*w, std::vector<bool>(30, true), pred);
  ASSERT_FALSE(p.candidate_count().exact());
  EXPECT_EQ(p.candidate_count().approx(), std::ldexp(1.0, 210));
  auto s = make_solver("exhaustive");
  ASSERT_TRUE(s.ok());
  const auto r = (*s)->solve(Context{.seed = 1, .threads = 2}, p, SolverOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), Error::Kind::kInvalidInput);  // the CLI's exit code 2
  EXPECT_NE(r.error().message().find("more than 2^64"), std::string::npos) << r.error().what();
  // Every other solver still plans it: a valid configuration for each of the 30 cameras.
  for (const char* name : {"greedy", "hillclimb", "ga", "exact"}) {
    SCOPED_TRACE(name);
    const PlanResult planned = solve(name, p);
    ASSERT_EQ(planned.config.size(), 30u);
    for (const std::int32_t l : planned.config) {
      EXPECT_GE(l, 0);
      EXPECT_LT(l, 128);
    }
    EXPECT_TRUE(planned.feasible);
  }
}

TEST(Solvers, InactiveModelsStayAbsent) {
  const Workload w = load("paper-n5.yaml");
  testing::SyntheticPredictor pred(w);
  PlanProblem p(w, {true, false, true, true, false}, pred);
  EXPECT_EQ(p.candidate_count().value(), 12u * 9 * 9);
  const PlanResult r = solve("ga", p);
  EXPECT_EQ(r.config[1], kAbsent);
  EXPECT_EQ(r.config[4], kAbsent);
  EXPECT_NEAR(r.utility, solve("exhaustive", p).utility, 1e-9);
}

TEST(Solvers, WarmStartFromTheOptimumKeepsIt) {
  const Workload w = load("paper-n5.yaml");
  testing::SyntheticPredictor pred(w);
  PlanProblem p(w, std::vector<bool>(5, true), pred);
  const PlanResult ex = solve("exhaustive", p);
  auto ga = make_solver("ga");
  auto r = (*ga)->solve(Context{.seed = 9, .threads = 1}, p, SolverOptions{ex.config});
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->utility, ex.utility, 1e-9);
}

TEST(Solvers, ExactProvesOptimalityAtTwelveModels) {
  const Workload w = load("scale-n12.yaml");
  testing::SyntheticPredictor pred(w);
  PlanProblem p(w, std::vector<bool>(12, true), pred);
  const PlanResult exact = solve("exact", p);
  EXPECT_TRUE(exact.stats.proved_optimal);
  EXPECT_TRUE(exact.feasible);
  const PlanResult ga = solve("ga", p);
  EXPECT_GE(ga.utility, exact.utility * (1 - 0.005));
  EXPECT_LE(ga.utility, exact.utility + 1e-9);
}

TEST(Solvers, UnknownSolverNamesGetASuggestion) {
  auto s = make_solver("exhaustiv");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().what().find("did you mean 'exhaustive'"), std::string::npos);
}

TEST(Objective, QualityFollowsThePublishedCurves) {
  const Workload w = load("paper-n5.yaml");
  const ModelSpec& cam1 = w.models[2];  // yolo11s, mAP 47.0 at 640 (Ultralytics)
  Settings s = cam1.base;
  s.imgsz = 640;
  EXPECT_NEAR(config_quality(cam1, s), 47.0, 1e-9);
  // YOLOv3 (Redmon & Farhadi 2018): 320 -> 28.2, 608 -> 33.0; 640 extrapolates the 416-608
  // segment: 33.0 + 2.0 * ln(640/608) / ln(608/416) = 33.270. Ratio 28.2 / 33.270 = 0.8476.
  s.imgsz = 320;
  EXPECT_NEAR(config_quality(cam1, s), 47.0 * 0.8476, 0.01);
  // AWQ: 5.47 / 5.60 of FP16 quality (Lin et al. 2024).
  Settings q = w.models[0].base;
  q.precision = Precision::kAwq;
  const double awq = config_quality(w.models[0], q);
  q.precision = Precision::kFp16;
  EXPECT_NEAR(awq / config_quality(w.models[0], q), 0.97679, 1e-4);
}

TEST(Objective, ServedFractionCountsSkipsAndShortfall) {
  const Workload w = load("paper-n5.yaml");
  const ModelSpec& cam0 = w.models[1];  // 30 fps offered
  Settings s = cam0.base;
  s.skip_rate = 0.5;
  EXPECT_NEAR(served_fraction(cam0, s, 15), 0.5, 1e-12);   // keeps up with the 15 fps it keeps
  EXPECT_NEAR(served_fraction(cam0, s, 7.5), 0.25, 1e-12); // serves half of those
  const ModelSpec& chat = w.models[0];  // 1.5 rps x 128 tokens = 192 tokens/s offered
  EXPECT_NEAR(served_fraction(chat, chat.base, 96), 0.5, 1e-12);
}

}  // namespace
}  // namespace corun::solvers_test

namespace corun::solvers_test {
namespace {

// Transition costs (PlanProblem::set_transitions) make every solver keep a model where the
// exhaustive optimum of utility minus cost keeps it, and the exact solver's bounds still prove
// that optimum: the cost is a constant per (model, configuration), subtracted inside
// model_utility(), so a bound on utility minus it is still a bound.
TEST(Solvers, TransitionCostsAreOptimisedByEverySolverAndBoundsStillHold) {
  const Workload w = load("paper-n5.yaml");
  testing::SyntheticPredictor pred(w);
  PlanProblem free(w, std::vector<bool>(5, true), pred);
  const PlanResult best = solve("exhaustive", free);
  ASSERT_TRUE(best.feasible);
  // The plan in force: the free optimum with model 0 moved to another configuration.
  JointConfig in_force = best.config;
  in_force[0] = best.config[0] == 0 ? 1 : 0;
  // Leaving model 0's configuration in force costs 1e3 utility: larger than any gain.
  std::vector<std::vector<double>> cost(5);
  for (std::size_t m = 0; m < 5; ++m) cost[m].assign(free.local_count(m), 0.0);
  for (std::size_t l = 0; l < cost[0].size(); ++l) {
    if (static_cast<std::int32_t>(l) != in_force[0]) cost[0][l] = 1e3;
  }
  PlanProblem priced(w, std::vector<bool>(5, true), pred);
  priced.set_transitions(cost);
  const PlanResult ex = solve("exhaustive", priced);
  ASSERT_TRUE(ex.feasible);
  EXPECT_EQ(ex.config[0], in_force[0]);
  const PlanResult exact = solve("exact", priced);
  EXPECT_TRUE(exact.stats.proved_optimal);
  EXPECT_EQ(exact.config[0], in_force[0]);
  EXPECT_NEAR(exact.utility, ex.utility, 1e-6 * std::abs(ex.utility));
  const PlanResult ga = solve("ga", priced, 1);
  EXPECT_EQ(ga.config[0], in_force[0]);
  // Not allowing configurations (a model within its dwell) excludes them as a pin does.
  std::vector<std::vector<bool>> allowed(5);
  for (std::size_t m = 0; m < 5; ++m) allowed[m].assign(free.local_count(m), true);
  for (std::size_t l = 0; l < allowed[1].size(); ++l) {
    allowed[1][l] = static_cast<std::int32_t>(l) == in_force[1];
  }
  PlanProblem dwelling(w, std::vector<bool>(5, true), pred);
  dwelling.set_transitions({}, allowed);
  EXPECT_EQ(solve("exhaustive", dwelling).config[1], in_force[1]);
  EXPECT_EQ(solve("exact", dwelling).config[1], in_force[1]);
}

}  // namespace
}  // namespace corun::solvers_test
