// The discrete-event executor on the round device of test_util.h, against hand computations.
#include "corun/mapping/executor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace corun::mapping::executor_test {
namespace {

using testing::make_problem;
constexpr auto kNow = Placement::kGpuNow;
constexpr auto kQueue = Placement::kGpuQueue;
constexpr auto kCpu = Placement::kCpu;

// Alone on the round device (tools_test.cc derives them by hand): conv uploads in 10.01 ms,
// computes in 20.7174 ms, downloads in 1.01 ms: 31.7374 ms; small computes in 2.5146 ms.
constexpr double kConvMs = 31.7374;
constexpr double kSmallMs = 2.5146;

TEST(Executor, OneToolAloneTakesItsProfile) {
  const auto p = make_problem({{"a", "conv", {}, 0}}, 10);
  Executor ex(p);
  EXPECT_NEAR(ex.run(Mapping{kNow}).makespan_ms, kConvMs, 1e-3);
  // Its burst: computing from the end of the upload (10.01 ms) for 20.717 ms on 97.014 of the
  // 100 SMs, pulling 0.053632 of the achievable bandwidth (tools_test.cc).
  const BurstLoad b = ex.run(Mapping{kNow}).burst;
  EXPECT_NEAR(b.start_ms, 10.01, 1e-6);
  EXPECT_NEAR(b.end_ms, 10.01 + 20.7174, 1e-3);
  EXPECT_NEAR(b.sm_util, 0.97014, 1e-5);
  EXPECT_NEAR(b.bw_util, 0.053632, 1e-5);
  EXPECT_FALSE(ex.run(Mapping{kCpu}).burst.any());
  EXPECT_NEAR(ex.run(Mapping{kCpu}).makespan_ms, 2000.0, 1e-9);  // 2 s on 10 cores
}

TEST(Executor, ChainAddsUp) {
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "small", {0}, 0}}, 10);
  Executor ex(p);
  const RunResult r = ex.run(Mapping{kQueue, kQueue});
  EXPECT_NEAR(r.tools[1].ready_ms, kConvMs, 1e-3);
  EXPECT_NEAR(r.tools[1].start_ms, r.tools[0].end_ms, 1e-12);
  EXPECT_NEAR(r.makespan_ms, kConvMs + kSmallMs, 1e-3);
}

TEST(Executor, ConcurrentGpuToolsShareSmsPcieAndCache) {
  // Two conv at once, by hand with the GPU model's constants (src/testbed/sim_params.h).
  // Uploads share PCIe: both end at 2 x 10.01 = 20.02 ms. Compute (alone: 97.014 SMs, math
  // 18.7414 ms, memory 1.1630 ms, 100 kernels): the other one holds 97.014 SMs, so SMs are
  // oversubscribed 1.9403x; DRAM demand 2 x 0.053632 of the achievable bandwidth stretches
  // memory by (1 + 0.12 x 0.10726^2) / (1 + 0.12 x 0.05363^2) = 1.00104 and DRAM latency by
  // 1.00517; the other's L2 pressure 0.31425 costs 0.716 x sensitivity 0.018795 x 0.31425 /
  // 1.31425 = 0.32 % extra traffic (0.3 of it on the math); the per-kernel 18 us fixed cost
  // stretches by sqrt(1.9403) and the launch delay of 2 workloads is 1.7 us. Compute:
  // sqrt((18.7414 x 1.9403 x 1.00097)^2 + (1.1630 x 1.00104 x 1.0032)^2) + 100 x (18 us x
  // 1.0032 x 1.00517 x 1.3930 + 1.7 us) = 39.1158 ms. Downloads share PCIe: 2.02 ms.
  // Total 20.02 + 39.1158 + 2.02 = 61.1558 ms.
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "conv", {}, 0}}, 10);
  Executor ex(p);
  const RunResult r = ex.run(Mapping{kNow, kNow});
  const double expected = 61.1558;
  EXPECT_NEAR(r.makespan_ms, expected, 1e-3);
  EXPECT_NEAR(r.tools[0].end_ms, expected, 1e-3);
  EXPECT_EQ(r.tools[0].gpu_corunners, 1);
  EXPECT_NEAR(r.peak_vram_gb, 4.0, 1e-9);
}

