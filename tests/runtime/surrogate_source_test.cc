// The surrogate-backed predictor source: batched and aggregate predictions agree, demand changes
// re-profile only the changed model, margins follow the error model, monotone fits are monotone.
#include "corun/runtime/surrogate_source.h"

#include <gtest/gtest.h>

#include <cmath>

#include "corun/catalog/catalog.h"
#include "corun/core/rng.h"
#include "corun/core/stats.h"
#include "corun/plan/objective.h"
#include "corun/plan/solver.h"
#include "corun/profile/campaign.h"
#include "corun/surrogate/cotenant.h"

namespace corun::surrogate_source_test {
namespace {

Workload parsed(const char* yaml) {
  auto w = parse_workload(yaml, "<test>", Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << w.error().what();
  return *w;
}

Workload three_models() {
  return parsed(R"(device: rtx3090
models:
  - name: chat
    model: qwen2.5-1.5b
    knobs: {precision: [fp16, awq], request_concurrency: [1, 2, 4]}
    demand: {rps: 1.0, prompt_tokens: 512, output_tokens: 128}
    sla: {ttft_ms_p95: 1500, tpot_ms_p95: 60}
  - name: cam0
    model: yolo11s
    knobs: {imgsz: [320, 480, 640], skip_rate: [0, 0.5]}
    demand: {fps: 30}
    sla: {latency_ms_p95: 60}
  - name: cam1
    model: yolo11m
    knobs: {imgsz: [320, 640]}
    demand: {fps: 15}
)");
}

// Fitted once per regressor: one standalone pass and 20·N co-runs on the simulator.
surrogate::Surrogate fitted(const Workload& w, surrogate::RegressorKind reg, bool monotone) {
  auto tb = make_testbed("sim");
  EXPECT_TRUE(tb.ok());
  auto table = surrogate::StandaloneTable::from_samples(
      w, profile::measure_plan(Context{.seed = 3}, w, **tb, profile::Plan::kStandalone, 1, 10));
  EXPECT_TRUE(table.ok());
  const auto corun =
      profile::measure_plan(Context{.seed = 3}, w, **tb, profile::Plan::kMeanField, 60, 10);
  surrogate::FitOptions o;
  o.regressor = reg;
  o.monotone = monotone;
  o.regressor_options.gbdt.rounds = 60;
  auto s = surrogate::Surrogate::fit(Context{}, w, *table, corun, o, {});
  EXPECT_TRUE(s.ok()) << s.error().what();
  return *s;
}

TEST(NormalQuantile, MatchesTables) {
  // Standard normal table values (e.g. Abramowitz & Stegun, Table 26.5).
  EXPECT_NEAR(normal_quantile(0.5), 0.0, 1e-9);
  EXPECT_NEAR(normal_quantile(0.95), 1.644854, 1e-5);
  EXPECT_NEAR(normal_quantile(0.975), 1.959964, 1e-5);
  EXPECT_NEAR(normal_quantile(0.999), 3.090232, 1e-5);
  EXPECT_NEAR(normal_quantile(0.05), -1.644854, 1e-5);
}

// Each regressor: the MLP, the monotone GBDT (whose aggregate form walks trees specialised to
// each local configuration) and the monotone linear model.
class BothForms : public ::testing::TestWithParam<std::pair<surrogate::RegressorKind, bool>> {};

TEST_P(BothForms, BatchedAndAggregateFormsAgree) {
  const Workload w = three_models();
  auto compiled =
      surrogate::CompiledSurrogate::compile(fitted(w, GetParam().first, GetParam().second), w);
  ASSERT_TRUE(compiled.ok()) << compiled.error().what();
  const SurrogatePredictor p(std::move(*compiled));
  const ConfigSpace space(w);
  Rng rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    JointConfig c(w.models.size());
    for (std::size_t m = 0; m < c.size(); ++m) {
      c[m] = rng.below(4) == 0 ? kAbsent
                               : static_cast<std::int32_t>(rng.below(space.local_counts()[m]));
    }
    std::vector<Predicted> batch(w.models.size());
    p.predict(c, 1, batch);
    for (std::size_t m = 0; m < c.size(); ++m) {
      if (c[m] == kAbsent) {
        EXPECT_EQ(batch[m].latency_ms_p95, 0.0f);
        continue;
      }
      std::vector<float> others(p.aggregate_dims(), 0.0f), part(p.aggregate_dims());
      for (std::size_t j = 0; j < c.size(); ++j) {
        if (j == m || c[j] == kAbsent) continue;
        p.contribution(j, c[j], part);
        for (std::size_t k = 0; k < others.size(); ++k) others[k] += part[k];
      }
      const Predicted one = p.predict_given(m, c[m], others);
      EXPECT_NEAR(one.latency_ms_p95, batch[m].latency_ms_p95, 1e-3 * batch[m].latency_ms_p95);
      EXPECT_NEAR(one.ttft_ms_p95, batch[m].ttft_ms_p95, 1e-3 * batch[m].ttft_ms_p95);
      EXPECT_NEAR(one.throughput, batch[m].throughput, 1e-3 * batch[m].throughput);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Regressors, BothForms,
                         ::testing::Values(std::pair{surrogate::RegressorKind::kMlp, false},
                                           std::pair{surrogate::RegressorKind::kGbdt, true},
                                           std::pair{surrogate::RegressorKind::kLinear, true}));

TEST(SurrogateSource, DemandChangeReprofilesOnlyThatModel) {
  Workload w = three_models();
  auto tb = make_testbed("sim");
  ASSERT_TRUE(tb.ok());
  SurrogateSource source(Context{.seed = 5}, fitted(w, surrogate::RegressorKind::kLinear, false),
                         **tb, {2, 10});
  auto before = source.predictor_for(w);
  ASSERT_TRUE(before.ok()) << before.error().what();
  EXPECT_EQ(source.measurements_taken(), 0u);  // profiled at these demands already

  w.models[1].demand.fps = 10;  // cam0 slows down: its standalone profile is stale
  auto after = source.predictor_for(w);
  ASSERT_TRUE(after.ok()) << after.error().what();
  EXPECT_EQ(source.measurements_taken(), 6u * 2u);  // cam0's 6 configurations x 2 repeats
  EXPECT_EQ(source.refreshes(), 1u);
  const JointConfig c = {0, 5, 1};
  std::vector<Predicted> a(3), b(3);
  (*before)->predict(c, 1, a);
  (*after)->predict(c, 1, b);
  EXPECT_NEAR(b[1].throughput, 10.0f * 0.5f, 1.0f);  // skip_rate 0.5 of 10 fps
  EXPECT_NEAR(a[1].throughput, 30.0f * 0.5f, 2.0f);

  auto again = source.predictor_for(w);  // nothing changed since: nothing measured
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(source.measurements_taken(), 12u);
}

// An LLM configuration whose KV cache does not hold its concurrency (space.h) is no longer
// out of memory: it runs KV-limited, and the planner learns what that costs from the testbed
// through the surrogate. Llama-2-7B on an L4 (tests/testbed/kv_cache_test.cc): 32 sequences of
// 256 + 1,024 tokens do not fit; about 19 run at once. A surrogate that extrapolated from 4,
// 8 and 16 would double the throughput from 16 to 32; the testbed gives about 1.1 x.
TEST(SurrogateSource, APlanSeesTheKvCacheLimitThroughTheSurrogate) {
  const Workload w = parsed(R"(device: l4
models:
  - name: chat
    model: llama-2-7b
    knobs: {request_concurrency: [4, 8, 16, 32]}
    demand: {rps: 0.25, prompt_tokens: 256, output_tokens: 1024}
  - name: cam
    model: yolo11n
    knobs: {imgsz: [320, 640]}
    demand: {fps: 15}
)");
  const JointConfig kv_limited = {3, 0};
  EXPECT_TRUE(ConfigSpace(w).fits_vram(kv_limited));  // the camera fits beside it
  auto tb = make_testbed("sim");
  ASSERT_TRUE(tb.ok());
  SurrogateSource source(Context{.seed = 5}, fitted(w, surrogate::RegressorKind::kLinear, false),
                         **tb, {2, 10});
  auto predictor = source.predictor_for(w);
  ASSERT_TRUE(predictor.ok()) << predictor.error().what();
  std::vector<Predicted> at16(2), at32(2);
  (*predictor)->predict(JointConfig{2, 0}, 1, at16);
  (*predictor)->predict(kv_limited, 1, at32);
  // Ground truth without noise, over the profile's 10 s window.
  const Measurement truth = (*tb)->measure(Context{}, w, kv_limited, MeasureOptions(10, {}, false));
  ASSERT_TRUE(truth.ok()) << truth.error;
  EXPECT_GT(*truth.models[0].preemptions_per_request, 0);
  EXPECT_NEAR(at32[0].throughput, truth.models[0].throughput, 0.1 * truth.models[0].throughput);
  EXPECT_NEAR(at32[0].ttft_ms_p95, *truth.models[0].ttft_ms_p95,
              0.15 * *truth.models[0].ttft_ms_p95);
  EXPECT_LT(at32[0].throughput, 1.3f * at16[0].throughput);
}

TEST(SurrogateSource, MarginsCoverOnlyConstrainedLatencies) {
  Workload w = three_models();
  auto tb = make_testbed("sim");
  ASSERT_TRUE(tb.ok());
  SurrogateSource source(Context{.seed = 5}, fitted(w, surrogate::RegressorKind::kLinear, false),
                         **tb, {1, 10});
  ASSERT_TRUE(source.predictor_for(w).ok());
  const auto m = source.margins(w);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_GT(m[0], 0.0);
  EXPECT_GT(m[1], 0.0);
  EXPECT_EQ(m[2], 0.0);  // cam1 has no SLA
  // A lower confidence keeps less headroom.
  SurrogateSource loose(Context{.seed = 5}, fitted(w, surrogate::RegressorKind::kLinear, false),
                        **tb, {.standalone_repeats = 1, .window_s = 10, .confidence = 0.6});
  ASSERT_TRUE(loose.predictor_for(w).ok());
  EXPECT_LE(loose.margins(w)[0], m[0]);
}

class Monotone : public ::testing::TestWithParam<surrogate::RegressorKind> {};

TEST_P(Monotone, NeverImprovesWithMoreLoad) {
  const Workload w = three_models();
  auto compiled = surrogate::CompiledSurrogate::compile(fitted(w, GetParam(), true), w);
  ASSERT_TRUE(compiled.ok()) << compiled.error().what();
  const SurrogatePredictor p(std::move(*compiled));
  EXPECT_TRUE(p.monotone());
  Rng rng(3);
  const ConfigSpace space(w);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t m = rng.below(w.models.size());
    const auto l = static_cast<std::int32_t>(rng.below(space.local_counts()[m]));
    std::vector<float> lo(p.aggregate_dims()), hi(p.aggregate_dims());
    for (std::size_t k = 0; k < lo.size(); ++k) {
      lo[k] = static_cast<float>(rng.uniform() * (k == 0 ? 2 : 1));
      hi[k] = lo[k] + static_cast<float>(rng.uniform() * 0.5);
    }
    const Predicted a = p.predict_given(m, l, lo);
    const Predicted b = p.predict_given(m, l, hi);
    EXPECT_GE(b.latency_ms_p95, a.latency_ms_p95 * (1 - 1e-5f));
    EXPECT_GE(b.ttft_ms_p95, a.ttft_ms_p95 * (1 - 1e-5f));
    EXPECT_GE(b.tpot_ms_p95, a.tpot_ms_p95 * (1 - 1e-5f));
    EXPECT_LE(b.throughput, a.throughput * (1 + 1e-5f));
  }
}

TEST_P(Monotone, ExactAgreesWithExhaustive) {
  const Workload w = three_models();
  auto compiled = surrogate::CompiledSurrogate::compile(fitted(w, GetParam(), true), w);
  ASSERT_TRUE(compiled.ok());
  const SurrogatePredictor p(std::move(*compiled));
  const PlanProblem problem(w, {true, true, true}, p, {0.2, 0.2, 0.0});
  auto ex = (*make_solver("exhaustive"))->solve(Context{.seed = 1, .threads = 2}, problem, {});
  auto exact = (*make_solver("exact"))->solve(Context{.seed = 1, .threads = 2}, problem, {});
  ASSERT_TRUE(ex.ok() && exact.ok());
  EXPECT_TRUE(exact->stats.proved_optimal);
  EXPECT_NEAR(exact->utility, ex->utility, 1e-9 * std::max(1.0, ex->utility));
  EXPECT_EQ(exact->feasible, ex->feasible);
}

// A declared tool burst enters every model's aggregate as a constant load: each prediction is
// the plain predictor's at the aggregate plus the burst, in both forms, never better than
// without it (monotone fit), and the exact solver still proves what exhaustive finds.
TEST_P(Monotone, ABurstIsTheSamePredictionAtAHigherAggregate) {
  const Workload w = three_models();
  const surrogate::Surrogate s = fitted(w, GetParam(), true);
  auto plain_c = surrogate::CompiledSurrogate::compile(s, w);
  auto burst_c = surrogate::CompiledSurrogate::compile(s, w);
  ASSERT_TRUE(plain_c.ok() && burst_c.ok());
  const surrogate::Totals burst{1.0, 0.6, 0.2, 0.0, 150.0, 1.0};
  const SurrogatePredictor plain(std::move(*plain_c));
  const SurrogatePredictor loaded(std::move(*burst_c), burst);
  EXPECT_EQ(loaded.monotone(), plain.monotone());
  const std::vector<float> shift = {1.0f, 0.6f, 0.2f, 0.0f, 150.0f, 1.0f};
  Rng rng(5);
  const ConfigSpace space(w);
  for (int trial = 0; trial < 30; ++trial) {
    JointConfig c(w.models.size());
    for (std::size_t m = 0; m < c.size(); ++m) {
      c[m] = static_cast<std::int32_t>(rng.below(space.local_counts()[m]));
    }
    std::vector<Predicted> with(c.size()), without(c.size());
    loaded.predict(c, 1, with);
    plain.predict(c, 1, without);
    for (std::size_t m = 0; m < c.size(); ++m) {
      std::vector<float> others(plain.aggregate_dims(), 0.0f), part(plain.aggregate_dims());
      for (std::size_t j = 0; j < c.size(); ++j) {
        if (j == m) continue;
        plain.contribution(j, c[j], part);
        for (std::size_t k = 0; k < others.size(); ++k) others[k] += part[k];
      }
      std::vector<float> shifted = others;
      for (std::size_t k = 0; k < shifted.size(); ++k) shifted[k] += shift[k];
      const Predicted at = plain.predict_given(m, c[m], shifted);
      EXPECT_NEAR(with[m].latency_ms_p95, at.latency_ms_p95, 1e-3 * at.latency_ms_p95);
      EXPECT_NEAR(with[m].throughput, at.throughput, 1e-3 * at.throughput + 1e-6);
      const Predicted given = loaded.predict_given(m, c[m], others);
      EXPECT_NEAR(given.latency_ms_p95, at.latency_ms_p95, 1e-3 * at.latency_ms_p95);
      EXPECT_GE(with[m].latency_ms_p95, without[m].latency_ms_p95 * (1 - 1e-5f));
      EXPECT_LE(with[m].throughput, without[m].throughput * (1 + 1e-5f));
    }
  }
  const PlanProblem problem(w, {true, true, true}, loaded, {0.2, 0.2, 0.0});
  auto ex = (*make_solver("exhaustive"))->solve(Context{.seed = 1, .threads = 2}, problem, {});
  auto exact = (*make_solver("exact"))->solve(Context{.seed = 1, .threads = 2}, problem, {});
  ASSERT_TRUE(ex.ok() && exact.ok());
  EXPECT_TRUE(exact->stats.proved_optimal);
  EXPECT_NEAR(exact->utility, ex->utility, 1e-9 * std::max(1.0, ex->utility));
}

// A load outside the plan (a make-before-break swap's start-up kernels) in the aggregate's units:
// one more co-runner of that SM share and bandwidth (surrogate::cotenant_totals), which only a
// predictor that knows its GPU can express.
TEST(SurrogatePredictor, ExpressesALoadOutsideThePlanOnlyWhenItKnowsTheGpu) {
  const Workload w = three_models();
  const surrogate::Surrogate s = fitted(w, surrogate::RegressorKind::kGbdt, true);
  auto bare_c = surrogate::CompiledSurrogate::compile(s, w);
  auto gpu_c = surrogate::CompiledSurrogate::compile(s, w);
  ASSERT_TRUE(bare_c.ok() && gpu_c.ok());
  const SurrogatePredictor bare(std::move(*bare_c));
  std::vector<float> out(bare.aggregate_dims(), -1.0f);
  EXPECT_FALSE(bare.cotenant(0.2, 0.3, out));
  EXPECT_EQ(out, std::vector<float>(bare.aggregate_dims(), -1.0f));

  const SurrogatePredictor p(std::move(*gpu_c), {}, w.device);
  ASSERT_TRUE(p.cotenant(0.2, 0.3, out));
  const surrogate::Totals t = surrogate::cotenant_totals(w.device, {0.2, 0.3});
  const std::vector<double> want = {t.count, t.sm, t.bw, t.vram_gb, t.power_w, t.occupancy};
  ASSERT_EQ(out.size(), want.size());
  for (std::size_t k = 0; k < want.size(); ++k)
    EXPECT_FLOAT_EQ(out[k], static_cast<float>(want[k]));
  // One co-runner holding a fifth of the SMs, no VRAM, busy throughout (cotenant.h).
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[1], 0.2f);
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_EQ(out[5], 1.0f);
}

INSTANTIATE_TEST_SUITE_P(Regressors, Monotone,
                         ::testing::Values(surrogate::RegressorKind::kGbdt,
                                           surrogate::RegressorKind::kLinear));

}  // namespace
}  // namespace corun::surrogate_source_test
