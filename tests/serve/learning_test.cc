// corun serve learns the GPU it serves from the telemetry it receives: a client that runs the
// plans on a GPU that differs from the catalog (a perturbed simulator) and reports what it
// measured brings the served predictions to what the GPU really does, and the plan near the best
// the GPU allows.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "corun/catalog/catalog.h"
#include "corun/core/rng.h"
#include "corun/eval/robust_oracle.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/service.h"
#include "corun/testbed/sim.h"
#include "serve_test_util.h"

namespace corun::serve::learning_test {
namespace {

using nlohmann::json;
using testing::TempDir;

constexpr const char* kToken = "learning-test-token-0123456789";

// The models the client serves (registration order = the workload's order).
constexpr const char* kModels = R"(device: rtx3090
models:
  - name: chat
    model: qwen2.5-0.5b
    knobs: {precision: [fp16, awq], request_concurrency: [1, 2, 4]}
    demand: {rps: 2, prompt_tokens: 256, output_tokens: 64}
    sla: {ttft_ms_p95: 400, tpot_ms_p95: 12}
    weight: 2
  - name: cam0
    model: yolo11s
    knobs: {imgsz: [320, 480, 640], skip_rate: [0, 0.5]}
    demand: {fps: 30}
    sla: {latency_ms_p95: 7.5}
  - name: cam1
    model: yolo11m
    knobs: {imgsz: [320, 480, 640]}
    demand: {fps: 15}
    sla: {latency_ms_p95: 10.5}
)";

HttpResponse call(Service& s, const std::string& method, const std::string& path,
                  const std::string& body = "") {
  return testing::call_service(s, kToken, method, path, body);
}

void settle(Service& s) { ASSERT_TRUE(testing::settle(s, kToken)) << "the planner did not settle"; }

// The telemetry a client posts for window `m`, measured under plan `plan_id`: the p95s of the
// model's SLA metrics and its throughput.
json samples_of(const Workload& w, const Measurement& m, const json& plan_id) {
  json samples = json::array();
  for (const auto& mm : m.models) {
    json sample = {{"model", mm.name}, {"plan_id", plan_id}, {"throughput", mm.throughput}};
    if (w.models[mm.model].arch.family == ModelFamily::kLlm) {
      if (mm.ttft_ms_p95) sample["ttft_ms_p95"] = *mm.ttft_ms_p95;
      if (mm.tpot_ms_p95) sample["tpot_ms_p95"] = *mm.tpot_ms_p95;
    } else {
      sample["latency_ms_p95"] = mm.latency_ms_p95;
    }
    samples.push_back(sample);
  }
  return samples;
}

TEST(ServeLearning, TelemetryFromAPerturbedGpuBringsPredictionsAndThePlanToItsTruth) {
  auto w = parse_workload(kModels, "models.yaml", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  // The GPU as it really is: every physical parameter 10-40 % off the catalog (seed 7).
  const SimTestbed truth(SimTruth::perturbed(Context{.seed = 7}));
  TempDir dir;
  ServiceOptions o;
  o.state_dir = dir.path();
  o.token = kToken;
  o.solver = "exhaustive";  // a small space: the decisions are exact, the test about learning
  o.min_replan_interval_ms = 0;
  // Learning alone: the windows come within seconds, where the transition rule's minimum dwell
  // (60 s of wall time) would hold the plan back (SteadyTelemetry... below holds that rule).
  o.transitions.aware = false;
  auto opened =
      Service::open(Context{}, o, Catalog::default_catalog(), std::make_unique<TwinSource>());
  ASSERT_TRUE(opened.ok()) << opened.error().what();
  Service& s = **opened;
  const std::vector<std::string> entries = {
      R"({"name":"chat","model":"qwen2.5-0.5b","knobs":{"precision":["fp16","awq"],"request_concurrency":[1,2,4]},"demand":{"rps":2,"prompt_tokens":256,"output_tokens":64},"sla":{"ttft_ms_p95":400,"tpot_ms_p95":12},"weight":2})",
      R"({"name":"cam0","model":"yolo11s","knobs":{"imgsz":[320,480,640],"skip_rate":[0,0.5]},"demand":{"fps":30},"sla":{"latency_ms_p95":7.5}})",
      R"({"name":"cam1","model":"yolo11m","knobs":{"imgsz":[320,480,640]},"demand":{"fps":15},"sla":{"latency_ms_p95":10.5}})"};
  for (const auto& e : entries) ASSERT_EQ(call(s, "POST", "/v1/models", e).status, 201);

  auto plan_config = [&](const json& plan) {
    JointConfig c;
    for (const auto& m : w->models)
      c.push_back(plan["models"][m.name]["index"].get<std::int32_t>());
    return c;
  };
  json plan;
  const int kWindows = 30;
  for (int k = 0; k < kWindows; ++k) {
    settle(s);
    plan = json::parse(call(s, "GET", "/v1/plan").body);
    const JointConfig c = plan_config(plan);
    const Measurement m =
        truth.measure(Context{.seed = derive_seed(7, {static_cast<std::uint64_t>(k)})}, *w, c,
                      MeasureOptions(10));
    ASSERT_EQ(call(s, "POST", "/v1/telemetry", samples_of(*w, m, plan["id"]).dump()).status, 202);
  }
  settle(s);
  plan = json::parse(call(s, "GET", "/v1/plan").body);
  const JointConfig c = plan_config(plan);

  // What is predicted for the plan in force against what this GPU does in it on average (the
  // expected value of the windows' p95: a single window's p95 scatters by up to 25 %).
  const Measurement expected = truth.measure(Context{}, *w, c, MeasureOptions(10, {}, false));
  for (const auto& mm : expected.models) {
    const json& p = plan["models"][mm.name]["predicted"];
    if (w->models[mm.model].arch.family == ModelFamily::kLlm) {
      EXPECT_NEAR(p["ttft_ms_p95"].get<double>() / *mm.ttft_ms_p95, 1.0, 0.10) << mm.name;
      EXPECT_NEAR(p["tpot_ms_p95"].get<double>() / *mm.tpot_ms_p95, 1.0, 0.10) << mm.name;
    } else {
      EXPECT_NEAR(p["latency_ms_p95"].get<double>() / mm.latency_ms_p95, 1.0, 0.10) << mm.name;
    }
  }
  // The twin alone (what serve planned with before it learned) was far off on this GPU.
  const Measurement twin = SimTestbed().measure(Context{}, *w, c, MeasureOptions(10, {}, false));
  double worst = 0;
  for (std::size_t k = 0; k < twin.models.size(); ++k) {
    const double a = twin.models[k].latency_ms_p95, b = expected.models[k].latency_ms_p95;
    worst = std::max(worst, std::abs(a / b - 1));
  }
  EXPECT_GT(worst, 0.10);

  // The plan against the best plan the GPU itself allows (robust: every SLA held in 99 % of
  // 1,000 windows).
  RobustOracle oracle(truth, 10, 2, 1000);
  const auto best = oracle.best(*w, {});
  ASSERT_TRUE(best.feasible);
  const RobustScore mine = oracle.score(*w, {}, c);
  const double gap = 100 * (best.utility - mine.earned) / best.utility;
  EXPECT_LE(gap, 3.0) << plan.dump();
  // What learning says about itself, where a client can see it.
  EXPECT_EQ(plan["learning"]["cam0"]["observations"].get<int>(), kWindows);
  const auto metrics = call(s, "GET", "/metrics").body;
  EXPECT_NE(metrics.find("corun_serve_margin_ratio{model=\"cam1\"}"), std::string::npos);
  EXPECT_NE(metrics.find("corun_serve_prediction_abs_error_ratio{model=\"chat\"}"),
            std::string::npos);
}

// The steady workload of workloads/transitions/steady-l4.yaml (no event), served: telemetry of
// the plan in force measured on the simulator, a new seed each window, must not make serve
// restart a model's server after the third window (docs/scheduler.md, "Transitions").
TEST(ServeLearning, SteadyTelemetryRestartsNoModelAfterTheThirdWindow) {
  const std::string file = std::string(CORUN_SOURCE_DIR) + "/workloads/transitions/steady-l4.yaml";
  auto w = load_workload(file, Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  const SimTestbed truth;
  TempDir dir;
  ServiceOptions o;
  o.state_dir = dir.path();
  o.token = kToken;
  o.device = "l4";
  o.workload_file = file;
  o.min_replan_interval_ms = 0;
  auto opened =
      Service::open(Context{}, o, Catalog::default_catalog(), std::make_unique<TwinSource>());
  ASSERT_TRUE(opened.ok()) << opened.error().what();
  Service& s = **opened;
  std::int64_t last_id = 0;
  int restarts_after_third = 0;
  for (int k = 0; k < 20; ++k) {
    settle(s);
    const json plan = json::parse(call(s, "GET", "/v1/plan").body);
    if (plan["id"].get<std::int64_t>() != last_id && k > 3 && plan.contains("transition")) {
      for (const auto& step : plan["transition"]["steps"]) {
        if (step["action"] == "restart") ++restarts_after_third;
      }
    }
    last_id = plan["id"].get<std::int64_t>();
    JointConfig c;
    for (const auto& m : w->models)
      c.push_back(plan["models"][m.name]["index"].get<std::int32_t>());
    const Measurement m =
        truth.measure(Context{.seed = derive_seed(11, {static_cast<std::uint64_t>(k)})}, *w, c,
                      MeasureOptions(10));
    ASSERT_EQ(call(s, "POST", "/v1/telemetry", samples_of(*w, m, plan["id"]).dump()).status, 202);
  }
  EXPECT_EQ(restarts_after_third, 0);
}

}  // namespace
}  // namespace corun::serve::learning_test
