// Stack telemetry from Prometheus: the PromQL templates, the HTTP API's answers, the data
// quality of a window and the outlier rule. The query fixture below answers as Prometheus's
// HTTP API does (https://prometheus.io/docs/prometheus/latest/querying/api/); the integration
// test (tests/integration/stack_prometheus_test.cc) runs a real Prometheus.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <map>
#include <string>

#include "corun/catalog/catalog.h"
#include "corun/serve/prometheus_client.h"
#include "corun/serve/promql.h"
#include "corun/serve/stack_telemetry.h"
#include "corun/spec/workload.h"
#include "corun/testbed/sim.h"

namespace corun::serve::stack_telemetry_test {
namespace {

ModelSpec model(const std::string& yaml) {
  Diagnostics diags;
  auto m = parse_model_entry(YAML::Load(yaml), "test", Catalog::default_catalog(), diags);
  EXPECT_TRUE(m.has_value()) << diags.to_error().what();
  return m.value_or(ModelSpec{});
}

std::string spec_error(const std::string& yaml) {
  Diagnostics diags;
  auto m = parse_model_entry(YAML::Load(yaml), "test", Catalog::default_catalog(), diags);
  EXPECT_FALSE(m.has_value());
  return diags.items().empty() ? "" : diags.to_error().what();
}

const char* kChat = R"(
name: chat
model: qwen2.5-1.5b
demand: {rps: 2, prompt_tokens: 512, output_tokens: 128}
sla: {ttft_ms_p95: 1500, tpot_ms_p95: 60}
telemetry: {source: vllm, labels: {model_name: Qwen/Qwen2.5-1.5B-Instruct}}
)";

const char* kCam = R"(
name: cam0
model: yolo11n
demand: {fps: 30}
sla: {latency_ms_p95: 50}
telemetry: {source: triton}
)";

// ---------------------------------------------------------------------------------------------
// The workload schema

TEST(TelemetrySourceSpec, ReadsSourceAndLabelsWithDefaults) {
  const ModelSpec chat = model(kChat);
  EXPECT_EQ(chat.telemetry.kind, TelemetrySource::Kind::kVllm);
  ASSERT_EQ(chat.telemetry.labels.size(), 1u);
  EXPECT_EQ(chat.telemetry.labels[0].first, "model_name");
  EXPECT_EQ(chat.telemetry.labels[0].second, "Qwen/Qwen2.5-1.5B-Instruct");
  // Triton's default selects its `model` label by the model's name.
  const ModelSpec cam = model(kCam);
  ASSERT_EQ(cam.telemetry.labels.size(), 1u);
  EXPECT_EQ(cam.telemetry.labels[0].first, "model");
  EXPECT_EQ(cam.telemetry.labels[0].second, "cam0");
  // No source: telemetry as POSTed only.
  EXPECT_FALSE(model("{name: a, model: yolo11n, demand: {fps: 30}}").telemetry.enabled());
}

TEST(TelemetrySourceSpec, BadEntriesNameTheField) {
  EXPECT_NE(spec_error("{name: a, model: yolo11n, telemetry: {source: vlm}}")
                .find("telemetry.source: unknown telemetry source 'vlm'"),
            std::string::npos);
  EXPECT_NE(spec_error("{name: a, model: yolo11n, telemetry: {source: vllm}}")
                .find("vLLM serves LLMs"),
            std::string::npos);
  EXPECT_NE(spec_error("{name: a, model: qwen2.5-1.5b, telemetry: {source: triton}}")
                .find("no time to first token"),
            std::string::npos);
  EXPECT_NE(spec_error("{name: a, model: yolo11n, telemetry: {source: triton, labels: "
                       "{__name__: x}}}")
                .find("telemetry.labels.__name__"),
            std::string::npos);
  EXPECT_NE(spec_error("{name: a, model: yolo11n, telemetry: {source: custom}}")
                .find("needs 'queries'"),
            std::string::npos);
  EXPECT_NE(spec_error("{name: a, model: yolo11n, telemetry: {source: custom, queries: "
                       "{latency_p95: x}}}")
                .find("telemetry.queries.latency_p95: unknown metric"),
            std::string::npos);
  EXPECT_NE(spec_error("{name: a, model: yolo11n, telemetry: {source: triton, queries: "
                       "{latency_ms_p95: x}}}")
                .find("queries are for source: custom"),
            std::string::npos);
}

