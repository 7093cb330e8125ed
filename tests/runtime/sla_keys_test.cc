// One SLA-key table (plan/sla_keys.h) defines a breach for the objective, the controller and
// serve's telemetry: the same window breaks the same keys under each.

#include "corun/plan/sla_keys.h"

#include <gtest/gtest.h>

#include <cmath>

#include "corun/catalog/catalog.h"
#include "corun/plan/objective.h"
#include "corun/runtime/admission.h"
#include "corun/runtime/controller.h"

namespace corun::sla_keys_test {
namespace {

ModelSpec assistant() {
  auto w = parse_workload(R"(device: rtx3090
models:
  - name: assistant
    model: qwen2.5-0.5b
    demand: {rps: 2, prompt_tokens: 256, output_tokens: 64}
    sla: {ttft_ms_p95: 1500, tpot_ms_p95: 80, min_throughput: 10}
)",
                          "sla.yaml", Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << w.error().what();
  return w->models[0];
}

ModelObservation window(double ttft, double tpot, double throughput) {
  ModelObservation o;
  o.measured = {NAN, ttft, tpot, throughput};  // latency, TTFT, TPOT, throughput
  return o;
}

TEST(SlaKeys, AnLlmsKeysComeInTheTablesOrder) {
  const auto keys = sla_keys(assistant());
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0].name, "ttft_ms_p95");
  EXPECT_EQ(keys[1].name, "tpot_ms_p95");
  EXPECT_EQ(keys[2].name, "min_throughput");
  EXPECT_TRUE(keys[2].floor);
}

TEST(SlaKeys, TheControllerAndTheObjectiveReadOneBreach) {
  const ModelSpec m = assistant();
  // Every key held: no breach, no excess at margin 0.
  auto o = window(1400, 79, 12);
  EXPECT_FALSE(measured_breach(m, o));
  EXPECT_EQ(sla_excess(m, as_predicted(o.measured), Margin{}), 0.0);
  // TTFT 1,600 ms against 1,500: a breach, and an excess of 1600 / 1500 - 1 = 1/15.
  o = window(1600, 79, 12);
  EXPECT_TRUE(measured_breach(m, o));
  EXPECT_NEAR(sla_excess(m, as_predicted(o.measured), Margin{}), 1.0 / 15, 1e-6);
  // 9 tokens/s against a floor of 10: a breach, and an excess of 1 - 9 / 10 = 0.1 (as_predicted
  // leaves throughput unbounded, so the predicted form is written out here).
  o = window(1400, 79, 9);
  EXPECT_TRUE(measured_breach(m, o));
  EXPECT_NEAR(sla_excess(m, Predicted{0, 1400, 79, 9}, Margin{}), 0.1, 1e-6);
  // A value not measured breaks nothing.
  EXPECT_FALSE(measured_breach(m, window(NAN, NAN, NAN)));
  // A failed run is a breach whatever it measured.
  o = window(1400, 79, 12);
  o.failed = true;
  EXPECT_TRUE(measured_breach(m, o));
}

TEST(SlaKeys, ALatencyKeyOfAnotherFamilyIsNotAnLlmKey) {
  auto w = parse_workload(R"(device: rtx3090
models:
  - name: cam
    model: yolo11n
    demand: {fps: 30}
    sla: {ttft_ms_p95: 10}
)",
                          "cam.yaml", Catalog::default_catalog());
  // The parser refuses a TTFT SLA on a camera, so no reader of the table meets one.
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().what().find("ttft_ms_p95"), std::string::npos) << w.error().what();
}

}  // namespace
}  // namespace corun::sla_keys_test
