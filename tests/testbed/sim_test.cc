// Behaviour of the simulated testbed at its boundary (Testbed::measure): failures as data,
// determinism, monotone responses to load and knobs, overload, thread safety, speed.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "corun/testbed/testbed.h"
#include "sim_test_util.h"

namespace corun::testing::sim_test {
namespace {

constexpr Precision kFp16 = Precision::kFp16;

// A five-model paper-like workload on an RTX 3090: four YOLO11 streams and one Qwen2.5 chat
// model (MeanField's N = 5 setting).
Workload paper_n5() {
  Settings yolo = settings(kFp16, 1, 100);
  std::vector<ModelSpec> ms;
  ms.reserve(5);
  const char* archs[] = {"yolo11n", "yolo11s", "yolo11m", "yolo11s"};
  for (int i = 0; i < 4; ++i) {
    ms.push_back(make_spec("cam" + std::to_string(i), archs[i], yolo, Demand{.fps = 30}));
  }
  ms.push_back(make_spec("chat", "qwen2.5-1.5b", settings(Precision::kAwq, 1, 100, 2),
                         Demand{.rps = 0.5, .prompt_tokens = 512, .output_tokens = 128}));
  return make_workload("rtx3090", ms);
}

void expect_same(const Measurement& a, const Measurement& b) {
  ASSERT_EQ(a.models.size(), b.models.size());
  for (std::size_t i = 0; i < a.models.size(); ++i) {
    EXPECT_EQ(a.models[i].latency_ms_p50, b.models[i].latency_ms_p50);
    EXPECT_EQ(a.models[i].latency_ms_p95, b.models[i].latency_ms_p95);
    EXPECT_EQ(a.models[i].throughput, b.models[i].throughput);
    EXPECT_EQ(a.models[i].ttft_ms_p95, b.models[i].ttft_ms_p95);
    EXPECT_EQ(a.models[i].tpot_ms_p95, b.models[i].tpot_ms_p95);
  }
  EXPECT_EQ(a.gpu.sm_util, b.gpu.sm_util);
  EXPECT_EQ(a.gpu.power_w, b.gpu.power_w);
  EXPECT_EQ(a.gpu.clock_mhz, b.gpu.clock_mhz);
}

TEST(MakeTestbed, KnowsSimAndSuggestsForTypos) {
  auto sim = make_testbed("sim");
  ASSERT_TRUE(sim.ok());
  EXPECT_EQ((*sim)->name(), "sim");
  auto typo = make_testbed("simm");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.error().what().find("did you mean 'sim'"), std::string::npos)
      << typo.error().what();
  EXPECT_EQ(testbed_names(), (std::vector<std::string>{"sim", "sim:perturb=SEED"}));
  for (const char* bad : {"sim:perturb=", "sim:perturb=x", "sim:perturb=0", "sim:perturb=-3"}) {
    auto b = make_testbed(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.error().kind(), Error::Kind::kInvalidInput);
    EXPECT_NE(b.error().what().find("positive integer"), std::string::npos) << b.error().what();
  }
}

TEST(SimTruth, APerturbedGpuDiffersFromItsCatalogTwinByTenToFortyPercent) {
  const SimTruth t = SimTruth::perturbed(Context{.seed = 7});
  for (double v : {t.bandwidth, t.compute, t.l2_sensitivity, t.launch, t.power}) {
    const double off = std::abs(v - 1);
    EXPECT_GE(off, 0.1 - 1e-12);
    EXPECT_LE(off, 0.4 + 1e-12);
  }
  // Deterministic by seed, different across seeds.
  EXPECT_EQ(SimTruth::perturbed(Context{.seed = 7}).bandwidth, t.bandwidth);
  EXPECT_NE(SimTruth::perturbed(Context{.seed = 8}).bandwidth, t.bandwidth);
  auto perturbed = make_testbed("sim:perturb=7");
  ASSERT_TRUE(perturbed.ok());
  EXPECT_EQ((*perturbed)->name(), "sim:perturb=7");
  const Workload w = paper_n5();
  const JointConfig c(w.models.size(), 0);
  const MeasureOptions quiet(10, {}, false);
  const Measurement twin = SimTestbed().measure(Context{}, w, c, quiet);
  const Measurement truth = (*perturbed)->measure(Context{}, w, c, quiet);
  // Another GPU: every model's latency moves; and the same GPU through the conditions.
  Conditions as_event;
  as_event.perturb_seed = 7;
  const Measurement via_event =
      SimTestbed().measure(Context{}, w, c, MeasureOptions(10, as_event, false));
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    EXPECT_NE(truth.models[m].latency_ms_p95, twin.models[m].latency_ms_p95) << m;
    EXPECT_EQ(truth.models[m].latency_ms_p95, via_event.models[m].latency_ms_p95) << m;
  }
}