TEST(TelemetrySourceSpec, TheWorkloadOfDocsStackValidates) {
  // The first yaml block of docs/stack.md, as a user copies it.
  std::ifstream in(std::string(CORUN_SOURCE_DIR) + "/docs/stack.md");
  ASSERT_TRUE(in) << "docs/stack.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const auto begin = doc.find("```yaml\n");
  ASSERT_NE(begin, std::string::npos);
  const auto end = doc.find("```", begin + 8);
  const std::string yaml = doc.substr(begin + 8, end - begin - 8);
  auto w = parse_workload(yaml, "docs/stack.md", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  ASSERT_EQ(w->models.size(), 3u);
  EXPECT_EQ(w->models[0].telemetry.kind, TelemetrySource::Kind::kVllm);
  EXPECT_EQ(w->models[1].telemetry.kind, TelemetrySource::Kind::kTriton);
  EXPECT_EQ(w->models[2].telemetry.kind, TelemetrySource::Kind::kCustom);
  // The custom queries come out as PromQL with the labels and the window filled in.
  const auto q = promql_queries(w->models[2], 30);
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[1].promql, R"(sum(rate(http_requests_total{job="encoder"}[30s])))");
}

// ---------------------------------------------------------------------------------------------
// PromQL

TEST(PromQl, MatchersEscapeAsPromQlStringLiterals) {
  EXPECT_EQ(promql_matchers({{"a", "x"}, {"b", "q\"uo\\te"}}), R"(a="x",b="q\"uo\\te")");
  EXPECT_EQ(promql_duration(30), "30s");
  EXPECT_EQ(promql_duration(0.2), "1s");
}

TEST(PromQl, VllmQueriesUseTheUpstreamNames) {
  // Written by hand from vLLM's metric names (docs.vllm.ai, design/metrics) and Prometheus's
  // histogram_quantile idiom (prometheus.io/docs/practices/histograms).
  const auto q = promql_queries(model(kChat), 30);
  std::map<std::string, std::string> by;
  for (const auto& x : q) by[x.metric] = x.promql;
  const std::string l = R"({model_name="Qwen/Qwen2.5-1.5B-Instruct"})";
  EXPECT_EQ(by["ttft_ms_p95"],
            "1000 * histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_"
            "bucket" + l + "[30s])))");
  EXPECT_EQ(by["tpot_ms_p95"],
            "(1000 * histogram_quantile(0.95, sum by (le) (rate(vllm:inter_token_latency_seconds_"
            "bucket" + l + "[30s]))) or 1000 * histogram_quantile(0.95, sum by (le) (rate("
            "vllm:time_per_output_token_seconds_bucket" + l + "[30s]))))");
  EXPECT_EQ(by["throughput"], "sum(rate(vllm:generation_tokens_total" + l + "[30s]))");
  EXPECT_EQ(by["requests"], "sum(increase(vllm:request_success_total" + l + "[30s]))");
  EXPECT_EQ(by["prompt_tokens"], "sum(rate(vllm:prompt_tokens_total" + l +
                                     "[30s])) / sum(rate(vllm:request_success_total" + l +
                                     "[30s]))");
  EXPECT_NE(by["rps"].find("deriv(vllm:num_requests_waiting" + l + "[30s])"), std::string::npos);
  EXPECT_EQ(promql_request_counter(model(kChat)), "vllm:request_success_total" + l);
}

