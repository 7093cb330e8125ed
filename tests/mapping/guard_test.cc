// Protecting the co-running models: the guard's prediction of their SLAs during a tool burst,
// the agent's exclusion of mappings predicted to break one, and the constrained oracle.
#include "corun/mapping/guard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "corun/eval/placement_eval.h"
#include "corun/mapping/agent.h"
#include "corun/mapping/executor.h"
#include "corun/mapping/problem.h"
#include "corun/surrogate/targets.h"
#include "corun/testbed/sim.h"

namespace corun::mapping::guard_test {
namespace {

using surrogate::Target;
using surrogate::Totals;

const std::string kWorkload = std::string(CORUN_SOURCE_DIR) + "/workloads/paper-n3.yaml";

const ToolCatalog& tools() {
  static const ToolCatalog c = std::move(default_tool_catalog()).value();
  return c;
}

// A predictor with round numbers: every model adds SM 0.05 and bandwidth 0.02 to the others'
// aggregate; the LLM's TTFT p95 is 100 ms x (1 + 10 x others' SM), its TPOT p95 10 ms x (1 +
// others' bandwidth), a camera's latency p95 5 ms x (1 + others' SM); throughput unknown (NaN).
class RoundPredictor final : public AggregatePredictor {
 public:
  void predict(std::size_t m, std::size_t /*l*/, const Totals& others,
               std::span<double> out) const override {
    for (auto& v : out) v = NAN;
    if (m == 0) {
      out[static_cast<std::size_t>(Target::kTtftP95)] = 100 * (1 + 10 * others.sm);
      out[static_cast<std::size_t>(Target::kTpotP95)] = 10 * (1 + others.bw);
    } else {
      out[static_cast<std::size_t>(Target::kLatencyP95)] = 5 * (1 + others.sm);
    }
  }
  [[nodiscard]] Totals contribution(std::size_t, std::size_t) const override {
    Totals t;
    t.count = 1;
    t.sm = 0.05;
    t.bw = 0.02;
    return t;
  }
};

ModelMetrics metrics(std::size_t model, const char* name) {
  ModelMetrics m;
  m.model = model;
  m.name = name;
  return m;
}

// paper-n3 (chat: TTFT 800 ms, TPOT 60 ms; cam0: 50 ms; cam1: 60 ms) under a light plan, with
// what the plan "measured" set by hand: chat TTFT 400 ms and TPOT 20 ms, cameras 10 ms; the GPU
// 20 % busy, 3 GB held.
std::shared_ptr<const CoRunners> round_corunners(bool guarded) {
  auto plan = exporting::parse_plan_input(R"({"models": [
    {"name": "chat", "config": "precision=awq,request_concurrency=4,prefill_chunk=512"},
    {"name": "cam0", "config": "imgsz=320,skip_rate=0.5"},
    {"name": "cam1", "config": "imgsz=320,skip_rate=0.5"}]})",
                                          "round.plan.json", kWorkload, Catalog::default_catalog());
  EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().what());
  CoRunners co;
  co.plan = std::move(*plan);
  co.config.assign(co.plan.workload.models.size(), kAbsent);
  for (const auto& p : co.plan.models)
    co.config[p.model] = static_cast<std::int32_t>(p.local_index);
  ModelMetrics chat = metrics(0, "chat");
  chat.ttft_ms_p95 = 400;
  chat.tpot_ms_p95 = 20;
  chat.throughput = 190;
  ModelMetrics cam0 = metrics(1, "cam0");
  cam0.latency_ms_p95 = 10;
  ModelMetrics cam1 = metrics(2, "cam1");
  cam1.latency_ms_p95 = 10;
  co.measured.models = {chat, cam0, cam1};
  co.measured.gpu.sm_util = 0.2;
  co.measured.gpu.mem_bw_util = 0.1;
  co.measured.gpu.vram_used_gb = 3;
  co.testbed = "sim";
  if (guarded) {
    co.guard = std::make_shared<const CoRunnerGuard>(co, std::make_shared<RoundPredictor>(),
                                                     "round numbers");
  }
  return std::make_shared<const CoRunners>(std::move(co));
}

BurstLoad burst(double sm, double bw) {
  BurstLoad b;
  b.start_ms = 0;
  b.end_ms = 100;
  b.sm_util = sm;
  b.bw_util = bw;
  return b;
}

const SlaOutcome* find(const std::vector<SlaOutcome>& list, const char* model, const char* m) {
  for (const auto& o : list) {
    if (o.model == model && o.metric == m) return &o;
  }
  return nullptr;
}

