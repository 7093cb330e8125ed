// Benchmark mode on the simulator: `demand: {concurrency: N}` keeps N requests in flight,
// each sent when the previous answer returns (perf_analyzer's --concurrency-range).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "corun/testbed/concurrency_sweep.h"
#include "sim_test_util.h"

namespace corun::testing::concurrency_test {
namespace {

constexpr int kLevels[] = {1, 2, 4, 8, 16};

// Expected values, without measurement noise: these tests are about the queueing model.
std::vector<ConcurrencyLevel> sweep(const Workload& w) {
  const SimTestbed sim;
  const JointConfig config(w.models.size(), 0);
  return sweep_concurrency(Context{}, sim, w, config, kLevels, MeasureOptions(60, {}, false));
}

// Throughput grows while requests in flight find an idle server (or a slot of the LLM's
// continuous batch), then stays flat; latency grows all along.
void expect_grows_then_saturates(const std::vector<ConcurrencyLevel>& levels, int servers) {
  for (std::size_t i = 1; i < levels.size(); ++i) {
    const ModelMetrics& a = levels[i - 1].measurement.models.at(0);
    const ModelMetrics& b = levels[i].measurement.models.at(0);
    const int n = levels[i].concurrency;
    SCOPED_TRACE("concurrency " + std::to_string(n));
    ASSERT_TRUE(b.ok()) << b.error;
    EXPECT_GT(b.latency_ms_p50, a.latency_ms_p50);
    if (n <= servers) {
      EXPECT_GT(b.throughput, 1.05 * a.throughput);
    } else {
      EXPECT_NEAR(b.throughput / a.throughput, 1.0, 1e-6);
      // Beyond the servers a request waits for the ones ahead: doubling N doubles latency.
      EXPECT_NEAR(b.latency_ms_p50 / a.latency_ms_p50, 2.0, 0.05);
    }
  }
}

TEST(Concurrency, EncoderThroughputGrowsUpToItsServersThenSaturates) {
  // BERT-base at batch 1 leaves most of an RTX 3090 idle: four concurrent requests overlap.
  const Workload w = make_workload(
      "rtx3090", {make_spec("enc", "bert-base", settings(Precision::kFp16, 1, 100, 4))});
  expect_grows_then_saturates(sweep(w), 4);
}

TEST(Concurrency, LlmThroughputGrowsWithTheDecodeBatchThenSaturates) {
  Demand d;
  d.prompt_tokens = 256;
  d.output_tokens = 64;
  const Workload w = make_workload(
      "rtx3090", {make_spec("chat", "qwen2.5-1.5b", settings(Precision::kFp16, 1, 100, 4), d)});
  const auto levels = sweep(w);
  expect_grows_then_saturates(levels, 4);
  // Requests beyond the four slots wait for one before their first token.
  const auto ttft = [&](std::size_t i) {
    return levels[i].measurement.models.at(0).ttft_ms_p95.value_or(0);
  };
  EXPECT_GT(ttft(3), 2 * ttft(2));  // 8 in flight vs 4
  EXPECT_GT(ttft(4), 1.5 * ttft(3));
}

TEST(Concurrency, ClosedLoopObeysLittlesLaw) {
  // A closed system without think time: N = throughput x latency, whatever the service.
  const Workload w = make_workload(
      "rtx3090", {make_spec("enc", "bert-base", settings(Precision::kFp16, 1, 100, 2))});
  for (const ConcurrencyLevel& l : sweep(w)) {
    const ModelMetrics& m = l.measurement.models.at(0);
    EXPECT_NEAR(m.throughput * m.latency_ms_p50 / 1e3, l.concurrency, 0.02 * l.concurrency)
        << "concurrency " << l.concurrency;
  }
}

TEST(Concurrency, ABatchIsOneRequest) {
  // ResNet-50 at batch 8: one request is a batch of 8 frames, so the frames/s reported are
  // 8 x the batches/s, and a batch's latency is its service (no waiting for frames to fill).
  const Workload w =
      make_workload("v100", {make_spec("r50", "resnet50", settings(Precision::kFp32, 8, 100))});
  const auto levels = sweep(w);
  const ModelMetrics& one = levels[0].measurement.models.at(0);
  EXPECT_NEAR(one.throughput * one.latency_ms_p50 / 1e3, 8, 0.2);
}

TEST(Concurrency, OverridesTheMeasuredModelsOnly) {
  Demand rate;
  rate.fps = 30;
  const Workload w = make_workload(
      "rtx3090", {make_spec("cam0", "yolo11n", settings(Precision::kFp16, 1, 50), rate),
                  make_spec("cam1", "yolo11n", settings(Precision::kFp16, 1, 50), rate)});
  const JointConfig config = {0, kAbsent};
  const Workload swept = with_concurrency(w, config, 3);
  EXPECT_EQ(swept.models[0].demand.concurrency, 3);
  EXPECT_EQ(swept.models[0].demand.fps, 0);
  EXPECT_EQ(swept.models[1].demand, w.models[1].demand);
}

// iGniter (Xu et al., IEEE TPDS 2023; /work/shared/REFERENCES.md) profiled ResNet-50 on a V100
// at batch 32 with 10 / 50 / 100 % of the SMs: 180.5 / 38.4 / 21.3 ms per batch, one batch at
// a time. The same profile written as a workload in benchmark mode, through the parser.
TEST(Concurrency, ReproducesIgniterResNet50Batch32Profile) {
  const std::string text = R"(device: v100
models:
  - name: r50
    model: resnet50
    knobs: {precision: fp32, batch: 32, sm_share: [10, 50, 100]}
    demand: {concurrency: 1}
)";
  auto w = parse_workload(text, "igniter.yaml", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  const double published_ms[] = {180.5, 38.4, 21.3};
  const SimTestbed sim;
  for (std::int32_t k = 0; k < 3; ++k) {
    SCOPED_TRACE(w->models[0].describe(static_cast<std::size_t>(k)));
    // Mean of the median over seeds: the model, not one window's noise.
    double sum = 0;
    constexpr int kSeeds = 32;
    for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
      const Measurement m =
          sim.measure(Context{.seed = seed}, *w, JointConfig{k}, MeasureOptions(60));
      ASSERT_TRUE(m.ok()) << m.error;
      sum += m.models.at(0).latency_ms_p50;
    }
    const double sim_ms = sum / kSeeds;
    EXPECT_NEAR(sim_ms / published_ms[k], 1.0, 0.30) << "sim " << sim_ms << " ms";
  }
}

}  // namespace
}  // namespace corun::testing::concurrency_test