TEST(PromQl, TritonQueriesReadSummariesAndMicroseconds) {
  // Triton's names (server docs/user_guide/metrics.md): cumulative µs counters without _total,
  // summaries with a quantile label.
  const auto q = promql_queries(model(kCam), 10);
  std::map<std::string, std::string> by;
  for (const auto& x : q) by[x.metric] = x.promql;
  EXPECT_EQ(by["latency_ms_p95"],
            R"(sum(nv_inference_request_summary_us{model="cam0",quantile="0.95"}) / 1000)");
  EXPECT_EQ(by["latency_ms_mean"],
            R"(sum(rate(nv_inference_request_duration_us{model="cam0"}[10s])) / )"
            R"(sum(rate(nv_inference_request_success{model="cam0"}[10s])) / 1000)");
  EXPECT_EQ(by["throughput"], R"(sum(rate(nv_inference_count{model="cam0"}[10s])))");
  EXPECT_EQ(by.count("fps"), 1u);  // a camera's demand is in frames
  EXPECT_EQ(by.count("rps"), 0u);
}

TEST(PromQl, CustomQueriesFillWindowAndLabels) {
  const ModelSpec m = model(R"(
name: enc
model: bert-base
demand: {rps: 50}
telemetry:
  source: custom
  labels: {job: enc}
  queries: {latency_ms_p95: 'my_p95_ms{{labels}}[{window}]'}
)");
  const auto q = promql_queries(m, 15);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].promql, R"(my_p95_ms{job="enc"}[15s])");
  EXPECT_EQ(promql_request_counter(m), "");
}

// ---------------------------------------------------------------------------------------------
// The HTTP API's answers

TEST(PrometheusApi, ParsesTheDocumentedVectorAndErrorAnswers) {
  // The instant-query example of prometheus.io/docs/prometheus/latest/querying/api/.
  const std::string body = R"({"status":"success","data":{"resultType":"vector","result":[
    {"metric":{"__name__":"up","job":"prometheus","instance":"localhost:9090"},
     "value":[1435781451.781,"1"]},
    {"metric":{"__name__":"up","job":"node","instance":"localhost:9100"},
     "value":[1435781451.781,"0"]}]}})";
  const auto r = parse_query_response(200, body);
  ASSERT_TRUE(std::holds_alternative<std::vector<PromSample>>(r));
  const auto& v = std::get<std::vector<PromSample>>(r);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].labels.at("instance"), "localhost:9090");
  EXPECT_DOUBLE_EQ(v[0].time_s, 1435781451.781);
  EXPECT_EQ(v[0].value, 1);
  EXPECT_EQ(v[1].value, 0);
  // Special values are strings.
  const auto nan = parse_query_response(
      200, R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},)"
           R"("value":[1,"NaN"]},{"metric":{},"value":[1,"+Inf"]}]}})");
  const auto& n = std::get<std::vector<PromSample>>(nan);
  EXPECT_TRUE(std::isnan(n[0].value));
  EXPECT_TRUE(std::isinf(n[1].value) && n[1].value > 0);
  // Scalars.
  const auto s = parse_query_response(
      200, R"({"status":"success","data":{"resultType":"scalar","result":[1,"2.5"]}})");
  EXPECT_EQ(std::get<std::vector<PromSample>>(s).at(0).value, 2.5);
  // An error answer (HTTP 400 with errorType).
  const auto e = parse_query_response(
      400, R"({"status":"error","errorType":"bad_data","error":"parse error at char 5"})");
  ASSERT_TRUE(std::holds_alternative<PromError>(e));
  EXPECT_EQ(std::get<PromError>(e).kind, PromError::Kind::kRejected);
  EXPECT_EQ(std::get<PromError>(e).message, "bad_data: parse error at char 5");
  // Not the API.
  EXPECT_EQ(std::get<PromError>(parse_query_response(200, "<html>")).kind,
            PromError::Kind::kBadResponse);
  EXPECT_EQ(std::get<PromError>(parse_query_response(
                                    200, R"({"status":"success","data":{"resultType":"matrix",)"
                                         R"("result":[]}})"))
                .kind,
            PromError::Kind::kBadResponse);
}