TEST(CoRunnerGuard, PredictsTheSlowdownFromTheAggregateAnchoredOnThePlansMeasurement) {
  const auto co = round_corunners(true);
  const auto predicted = co->guard->predict(burst(0.4, 0));
  // chat: the cameras add SM 0.1, so TTFT is 100 x (1 + 1) = 200 ms without the tools and
  // 100 x (1 + 10 x 0.5) = 600 ms with the burst's SM 0.4; anchored on the measured 400 ms:
  // 400 x 600 / 200 = 1200 ms, 50 % past its 800 ms SLA.
  const SlaOutcome* ttft = find(predicted, "chat", "ttft_ms_p95");
  ASSERT_NE(ttft, nullptr);
  EXPECT_NEAR(ttft->alone, 400, 1e-9);
  EXPECT_NEAR(ttft->during, 1200, 1e-9);
  EXPECT_TRUE(ttft->breached);
  EXPECT_NEAR(ttft->excess(), 0.5, 1e-12);
  EXPECT_EQ(ttft->describe(), "chat ttft_ms_p95 1200.0 > 800.0 (+50.0 %)");
  // TPOT depends on bandwidth only, which the burst does not add: 20 ms as measured.
  const SlaOutcome* tpot = find(predicted, "chat", "tpot_ms_p95");
  ASSERT_NE(tpot, nullptr);
  EXPECT_NEAR(tpot->during, 20, 1e-9);
  EXPECT_FALSE(tpot->breached);
  // cam0: others (chat, cam1) SM 0.1: 5 x 1.1 = 5.5 ms alone, 5 x 1.5 = 7.5 ms with the burst;
  // 10 x 7.5 / 5.5 = 13.64 ms, within its 50 ms.
  const SlaOutcome* cam0 = find(predicted, "cam0", "latency_ms_p95");
  ASSERT_NE(cam0, nullptr);
  EXPECT_NEAR(cam0->during, 10 * 7.5 / 5.5, 1e-9);
  EXPECT_FALSE(cam0->breached);
  // Only the chat's TTFT is reported broken.
  const auto broken = predicted_breaches(*co->guard, burst(0.4, 0));
  ASSERT_EQ(broken.size(), 1u);
  EXPECT_EQ(broken[0].model, "chat");
  // A light burst (SM 0.05): 100 x (1 + 10 x 0.15) = 250 ms, 400 x 250 / 200 = 500 ms: holds.
  EXPECT_TRUE(predicted_breaches(*co->guard, burst(0.05, 0)).empty());
  // No burst: the plan as measured.
  EXPECT_NEAR(find(co->guard->predict(BurstLoad{}), "chat", "ttft_ms_p95")->during, 400, 1e-9);
}

TEST(CoRunnerGuard, TheAgentExcludesAMappingPredictedToBreakACoRunnerAndSaysWhy) {
  // summarize runs 1.7 s on the GPU and 12.9 s on the CPU (docs/results/placement.md): left
  // alone, the agent puts it on the GPU. Its burst holds most of the SMs, which the guard
  // predicts breaks the chat's TTFT.
  Scenario s;
  s.name = "protect";
  s.file = "protect.yaml";
  s.device = "rtx3090";
  s.vram_budget_gb = 10;
  s.nodes = {ToolNode{"answer", "summarize", {}, 0}};
  const auto run = [&](bool guarded) {
    auto p =
        PlacementProblem::build(s, tools(), Catalog::default_catalog(), round_corunners(guarded));
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().what());
    Executor ex(*p);
    TrialRunner runner(ex);
    AgentPolicy policy(std::make_shared<BuiltinAgent>());
    auto d = policy.decide(runner, Context{.seed = 3});
    EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.error().what());
    return *d;
  };
  const PolicyResult free = run(false);
  EXPECT_EQ(free.mapping, Mapping{Placement::kGpuQueue});
  EXPECT_TRUE(free.excluded.empty());
  const PolicyResult kept = run(true);
  EXPECT_EQ(kept.mapping, Mapping{Placement::kCpu});
  ASSERT_FALSE(kept.excluded.empty());
  const Exclusion& e = kept.excluded.front();
  EXPECT_EQ(e.mapping, Mapping{Placement::kGpuQueue});
  ASSERT_FALSE(e.predicted.empty());
  EXPECT_EQ(e.predicted[0].model, "chat");
  EXPECT_EQ(e.predicted[0].metric, "ttft_ms_p95");
  // Any burst of SM share u >= 0.3 gives 400 x 100 (1 + 10 (0.1 + u)) / 200 >= 1200 ms.
  EXPECT_GE(e.predicted[0].excess(), 0.5);
  bool said = false;
  for (const auto& line : kept.log)
    said = said || line.find("predicted to break chat") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(ConstrainedOracle, IsTheFastestMappingWhoseBurstTheTestbedMeasuresBreakingNothing) {
  auto scenario = load_scenario(
      std::string(CORUN_SOURCE_DIR) + "/workloads/tools-shared/voice-note.yaml", tools());
  ASSERT_TRUE(scenario.ok()) << scenario.error().what();
  const SimTestbed sim;
  auto co = scenario_corunners(*scenario, Catalog::default_catalog(), sim);
  ASSERT_TRUE(co.ok()) << co.error().what();
  ASSERT_NE((*co)->guard, nullptr);
  auto p = PlacementProblem::build(*scenario, tools(), Catalog::default_catalog(), *co);
  ASSERT_TRUE(p.ok()) << p.error().what();
  auto o = brute_force_oracle(*p);
  ASSERT_TRUE(o.ok()) << o.error().what();
  ASSERT_TRUE(o->unconstrained_makespan_ms.has_value());
  auto at_oracle = measure_corunners_during(*p, o->mapping);
  ASSERT_TRUE(at_oracle.ok());
  EXPECT_TRUE((*at_oracle)->empty());
  // Every mapping faster than the constrained optimum breaks a co-runner, as measured.
  Executor ex(*p);
  for (std::uint64_t k = 0; k < p->mapping_count(); ++k) {
    const Mapping m = p->mapping_at(k);
    const double ms = ex.makespan_s(m) * 1e3;
    if (!(ms < o->makespan_ms)) continue;
    auto measured = measure_corunners_during(*p, m);
    ASSERT_TRUE(measured.ok());
    EXPECT_FALSE((*measured)->empty()) << p->describe(m);
  }
  EXPECT_LE(*o->unconstrained_makespan_ms, o->makespan_ms);
}

}  // namespace
}  // namespace corun::mapping::guard_test
