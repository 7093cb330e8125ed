// Sampling plans: coverage, determinism, nesting of budgets, feasibility.
#include "corun/profile/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "corun/catalog/catalog.h"

namespace corun::profile::plan_test {
namespace {

Workload load(const std::string& name) {
  auto w = load_workload(std::string(CORUN_SOURCE_DIR) + "/workloads/" + name,
                         Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().what());
  return std::move(w).value();
}

TEST(Plan, NamesRoundTrip) {
  for (const auto& n : plan_names()) {
    const auto p = parse_plan(n);
    ASSERT_TRUE(p.has_value()) << n;
    EXPECT_EQ(to_string(*p), n);
  }
  EXPECT_FALSE(parse_plan("meanfeild").has_value());
}

TEST(Plan, StandaloneVisitsEveryLocalConfigurationOnceAlone) {
  const Workload w = load("paper-n3.yaml");
  // 12 (LLM) + 9 + 9 local configurations: linear in N, not 12 x 9 x 9.
  ASSERT_EQ(plan_size(w, Plan::kStandalone, 0), 30u);
  const auto samples = plan_samples(Context{.seed = 7}, w, Plan::kStandalone, 0);
  std::set<std::pair<std::size_t, std::int32_t>> seen;
  for (const auto& c : samples) {
    int running = 0;
    for (std::size_t m = 0; m < c.size(); ++m) {
      if (c[m] == kAbsent) continue;
      ++running;
      seen.insert({m, c[m]});
    }
    EXPECT_EQ(running, 1);
  }
  EXPECT_EQ(seen.size(), 30u);
}

TEST(Plan, SameSeedSamePlanOtherSeedOtherPlan) {
  const Workload w = load("paper-n4.yaml");
  for (Plan p : {Plan::kMeanField, Plan::kJoint, Plan::kCoTenant}) {
    const auto a = plan_samples(Context{.seed = 3}, w, p, 50);
    const auto b = plan_samples(Context{.seed = 3}, w, p, 50);
    const auto c = plan_samples(Context{.seed = 4}, w, p, 50);
    EXPECT_EQ(a, b) << to_string(p);
    EXPECT_NE(a, c) << to_string(p);
  }
}

TEST(Plan, BudgetsNest) {
  // The first b samples of a larger plan are the plan of budget b: a campaign extended with a
  // larger budget, or an evaluation taking budget prefixes, sees the same samples.
  const Workload w = load("paper-n5.yaml");
  for (Plan p : {Plan::kMeanField, Plan::kJoint, Plan::kCoTenant}) {
    const auto small = plan_samples(Context{.seed = 11}, w, p, 25);
    const auto large = plan_samples(Context{.seed = 11}, w, p, 200);
    ASSERT_EQ(small.size(), 25u);
    for (std::size_t i = 0; i < small.size(); ++i) EXPECT_EQ(small[i], large[i]) << i;
  }
}

TEST(Plan, MeanFieldVisitsEachLocalConfigurationEvenly) {
  // paper-n3 fits in VRAM in every joint configuration, so the stratified draw is never
  // replaced: in the first 36 samples the LLM (12 configurations) sees each 3 times and each
  // stream (9 configurations) each 4 times.
  const Workload w = load("paper-n3.yaml");
  const ConfigSpace space(w);
  ASSERT_EQ(space.feasible_count().value(), space.joint_count().value());
  const auto samples = plan_samples(Context{.seed = 5}, w, Plan::kMeanField, 36);
  for (std::size_t m = 0; m < 3; ++m) {
    std::map<std::int32_t, int> count;
    for (const auto& c : samples) ++count[c[m]];
    const int expected = m == 0 ? 3 : 4;
    ASSERT_EQ(count.size(), space.local_counts()[m]) << m;
    for (const auto& [l, n] : count) EXPECT_EQ(n, expected) << "model " << m << " local " << l;
  }
  // Joint configurations still vary: the models' permutations are independent.
  EXPECT_GT(std::set<JointConfig>(samples.begin(), samples.end()).size(), 30u);
}

// A node's models share its GPUs, so a co-run sample runs as many as one GPU of it holds: on
// the 8-GPU, 32-model scale node, 2 to 2 x ceil(32 / 8) = 8 models per sample, the rest absent,
// every size in that range and every model drawn over 640 samples (each model about 5 / 32 of
// them: about 100). A one-GPU workload's samples run every model, as before.
TEST(Plan, NodeCoRunSamplesRunAsManyModelsAsOneGpuHolds) {
  const Workload node = load("scale-node-8gpu-n32.yaml");
  ASSERT_EQ(node.node.gpus(), 8u);
  const auto samples = plan_samples(Context{.seed = 1}, node, Plan::kMeanField, 640);
  std::set<std::size_t> sizes;
  std::vector<int> seen(node.models.size(), 0);
  for (const auto& c : samples) {
    std::size_t present = 0;
    for (std::size_t m = 0; m < c.size(); ++m) {
      if (c[m] == kAbsent) continue;
      ++present;
      ++seen[m];
    }
    EXPECT_GE(present, 2u);
    EXPECT_LE(present, 8u);
    sizes.insert(present);
  }
  EXPECT_EQ(sizes.size(), 7u);  // 2, 3, ..., 8
  for (std::size_t m = 0; m < seen.size(); ++m) EXPECT_GT(seen[m], 50) << node.models[m].name;
  EXPECT_EQ(plan_samples(Context{.seed = 1}, node, Plan::kMeanField, 640),
            samples);  // deterministic by seed
  for (const auto& c :
       plan_samples(Context{.seed = 1}, load("scale-n16.yaml"), Plan::kMeanField, 64)) {
    EXPECT_EQ(std::count(c.begin(), c.end(), kAbsent), 0);
  }
}

TEST(Plan, CoRunPlansOnlyDrawConfigurationsThatFit) {
  // A 7B LLM with a long context next to a YOLO stream on a 24 GB card: at high concurrency the
  // LLM runs KV-limited and takes 0.9 of the card (space.h), where a camera batching 64 large
  // frames does not fit, so the plans must avoid those joint configurations.
  const std::string text = R"(
device: rtx3090
models:
  - name: chat
    model: qwen2.5-7b
    knobs: {precision: [fp16, awq], request_concurrency: [1, 8, 64]}
    demand: {rps: 0.5, prompt_tokens: 4096, output_tokens: 512}
  - name: cam
    model: yolo11x
    knobs: {imgsz: [320, 640], batch: [1, 64]}
    demand: {fps: 30}
)";
  auto w = parse_workload(text, "big.yaml", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  const ConfigSpace space(*w);
  ASSERT_LT(space.feasible_count().value(), space.joint_count().value());
  ASSERT_GT(space.feasible_count().value(), 0u);
  for (Plan p : {Plan::kMeanField, Plan::kJoint}) {
    for (const auto& c : plan_samples(Context{.seed = 1}, *w, p, 60))
      EXPECT_TRUE(space.fits_vram(c));
  }
}

TEST(Plan, CoTenantSamplesCarryADeterministicCoTenantInRange) {
  const Workload w = load("paper-n4.yaml");
  // Its configurations are its own draws, not the MeanField campaign's again.
  EXPECT_NE(plan_samples(Context{.seed = 9}, w, Plan::kCoTenant, 40),
            plan_samples(Context{.seed = 9}, w, Plan::kMeanField, 40));
  double sm_sum = 0, bw_max = 0;
  std::set<double> distinct;
  for (std::uint64_t i = 0; i < 200; ++i) {
    const Interference c = plan_cotenant(Context{.seed = 9}, Plan::kCoTenant, i);
    EXPECT_GE(c.sm_util, 0.0);
    EXPECT_LT(c.sm_util, 1.0);
    EXPECT_GE(c.bandwidth_util, 0.0);
    EXPECT_LT(c.bandwidth_util, kMaxCoTenantBandwidth);
    // A pure function of (seed, index): a resumed campaign recomputes the same co-tenant.
    EXPECT_EQ(c.sm_util, plan_cotenant(Context{.seed = 9}, Plan::kCoTenant, i).sm_util);
    sm_sum += c.sm_util;
    bw_max = std::max(bw_max, c.bandwidth_util);
    distinct.insert(c.sm_util);
  }
  // U(0, 1) over 200 draws: the mean is 0.5 within 5 standard errors (0.29 / sqrt(200) = 0.02).
  EXPECT_NEAR(sm_sum / 200, 0.5, 0.1);
  EXPECT_GT(bw_max, 0.8 * kMaxCoTenantBandwidth);
  EXPECT_EQ(distinct.size(), 200u);
  for (Plan p : {Plan::kStandalone, Plan::kMeanField, Plan::kJoint, Plan::kOnline}) {
    const Interference none = plan_cotenant(Context{.seed = 9}, p, 3);
    EXPECT_EQ(none.sm_util, 0.0) << to_string(p);
    EXPECT_EQ(none.bandwidth_util, 0.0) << to_string(p);
  }
}

TEST(Plan, MeasurementSeedsDifferPerSampleAndPlan) {
  std::set<std::uint64_t> seeds;
  for (Plan p : {Plan::kStandalone, Plan::kMeanField, Plan::kJoint}) {
    for (std::uint64_t i = 0; i < 100; ++i)
      seeds.insert(measurement_seed(Context{.seed = 9}, p, i));
  }
  EXPECT_EQ(seeds.size(), 300u);
  EXPECT_EQ(measurement_seed(Context{.seed = 9}, Plan::kJoint, 5),
            measurement_seed(Context{.seed = 9}, Plan::kJoint, 5));
}

}  // namespace
}  // namespace corun::profile::plan_test