TEST(PrometheusApi, UrlsAreCheckedAndAClosedPortIsUnreachable) {
  EXPECT_FALSE(PrometheusClient::create("https://prom:9090").ok());
  EXPECT_FALSE(PrometheusClient::create("prom:9090").ok());
  EXPECT_FALSE(PrometheusClient::create("http://prom:99999").ok());
  EXPECT_FALSE(PrometheusClient::create("http://:9090").ok());
  auto c = PrometheusClient::create("http://127.0.0.1:1/prefix/", 500);
  ASSERT_TRUE(c.ok());
  const auto r = c->query("up");
  ASSERT_TRUE(std::holds_alternative<PromError>(r));
  EXPECT_EQ(std::get<PromError>(r).kind, PromError::Kind::kUnreachable);
}

// ---------------------------------------------------------------------------------------------
// A window's data quality

// Answers queries by the first registered fragment each contains; a query nothing matches
// returns an empty vector (no series), as Prometheus does.
struct Fixture {
  std::vector<std::pair<std::string, PromResult>> answers;
  std::vector<std::string> asked;

  void on(const std::string& fragment, double value,
          std::map<std::string, std::string> labels = {}) {
    answers.emplace_back(fragment, std::vector<PromSample>{{std::move(labels), 1000, value}});
  }
  PromQuery query() {
    return [this](const std::string& q) -> PromResult {
      asked.push_back(q);
      for (const auto& [f, r] : answers) {
        if (q.find(f) != std::string::npos) return r;
      }
      return std::vector<PromSample>{};
    };
  }
  // A healthy vLLM server: one instance, fresh, no reset, 60 requests in the window.
  void healthy_vllm() {
    on("time() - max(timestamp(", 3);
    on("resets(", 0);
    on("increase(vllm:request_success_total", 60);
    on("vllm:time_to_first_token_seconds", 420);
    on("vllm:inter_token_latency_seconds", 31);
    on("vllm:e2e_request_latency_seconds", 4500);
    on("vllm:prompt_tokens_total", 510);
    on("vllm:generation_tokens_total", 130);
    on("rate(vllm:request_success_total", 2);  // arrivals = completions here
    on("deriv(", 0);
    on("vllm:request_success_total", 1, {{"instance", "10.0.0.5:8000"}});
  }
};

TEST(WindowQuality, AHealthyVllmWindowIsLearnable) {
  Fixture f;
  f.healthy_vllm();
  const WindowReading r = read_window(model(kChat), StackReadOptions{}, f.query());
  EXPECT_TRUE(r.issues.empty()) << r.issues.front().detail;
  EXPECT_TRUE(r.learnable);
  EXPECT_EQ(r.sample.ttft_ms_p95, 420);
  EXPECT_EQ(r.sample.tpot_ms_p95, 31);
  EXPECT_EQ(r.sample.latency_ms_p95, 4500);
  EXPECT_EQ(r.sample.throughput, 130);  // output tokens per second
  EXPECT_EQ(r.requests, 60);
  EXPECT_EQ(r.prompt_tokens, 510);
  EXPECT_EQ(r.output_tokens, 130);
}

TEST(WindowQuality, UnreachablePrometheusStopsTheWindow) {
  Fixture f;
  f.answers.emplace_back("", PromError{PromError::Kind::kUnreachable, "connection refused"});
  const WindowReading r = read_window(model(kChat), StackReadOptions{}, f.query());
  EXPECT_FALSE(r.learnable);
  EXPECT_TRUE(r.has(DataQuality::kUnreachable));
  EXPECT_EQ(f.asked.size(), 1u);  // nothing more is asked of a server that does not answer
}

