// The classical policies and the evaluation's notion of "optimal", on the round device.
#include "corun/mapping/policy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "corun/eval/placement_eval.h"
#include "test_util.h"

namespace corun::mapping::policy_test {
namespace {

using testing::make_problem;
constexpr auto kQueue = Placement::kGpuQueue;
constexpr auto kCpu = Placement::kCpu;

/// "ship": 1 GB of input for 0.475 ms of GPU compute; 150 ms on 2 CPU cores.
/// GPU: upload 10 us + 1e9 / 10e9 = 100.01 ms; 10 kernels of 100 tiles on 97.014 SMs (see
/// tools_test.cc): 1.5e10 / (55e12 x 0.97014) = 0.2811 ms of math + 10 x 19.4 us = 0.4751 ms.
/// CPU: 1.5e10 / (2 x 100e9 x 0.5) = 150 ms.
Tool ship_tool() {
  Tool t = testing::phase_tool("ship", 1.5e10, 1e6, 10, 100);
  t.cpu_threads = 2;
  t.weights_bytes = 0.25e9;
  t.working_bytes = 0.25e9;
  t.input_bytes = 1e9;
  return t;
}

ToolCatalog catalog_with_ship() {
  ToolCatalog c = testing::round_catalog();
  c.tools.push_back(ship_tool());
  Tool cpu_only = testing::small_tool();
  cpu_only.name = "cpu_only";
  cpu_only.has_gpu = false;
  c.tools.push_back(cpu_only);
  return c;
}

PolicyResult decide(Policy& policy, const PlacementProblem& p, std::uint64_t seed = 1) {
  Executor ex(p);
  TrialRunner runner(ex);
  auto r = policy.decide(runner, Context{.seed = seed});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().what());
  EXPECT_EQ(r->executions, runner.executions());
  return std::move(r).value();
}

TEST(AllGpu, QueuesEveryGpuCapableToolAndNothingElse) {
  // conv fits the 3 GB budget; cpu_only has no GPU implementation.
  const auto p =
      make_problem({{"a", "conv", {}, 0}, {"b", "cpu_only", {}, 0}}, 3, catalog_with_ship());
  AllGpuPolicy policy;
  const PolicyResult r = decide(policy, p);
  EXPECT_EQ(r.mapping, (Mapping{kQueue, kCpu}));
  EXPECT_EQ(r.executions, 0u);
}

TEST(Validation, RejectsPlacementsTheToolCannotTake) {
  // 1.5 GB budget: conv (2 GB) can never be on the GPU.
  const auto p =
      make_problem({{"a", "conv", {}, 0}, {"b", "cpu_only", {}, 0}}, 1.5, catalog_with_ship());
  EXPECT_EQ(p.mapping_count(), 1u);
  const Status too_big = p.validate(Mapping{kQueue, kCpu});
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.error().what().find("above the budget"), std::string::npos);
  const Status no_gpu = p.validate(Mapping{kCpu, kQueue});
  ASSERT_FALSE(no_gpu.ok());
  EXPECT_NE(no_gpu.error().what().find("no GPU implementation"), std::string::npos);
  EXPECT_FALSE(p.validate(Mapping{kCpu}).ok());
  EXPECT_TRUE(p.validate(Mapping{kCpu, kCpu}).ok());
}

TEST(Heft, InstanceHasOneGpuAndTheCpuSlots) {
  // Mean threads (10 + 2) / 2 = 6 on 10 cores: floor(10 / 6) = 1 CPU slot.
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "small", {0}, 0}}, 10);
  EXPECT_EQ(cpu_slots(p), 1u);
  const HeftProblem h = heft_instance(p);
  EXPECT_EQ(h.processors, 2u);
  EXPECT_NEAR(h.w(0, 0), 31.7374, 1e-3);  // conv on the GPU, copies included
  EXPECT_NEAR(h.w(0, 1), 2000.0, 1e-9);  // conv on the CPU
  ASSERT_EQ(h.edges.size(), 1u);
  EXPECT_EQ(h.edges[0].comm, 0.0);
}

TEST(HeftPolicy, SeesTheGpuAsOneExclusiveProcessor) {
  // One CPU slot (mean threads (2 + 10 + 10) / 3 on 10 cores). Ranks: conv (31.74 + 2000) / 2
  // = 1016 twice, ship (100.49 + 150) / 2 = 125.2. conv a -> GPU [0, 31.74]; conv b -> GPU
  // [31.74, 63.47] (its CPU time is 2 s); ship -> GPU would finish at 63.47 + 100.49 = 163.96,
  // the CPU at 150: HEFT sends it to the CPU, although on the real GPU it could have run
  // beside them.
  const auto p = make_problem({{"s", "ship", {}, 0}, {"a", "conv", {}, 0}, {"b", "conv", {}, 0}},
                              10, catalog_with_ship());
  HeftPolicy policy;
  const PolicyResult r = decide(policy, p);
  EXPECT_EQ(r.mapping, (Mapping{kCpu, kQueue, kQueue}));
  ASSERT_TRUE(r.predicted_makespan_ms);
  EXPECT_NEAR(*r.predicted_makespan_ms, 150.0, 1e-6);
  // Alone, ship goes to the GPU: 100.49 ms end to end beats 150 ms.
  const auto alone = make_problem({{"s", "ship", {}, 0}}, 10, catalog_with_ship());
  EXPECT_EQ(decide(policy, alone).mapping, (Mapping{kQueue}));
}

