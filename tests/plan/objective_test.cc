// How the planner judges a configuration's throughput (planned_throughput), against hand
// calculations written here.
#include "corun/plan/objective.h"

#include <gtest/gtest.h>

#include "corun/catalog/catalog.h"
#include "corun/plan/predictor.h"

namespace corun::objective_test {
namespace {

// A 1.5B chat model at 1.5 requests/s of 128 output tokens (offered: 192 tokens/s) and a camera.
Workload chat_and_camera() {
  auto w = parse_workload(R"(device: rtx3090
models:
  - name: chat
    model: qwen2.5-1.5b
    knobs: {precision: [fp16, awq], request_concurrency: [1, 4]}
    demand: {rps: 1.5, prompt_tokens: 512, output_tokens: 128}
    sla: {ttft_ms_p95: 1500, tpot_ms_p95: 60}
    weight: 2
  - name: cam0
    model: yolo11n
    knobs: {imgsz: [320, 640]}
    demand: {fps: 30}
    sla: {latency_ms_p95: 50}
)",
                          "objective.yaml", Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << w.error().what();
  return *w;
}

// The chat model's first local configuration at request_concurrency `concurrency` (-1: none).
std::int32_t chat_at(const Workload& w, int concurrency) {
  for (std::size_t l = 0; l < w.models[0].local_config_count(); ++l) {
    if (w.models[0].settings(l).request_concurrency == concurrency) {
      return static_cast<std::int32_t>(l);
    }
  }
  return -1;
}

Predicted llm(float ttft_ms, float tpot_ms, float throughput) {
  Predicted p;
  p.ttft_ms_p95 = ttft_ms;
  p.tpot_ms_p95 = tpot_ms;
  p.throughput = throughput;
  return p;
}

TEST(PlannedThroughput, AnLlmWithFewerRequestsInTheSystemThanItsConcurrencyKeepsUp) {
  const Workload w = chat_and_camera();
  const std::int32_t l = chat_at(w, 4);
  ASSERT_GE(l, 0);
  const Settings s = w.models[0].settings(static_cast<std::size_t>(l));
  // Little's law: 1.5 rps × (0.100 s + 128 × 0.0043 s) = 1.5 × 0.6504 = 0.98 requests in the
  // system, below 4: judged at the offered 1.5 × 128 = 192 tokens/s, not the 116 predicted.
  EXPECT_DOUBLE_EQ(planned_throughput(w.models[0], s, llm(100, 4.3f, 116)), 192.0);
  // A prediction above the offered load is kept (served_fraction caps it at 1).
  EXPECT_DOUBLE_EQ(planned_throughput(w.models[0], s, llm(100, 4.3f, 250)), 250.0);
}

TEST(PlannedThroughput, AnLlmAtItsConcurrencyKeepsItsPredictedThroughput) {
  const Workload w = chat_and_camera();
  const std::int32_t l = chat_at(w, 1);
  ASSERT_GE(l, 0);
  const Settings s = w.models[0].settings(static_cast<std::size_t>(l));
  // 1.5 × (0.300 + 128 × 0.008) = 1.5 × 1.324 = 1.99 requests in the system: above 1, so the
  // engine may not keep up and the prediction stands.
  EXPECT_DOUBLE_EQ(planned_throughput(w.models[0], s, llm(300, 8, 116)), 116.0);
  // Without latency predictions there is nothing to judge by.
  EXPECT_DOUBLE_EQ(planned_throughput(w.models[0], s, llm(0, 0, 116)), 116.0);
}

TEST(PlannedThroughput, OtherModelsKeepTheirPrediction) {
  const Workload w = chat_and_camera();
  Predicted p;
  p.latency_ms_p95 = 5;
  p.throughput = 27;
  EXPECT_DOUBLE_EQ(planned_throughput(w.models[1], w.models[1].settings(0), p), 27.0);
}

TEST(PlannedThroughput, ThePlannerJudgesWithItAndMeasuredUtilityDoesNot) {
  const Workload w = chat_and_camera();
  const std::int32_t l4 = chat_at(w, 4);
  ASSERT_GE(l4, 0);
  const Predicted p = llm(100, 4.3f, 96);  // half the offered 192 tokens/s
  const Settings s = w.models[0].settings(static_cast<std::size_t>(l4));
  const double full = w.models[0].weight * config_quality(w.models[0], s);
  // Ground truth: a window that completed 96 tokens/s served half of the demand.
  EXPECT_NEAR(model_utility(w, 0, l4, p), full * 0.5, 1e-9);
  // The planner: 0.98 requests in the system at concurrency 4, so the whole demand.
  struct Fixed final : Predictor {
    Predicted at;
    [[nodiscard]] std::size_t models() const override { return 2; }
    void predict(std::span<const std::int32_t> configs, std::size_t rows,
                 std::span<Predicted> out) const override {
      for (std::size_t i = 0; i < rows * models(); ++i) {
        out[i] = configs[i] == kAbsent ? Predicted{} : at;
      }
    }
  } fixed;
  fixed.at = p;
  const PlanProblem problem(w, {true, false}, fixed);
  EXPECT_NEAR(problem.model_utility(0, l4, p), full, 1e-9);
  // What the plan is predicted to earn, as reported, is the planner's view.
  EXPECT_NEAR(planned_utility(w, 0, l4, p), full, 1e-9);
}

}  // namespace
}  // namespace corun::objective_test