TEST(WindowQuality, MissingSeriesSayWhereToLook) {
  Fixture f;
  const WindowReading r = read_window(model(kChat), StackReadOptions{}, f.query());
  EXPECT_FALSE(r.learnable);
  ASSERT_TRUE(r.has(DataQuality::kMissing));
  EXPECT_NE(r.issues[0].detail.find("telemetry.labels"), std::string::npos);
}

TEST(WindowQuality, TwoInstancesOfOneModelAreAmbiguous) {
  Fixture f;
  f.answers.emplace_back(
      "vllm:request_success_total",
      std::vector<PromSample>{{{{"instance", "a:8000"}}, 1, 5}, {{{"instance", "b:8000"}}, 1, 7}});
  const WindowReading r = read_window(model(kChat), StackReadOptions{}, f.query());
  EXPECT_FALSE(r.learnable);
  ASSERT_TRUE(r.has(DataQuality::kAmbiguous));
  EXPECT_NE(r.issues[0].detail.find("a:8000, b:8000"), std::string::npos);
}

TEST(WindowQuality, AQuantileOfAnEmptyWindowIsNotFinite) {
  Fixture f;
  f.answers.emplace_back("vllm:time_to_first_token_seconds",
                         std::vector<PromSample>{{{}, 1, NAN}});
  f.healthy_vllm();
  const WindowReading r = read_window(model(kChat), StackReadOptions{}, f.query());
  ASSERT_TRUE(r.has(DataQuality::kNotFinite));
  EXPECT_FALSE(r.sample.ttft_ms_p95.has_value());
  EXPECT_EQ(r.sample.tpot_ms_p95, 31);  // the other metrics still count
}

TEST(WindowQuality, ACounterResetWindowIsNotLearned) {
  Fixture f;
  f.on("resets(", 1);
  f.healthy_vllm();
  const WindowReading r = read_window(model(kChat), StackReadOptions{}, f.query());
  EXPECT_TRUE(r.has(DataQuality::kCounterReset));
  EXPECT_FALSE(r.learnable);
}

TEST(WindowQuality, AStaleSeriesIsNotRead) {
  Fixture f;
  f.on("time() - max(timestamp(", 95);
  f.healthy_vllm();
  StackReadOptions o;
  o.window_s = 30;
  const WindowReading r = read_window(model(kChat), o, f.query());
  EXPECT_TRUE(r.has(DataQuality::kStale));
  EXPECT_FALSE(r.learnable);
  o.stale_after_s = 120;  // declared tolerance
  EXPECT_FALSE(read_window(model(kChat), o, f.query()).has(DataQuality::kStale));
}

TEST(WindowQuality, TooFewRequestsForAP95) {
  Fixture f;
  f.on("increase(vllm:request_success_total", 7);
  f.healthy_vllm();
  const WindowReading r = read_window(model(kChat), StackReadOptions{}, f.query());
  EXPECT_TRUE(r.has(DataQuality::kTooFewRequests));
  EXPECT_FALSE(r.learnable);
  EXPECT_EQ(r.sample.ttft_ms_p95, 420);  // reported, not learned
}

TEST(WindowQuality, TritonWithoutSummariesReportsItsMeanNeverAsP95) {
  Fixture f;
  f.on("time() - max(timestamp(", 1);
  f.on("resets(", 0);
  f.on("increase(nv_inference_request_success", 300);
  f.on("nv_inference_request_duration_us", 12.5);
  f.on("nv_inference_count", 30);
  f.on("deriv(", 0);
  f.on("nv_inference_request_success", 1, {{"instance", "triton:8002"}});
  const WindowReading r = read_window(model(kCam), StackReadOptions{}, f.query());
  EXPECT_TRUE(r.issues.empty()) << r.issues.front().detail;
  EXPECT_FALSE(r.sample.latency_ms_p95.has_value());
  EXPECT_EQ(r.latency_ms_mean, 12.5);
  EXPECT_EQ(r.fps, 30);
}

