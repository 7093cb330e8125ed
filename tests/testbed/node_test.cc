// A node measurement: units measured independently, so co-runners contend only inside their
// GPU or MIG slice; deterministic by seed.
#include "corun/spec/node.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "corun/catalog/catalog.h"
#include "corun/testbed/node.h"
#include "corun/testbed/sim.h"

namespace corun::node_test {
namespace {

// A camera stream (the victim) and a heavy detector (the noisy co-runner) on an A100 80GB cut
// into two 3g.40gb slices.
Workload mig_workload() {
  const std::string text =
      "device: a100-80gb\n"
      "gpus: [{mig: [3g.40gb, 3g.40gb]}]\n"
      "models:\n"
      "  - name: cam\n"
      "    model: yolo11s\n"
      "    knobs: {imgsz: [640]}\n"
      "    demand: {fps: 30}\n"
      "  - name: noisy\n"
      "    model: yolo11x\n"
      "    knobs: {imgsz: [960]}\n"
      "    demand: {fps: 60}\n";
  auto w = parse_workload(text, "mig.yaml", Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().what());
  return std::move(w).value();
}

double cam_p95(const Workload& w, const NodeLayout& layout, std::int32_t noisy_unit,
               std::uint64_t seed) {
  const SimTestbed sim;
  const std::vector<std::int32_t> assignment = {0, noisy_unit};
  const std::vector<std::int32_t> config = {0, noisy_unit == kUnassigned ? kAbsent : 0};
  const NodeMeasurement m =
      measure_node(Context{.seed = seed}, sim, w, layout, assignment, config, MeasureOptions(10));
  const ModelMetrics* cam = m.find(0);
  EXPECT_NE(cam, nullptr);
  EXPECT_TRUE(cam != nullptr && cam->ok());
  return cam == nullptr ? 0 : cam->latency_ms_p95;
}

TEST(NodeMeasure, ANoisyCoRunnerInAnotherSliceDoesNotSlowTheModel) {
  const Workload w = mig_workload();
  const NodeLayout layout = node_layouts(w)[0];
  ASSERT_EQ(layout.units.size(), 2u);
  // The noise band: the camera alone on its slice, measured with ten seeds.
  double lo = 1e18, hi = 0;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    const double p = cam_p95(w, layout, kUnassigned, seed);
    lo = std::min(lo, p);
    hi = std::max(hi, p);
  }
  const double alone = cam_p95(w, layout, kUnassigned, 1);
  const double other_slice = cam_p95(w, layout, 1, 1);
  const double same_slice = cam_p95(w, layout, 0, 1);
  // In the other slice: within the alone band (the slice shares nothing with it).
  EXPECT_GE(other_slice, lo);
  EXPECT_LE(other_slice, hi);
  EXPECT_NEAR(other_slice, alone, 1e-9 * alone);
  // In the same slice: well beyond the band (contention for the slice's SMs and bandwidth).
  EXPECT_GT(same_slice, hi + 3 * (hi - lo));
  EXPECT_GT(same_slice, 1.05 * alone);
}

TEST(NodeMeasure, ModelsOnOtherGpusDoNotInterfere) {
  auto w = parse_workload(
      "device: a100-80gb\n"
      "gpus: 2\n"
      "models:\n"
      "  - {name: cam, model: yolo11s, knobs: {imgsz: [640]}, demand: {fps: 30}}\n"
      "  - {name: noisy, model: yolo11x, knobs: {imgsz: [960]}, demand: {fps: 60}}\n",
      "two.yaml", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  const NodeLayout layout = node_layouts(*w)[0];
  EXPECT_NEAR(cam_p95(*w, layout, 1, 7), cam_p95(*w, layout, kUnassigned, 7), 1e-9);
  EXPECT_GT(cam_p95(*w, layout, 0, 7), 1.05 * cam_p95(*w, layout, kUnassigned, 7));
}

TEST(NodeMeasure, DeterministicBySeedAndGathersModelsInWorkloadOrder) {
  const Workload w = mig_workload();
  const NodeLayout layout = node_layouts(w)[0];
  const SimTestbed sim;
  const std::vector<std::int32_t> assignment = {1, 0};
  const std::vector<std::int32_t> config = {0, 0};
  const auto a =
      measure_node(Context{.seed = 3}, sim, w, layout, assignment, config, MeasureOptions(10));
  const auto b =
      measure_node(Context{.seed = 3}, sim, w, layout, assignment, config, MeasureOptions(10));
  ASSERT_EQ(a.models.size(), 2u);
  EXPECT_EQ(a.models[0].name, "cam");
  EXPECT_EQ(a.models[1].name, "noisy");
  EXPECT_EQ(a.models[0].latency_ms_p95, b.models[0].latency_ms_p95);
  EXPECT_EQ(a.models[1].latency_ms_p95, b.models[1].latency_ms_p95);
  EXPECT_EQ(a.units[0].device, "a100-80gb/3g.40gb");
  // Each slice reports its own share of the GPU: the noisy detector's slice is busier.
  EXPECT_GT(a.units[0].gpu.sm_util, a.units[1].gpu.sm_util);
}

TEST(NodeMeasure, ASliceTooSmallForItsModelsReportsOutOfMemory) {
  auto w = parse_workload(
      "device: a100-80gb\n"
      "gpus: [{mig: [1g.10gb]}]\n"
      "models:\n"
      "  - name: chat\n"
      "    model: qwen2.5-7b\n"
      "    knobs: {precision: [fp16]}\n"
      "    demand: {rps: 1, prompt_tokens: 512, output_tokens: 64}\n",
      "small.yaml", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  const NodeLayout layout = node_layouts(*w)[0];
  const SimTestbed sim;
  const std::vector<std::int32_t> assignment = {0};
  const std::vector<std::int32_t> config = {0};
  const auto m =
      measure_node(Context{.seed = 1}, sim, *w, layout, assignment, config, MeasureOptions(10));
  // Qwen2.5-7B in FP16 holds about 15 GB of weights; a 1g.10gb slice has 85.9 / 8 = 10.7 GB.
  ASSERT_EQ(m.models.size(), 1u);
  EXPECT_FALSE(m.models[0].ok());
}

}  // namespace
}  // namespace corun::node_test
