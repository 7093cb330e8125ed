// POST /v1/capacity: how many GPUs of the served device a set of models needs, answered by the
// node planner on the catalog twin. Nothing in the service changes; bad bodies are 400s naming
// the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "corun/catalog/catalog.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/node_service.h"
#include "corun/serve/service.h"
#include "serve_test_util.h"

namespace corun::serve::capacity_test {
namespace {

using nlohmann::json;
using testing::kCam0;
using testing::kChat;
using testing::TempDir;

constexpr const char* kToken = "capacity-token-0123456789abcdef";

ServiceOptions options_for(const std::filesystem::path& dir) {
  ServiceOptions o;
  o.state_dir = dir;
  o.token = kToken;
  o.solver = "greedy";
  o.min_replan_interval_ms = 0;
  return o;
}

std::unique_ptr<Service> open_service(const std::filesystem::path& dir) {
  auto s = Service::open(Context{}, options_for(dir), Catalog::default_catalog(),
                         std::make_unique<TwinSource>());
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
  return s.ok() ? std::move(*s) : nullptr;
}

HttpResponse call(HttpHandler& h, const std::string& method, const std::string& path,
                  const std::string& body = "", bool auth = true) {
  return testing::call_service(h, auth ? kToken : "", method, path, body);
}

json body_of(const HttpResponse& r) { return json::parse(r.body, nullptr, false); }

// A Qwen2.5-7B served in FP16 only: its weights are 2 bytes x 7.6 B parameters = 15.2 GB
// (catalog parameter count), so two of them (30.4 GB) cannot share one RTX 3090's 24 GB
// (datasheet), while each alone holds a light chat SLA. The answer must be 2 GPUs, one each.
json big_llm(const std::string& name, const json& extra = json::object()) {
  json j = json::parse(
      R"({"knobs":{"precision":["fp16"],"request_concurrency":[1,2]},"model":"qwen2.5-7b",)"
      R"("demand":{"rps":0.5,"prompt_tokens":256,"output_tokens":64},)"
      R"("sla":{"ttft_ms_p95":3000,"tpot_ms_p95":200}})");
  j["name"] = name;
  j.update(extra);
  return j;
}

TEST(Capacity, RegisteredModelsThatShareOneGpuNeedOne) {
  TempDir dir;
  auto s = open_service(dir.path());
  ASSERT_TRUE(s);
  ASSERT_EQ(call(*s, "POST", "/v1/models", kCam0).status, 201);
  ASSERT_EQ(call(*s, "POST", "/v1/models", kChat).status, 201);
  ASSERT_TRUE(testing::settle(*s, kToken));
  const std::string plan = call(*s, "GET", "/v1/plan").body;
  const std::uint64_t generation = s->generation();

  // No token and no body: a question about the registered models.
  const auto r = call(*s, "POST", "/v1/capacity", "", /*auth=*/false);
  ASSERT_EQ(r.status, 200) << r.body;
  const json a = body_of(r);
  EXPECT_EQ(a["device"], "rtx3090");
  EXPECT_EQ(a["gpus_needed"], 1);
  EXPECT_EQ(a["tried_up_to"], 1);
  EXPECT_EQ(a["placement"], json({{"cam0", "gpu0"}, {"chat", "gpu0"}}));
  EXPECT_TRUE(a["predicted_utility"].is_number());
  // Nothing changed.
  EXPECT_EQ(call(*s, "GET", "/v1/plan").body, plan);
  EXPECT_EQ(s->generation(), generation);
}

TEST(Capacity, TwoFp16SevenBillionParameterLlmsNeedTwoGpusOneEach) {
  TempDir dir;
  auto s = open_service(dir.path());
  ASSERT_TRUE(s);
  const json body = {{"models", {big_llm("a"), big_llm("b")}}};
  const auto r = call(*s, "POST", "/v1/capacity", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json a = body_of(r);
  EXPECT_EQ(a["gpus_needed"], 2) << a.dump();
  EXPECT_EQ(a["tried_up_to"], 2);
  ASSERT_TRUE(a["placement"].is_object()) << a.dump();
  EXPECT_NE(a["placement"]["a"], a["placement"]["b"]);
  // Either alone fits one GPU.
  const auto one =
      body_of(call(*s, "POST", "/v1/capacity", json({{"models", {big_llm("a")}}}).dump()));
  EXPECT_EQ(one["gpus_needed"], 1) << one.dump();
  // With at most one GPU to try, no node holds both: null, and how far it tried.
  const auto capped =
      body_of(call(*s, "POST", "/v1/capacity",
                   json({{"models", {big_llm("a"), big_llm("b")}}, {"max_gpus", 1}}).dump()));
  EXPECT_TRUE(capped["gpus_needed"].is_null()) << capped.dump();
  EXPECT_EQ(capped["tried_up_to"], 1);
  EXPECT_FALSE(capped.contains("placement"));
}

TEST(Capacity, AnSlaNoGpuHoldsIsNullAfterEveryNodeTried) {
  TempDir dir;
  auto s = open_service(dir.path());
  ASSERT_TRUE(s);
  // No configuration of a detector answers in 10 microseconds, on any number of GPUs.
  const json fast =
      json::parse(R"({"name":"fast","model":"yolo11n","knobs":{"imgsz":[320]},"demand":{"fps":10},)"
                  R"("sla":{"latency_ms_p95":0.01}})");
  const auto r =
      call(*s, "POST", "/v1/capacity", json({{"models", {fast}}, {"max_gpus", 3}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json a = body_of(r);
  EXPECT_TRUE(a["gpus_needed"].is_null());
  EXPECT_EQ(a["tried_up_to"], 3);
}

TEST(Capacity, BadBodiesAre4xxNamingTheFieldAndNoModelsIs404) {
  TempDir dir;
  auto s = open_service(dir.path());
  ASSERT_TRUE(s);
  const auto expect = [&](const std::string& body, int status, const std::string& code,
                          const std::string& field) {
    SCOPED_TRACE(body);
    const auto r = call(*s, "POST", "/v1/capacity", body);
    ASSERT_EQ(r.status, status) << r.body;
    const json e = body_of(r)["error"];
    EXPECT_EQ(e["code"], code) << r.body;
    EXPECT_EQ(e.value("field", ""), field) << r.body;
  };
  expect("", 404, "no_models", "");
  expect("{}", 404, "no_models", "");
  expect("[1]", 400, "bad_type", "");
  expect(R"({"gpus":2})", 400, "unknown_field", "gpus");
  expect(R"({"max_gpus":0})", 400, "out_of_range", "max_gpus");
  expect(R"({"max_gpus":9})", 400, "out_of_range", "max_gpus");
  expect(R"({"max_gpus":"two"})", 400, "out_of_range", "max_gpus");
  expect(R"({"models":{}})", 400, "bad_type", "models");
  expect(R"({"models":[]})", 400, "bad_type", "models");
  json two = {{"models", {big_llm("a"), big_llm("a")}}};
  expect(two.dump(), 422, "invalid_spec", "models[1].name");
  json unknown = {{"models", {big_llm("a"), big_llm("b")}}};
  unknown["models"][1]["model"] = "qwen9-unknown";
  expect(unknown.dump(), 422, "invalid_spec", "models[1].model");
  expect(R"({"models":[1)", 400, "bad_json", "models[1]");
}

TEST(Capacity, ANodeAnswersForTheModelsOfEveryGpu) {
  TempDir dir;
  auto made =
      NodeService::open(Context{}, options_for(dir.path()), 2, {}, Catalog::default_catalog(), [] {
        return Result<std::unique_ptr<PredictorSource>>(
            std::unique_ptr<PredictorSource>(std::make_unique<TwinSource>()));
      });
  ASSERT_TRUE(made.ok()) << made.error().what();
  NodeService& node = **made;
  // One large LLM pinned on each GPU: the node's models need both GPUs.
  ASSERT_EQ(call(node, "POST", "/v1/models", big_llm("a", {{"gpu", 0}}).dump()).status, 201);
  ASSERT_EQ(call(node, "POST", "/v1/models", big_llm("b", {{"gpu", 1}}).dump()).status, 201);
  const auto r = call(node, "POST", "/v1/capacity");
  ASSERT_EQ(r.status, 200) << r.body;
  const json a = body_of(r);
  EXPECT_EQ(a["gpus_needed"], 2) << a.dump();
  EXPECT_EQ(a["placement"].size(), 2u);
  // A body's models are answered as they are.
  const auto one = call(node, "POST", "/v1/capacity", json({{"models", {big_llm("c")}}}).dump());
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(body_of(one)["gpus_needed"], 1);
}

}  // namespace
}  // namespace corun::serve::capacity_test
