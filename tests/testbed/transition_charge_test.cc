// What a transition under way costs a window's metrics (testbed.h, charge_transition). The
// expected values are hand calculations from the rule's statement: arrivals uniform over the
// window, those of an outage waiting for its end.
#include <gtest/gtest.h>

#include "corun/catalog/catalog.h"
#include "corun/spec/workload.h"
#include "corun/testbed/sim.h"
#include "corun/testbed/testbed.h"

namespace corun::transition_charge_test {
namespace {

Workload pair() {
  auto w = parse_workload(R"(device: rtx3090
models:
  - {name: chat, model: qwen2.5-0.5b, demand: {rps: 2, prompt_tokens: 256, output_tokens: 64}}
  - {name: cam, model: yolo11n, demand: {fps: 30}}
)",
                          "pair.yaml", Catalog::default_catalog());
  EXPECT_TRUE(w.ok());
  return *w;
}

TEST(TransitionCharge, RequestsOfAnOutageQueueAndFramesAreDropped) {
  const Workload w = pair();
  ModelMetrics llm;
  llm.latency_ms_p95 = 900;
  llm.ttft_ms_p95 = 100;
  llm.tpot_ms_p95 = 10;
  llm.throughput = 128;
  TransitionCharge c;
  c.outage_s = 5;  // half of a 10 s window
  charge_transition(w.models[0], c, 10, llm);
  // f = 0.5 of the requests waited; the p95 is the (1 - 0.05/0.5) = 0.9 quantile of their
  // waits, 0.9 x 5 s = 4.5 s; the median (f = 0.5 exactly) is untouched.
  EXPECT_NEAR(*llm.ttft_ms_p95, 100 + 4500, 1e-9);
  EXPECT_NEAR(llm.latency_ms_p95, 900 + 4500, 1e-9);
  EXPECT_EQ(llm.throughput, 128);  // the backlog is served within the window
  ModelMetrics cam;
  cam.latency_ms_p95 = 20;
  cam.throughput = 30;
  charge_transition(w.models[1], c, 10, cam);
  EXPECT_NEAR(cam.throughput, 15, 1e-9);  // half of the frames were lost
  EXPECT_EQ(cam.latency_ms_p95, 20);
  // An outage shorter than 5 % of the window leaves the p95 alone.
  ModelMetrics brief;
  brief.latency_ms_p95 = 900;
  brief.ttft_ms_p95 = 100;
  TransitionCharge b;
  b.outage_s = 0.4;
  charge_transition(w.models[0], b, 10, brief);
  EXPECT_EQ(*brief.ttft_ms_p95, 100);
}

TEST(TransitionCharge, WarmUpRaisesTheP95ByItsShareOfTheWindow) {
  const Workload w = pair();
  ModelMetrics mm;
  mm.latency_ms_p95 = 1000;
  mm.ttft_ms_p95 = 100;
  TransitionCharge c;
  c.warmup_requests = 1;
  c.warmup_slowdown = 2;
  // 2 rps x 10 s = 20 requests; 1 of them is 5 % of the window: the full slowdown, x2.
  charge_transition(w.models[0], c, 10, mm);
  EXPECT_NEAR(*mm.ttft_ms_p95, 200, 1e-9);
  EXPECT_NEAR(mm.latency_ms_p95, 2000, 1e-9);
}

TEST(TransitionCharge, TheSimulatorPaysTheChargesItIsGiven) {
  const Workload w = pair();
  SimTestbed sim;
  const std::vector<std::int32_t> config = {0, 0};
  MeasureOptions plain(10, {}, false);
  MeasureOptions charged = plain;
  TransitionCharge c;
  c.model = 0;
  c.outage_s = 10;  // the whole window
  c.extra_vram_bytes = 1e9;
  charged.transitions.push_back(c);
  const Measurement a = sim.measure(Context{.seed = 7}, w, config, plain);
  const Measurement b = sim.measure(Context{.seed = 7}, w, config, charged);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NEAR(*b.models[0].ttft_ms_p95, *a.models[0].ttft_ms_p95 + 9500, 1e-6);
  EXPECT_EQ(b.models[0].throughput, 0);
  EXPECT_NEAR(b.gpu.vram_used_gb, a.gpu.vram_used_gb + 1, 1e-9);
  EXPECT_EQ(b.models[1].latency_ms_p95, a.models[1].latency_ms_p95);
}

TEST(TransitionCharge, ASwapsKernelsSlowEveryoneForTheSecondsTheyRun) {
  // The rule (testbed.h, TransitionCharge::swap_gpu_s): the sim measures the window without
  // and with the new copy's load as a co-tenant of that share, throughputs weighted by time,
  // a p95 moved toward the loaded one by the share of the window it lasted over 5 %.
  const Workload w = pair();
  SimTestbed sim;
  const std::vector<std::int32_t> config = {0, 0};
  const MeasureOptions plain(10, {}, false);
  MeasureOptions loaded = plain;
  loaded.conditions.interference = {0.5, 0.5};
  const Measurement calm = sim.measure(Context{.seed = 7}, w, config, plain);
  const Measurement busy = sim.measure(Context{.seed = 7}, w, config, loaded);
  ASSERT_TRUE(calm.ok() && busy.ok());
  // The load slows both models, the one that swaps and its co-runner.
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_GT(busy.models[k].latency_ms_p95, calm.models[k].latency_ms_p95);
  }
  auto swapping = [&](double seconds) {
    MeasureOptions o = plain;
    TransitionCharge c;
    c.model = 0;
    c.swap_gpu_s = seconds;
    c.swap_gpu_share = 0.5;
    o.transitions.push_back(c);
    return sim.measure(Context{.seed = 7}, w, config, o);
  };
  // The whole window: exactly the loaded measurement.
  const Measurement whole = swapping(10);
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_DOUBLE_EQ(whole.models[k].latency_ms_p95, busy.models[k].latency_ms_p95);
    EXPECT_DOUBLE_EQ(whole.models[k].throughput, busy.models[k].throughput);
  }
  // A quarter second: f = 0.025 of the window, half of a p95's 5 % tail; throughput by time.
  const Measurement brief = swapping(0.25);
  for (std::size_t k = 0; k < 2; ++k) {
    const ModelMetrics& a = calm.models[k];
    const ModelMetrics& b = busy.models[k];
    EXPECT_NEAR(brief.models[k].latency_ms_p95,
                a.latency_ms_p95 + 0.5 * (b.latency_ms_p95 - a.latency_ms_p95), 1e-9);
    EXPECT_NEAR(brief.models[k].throughput, 0.975 * a.throughput + 0.025 * b.throughput, 1e-9);
  }
  // Nothing of it without kernels.
  const Measurement none = swapping(0);
  EXPECT_EQ(none.models[1].latency_ms_p95, calm.models[1].latency_ms_p95);
}

}  // namespace
}  // namespace corun::transition_charge_test