TEST(Executor, LaunchGapsGrowWithCoRunners) {
  // "launch" is 1000 kernels of no work: 18 us fixed + the launch delay of iGniter's table
  // (1.4, 1.7, 6.8 us with 1, 2, 3 co-located workloads). Alone 19.4 ms; two at once 19.7 ms;
  // three at once 24.8 ms (a few SMs each: no oversubscription).
  const auto one = make_problem({{"a", "launch", {}, 0}}, 10);
  Executor ex1(one);
  EXPECT_NEAR(ex1.run(Mapping{kNow}).makespan_ms, 19.4, 1e-9);
  const auto two = make_problem({{"a", "launch", {}, 0}, {"b", "launch", {}, 0}}, 10);
  Executor ex2(two);
  EXPECT_NEAR(ex2.run(Mapping{kNow, kNow}).makespan_ms, 19.7, 1e-9);
  const auto three =
      make_problem({{"a", "launch", {}, 0}, {"b", "launch", {}, 0}, {"c", "launch", {}, 0}}, 10);
  Executor ex3(three);
  EXPECT_NEAR(ex3.run(Mapping{kNow, kNow, kNow}).makespan_ms, 24.8, 1e-9);
  // Moving one to the CPU (where kernels of no work cost nothing) leaves two.
  EXPECT_NEAR(ex3.run(Mapping{kNow, kNow, kCpu}).makespan_ms, 19.7, 1e-9);
}

TEST(Executor, CpuToolsShareCores) {
  // Two conv on the CPU, each wanting all 10 cores: processor sharing doubles both: 4 s.
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "conv", {}, 0}}, 10);
  Executor ex(p);
  EXPECT_NEAR(ex.run(Mapping{kCpu, kCpu}).makespan_ms, 4000.0, 1e-6);
  // One on each side: no sharing at all.
  EXPECT_NEAR(ex.run(Mapping{kCpu, kNow}).makespan_ms, 2000.0, 1e-6);
}

TEST(Executor, BackgroundTenantSlowsKernels) {
  // A co-tenant holding 50 % of the SMs (no bandwidth): SMs oversubscribed (97.014 + 50) /
  // 100 = 1.4701x; its L2 pressure 0.5 x 0.5 costs 0.716 x 0.018795 x 0.25 / 1.25 = 0.27 %
  // extra traffic; it counts as one more workload for the launch delay (1.7 us). Compute:
  // sqrt((18.7414 x 1.4701 x 1.00081)^2 + (1.1630 x 1.0027)^2) + 100 x (18 us x 1.0027 x
  // sqrt(1.4701) + 1.7 us) = 29.9578 ms, + 11.02 ms of copies.
  auto s = testing::make_scenario({{"a", "conv", {}, 0}}, 10);
  s.background.gpu_sm_util = 0.5;
  auto p = PlacementProblem::build(s, testing::round_catalog(), testing::round_device());
  ASSERT_TRUE(p.ok());
  Executor ex(*p);
  EXPECT_NEAR(ex.run(Mapping{kNow}).makespan_ms, 10.01 + 29.9578 + 1.01, 1e-3);
}

TEST(Executor, GpuNowFailsWhenVramIsShortAndSkipsSuccessors) {
  // Budget 3 GB, two 2 GB tools ready at once: the first takes 2 GB, the second finds 1 GB.
  const auto p =
      make_problem({{"a", "conv", {}, 0}, {"b", "conv", {}, 0}, {"c", "small", {1}, 0}}, 3);
  Executor ex(p);
  const Mapping m{kNow, kNow, kQueue};
  const RunResult r = ex.run(m);
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.tools[0].status, ToolRun::Status::kDone);
  EXPECT_EQ(r.tools[1].status, ToolRun::Status::kFailed);
  EXPECT_EQ(r.tools[2].status, ToolRun::Status::kSkipped);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_NE(r.failures[0].find("out of VRAM"), std::string::npos);
  EXPECT_NEAR(r.makespan_ms, kConvMs, 1e-3);  // the tool that did run
  EXPECT_TRUE(std::isinf(ex.makespan_s(m)));
}