TEST(SimTestbed, NoiseFreeMeasurementsAreTheExpectedValues) {
  const Workload w = paper_n5();
  const JointConfig c(w.models.size(), 0);
  const Measurement a = SimTestbed().measure(Context{}, w, c, MeasureOptions(10, {}, false));
  const Measurement b =
      SimTestbed().measure(Context{.seed = 99}, w, c, MeasureOptions(10, {}, false));
  // No seed dependence, and noisy windows scatter around it on both sides.
  EXPECT_EQ(a.models[1].latency_ms_p95, b.models[1].latency_ms_p95);
  int above = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const Measurement n = SimTestbed().measure(Context{.seed = seed}, w, c, MeasureOptions(10));
    above += n.models[1].latency_ms_p50 > a.models[1].latency_ms_p50 ? 1 : 0;
  }
  EXPECT_GT(above, 5);
  EXPECT_LT(above, 35);
}

TEST(SimTestbed, ACoTenantSlowsEveryModelAndAPowerCapLowersTheClock) {
  const Workload w = paper_n5();
  const JointConfig c(w.models.size(), 0);
  const MeasureOptions quiet(10, {}, false);
  const Measurement alone = SimTestbed().measure(Context{}, w, c, quiet);
  Conditions cotenant;
  cotenant.interference = {0.3, 0.4};
  const Measurement crowded =
      SimTestbed().measure(Context{}, w, c, MeasureOptions(10, cotenant, false));
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    EXPECT_GT(crowded.models[m].latency_ms_p50, alone.models[m].latency_ms_p50) << m;
  }
  // The co-tenant's own share shows in the aggregate counters (one light model: far from full).
  JointConfig one(w.models.size(), kAbsent);
  one[0] = 0;
  const Measurement light = SimTestbed().measure(Context{}, w, one, quiet);
  const Measurement light_crowded =
      SimTestbed().measure(Context{}, w, one, MeasureOptions(10, cotenant, false));
  EXPECT_GT(light_crowded.gpu.sm_util, light.gpu.sm_util + 0.25);
  EXPECT_GT(light_crowded.gpu.mem_bw_util, light.gpu.mem_bw_util + 0.3);
  // A limit below what the load draws on the 350 W board: power stays under it, the clock falls
  // and every model slows.
  const double limit = 0.8 * alone.gpu.power_w;
  ASSERT_GT(limit, 70);
  Conditions capped;
  capped.power_cap_w = limit;
  const Measurement limited =
      SimTestbed().measure(Context{}, w, c, MeasureOptions(10, capped, false));
  EXPECT_LE(limited.gpu.power_w, limit + 1e-9);
  EXPECT_LT(limited.gpu.clock_mhz, alone.gpu.clock_mhz);
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    EXPECT_GT(limited.models[m].latency_ms_p50, alone.models[m].latency_ms_p50) << m;
  }
}