TEST(GpuWindow, DcgmFieldsAreReadWithTheUtilisationFallback) {
  // dcgm-exporter's default counters have no DCGM_FI_PROF_* fields: SM activity falls back to
  // DCGM_FI_DEV_GPU_UTIL (percent).
  Fixture f;
  f.on("DCGM_FI_DEV_GPU_UTIL", 73);
  f.on("avg_over_time(DCGM_FI_DEV_FB_USED", 20480);
  f.on("DCGM_FI_DEV_POWER_USAGE", 251.5);
  f.on("DCGM_FI_DEV_SM_CLOCK", 1410);
  f.on("DCGM_FI_DEV_FB_USED", 20480, {{"gpu", "0"}, {"UUID", "GPU-1"}, {"Hostname", "n1"}});
  const GpuReading g = read_gpu_window({{"gpu", "0"}}, StackReadOptions{}, f.query());
  EXPECT_TRUE(g.issues.empty());
  EXPECT_DOUBLE_EQ(*g.sm_active, 0.73);
  EXPECT_EQ(g.sm_active_field, "DCGM_FI_DEV_GPU_UTIL");
  EXPECT_FALSE(g.dram_active.has_value());
  EXPECT_EQ(g.fb_used_mib, 20480);
  EXPECT_EQ(g.power_w, 251.5);
  EXPECT_EQ(g.sm_clock_mhz, 1410);
  EXPECT_NE(f.asked.back().find(R"(DCGM_FI_DEV_SM_CLOCK{gpu="0"}[30s])"), std::string::npos);
}

TEST(GpuWindow, TwoGpusMatchingIsAmbiguous) {
  Fixture f;
  f.answers.emplace_back("DCGM_FI_DEV_FB_USED",
                         std::vector<PromSample>{{{{"gpu", "0"}, {"Hostname", "n1"}}, 1, 1},
                                                 {{{"gpu", "1"}, {"Hostname", "n1"}}, 1, 1}});
  const GpuReading g = read_gpu_window({{"Hostname", "n1"}}, StackReadOptions{}, f.query());
  ASSERT_EQ(g.issues.size(), 1u);
  EXPECT_EQ(g.issues[0].quality, DataQuality::kAmbiguous);
  EXPECT_FALSE(g.sm_active.has_value());
}

TEST(GpuWindow, AnUnexplainedLoadNeedsItsWindowsInARowToComeAndToGo) {
  UnexplainedLoadOptions o;  // 25 % of the SMs, 3 windows
  UnexplainedLoad u(o);
  // Excess below the share (what a GPU off its catalog description shows): nothing.
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(u.observe(0.60, 0.40, std::nullopt, std::nullopt));
  EXPECT_FALSE(u.present());
  EXPECT_NEAR(u.sm_excess(), 0.20, 1e-12);
  // A co-tenant keeps 30 % of the SMs busy: reported at the third window in a row, once.
  EXPECT_FALSE(u.observe(0.70, 0.40, std::nullopt, std::nullopt));
  EXPECT_FALSE(u.observe(0.70, 0.40, std::nullopt, std::nullopt));
  EXPECT_TRUE(u.observe(0.70, 0.40, std::nullopt, std::nullopt));
  EXPECT_TRUE(u.present());
  EXPECT_FALSE(u.observe(0.70, 0.40, std::nullopt, std::nullopt));
  // One quiet window does not end it; a busy one starts the count again.
  EXPECT_FALSE(u.observe(0.41, 0.40, std::nullopt, std::nullopt));
  EXPECT_FALSE(u.observe(0.41, 0.40, std::nullopt, std::nullopt));
  EXPECT_FALSE(u.observe(0.70, 0.40, std::nullopt, std::nullopt));
  EXPECT_TRUE(u.present());
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(u.observe(0.41, 0.40, std::nullopt, std::nullopt));
  EXPECT_TRUE(u.observe(0.41, 0.40, std::nullopt, std::nullopt));
  EXPECT_FALSE(u.present());
  // DRAM alone can carry it (a memory-bound co-tenant), when both sides of it are known.
  for (int i = 0; i < 3; ++i) u.observe(0.40, 0.40, 0.55, 0.20);
  EXPECT_TRUE(u.present());
  EXPECT_NEAR(*u.dram_excess(), 0.35, 1e-12);
  EXPECT_FALSE(check(UnexplainedLoadOptions{0, 3}).ok());
  EXPECT_FALSE(check(UnexplainedLoadOptions{0.1, 0}).ok());
}

