// The references of the scheduler evaluation, and the run's durable online log.
#include "corun/eval/robust_oracle.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "corun/catalog/catalog.h"
#include "corun/runtime/online_run.h"
#include "corun/runtime/twin_source.h"
#include "corun/testbed/sim.h"
#include "../core/temp_dir.h"

namespace corun::robust_oracle_test {
namespace {

// Small enough to measure every configuration over every window: 3 x 3 x 2 = 18 plans.
Workload small() {
  auto w = parse_workload(R"(device: rtx3090
models:
  - name: chat
    model: qwen2.5-1.5b
    knobs: {precision: [fp16, awq], request_concurrency: [1, 4], prefill_chunk: [512]}
    demand: {rps: 1.5, prompt_tokens: 512, output_tokens: 128}
    sla: {ttft_ms_p95: 900, tpot_ms_p95: 60}
    weight: 2
  - name: cam0
    model: yolo11m
    knobs: {imgsz: [320, 640, 960]}
    demand: {fps: 30}
    sla: {latency_ms_p95: 40}
timeline:
  duration_s: 30
  interval_s: 10
)",
                          "small.yaml", Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << w.error().what();
  return *w;
}

TEST(RobustOracle, EqualsMeasuringEveryPlanOverEveryWindow) {
  const Workload w = small();
  SimTestbed sim;
  RobustOracle oracle(sim, 10, 1, 20);
  const auto best = oracle.best(w, {});
  // Brute force through the same windows.
  bool any = false;
  double top = 0;
  JointConfig arg;
  for (std::int32_t a = 0; a < 4; ++a) {
    for (std::int32_t b = 0; b < 3; ++b) {
      const JointConfig c{a, b};
      const RobustScore s = oracle.score(w, {}, c);
      if (s.holds && (!any || s.utility > top)) {
        any = true;
        top = s.utility;
        arg = c;
      }
    }
  }
  ASSERT_TRUE(any);
  ASSERT_TRUE(best.feasible);
  EXPECT_DOUBLE_EQ(best.utility, top);
  EXPECT_EQ(best.config, arg);
  // A plan that holds in every window earns all of its utility.
  const RobustScore s = oracle.score(w, {}, best.config);
  EXPECT_EQ(s.breaching_windows, 0u);
  EXPECT_DOUBLE_EQ(s.earned, s.utility);
}

TEST(RobustOracle, ASingleLuckyWindowPromisesMore) {
  const Workload w = small();
  SimTestbed sim;
  RobustOracle oracle(sim, 10, 1, 20);
  const auto best = oracle.best(w, {});
  ASSERT_TRUE(best.feasible_1);
  // The single-window oracle picks among the plans that passed one draw of the noise: at least
  // as much utility as the plans that pass twenty.
  EXPECT_GE(best.utility_1, best.utility - 1e-9);
  // Every plan that the robust oracle rejects breaches in at least one of its windows.
  const RobustScore s = oracle.score(w, {}, best.config_1);
  if (best.config_1 != best.config) {
    EXPECT_TRUE(s.breaching_windows > 0 || s.utility <= best.utility + 1e-9);
  }
}

TEST(RobustOracle, ConditionsChangeTheReference) {
  const Workload w = small();
  SimTestbed sim;
  RobustOracle oracle(sim, 10, 1, 20);
  Conditions busy;
  busy.interference = {0.7, 0.7};
  const auto quiet = oracle.best(w, {});
  const auto crowded = oracle.best(w, busy);
  EXPECT_LE(crowded.utility, quiet.utility + 1e-9);
}

TEST(OnlineLog, AResumedRunReadsItsIntervalsBackAndDecidesTheSame) {
  const Workload w = small();
  SimTestbed sim;
  const testing::TempDir scratch("corun-online-log-test");
  const std::filesystem::path& dir = scratch.path();
  auto run = [&](std::size_t* replayed) -> Result<RunReport> {
    auto log = OnlineLog::open(dir / "dataset.db", w, "text", "sim", 10, 42, 3);
    if (!log) return log.error();
    RunOptions o;
    o.controller.solver = "exhaustive";
    o.log = log->get();
    auto r = run_online(Context{}, w, sim, std::make_unique<TwinSource>(), o);
    if (r) *replayed = r->replayed;
    return r;
  };
  std::size_t first = 99, second = 99;
  auto a = run(&first);
  auto b = run(&second);
  ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.error().what() : a.error().what());
  EXPECT_EQ(first, 0u);
  EXPECT_EQ(second, a->intervals.size());
  for (std::size_t k = 0; k < a->intervals.size(); ++k) {
    EXPECT_EQ(a->intervals[k].plan, b->intervals[k].plan);
    EXPECT_EQ(a->intervals[k].measured_utility, b->intervals[k].measured_utility);
  }
  std::filesystem::remove_all(dir);
}

// The run's key names every setting that changes its decisions: a run resumed under another
// one measures afresh instead of reading back intervals another plan chose.
TEST(OnlineLog, EachSettingThatChangesDecisionsChangesTheRunKey) {
  const TwinSource source;
  ControllerOptions base;
  const std::uint64_t key = OnlineLog::run_key(Context{7, 1}, base, source);
  EXPECT_EQ(key, OnlineLog::run_key(Context{7, 1}, base, source));
  EXPECT_NE(key, OnlineLog::run_key(Context{8, 1}, base, source));
  std::vector<ControllerOptions> others(6, base);
  others[0].solver = "exhaustive";
  others[1].learning.enabled = !base.learning.enabled;
  others[2].learning.breach_target = base.learning.breach_target * 2;
  others[3].learning.explore_sd = 1;
  others[4].admission.enabled = !base.admission.enabled;
  others[5].transitions.aware = !base.transitions.aware;
  for (std::size_t i = 0; i < others.size(); ++i) {
    EXPECT_NE(key, OnlineLog::run_key(Context{7, 1}, others[i], source)) << "setting " << i;
  }
}

TEST(OnlineLog, OpenInCreatesTheRunsDirectoryAndResumesOnlyTheSameKey) {
  const Workload w = small();
  SimTestbed sim;
  const testing::TempDir scratch("corun-online-log-key-test");
  const std::filesystem::path dir = scratch.path() / "out" / "run";
  auto run = [&](bool learning) -> Result<RunReport> {
    RunOptions o;
    o.controller.solver = "exhaustive";
    o.controller.learning.enabled = learning;
    auto source = std::make_unique<TwinSource>();
    auto log = OnlineLog::open_in(dir, w, "text", "sim", 10,
                                  OnlineLog::run_key(Context{1, 1}, o.controller, *source));
    if (!log) return log.error();
    o.log = log->get();
    return run_online(Context{}, w, sim, std::move(source), o);
  };
  auto first = run(false);
  ASSERT_TRUE(first.ok()) << first.error().what();
  EXPECT_TRUE(std::filesystem::exists(dir / "dataset.db"));
  EXPECT_EQ(first->replayed, 0u);
  auto other = run(true);
  ASSERT_TRUE(other.ok()) << other.error().what();
  EXPECT_EQ(other->replayed, 0u);
  auto again = run(false);
  ASSERT_TRUE(again.ok()) << again.error().what();
  EXPECT_EQ(again->replayed, first->intervals.size());
}

}  // namespace
}  // namespace corun::robust_oracle_test