TEST(SimTestbed, ReportsEveryRunningModelWithMetricsInRange) {
  const Workload w = paper_n5();
  const Measurement m = measure_all(w);
  ASSERT_TRUE(m.ok()) << m.error;
  EXPECT_EQ(m.testbed, "sim");
  EXPECT_EQ(m.device, "rtx3090");
  ASSERT_EQ(m.models.size(), 5u);
  for (std::size_t i = 0; i < m.models.size(); ++i) {
    const ModelMetrics& mm = m.models[i];
    EXPECT_EQ(mm.model, i);
    EXPECT_EQ(mm.name, w.models[i].name);
    EXPECT_TRUE(mm.ok());
    EXPECT_GT(mm.latency_ms_p50, 0);
    EXPECT_GE(mm.latency_ms_p95, mm.latency_ms_p50);
    EXPECT_GT(mm.throughput, 0);
    const bool llm = w.models[i].arch.family == ModelFamily::kLlm;
    EXPECT_EQ(mm.ttft_ms_p95.has_value(), llm);
    EXPECT_EQ(mm.tpot_ms_p95.has_value(), llm);
  }
  // Vision streams below capacity process what arrives: 30 frames/s.
  EXPECT_NEAR(m.models[0].throughput, 30, 1.5);
  // The LLM serves 0.5 requests/s x 128 output tokens.
  EXPECT_NEAR(m.models[4].throughput, 64, 15);
  EXPECT_GT(m.gpu.sm_util, 0);
  EXPECT_LE(m.gpu.sm_util, 1);
  EXPECT_GT(m.gpu.mem_bw_util, 0);
  EXPECT_LE(m.gpu.mem_bw_util, 1);
  EXPECT_GT(m.gpu.vram_used_gb, 1);
  EXPECT_GE(m.gpu.power_w, w.device.idle_power_w);
  EXPECT_LE(m.gpu.power_w, w.device.tdp_w);
  EXPECT_LE(m.gpu.clock_mhz, w.device.boost_clock_mhz);
  EXPECT_GE(m.gpu.clock_mhz, w.device.base_clock_mhz);
}

TEST(SimTestbed, AbsentModelsAreNotReported) {
  const Workload w = paper_n5();
  const Measurement m = measure_subset(w, {1, 4});
  ASSERT_TRUE(m.ok()) << m.error;
  ASSERT_EQ(m.models.size(), 2u);
  EXPECT_EQ(m.models[0].model, 1u);
  EXPECT_EQ(m.models[1].model, 4u);
  const Measurement none = measure_subset(w, {});
  EXPECT_TRUE(none.ok());
  EXPECT_TRUE(none.models.empty());
  EXPECT_EQ(none.gpu.sm_util, 0);
  EXPECT_EQ(none.gpu.power_w, w.device.idle_power_w);
}

TEST(SimTestbed, MalformedConfigurationsAreFailedMeasurements) {
  const Workload w = paper_n5();
  const SimTestbed sim;
  const JointConfig short_config = {0, 0};
  EXPECT_NE(sim.measure(Context{}, w, short_config, MeasureOptions()).error.find("5 models"),
            std::string::npos);
  const JointConfig out_of_range = {0, 0, 7, 0, 0};
  const Measurement m = sim.measure(Context{}, w, out_of_range, MeasureOptions());
  EXPECT_FALSE(m.ok());
  EXPECT_NE(m.error.find("cam2"), std::string::npos) << m.error;
}

TEST(SimTestbed, SameSeedSameNumbersOtherSeedOtherNumbers) {
  const Workload w = paper_n5();
  const Measurement a = measure_all(w, 7);
  const Measurement b = measure_all(w, 7);
  expect_same(a, b);
  const Measurement c = measure_all(w, 8);
  int differ = 0;
  for (std::size_t i = 0; i < a.models.size(); ++i) {
    differ += a.models[i].latency_ms_p50 != c.models[i].latency_ms_p50 ? 1 : 0;
  }
  EXPECT_EQ(differ, 5);
  // Over a long window (many samples per percentile) the noise is a few percent, not a
  // different answer; over 10 s an LLM serving 0.5 requests/s has 5 samples and may differ more.
  const Measurement long_a = measure_all(w, 7, 3600);
  const Measurement long_c = measure_all(w, 8, 3600);
  for (std::size_t i = 0; i < a.models.size(); ++i) {
    EXPECT_NEAR(long_c.models[i].latency_ms_p50 / long_a.models[i].latency_ms_p50, 1, 0.15);
  }
}

TEST(SimTestbed, ThreadSafeAndStateless) {
  const Workload w = paper_n5();
  const SimTestbed sim;
  const JointConfig config(w.models.size(), 0);
  const Measurement serial = sim.measure(Context{.seed = 3}, w, config, MeasureOptions(10));
  std::vector<Measurement> results(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 50; ++k)
        results[t] = sim.measure(Context{.seed = 3}, w, config, MeasureOptions(10));
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& r : results) expect_same(serial, r);
}