// While a load is present the planner is told its size (UnexplainedLoad::planned): the mean
// excess of the windows that confirmed it, re-estimated only when as many windows in a row are
// off it by min_share or more, and none once it is gone.
TEST(GpuWindow, TheLoadToPlanWithIsTheMeanOfItsConfirmingWindows) {
  UnexplainedLoad u;  // 25 % of the SMs, 3 windows
  u.observe(0.70, 0.40, std::nullopt, std::nullopt);
  u.observe(0.72, 0.40, std::nullopt, std::nullopt);
  EXPECT_EQ(u.planned().sm_util, 0.0);  // not yet confirmed
  ASSERT_TRUE(u.observe(0.68, 0.40, std::nullopt, std::nullopt));
  // (0.30 + 0.32 + 0.28) / 3; no DRAM measurement: as busy on DRAM as on the SMs.
  EXPECT_NEAR(u.planned().sm_util, 0.30, 1e-12);
  EXPECT_NEAR(u.planned().bandwidth_util, 0.30, 1e-12);
  // Windows near it, or two far ones and a near one: the estimate stays.
  u.observe(0.75, 0.40, std::nullopt, std::nullopt);
  u.observe(1.00, 0.40, std::nullopt, std::nullopt);
  u.observe(1.00, 0.40, std::nullopt, std::nullopt);
  u.observe(0.70, 0.40, std::nullopt, std::nullopt);
  EXPECT_NEAR(u.planned().sm_util, 0.30, 1e-12);
  // Three in a row 0.25 or more above it: the load grew to their mean.
  u.observe(1.00, 0.40, std::nullopt, std::nullopt);
  u.observe(0.98, 0.40, std::nullopt, std::nullopt);
  EXPECT_NEAR(u.planned().sm_util, 0.30, 1e-12);
  EXPECT_FALSE(u.observe(0.96, 0.40, 0.70, 0.20));
  EXPECT_NEAR(u.planned().sm_util, (0.60 + 0.58 + 0.56) / 3, 1e-12);
  EXPECT_NEAR(u.planned().bandwidth_util, (0.60 + 0.58 + 0.50) / 3, 1e-12);
  // Gone: nothing to plan with.
  for (int i = 0; i < 3; ++i) u.observe(0.40, 0.40, std::nullopt, std::nullopt);
  EXPECT_FALSE(u.present());
  EXPECT_EQ(u.planned().sm_util, 0.0);
  EXPECT_EQ(u.planned().bandwidth_util, 0.0);
}

