// The discrete-event executor on the round device of test_util.h, against hand computations.
#include "corun/mapping/executor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace corun::mapping {
namespace {

using testing::make_problem;
constexpr auto kNow = Placement::kGpuNow;
constexpr auto kQueue = Placement::kGpuQueue;
constexpr auto kCpu = Placement::kCpu;
constexpr RunOptions kExact{0, false};

TEST(Executor, OneToolAloneTakesItsProfile) {
  const auto p = make_problem({{"a", "conv", {}, 0}}, 10);
  Executor ex(p);
  EXPECT_NEAR(ex.run(Mapping{kNow}, kExact).makespan_ms, 32.0, 1e-9);    // 10 + 21 + 1
  EXPECT_NEAR(ex.run(Mapping{kCpu}, kExact).makespan_ms, 2000.0, 1e-9);  // 2 s on 10 cores
}

TEST(Executor, ChainAddsUp) {
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "small", {0}, 0}}, 10);
  Executor ex(p);
  const RunResult r = ex.run(Mapping{kQueue, kQueue}, kExact);
  EXPECT_NEAR(r.tools[1].ready_ms, 32.0, 1e-9);
  EXPECT_NEAR(r.tools[1].start_ms, 32.0, 1e-9);
  EXPECT_NEAR(r.makespan_ms, 32.0 + 2.1, 1e-9);  // small: 2 ms kernels + 10 x 10 us launches
}

TEST(Executor, ConcurrentGpuToolsShareSmsPcieAndCache) {
  // Two conv at once. Uploads share PCIe: 2 x 100 MB / 10 GB/s = 20 ms for both. Kernels:
  // summed SM demand 2 x 20/21 stretches kernel time to 20 x 40/21 ms, cache interference
  // (1 co-runner) adds 10 %: 41.905 ms, plus 1 ms of launches (no extra delay with one
  // co-runner). Downloads share PCIe: 2 ms. Total 20 + 42.905 + 2 = 64.905 ms.
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "conv", {}, 0}}, 10);
  Executor ex(p);
  const RunResult r = ex.run(Mapping{kNow, kNow}, kExact);
  const double expected = 20 + (20 * 40.0 / 21.0 * 1.1 + 1) + 2;
  EXPECT_NEAR(r.makespan_ms, expected, 1e-6);
  EXPECT_NEAR(r.tools[0].end_ms, expected, 1e-6);
  EXPECT_EQ(r.tools[0].gpu_corunners, 1);
  EXPECT_NEAR(r.peak_vram_gb, 4.0, 1e-9);
}

TEST(Executor, LaunchGapsGrowWithCoRunners) {
  // "launch" is 1000 pure launch gaps of 10 us. Two at once: no extra delay (table entry 1 is
  // 0): 10 ms. Three at once: 10 us extra per kernel with 2 co-runners: 20 ms.
  const auto two = make_problem({{"a", "launch", {}, 0}, {"b", "launch", {}, 0}}, 10);
  Executor ex2(two);
  EXPECT_NEAR(ex2.run(Mapping{kNow, kNow}, kExact).makespan_ms, 10.0, 1e-9);
  const auto three =
      make_problem({{"a", "launch", {}, 0}, {"b", "launch", {}, 0}, {"c", "launch", {}, 0}}, 10);
  Executor ex3(three);
  EXPECT_NEAR(ex3.run(Mapping{kNow, kNow, kNow}, kExact).makespan_ms, 20.0, 1e-9);
  // Moving one to the CPU (where pure launch gaps cost nothing) leaves two: 10 ms again.
  EXPECT_NEAR(ex3.run(Mapping{kNow, kNow, kCpu}, kExact).makespan_ms, 10.0, 1e-9);
}

TEST(Executor, CpuToolsShareCores) {
  // Two conv on the CPU, each wanting all 10 cores: processor sharing doubles both: 4 s.
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "conv", {}, 0}}, 10);
  Executor ex(p);
  EXPECT_NEAR(ex.run(Mapping{kCpu, kCpu}, kExact).makespan_ms, 4000.0, 1e-6);
  // One on each side: no sharing at all.
  EXPECT_NEAR(ex.run(Mapping{kCpu, kNow}, kExact).makespan_ms, 2000.0, 1e-6);
}