TEST(SimTestbed, VramExhaustionIsAFailedMeasurementWithItsReason) {
  // Qwen2.5-7B FP16 (15.2 GB of weights) serving 8 long conversations (16k-token prompts:
  // 8 x 17k tokens x 57 KB of KV per token = 8 GB) next to four YOLO11x streams does not fit
  // the 24 GiB of an RTX 3090.
  std::vector<ModelSpec> ms;
  ms.push_back(make_spec("chat", "qwen2.5-7b", settings(kFp16, 1, 100, 8),
                         Demand{.rps = 0.1, .prompt_tokens = 16000, .output_tokens = 1000}));
  for (int i = 0; i < 4; ++i) {
    ms.push_back(make_spec("cam" + std::to_string(i), "yolo11x", settings(kFp16, 8, 100),
                           Demand{.fps = 30}));
  }
  const Workload w = make_workload("rtx3090", ms);
  double need = 0;
  for (const auto& m : w.models) need += model_vram_bytes(m, m.base, w.device.vram_bytes());
  ASSERT_GT(need, w.device.vram_bytes()) << "scenario must not fit";
  const Measurement m = measure_all(w);
  EXPECT_FALSE(m.ok());
  EXPECT_NE(m.error.find("out of memory"), std::string::npos) << m.error;
  char expected[96];
  std::snprintf(expected, sizeof expected, "needs %.1f GB, device has %.1f GB", need / 1e9,
                w.device.vram_bytes() / 1e9);
  EXPECT_NE(m.error.find(expected), std::string::npos) << m.error << " vs " << expected;
  ASSERT_EQ(m.models.size(), 5u);
  for (const auto& mm : m.models) EXPECT_EQ(mm.error, m.error);
  EXPECT_NEAR(m.gpu.vram_used_gb, need / 1e9, 1e-9);
  // Without the LLM the cameras fit and run.
  EXPECT_TRUE(measure_subset(w, {1, 2, 3, 4}).ok());
}

TEST(SimTestbed, LatencyGrowsWithImageSize) {
  double last = 0;
  for (int imgsz : {320, 480, 640, 960, 1280}) {
    Settings s = settings(kFp16, 1, 100);
    s.imgsz = imgsz;
    const Workload w = make_workload("rtx3090", {make_spec("cam", "yolo11s", s, {.fps = 10})});
    const double p50 = measure_all(w).models[0].latency_ms_p50;
    EXPECT_GT(p50, last) << imgsz;
    last = p50;
  }
}

TEST(SimTestbed, LatencyGrowsWithCoRunners) {
  std::vector<ModelSpec> ms;
  const char* archs[] = {"yolo11m", "resnet50", "bert-base", "yolo11s", "yolo11l"};
  for (int i = 0; i < 5; ++i) {
    const bool encoder = std::string(archs[i]) == "bert-base";
    ms.push_back(make_spec(archs[i], archs[i], settings(kFp16, 1, 100),
                           encoder ? Demand{.rps = 60} : Demand{.fps = 60}));
  }
  const Workload w = make_workload("rtx3090", ms);
  double last = 0;
  for (std::size_t n = 1; n <= 5; ++n) {
    std::vector<std::size_t> running;
    for (std::size_t i = 0; i < n; ++i) running.push_back(i);
    // Average over seeds: the trend, not the noise, is under test.
    double p50 = 0;
    for (std::uint64_t seed = 1; seed <= 16; ++seed) {
      p50 += measure_subset(w, running, seed, 60).models[0].latency_ms_p50 / 16;
    }
    EXPECT_GT(p50, last) << n << " co-located workloads";
    last = p50;
  }
}

TEST(SimTestbed, TpotGrowsWithContextLength) {
  double last = 0;
  for (int prompt : {256, 2048, 8192, 16384}) {
    const Workload w = make_workload(
        "a100-80gb",
        {make_spec("chat", "qwen2.5-7b", settings(kFp16, 1, 100, 4),
                   Demand{.rps = 0.05, .prompt_tokens = prompt, .output_tokens = 256})});
    const Measurement m = measure_all(w, 1, 3600);
    ASSERT_TRUE(m.ok()) << m.error;
    const double tpot = *m.models[0].tpot_ms_p95;
    EXPECT_GT(tpot, last) << prompt;
    last = tpot;
  }
}