// Where UnexplainedLoadOptions::min_share comes from: the catalog twin's error on the GPU's own
// activity when the GPU is off its catalog description (the simulator's SimTruth::perturbed,
// 10-40 % off in bandwidth, kernel efficiency and launch costs). Over these workloads, seeds
// and configurations the twin's SM activity is off by up to 0.20 and its DRAM activity by up to
// 0.16; the default threshold must stay above both, or a mis-described GPU reads as a
// co-tenant.
TEST(GpuWindow, TheUnexplainedLoadThresholdIsAboveTheTwinsOwnError) {
  double worst_sm = 0;
  double worst_dram = 0;
  for (const char* file : {"paper-n3.yaml", "paper-n5.yaml", "mix-l4.yaml", "mix-a100.yaml"}) {
    auto w = load_workload(std::string(CORUN_SOURCE_DIR) + "/workloads/" + file,
                           Catalog::default_catalog());
    ASSERT_TRUE(w.ok()) << w.error().what();
    const SimTestbed twin;
    for (std::size_t c = 0; c < 3; ++c) {
      JointConfig config(w->models.size(), 0);
      for (std::size_t m = 0; m < config.size(); ++m) {
        config[m] = static_cast<std::int32_t>((c * 7 + m) % w->models[m].local_config_count());
      }
      const MeasureOptions exact(10, {}, false);
      const Measurement predicted = twin.measure(Context{}, *w, config, exact);
      ASSERT_TRUE(predicted.ok()) << predicted.error;
      for (const std::uint64_t seed : {1, 2, 3, 7, 11}) {
        const SimTestbed truth(SimTruth::perturbed(Context{.seed = seed}));
        const Measurement real = truth.measure(Context{}, *w, config, exact);
        ASSERT_TRUE(real.ok()) << real.error;
        worst_sm = std::max(worst_sm, std::abs(real.gpu.sm_util - predicted.gpu.sm_util));
        worst_dram =
            std::max(worst_dram, std::abs(real.gpu.mem_bw_util - predicted.gpu.mem_bw_util));
      }
    }
  }
  const double threshold = UnexplainedLoadOptions{}.min_share;
  EXPECT_GT(worst_sm, 0.1);  // the twin is not exact: a small threshold would misfire
  EXPECT_LT(worst_sm, threshold);
  EXPECT_LT(worst_dram, threshold);
}

// ---------------------------------------------------------------------------------------------
// Outliers

TEST(Outliers, OneFarWindowIsHeldAndAConfirmedOneCounts) {
  // The case of the issue: twenty TTFT windows near 140 ms, then one of 1,400 ms.
  OutlierOptions o;
  OutlierGate g;
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(g.hold("ttft_ms_p95", 140 + (i % 5) * 3, o));
  EXPECT_TRUE(g.hold("ttft_ms_p95", 1400, o));   // held
  EXPECT_FALSE(g.hold("ttft_ms_p95", 150, o));   // back to normal: the spike never counted
  EXPECT_TRUE(g.hold("ttft_ms_p95", 1400, o));   // a level shift starts
  EXPECT_FALSE(g.hold("ttft_ms_p95", 1300, o));  // confirmed on the same side: it counts
  // A breach within the model's noise (×1.5, below min_ratio 2 and 6 MADs) is never held.
  OutlierGate h;
  for (int i = 0; i < 20; ++i) h.hold("x", 100 + (i % 5) * 10, o);
  EXPECT_FALSE(h.hold("x", 150, o));
  // Too little history: nothing is judged.
  OutlierGate fresh;
  EXPECT_FALSE(fresh.hold("x", 1, o));
  EXPECT_FALSE(fresh.hold("x", 1000, o));
}

TEST(Outliers, HoldOutliersRemovesTheMetricAndSaysSo) {
  OutlierOptions o;
  OutlierGate g;
  for (int i = 0; i < 10; ++i) {
    TelemetrySample s;
    s.ttft_ms_p95 = 140;
    s.tpot_ms_p95 = 30;
    EXPECT_TRUE(hold_outliers(s, g, o).empty());
  }
  TelemetrySample spike;
  spike.ttft_ms_p95 = 1400;
  spike.tpot_ms_p95 = 31;
  const auto issues = hold_outliers(spike, g, o);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].metric, "ttft_ms_p95");
  EXPECT_FALSE(spike.ttft_ms_p95.has_value());
  EXPECT_EQ(spike.tpot_ms_p95, 31);
}

TEST(Outliers, OptionsAreChecked) {
  OutlierOptions o;
  EXPECT_TRUE(check(o).ok());
  o.min_history = 50;
  EXPECT_NE(check(o).error().what().find("outliers.min_history"), std::string::npos);
  StackReadOptions s;
  s.window_s = 0;
  EXPECT_NE(check(s).error().what().find("telemetry.window_s"), std::string::npos);
}

}  // namespace
}  // namespace corun::serve::stack_telemetry_test