TEST(Executor, GpuQueueWaitsInFifoOrder) {
  // Same budget with gpu_queue: b waits for a's 2 GB, then runs alone too.
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "conv", {}, 0}}, 3);
  Executor ex(p);
  const RunResult r = ex.run(Mapping{kQueue, kQueue});
  EXPECT_FALSE(r.failed);
  EXPECT_NEAR(r.tools[1].start_ms, kConvMs, 1e-3);
  EXPECT_NEAR(r.tools[1].queue_wait_ms, kConvMs, 1e-3);
  EXPECT_TRUE(r.tools[1].vram_pressure);
  EXPECT_NEAR(r.makespan_ms, 2 * kConvMs, 2e-3);
}

TEST(Executor, HeadOfLineBlockingAndQueueJumping) {
  // a (2 GB) runs; b (2 GB) waits at the head of the queue; c (0.5 GB) would fit beside a.
  // Queued behind b, c starts only when a ends; with gpu_now it starts at once.
  const auto p =
      make_problem({{"a", "conv", {}, 0}, {"b", "conv", {}, 0}, {"c", "small", {}, 0}}, 3);
  Executor ex(p);
  const RunResult queued = ex.run(Mapping{kQueue, kQueue, kQueue});
  EXPECT_NEAR(queued.tools[2].start_ms, kConvMs, 1e-3);
  const RunResult jumped = ex.run(Mapping{kQueue, kQueue, kNow});
  EXPECT_NEAR(jumped.tools[2].start_ms, 0.0, 1e-12);
  EXPECT_FALSE(jumped.failed);
}

TEST(Executor, ZeroCostToolsAndDiamondsComplete) {
  // A diamond with a zero-work CPU tool in it still ends, in precedence order.
  const auto p = make_problem({{"src", "launch", {}, 0},
                               {"l", "small", {0}, 0},
                               {"r", "small", {0}, 0},
                               {"sink", "launch", {1, 2}, 0}},
                              10);
  Executor ex(p);
  const RunResult r = ex.run(Mapping{kCpu, kQueue, kCpu, kCpu});
  EXPECT_NEAR(r.tools[0].end_ms, 0.0, 1e-12);   // launch on CPU: no work, no dispatch cost
  EXPECT_NEAR(r.tools[2].end_ms, 100.0, 1e-9);  // small on 2 cores: 100 ms
  EXPECT_NEAR(r.tools[1].end_ms, kSmallMs, 1e-3);
  EXPECT_NEAR(r.tools[3].start_ms, 100.0, 1e-9);
  EXPECT_NEAR(r.makespan_ms, 100.0, 1e-9);
}

TEST(Executor, NoiseIsDeterministicBySeedAndMeanOne) {
  auto s = testing::make_scenario({{"a", "conv", {}, 0}, {"b", "small", {0}, 0}}, 10);
  s.noise = 0.05;
  auto p = PlacementProblem::build(s, testing::round_catalog(), testing::round_device());
  ASSERT_TRUE(p.ok());
  Executor ex(*p);
  const Mapping m{kQueue, kCpu};
  const double a = ex.makespan_s(Context{.seed = 7}, m);
  EXPECT_EQ(a, ex.makespan_s(Context{.seed = 7}, m));
  EXPECT_NE(a, ex.makespan_s(Context{.seed = 8}, m));
  const double exact = ex.makespan_s(m);
  double sum = 0;
  const int n = 2000;
  for (int k = 0; k < n; ++k)
    sum += ex.makespan_s(Context{.seed = static_cast<std::uint64_t>(k)}, m);
  // Mean-one log-normal per tool: the average observed makespan converges on the exact one
  // (standard error ~ 0.05 / sqrt(2000) ~ 0.1 %).
  EXPECT_NEAR(sum / n / exact, 1.0, 0.005);
}

TEST(Executor, FastPathAgreesWithTrace) {
  const auto p = make_problem({{"a", "conv", {}, 0},
                               {"b", "small", {0}, 0},
                               {"c", "conv", {}, 0},
                               {"d", "launch", {1, 2}, 0}},
                              4.5);
  Executor ex(p);
  for (std::uint64_t k = 0; k < p.mapping_count(); ++k) {
    const Mapping m = p.mapping_at(k);
    const RunResult r = ex.run(Context{.seed = k}, m);
    const double fast = ex.makespan_s(Context{.seed = k}, m);
    if (r.failed) {
      EXPECT_TRUE(std::isinf(fast));
    } else {
      EXPECT_NEAR(fast * 1e3, r.makespan_ms, 1e-9);
    }
  }
}

}  // namespace
}  // namespace corun::mapping::executor_test