TEST(SimTestbed, KvCacheAndConcurrencyRaiseVram) {
  const auto vram = [](int concurrency, int prompt) {
    const Workload w = make_workload(
        "a100-80gb",
        {make_spec("chat", "qwen2.5-3b", settings(kFp16, 1, 100, concurrency),
                   Demand{.rps = 0.1, .prompt_tokens = prompt, .output_tokens = 128})});
    return measure_all(w).gpu.vram_used_gb;
  };
  EXPECT_GT(vram(4, 1024), vram(1, 1024));
  EXPECT_GT(vram(4, 8192), vram(4, 1024));
}

TEST(SimTestbed, VisionOverloadSaturatesAtCapacity) {
  const Settings s = settings(kFp16, 4, 100);
  // Capacity: the same stream run back to back (no demand = closed loop).
  const Workload closed = make_workload("l4", {make_spec("cam", "yolo11m", s, {})});
  const double capacity = measure_all(closed, 1, 600).models[0].throughput;
  ASSERT_GT(capacity, 0);
  const Workload flood =
      make_workload("l4", {make_spec("cam", "yolo11m", s, {.fps = 20 * capacity})});
  const Measurement m = measure_all(flood, 1, 600);
  ASSERT_TRUE(m.ok());
  const ModelMetrics& mm = m.models[0];
  EXPECT_NEAR(mm.throughput / capacity, 1, 0.05);
  EXPECT_TRUE(std::isfinite(mm.latency_ms_p50));
  EXPECT_TRUE(std::isfinite(mm.latency_ms_p95));
  // A backlog builds through the 10 s window: seconds of latency, not milliseconds.
  const Measurement ten_s = measure_all(flood, 1, 10);
  EXPECT_GT(ten_s.models[0].latency_ms_p95, 1000);
  EXPECT_LT(ten_s.models[0].latency_ms_p95, 30'000);
  // Below capacity the stream is served in full.
  const Workload light =
      make_workload("l4", {make_spec("cam", "yolo11m", s, {.fps = 0.5 * capacity})});
  EXPECT_NEAR(measure_all(light, 1, 600).models[0].throughput / (0.5 * capacity), 1, 0.02);
}

TEST(SimTestbed, LlmOverloadSaturatesAtCapacity) {
  const Settings s = settings(kFp16, 1, 100, 4);
  const Demand shape{.prompt_tokens = 1024, .output_tokens = 256};
  const Workload closed = make_workload("l4", {make_spec("chat", "qwen2.5-3b", s, shape)});
  const double capacity = measure_all(closed, 1, 3600).models[0].throughput;  // tokens/s
  ASSERT_GT(capacity, 0);
  Demand flood = shape;
  flood.rps = 50 * capacity / shape.output_tokens;
  const Measurement m =
      measure_all(make_workload("l4", {make_spec("chat", "qwen2.5-3b", s, flood)}), 1, 3600);
  ASSERT_TRUE(m.ok()) << m.error;
  const ModelMetrics& mm = m.models[0];
  EXPECT_NEAR(mm.throughput / capacity, 1, 0.1);
  EXPECT_TRUE(std::isfinite(mm.latency_ms_p95));
  EXPECT_TRUE(std::isfinite(*mm.ttft_ms_p95));
  EXPECT_GT(*mm.ttft_ms_p95, 60'000);  // queued behind an hour-long backlog
}

TEST(SimTestbed, FrameSkipLowersLoad) {
  const auto measure = [](double skip) {
    Settings s = settings(kFp16, 1, 100);
    s.skip_rate = skip;
    return measure_all(make_workload("l4", {make_spec("cam", "yolo11l", s, {.fps = 60})}), 1, 600);
  };
  const Measurement none = measure(0);
  const Measurement half = measure(0.5);
  EXPECT_NEAR(half.models[0].throughput, 30, 1);
  EXPECT_LT(half.gpu.sm_util, none.gpu.sm_util);
}

TEST(SimTestbed, SmShareCapSlowsAStandaloneModel) {
  double last = 1e300;
  for (double share : {10.0, 25.0, 50.0, 100.0}) {
    const Workload w =
        make_workload("a100-80gb", {make_spec("cam", "yolo11x", settings(kFp16, 8, share), {})});
    const double p50 = measure_all(w).models[0].latency_ms_p50;
    EXPECT_LT(p50, last) << share;
    last = p50;
  }
}

TEST(SimTestbed, OversubscribedMpsClientsShareSms) {
  // Two compute-bound clients: with caps that sum to 100 % they do not touch each other's SMs;
  // with 100 % each they share SMs like concurrent kernels and both slow down.
  const auto pair_slowdown = [](double share) {
    std::vector<ModelSpec> ms;
    for (const char* n : {"a", "b"}) {
      ms.push_back(make_spec(n, "yolo11x", settings(kFp16, 16, share), {}));
    }
    const Workload w = make_workload("h200", ms);
    double alone = 0, both = 0;
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
      alone += measure_subset(w, {0}, seed).models[0].latency_ms_p50;
      both += measure_all(w, seed).models[0].latency_ms_p50;
    }
    return both / alone;
  };
  const double partitioned = pair_slowdown(50);
  const double shared = pair_slowdown(100);
  EXPECT_LT(partitioned, 1.25);  // L2, DRAM and launch interference only
  EXPECT_GT(shared, 1.5);        // about half the SMs each while both run
  EXPECT_GT(shared, partitioned);
}

TEST(SimTestbed, PairTermsMakeInterferenceNonAggregate) {
  // Two co-runners with identical architecture numbers, load and SM use differ only in their
  // catalog name: an aggregate state (utilisation, bandwidth, VRAM) cannot tell them apart,
  // yet the victim's slowdown differs because interference has a pair-specific term.
  const ModelSpec victim =
      make_spec("victim", "yolo11m", settings(kFp16, 1, 100), Demand{.fps = 120});
  ModelSpec twin_a = make_spec("a", "bert-base", settings(kFp16, 8, 100), Demand{.rps = 400});
  ModelSpec twin_b = twin_a;
  twin_b.name = "b";
  twin_b.arch.name = "bert-base-finetuned";
  const auto slowdown = [&](const ModelSpec& other) {
    const Workload w = make_workload("l4", {victim, other});
    double alone = 0, both = 0;
    for (std::uint64_t seed = 1; seed <= 32; ++seed) {
      alone += measure_subset(w, {0}, seed, 600).models[0].latency_ms_p50;
      both += measure_all(w, seed, 600).models[0].latency_ms_p50;
    }
    return both / alone - 1;
  };
  const Workload wa = make_workload("l4", {victim, twin_a});
  const Workload wb = make_workload("l4", {victim, twin_b});
  const Measurement ma = measure_all(wa, 1, 600);
  const Measurement mb = measure_all(wb, 1, 600);
  EXPECT_NEAR(ma.gpu.sm_util, mb.gpu.sm_util, 0.03);
  EXPECT_NEAR(ma.gpu.vram_used_gb, mb.gpu.vram_used_gb, 1e-9);
  const double a = slowdown(twin_a);
  const double b = slowdown(twin_b);
  EXPECT_GT(a, 0);
  EXPECT_GT(b, 0);
  EXPECT_GT(std::abs(a - b), 0.002) << a << " vs " << b;
}

TEST(SimTestbed, SpeechAndEncoderModelsRun) {
  const Workload w =
      make_workload("l4", {make_spec("asr", "whisper-small", settings(kFp16, 1, 100), {.rps = 0.5}),
                           make_spec("emb", "bert-base", settings(kFp16, 8, 100), {.rps = 100})});
  const Measurement m = measure_all(w, 1, 600);
  ASSERT_TRUE(m.ok()) << m.error;
  EXPECT_NEAR(m.models[0].throughput, 0.5, 0.05);
  EXPECT_NEAR(m.models[1].throughput, 100, 3);
  // BERT batches of 8 requests arriving at 100/s wait for their batch to fill (~35 ms on
  // average), so its median latency exceeds that.
  EXPECT_GT(m.models[1].latency_ms_p50, 30);
}

}  // namespace
}  // namespace corun::testing::sim_test