TEST(DmdaPolicy, FollowsStarPusFitnessRule) {
  // ship alone. CUDA worker: T_xfer = 10 us + 2 x 1 GB / 10 GB/s = 200.01 ms, end 200.49.
  // CPU worker: end 150. best_end = 150. Fitness: GPU (200.49 - 150) + 200.01 = 250.5, CPU 0:
  // dmda picks the CPU, where HEFT (end to end 100.49 < 150) picks the GPU.
  const auto p = make_problem({{"s", "ship", {}, 0}}, 10, catalog_with_ship());
  DmdaPolicy dmda;
  const PolicyResult r = decide(dmda, p);
  EXPECT_EQ(r.mapping, (Mapping{kCpu}));
  EXPECT_NEAR(*r.predicted_makespan_ms, 150.0, 1e-9);
  HeftPolicy heft_policy;
  EXPECT_EQ(decide(heft_policy, p).mapping, (Mapping{kQueue}));
}

TEST(DmdaPolicy, TimelineUsesQueueFreeTimes) {
  // conv -> small. conv: GPU xfer 10 us + 20 ms, end 20.01 + 20.7174 = 40.7274 (compute
  // alone, tools_test.cc); CPU end 2000: GPU. small ready at 40.7274: GPU start
  // max(queue_free, ready + 0) = 40.7274, end + 2.5146 = 43.2420; CPU end 140.73: GPU.
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "small", {0}, 0}}, 10);
  DmdaPolicy dmda;
  const PolicyResult r = decide(dmda, p);
  EXPECT_EQ(r.mapping, (Mapping{kQueue, kQueue}));
  EXPECT_NEAR(*r.predicted_makespan_ms, 43.2420, 1e-3);
}

TEST(BruteForce, ExecutesEveryMappingAndFindsTheOracle) {
  const auto p =
      make_problem({{"a", "conv", {}, 0}, {"b", "conv", {}, 0}, {"c", "small", {0}, 0}}, 3);
  BruteForcePolicy policy;
  const PolicyResult r = decide(policy, p);
  EXPECT_EQ(r.executions, 27u);
  auto oracle = brute_force_oracle(p);
  ASSERT_TRUE(oracle.ok());
  // Noise 0: the observed best is the true best.
  EXPECT_NEAR(true_makespan_ms(p, r.mapping), oracle->makespan_ms, 1e-9);
  // Hand check: a and b need 2 GB each of the 3 GB, so they run one after the other on the
  // GPU (2 x 31.7374 ms); small follows a and computes (2.51 ms) while b is still uploading
  // (10.01 ms), so nothing overlaps b's kernels: 63.4749 ms. Any CPU placement of conv costs
  // 2 s.
  EXPECT_NEAR(oracle->makespan_ms, 63.4749, 2e-3);
}

TEST(Bandit, PullsBudgetTimesArmsAndFindsTheBestArm) {
  auto s = testing::make_scenario({{"a", "conv", {}, 0}, {"b", "small", {}, 0}}, 10);
  s.noise = 0.02;
  auto p = PlacementProblem::build(s, testing::round_catalog(), testing::round_device());
  ASSERT_TRUE(p.ok());
  BanditPolicy bandit(3.0);
  const PolicyResult r = decide(bandit, *p, 5);
  EXPECT_EQ(r.executions, 27u);  // 3 x 9 arms
  auto oracle = brute_force_oracle(*p);
  ASSERT_TRUE(oracle.ok());
  EXPECT_LE(true_makespan_ms(*p, r.mapping), oracle->makespan_ms * 1.01);
}

TEST(Policies, UnknownNamesGetASuggestion) {
  auto p = make_policy("hefts");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().what().find("did you mean 'heft'"), std::string::npos);
  EXPECT_FALSE(make_policy("agent").ok());  // needs an agent
}

TEST(Judge, OptimalMeansWithinOnePercentOfTheNoiseFreeOracle) {
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "conv", {}, 0}}, 3);
  auto oracle = brute_force_oracle(p);
  ASSERT_TRUE(oracle.ok());
  AllGpuPolicy all_gpu;  // both queued, one after the other: the optimum here
  const PlacementRow row = judge(p, *oracle, all_gpu, 0.01);
  EXPECT_TRUE(row.optimal);
  EXPECT_NEAR(row.makespan_ms, 63.4749, 2e-3);
  EXPECT_EQ(row.executions, 0u);
  // A 1 % tolerance admits an oracle 0.99 % below the mapping but not 1.01 %.
  Oracle tighter = *oracle;
  tighter.makespan_ms = row.makespan_ms / 1.0099;
  EXPECT_TRUE(judge(p, tighter, all_gpu, 0.01).optimal);
  tighter.makespan_ms = row.makespan_ms / 1.0101;
  EXPECT_FALSE(judge(p, tighter, all_gpu, 0.01).optimal);
}

}  // namespace
}  // namespace corun::mapping::policy_test