TEST(Executor, BackgroundTenantSlowsKernels) {
  // 50 % background SM load: stretch 0.5 + 20/21, and it counts as one co-runner (+10 %
  // interference): kernels 20 x 1.4524 x 1.1 = 31.952 ms, + 1 ms launches, + 11 ms copies.
  auto s = testing::make_scenario({{"a", "conv", {}, 0}}, 10);
  s.background.gpu_sm_util = 0.5;
  auto p = PlacementProblem::build(s, testing::round_catalog(), testing::round_device());
  ASSERT_TRUE(p.ok());
  Executor ex(*p);
  EXPECT_NEAR(ex.run(Mapping{kNow}, kExact).makespan_ms,
              10 + 20 * (0.5 + 20.0 / 21.0) * 1.1 + 1 + 1, 1e-6);
}

TEST(Executor, GpuNowFailsWhenVramIsShortAndSkipsSuccessors) {
  // Budget 3 GB, two 2 GB tools ready at once: the first takes 2 GB, the second finds 1 GB.
  const auto p =
      make_problem({{"a", "conv", {}, 0}, {"b", "conv", {}, 0}, {"c", "small", {1}, 0}}, 3);
  Executor ex(p);
  const Mapping m{kNow, kNow, kQueue};
  const RunResult r = ex.run(m, kExact);
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.tools[0].status, ToolRun::Status::kDone);
  EXPECT_EQ(r.tools[1].status, ToolRun::Status::kFailed);
  EXPECT_EQ(r.tools[2].status, ToolRun::Status::kSkipped);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_NE(r.failures[0].find("out of VRAM"), std::string::npos);
  EXPECT_NEAR(r.makespan_ms, 32.0, 1e-9);  // the tool that did run
  EXPECT_TRUE(std::isinf(ex.makespan_s(m, kExact)));
}

TEST(Executor, GpuQueueWaitsInFifoOrder) {
  // Same budget with gpu_queue: b waits for a's 2 GB, then runs: 32 + 32 ms.
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "conv", {}, 0}}, 3);
  Executor ex(p);
  const RunResult r = ex.run(Mapping{kQueue, kQueue}, kExact);
  EXPECT_FALSE(r.failed);
  EXPECT_NEAR(r.tools[1].start_ms, 32.0, 1e-9);
  EXPECT_NEAR(r.tools[1].queue_wait_ms, 32.0, 1e-9);
  EXPECT_TRUE(r.tools[1].vram_pressure);
  EXPECT_NEAR(r.makespan_ms, 64.0, 1e-9);
}

TEST(Executor, HeadOfLineBlockingAndQueueJumping) {
  // a (2 GB) runs; b (2 GB) waits at the head of the queue; c (0.5 GB) would fit beside a.
  // Queued behind b, c starts only when a ends (32 ms); with gpu_now it starts at once.
  const auto p =
      make_problem({{"a", "conv", {}, 0}, {"b", "conv", {}, 0}, {"c", "small", {}, 0}}, 3);
  Executor ex(p);
  const RunResult queued = ex.run(Mapping{kQueue, kQueue, kQueue}, kExact);
  EXPECT_NEAR(queued.tools[2].start_ms, 32.0, 1e-9);
  const RunResult jumped = ex.run(Mapping{kQueue, kQueue, kNow}, kExact);
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
  const RunResult r = ex.run(Mapping{kCpu, kQueue, kCpu, kCpu}, kExact);
  EXPECT_NEAR(r.tools[0].end_ms, 0.0, 1e-12);   // launch on CPU: no work, no dispatch cost
  EXPECT_NEAR(r.tools[2].end_ms, 100.0, 1e-9);  // small on 2 cores: 100 ms
  EXPECT_NEAR(r.tools[1].end_ms, 2.1, 1e-9);
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
  const double a = ex.makespan_s(m, {7, true});
  EXPECT_EQ(a, ex.makespan_s(m, {7, true}));
  EXPECT_NE(a, ex.makespan_s(m, {8, true}));
  const double exact = ex.makespan_s(m, kExact);
  double sum = 0;
  const int n = 2000;
  for (int k = 0; k < n; ++k) sum += ex.makespan_s(m, {static_cast<std::uint64_t>(k), true});
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
    const RunResult r = ex.run(m, {k, true});
    const double fast = ex.makespan_s(m, {k, true});
    if (r.failed) {
      EXPECT_TRUE(std::isinf(fast));
    } else {
      EXPECT_NEAR(fast * 1e3, r.makespan_ms, 1e-9);
    }
  }
}

}  // namespace
}  // namespace corun::mapping
