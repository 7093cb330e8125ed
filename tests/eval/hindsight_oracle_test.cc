#include "corun/eval/hindsight_oracle.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/runtime/transition_ledger.h"
#include "corun/testbed/sim.h"

namespace corun::hindsight_oracle_test {
namespace {

constexpr double kWindow = 10;

// One LLM whose precision is a restart-class knob (catalog/actuation.yaml: vllm) and one camera,
// its image size a Triton reload.
Workload workload() {
  auto w = parse_workload(R"(device: rtx3090
models:
  - name: chat
    model: qwen2.5-1.5b
    knobs: {precision: [fp16, awq], request_concurrency: [2, 4]}
    demand: {rps: 1.5, prompt_tokens: 512, output_tokens: 128}
    sla: {ttft_ms_p95: 800, tpot_ms_p95: 60}
  - name: cam0
    model: yolo11s
    knobs: {imgsz: [320, 640]}
    demand: {fps: 30}
    sla: {latency_ms_p95: 60}
)",
                          "hindsight.yaml", Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << w.error().what();
  return *w;
}

// A 7B LLM on an L4 whose fp16 and AWQ copies do not fit side by side (hand: weights 15.2 and
// about 5.5 GB, KV cache of 16 sequences of 2,304 tokens about 2.1 GB each, 0.4 GB of context
// each: above the L4's 24.15 GB), so a precision change breaks first; SLAs loose enough that
// both hold.
Workload big() {
  auto w = parse_workload(R"(device: l4
models:
  - name: chat
    model: qwen2.5-7b
    knobs: {precision: [fp16, awq], request_concurrency: 16}
    demand: {rps: 0.3, prompt_tokens: 2048, output_tokens: 256}
    sla: {ttft_ms_p95: 20000, tpot_ms_p95: 400}
)",
                          "big.yaml", Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << w.error().what();
  return *w;
}

// Six intervals: the camera's frame rate halves after the third (the chat at 2 rps or more
// holds no plan in every window).
std::vector<HindsightInterval> timeline() {
  std::vector<HindsightInterval> out;
  Workload w = workload();
  for (int k = 0; k < 6; ++k) {
    if (k == 3) w.models[1].demand.fps = 15;
    out.push_back({w, Conditions{}});
  }
  return out;
}

TEST(TransitionLedger, ASwapsKernelsRunInItsLastSeconds) {
  // A make-before-break restart of 25 s whose new copy runs kernels for its last 12 s (hand:
  // they run in [13, 25) s): windows of 10 s see 0, 7 and 5 s of them, 12 s in all.
  JointTransition t;
  TransitionStep s;
  s.model = 0;
  s.from = 0;
  s.to = 1;
  s.change.action = Actuation::kRestart;
  s.change.downtime_s = 25;
  s.change.make_before_break = true;
  s.change.start_gpu_s = 12;
  s.change.start_gpu_share = 0.2;
  t.steps.push_back(s);
  EXPECT_NEAR(s.change.swap_gpu_seconds(), 2.4, 1e-12);
  TransitionLedger ledger(1);
  ledger.begin(t);
  const JointConfig to = {1};
  const double expected[] = {0, 7, 5};
  for (double e : expected) {
    const auto charges = ledger.next_window(to, 10);
    ASSERT_EQ(charges.size(), 1u);
    EXPECT_NEAR(charges[0].swap_gpu_s, e, 1e-12);
    EXPECT_EQ(charges[0].outage_s, 0);
    EXPECT_EQ(charges[0].swap_gpu_share, e > 0 ? 0.2 : 0.0);
  }
  EXPECT_TRUE(ledger.idle());
  // After a break nothing runs beside an old copy.
  t.steps[0].change.make_before_break = false;
  EXPECT_EQ(t.steps[0].change.swap_gpu_seconds(), 0);
  TransitionLedger broke(1);
  broke.begin(t);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(broke.next_window(to, 10)[0].swap_gpu_s, 0);
}

TEST(TransitionLedger, ARestartLongerThanAWindowCarriesIntoTheNextOnes) {
  const Workload w = big();
  // fp16 -> awq of the chat: a vLLM restart that breaks first; its outage (hand: process_start
  // 15 + compile 8 + graph capture 12 s + weights over min(storage, PCIe)) is longer than three
  // 10 s windows.
  const JointConfig from = {0};
  const JointConfig to = {1};
  const JointTransition t = joint_transition(ActuationTable::builtin(), w, from, to);
  ASSERT_EQ(t.steps.size(), 1u);
  ASSERT_EQ(t.steps[0].change.action, Actuation::kRestart);
  ASSERT_FALSE(t.steps[0].change.make_before_break);
  const double outage = t.steps[0].change.outage_s();
  const double downtime = t.steps[0].change.downtime_s;
  EXPECT_GT(downtime, 35.0);
  TransitionLedger ledger(1);
  ledger.begin(t);
  double paid = 0;
  int windows = 0;
  while (!ledger.idle() && windows < 10) {
    const auto charges = ledger.next_window(to, kWindow);
    ASSERT_EQ(charges.size(), 1u);
    EXPECT_EQ(charges[0].model, 0u);
    EXPECT_LE(charges[0].outage_s, kWindow);
    paid += charges[0].outage_s;
    ++windows;
  }
  EXPECT_TRUE(ledger.idle());
  EXPECT_DOUBLE_EQ(paid, outage);
  EXPECT_DOUBLE_EQ(outage, downtime);
  EXPECT_EQ(windows, static_cast<int>(std::ceil(downtime / kWindow)));
  // A model that stops drops what it owed.
  TransitionLedger stopped(1);
  stopped.begin(t);
  EXPECT_TRUE(stopped.next_window({kAbsent}, kWindow).empty());
  EXPECT_TRUE(stopped.idle());
}

// The schedule is the best path through each interval's candidates: it is worth at least as
// much as the two schedules every candidate set contains — the per-interval best plans (which
// pay for every change) and the first interval's best kept throughout (which pays none, as long
// as it holds).
TEST(HindsightOracle, BeatsThePerIntervalBestAndTheKeptPlanByTheSameMeasure) {
  SimTestbed sim;
  RobustOracle robust(sim, kWindow, 2, 50, 0.99, 3);
  HindsightOracle hindsight(robust, ActuationTable::builtin(), kWindow);
  const auto run = timeline();
  const HindsightSchedule best = hindsight.best(run);
  ASSERT_EQ(best.plans.size(), run.size());
  std::vector<JointConfig> greedy;
  for (const auto& iv : run) {
    const auto a = robust.best(iv.now, iv.conditions);
    ASSERT_TRUE(a.feasible) << "fps " << iv.now.models[1].demand.fps;
    ASSERT_FALSE(a.candidates.empty());
    ASSERT_LE(a.candidates.size(), 3u);
    EXPECT_EQ(a.candidates.front().first, a.config);  // best first
    greedy.push_back(a.config);
  }
  const std::vector<bool> all(run.size(), true);
  EXPECT_EQ(best.planned, all);
  const double v_greedy = hindsight.value(run, greedy, {}, all);
  EXPECT_GE(best.value, v_greedy - 1e-9);
  const std::vector<JointConfig> kept(run.size(), greedy.front());
  const double v_kept = hindsight.value(run, kept, {}, all);
  bool kept_holds = true;
  for (const auto& iv : run) {
    kept_holds = kept_holds && robust.score(iv.now, iv.conditions, greedy.front()).holds;
  }
  if (kept_holds) {
    EXPECT_GE(best.value, v_kept - 1e-9);
  }
  // The schedule's own plans, scored by value(), give its value.
  EXPECT_NEAR(hindsight.value(run, best.plans, {}, all), best.value, 1e-9 * best.value);
  // Without a change, the value is the sum of the plans' earned utility.
  double earned = 0;
  for (const auto& iv : run) earned += robust.score(iv.now, iv.conditions, greedy.front()).earned;
  EXPECT_NEAR(v_kept, earned, 1e-9 * earned);
}

// A schedule that restarts the chat every interval pays for it: each restart's windows earn
// less than the same plans would without it.
TEST(HindsightOracle, ARestartEveryIntervalCostsWhatItsWindowsLose) {
  SimTestbed sim;
  RobustOracle robust(sim, kWindow, 2, 50, 0.99, 3);
  HindsightOracle hindsight(robust, ActuationTable::builtin(), kWindow);
  std::vector<HindsightInterval> run;
  for (int k = 0; k < 8; ++k) run.push_back({big(), Conditions{}});
  std::vector<JointConfig> flip;
  double free = 0;
  for (int k = 0; k < 8; ++k) {
    flip.push_back({k % 4 < 2 ? 0 : 1});  // fp16, fp16, awq, awq, fp16, ...
    const RobustScore s = robust.score(run[static_cast<std::size_t>(k)].now, {}, flip.back());
    ASSERT_TRUE(s.holds) << "interval " << k;
    free += s.earned;
  }
  const std::vector<bool> all(run.size(), true);
  const double paid = hindsight.value(run, flip, {}, all);
  EXPECT_LT(paid, free);
  // Knowing it all in advance, the oracle keeps one precision (in its candidates: both hold).
  const HindsightSchedule best = hindsight.best(run);
  EXPECT_EQ(best.restarts, 0u);
  EXPECT_GT(best.value, paid);
}

}  // namespace
}  // namespace corun::hindsight_oracle_test
