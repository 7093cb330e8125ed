// corun serve with stack telemetry: windows read from Prometheus (here through a fixture that
// answers as its HTTP API does; tests/integration/stack_prometheus_test.cc runs a real one) are
// learned from only when clean and of the plan in force, their data-quality issues show in
// /v1/plan, /healthz and /metrics, an observed demand change becomes the model's demand, and the
// outlier rule holds a lone far window of POSTed telemetry.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "corun/catalog/catalog.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/service.h"
#include "serve_test_util.h"

namespace corun::serve::stack_service_test {
namespace {

using nlohmann::json;
using testing::TempDir;

constexpr const char* kToken = "stack-telemetry-test-token-0123456789";

constexpr const char* kChat =
    R"({"name":"chat","model":"qwen2.5-0.5b","knobs":{"precision":["fp16","awq"]},)"
    R"("demand":{"rps":2,"prompt_tokens":256,"output_tokens":64},)"
    R"("sla":{"ttft_ms_p95":1500,"tpot_ms_p95":60},)"
    R"("telemetry":{"source":"vllm","labels":{"model_name":"Qwen/Qwen2.5-0.5B-Instruct"}}})";

HttpResponse call(Service& s, const std::string& method, const std::string& path,
                  const std::string& body = "") {
  return testing::call_service(s, kToken, method, path, body);
}

// Answers by the first fragment a query contains (an empty vector, as Prometheus answers a
// selector nothing matches, otherwise).
struct Prometheus {
  std::vector<std::pair<std::string, PromResult>> answers;
  void on(const std::string& fragment, double value,
          std::map<std::string, std::string> labels = {}) {
    answers.emplace_back(fragment, std::vector<PromSample>{{std::move(labels), 1000, value}});
  }
  PromQuery query() const {
    return [this](const std::string& q) -> PromResult {
      for (const auto& [f, r] : answers) {
        if (q.find(f) != std::string::npos) return r;
      }
      return std::vector<PromSample>{};
    };
  }
  // One vLLM server for chat: fresh, no reset, `rps` requests per second for 30 s.
  static Prometheus vllm(double ttft_ms, double tpot_ms, double rps) {
    Prometheus p;
    p.on("time() - max(timestamp(", 2);
    p.on("resets(", 0);
    p.on("increase(vllm:request_success_total", rps * 30);
    p.on("vllm:time_to_first_token_seconds", ttft_ms);
    p.on("vllm:inter_token_latency_seconds", tpot_ms);
    p.on("vllm:e2e_request_latency_seconds", ttft_ms + 64 * tpot_ms);
    p.on("vllm:prompt_tokens_total", 256);
    p.on("vllm:generation_tokens_total", 64);
    p.on("rate(vllm:request_success_total", rps);  // arrivals = completions here
    p.on("deriv(", 0);
    p.on("vllm:request_success_total", 1, {{"instance", "10.0.0.5:8000"}});
    return p;
  }
};

std::unique_ptr<Service> open_service(
    const TempDir& dir, const std::vector<std::pair<std::string, std::string>>& dcgm = {}) {
  ServiceOptions o;
  o.state_dir = dir.path();
  o.token = kToken;
  o.solver = "exhaustive";
  o.min_replan_interval_ms = 0;
  // A poller that never fires within the test: the test reads the windows itself.
  o.stack.prometheus_url = "http://127.0.0.1:1";
  o.stack.read.window_s = 3600;
  o.stack.dcgm_labels = dcgm;
  auto s = Service::open(Context{}, o, Catalog::default_catalog(), std::make_unique<TwinSource>());
  EXPECT_TRUE(s.ok()) << s.error().what();
  return s.ok() ? std::move(*s) : nullptr;
}

json plan_of(Service& s) { return json::parse(call(s, "GET", "/v1/plan").body); }

TEST(StackTelemetry, CleanWindowsOfThePlanInForceAreLearned) {
  TempDir dir;
  auto s = open_service(dir);
  ASSERT_TRUE(s);
  ASSERT_EQ(call(*s, "POST", "/v1/models", kChat).status, 201);
  ASSERT_TRUE(testing::settle(*s, kToken));
  const json plan = plan_of(*s);
  const double ttft = plan["models"]["chat"]["predicted"]["ttft_ms_p95"].get<double>();
  const double tpot = plan["models"]["chat"]["predicted"]["tpot_ms_p95"].get<double>();
  const Prometheus prom = Prometheus::vllm(ttft, tpot, 2);

  // The first window: the plan in force may have started inside it, so it teaches nothing.
  s->read_stack_window(prom.query());
  json t = plan_of(*s)["telemetry"];
  EXPECT_FALSE(t["models"]["chat"]["learned"].get<bool>());
  EXPECT_EQ(t["models"]["chat"]["status"], "ok");
  EXPECT_TRUE(t["up"].get<bool>());
  EXPECT_EQ(json::parse(call(*s, "GET", "/v1/telemetry").body)["models"]["chat"]["samples"], 0);

  // The second, under the same plan, is learned as a POSTed sample would be.
  s->read_stack_window(prom.query());
  t = plan_of(*s)["telemetry"];
  EXPECT_TRUE(t["models"]["chat"]["learned"].get<bool>());
  const json tel = json::parse(call(*s, "GET", "/v1/telemetry").body);
  EXPECT_EQ(tel["models"]["chat"]["samples"], 1);
  EXPECT_NEAR(tel["models"]["chat"]["last"]["ttft_ms_p95"].get<double>(), ttft, 1e-6);
  EXPECT_EQ(tel["stack"]["models"]["chat"]["observed_rps"], 2);
  const std::string metrics = call(*s, "GET", "/metrics").body;
  EXPECT_NE(metrics.find("corun_serve_telemetry_up 1"), std::string::npos);
  EXPECT_NE(metrics.find("corun_serve_telemetry_learned{model=\"chat\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("corun_serve_model_admitted_share{model=\"chat\"} 1"),
            std::string::npos);
}

TEST(StackTelemetry, AWindowWithTooFewRequestsIsReportedAndNotLearned) {
  TempDir dir;
  auto s = open_service(dir);
  ASSERT_TRUE(s);
  ASSERT_EQ(call(*s, "POST", "/v1/models", kChat).status, 201);
  ASSERT_TRUE(testing::settle(*s, kToken));
  const Prometheus prom = Prometheus::vllm(200, 20, 0.2);  // 6 requests in 30 s
  s->read_stack_window(prom.query());
  s->read_stack_window(prom.query());
  const json t = plan_of(*s)["telemetry"]["models"]["chat"];
  EXPECT_FALSE(t["learned"].get<bool>());
  EXPECT_EQ(t["status"], "too_few_requests");
  EXPECT_EQ(json::parse(call(*s, "GET", "/v1/telemetry").body)["models"]["chat"]["samples"], 0);
  EXPECT_NE(call(*s, "GET", "/metrics")
                .body.find("corun_serve_telemetry_issue{model=\"chat\",status=\"too_few_requests\"}"
                           " 1"),
            std::string::npos);
}

TEST(StackTelemetry, AWindowAtAnotherDemandIsReportedAndNotLearned) {
  TempDir dir;
  auto s = open_service(dir);
  ASSERT_TRUE(s);
  ASSERT_EQ(call(*s, "POST", "/v1/models", kChat).status, 201);
  ASSERT_TRUE(testing::settle(*s, kToken));
  // 2 requests/s registered; a burst of 4.4 (+120 %, outside the 20 % band and the 3 Poisson
  // sds of 60 requests, 39 %) with a TTFT 30 times the prediction: the queue of a burst, not an
  // error of the plan's prediction at 2 requests/s.
  const Prometheus burst = Prometheus::vllm(6000, 20, 4.4);
  s->read_stack_window(burst.query());
  s->read_stack_window(burst.query());
  json t = plan_of(*s)["telemetry"]["models"]["chat"];
  EXPECT_FALSE(t["learned"].get<bool>());
  EXPECT_EQ(t["status"], "demand_moved");
  EXPECT_EQ(json::parse(call(*s, "GET", "/v1/telemetry").body)["models"]["chat"]["samples"], 0);
  EXPECT_NE(call(*s, "GET", "/metrics")
                .body.find("corun_serve_telemetry_issue{model=\"chat\",status=\"demand_moved\"}"
                           " 1"),
            std::string::npos);
  // Back at the registered demand (+15 %, inside the band), the window is learned.
  s->read_stack_window(Prometheus::vllm(200, 20, 2.3).query());
  t = plan_of(*s)["telemetry"]["models"]["chat"];
  EXPECT_TRUE(t["learned"].get<bool>());
  EXPECT_EQ(t["status"], "ok");
}

TEST(StackTelemetry, AnUnreachablePrometheusDegradesHealthNotThePlan) {
  TempDir dir;
  auto s = open_service(dir);
  ASSERT_TRUE(s);
  ASSERT_EQ(call(*s, "POST", "/v1/models", kChat).status, 201);
  ASSERT_TRUE(testing::settle(*s, kToken));
  const std::int64_t before = s->plan_id();
  Prometheus down;
  down.answers.emplace_back("", PromError{PromError::Kind::kUnreachable, "connection refused"});
  s->read_stack_window(down.query());
  const json h = json::parse(call(*s, "GET", "/healthz").body);
  EXPECT_EQ(h["status"], "degraded");
  EXPECT_NE(h["telemetry_error"].get<std::string>().find("connection refused"), std::string::npos);
  EXPECT_EQ(s->plan_id(), before);
  EXPECT_EQ(plan_of(*s)["telemetry"]["models"]["chat"]["status"], "unreachable");
  EXPECT_NE(call(*s, "GET", "/metrics").body.find("corun_serve_telemetry_up 0"),
            std::string::npos);
  // Back again: healthy.
  s->read_stack_window(Prometheus::vllm(200, 20, 2).query());
  EXPECT_EQ(json::parse(call(*s, "GET", "/healthz").body)["status"], "ok");
}

TEST(StackTelemetry, AnObservedDemandChangeBecomesTheDemandWithHysteresis) {
  TempDir dir;
  auto s = open_service(dir);
  ASSERT_TRUE(s);
  ASSERT_EQ(call(*s, "POST", "/v1/models", kChat).status, 201);
  ASSERT_TRUE(testing::settle(*s, kToken));
  auto rps = [&] {
    return json::parse(call(*s, "GET", "/v1/models/chat").body)["model"]["demand"]["rps"]
        .get<double>();
  };
  // Within the band (+15 %): nothing changes, however long.
  for (int k = 0; k < 3; ++k) s->read_stack_window(Prometheus::vllm(200, 20, 2.3).query());
  EXPECT_EQ(rps(), 2);
  // Out of it twice, then back in: nothing (the default needs three windows in a row).
  s->read_stack_window(Prometheus::vllm(200, 20, 4).query());
  s->read_stack_window(Prometheus::vllm(200, 20, 4.4).query());
  s->read_stack_window(Prometheus::vllm(200, 20, 2).query());
  EXPECT_EQ(rps(), 2);
  // Out on alternate sides: noise, not a change.
  s->read_stack_window(Prometheus::vllm(200, 20, 4).query());
  s->read_stack_window(Prometheus::vllm(200, 20, 1).query());
  s->read_stack_window(Prometheus::vllm(200, 20, 4).query());
  s->read_stack_window(Prometheus::vllm(200, 20, 2.1).query());  // back in the band
  EXPECT_EQ(rps(), 2);
  // Three in a row above: their median is the demand, and a re-plan follows.
  const std::int64_t decision = s->decision();
  s->read_stack_window(Prometheus::vllm(200, 20, 4.4).query());
  s->read_stack_window(Prometheus::vllm(200, 20, 3.8).query());
  EXPECT_EQ(rps(), 2);
  s->read_stack_window(Prometheus::vllm(200, 20, 4.2).query());
  EXPECT_EQ(rps(), 4.2);
  EXPECT_TRUE(s->wait_for_decision(decision, 60000));
}

TEST(StackTelemetry, ALoneFarWindowOfPostedTelemetryIsHeldUntilConfirmed) {
  TempDir dir;
  auto s = open_service(dir);
  ASSERT_TRUE(s);
  ASSERT_EQ(call(*s, "POST", "/v1/models", kChat).status, 201);
  ASSERT_TRUE(testing::settle(*s, kToken));
  const json plan = plan_of(*s);
  const double ttft = plan["models"]["chat"]["predicted"]["ttft_ms_p95"].get<double>();
  const double tpot = plan["models"]["chat"]["predicted"]["tpot_ms_p95"].get<double>();
  auto post = [&](double t) {
    const json sample = {{"model", "chat"},
                         {"plan_id", plan["id"]},
                         {"ttft_ms_p95", t},
                         {"tpot_ms_p95", tpot}};
    const auto r = call(*s, "POST", "/v1/telemetry", sample.dump());
    EXPECT_EQ(r.status, 202) << r.body;
    return json::parse(r.body);
  };
  // Windows as predicted: the plan stays, and the rule has its history.
  for (int k = 0; k < 8; ++k) EXPECT_FALSE(post(ttft * (1 + 0.02 * (k % 3))).contains("held"));
  ASSERT_EQ(s->plan_id(), plan["id"].get<std::int64_t>());
  // One window past the SLA (1,500 ms) and ten times the noise: held, no breach.
  const json spike = post(2000);
  ASSERT_TRUE(spike.contains("held")) << spike.dump();
  EXPECT_EQ(spike["held"][0]["metric"], "ttft_ms_p95");
  EXPECT_EQ(spike["breaches"], 0);
  // The next one confirms it: it counts.
  const json confirmed = post(2100);
  EXPECT_FALSE(confirmed.contains("held"));
  EXPECT_EQ(confirmed["breaches"], 1);
}

// DCGM's SM activity against what the catalog twin predicts for the plan in force: equal, the
// GPU is explained; 30 % of the SMs more in three windows in a row, an unexplained load is
// reported in /v1/plan and /metrics (UnexplainedLoadOptions: 25 %, 3 windows) and planned with.
TEST(StackTelemetry, GpuActivityThePlanDoesNotExplainIsReported) {
  TempDir dir;
  auto opened = open_service(dir, {{"gpu", "0"}});
  ASSERT_TRUE(opened);
  Service& s = *opened;
  ASSERT_EQ(call(s, "POST", "/v1/models", kChat).status, 201);
  ASSERT_TRUE(testing::settle(s, kToken));
  const auto gpu_with = [](double sm_active) {
    Prometheus p;
    p.on("DCGM_FI_PROF_SM_ACTIVE", sm_active);
    p.on("avg_over_time(DCGM_FI_DEV_FB_USED", 8000);
    p.on("DCGM_FI_DEV_FB_USED", 8000, {{"gpu", "0"}, {"Hostname", "n1"}});
    return p;
  };
  // The first window may hold the plan's start: nothing is compared. The second is.
  s.read_stack_window(gpu_with(0.5).query());
  EXPECT_FALSE(plan_of(s)["telemetry"]["gpu"].contains("predicted_sm_active"));
  s.read_stack_window(gpu_with(0.5).query());
  const double predicted =
      plan_of(s)["telemetry"]["gpu"]["predicted_sm_active"].get<double>();
  ASSERT_GT(predicted, 0);
  ASSERT_LT(predicted, 0.7);
  for (int i = 0; i < 3; ++i) s.read_stack_window(gpu_with(predicted).query());
  json gpu = plan_of(s)["telemetry"]["gpu"];
  EXPECT_FALSE(gpu["unexplained_load"]["present"].get<bool>()) << gpu;
  EXPECT_NEAR(gpu["unexplained_load"]["sm_excess"].get<double>(), 0, 1e-9);
  EXPECT_EQ(gpu["unexplained_load"]["planned"]["sm"].get<double>(), 0.0);
  const std::int64_t decision = s.decision();
  for (int i = 0; i < 3; ++i) s.read_stack_window(gpu_with(predicted + 0.3).query());
  gpu = plan_of(s)["telemetry"]["gpu"];
  EXPECT_TRUE(gpu["unexplained_load"]["present"].get<bool>()) << gpu;
  EXPECT_NEAR(gpu["unexplained_load"]["sm_excess"].get<double>(), 0.3, 1e-9);
  // The planner predicts every model beside it now (UnexplainedLoad::planned: the mean excess
  // of the three windows; no DRAM field, so as busy on DRAM), and decides again.
  EXPECT_NEAR(gpu["unexplained_load"]["planned"]["sm"].get<double>(), 0.3, 1e-9) << gpu;
  EXPECT_NEAR(gpu["unexplained_load"]["planned"]["dram"].get<double>(), 0.3, 1e-9) << gpu;
  EXPECT_TRUE(s.wait_for_decision(decision, 60000));
  const std::string metrics = call(s, "GET", "/metrics").body;
  EXPECT_NE(metrics.find("corun_serve_gpu_unexplained_load 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("corun_serve_gpu_planned_load_sm 0.3"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("corun_serve_gpu_sm_active_predicted "), std::string::npos);
  // DCGM_FI_DEV_GPU_UTIL (any kernel running) is no SM activity to compare: not judged.
  Prometheus util;
  util.on("DCGM_FI_DEV_GPU_UTIL", 100);
  util.on("avg_over_time(DCGM_FI_DEV_FB_USED", 8000);
  util.on("DCGM_FI_DEV_FB_USED", 8000, {{"gpu", "0"}, {"Hostname", "n1"}});
  s.read_stack_window(util.query());
  EXPECT_FALSE(plan_of(s)["telemetry"]["gpu"].contains("unexplained_load"));
  s.stop();
}

TEST(StackTelemetry, OptionsAreCheckedAtOpen) {
  TempDir dir;
  ServiceOptions o;
  o.state_dir = dir.path();
  o.token = kToken;
  o.stack.prometheus_url = "https://prom:9090";
  auto s = Service::open(Context{}, o, Catalog::default_catalog(), std::make_unique<TwinSource>());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().what().find("https is not supported"), std::string::npos);
  o.stack.prometheus_url = "http://prom:9090";
  o.stack.demand_band = 0;
  s = Service::open(Context{}, o, Catalog::default_catalog(), std::make_unique<TwinSource>());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().what().find("telemetry.demand_band"), std::string::npos);
}

}  // namespace
}  // namespace corun::serve::stack_service_test
