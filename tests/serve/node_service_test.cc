// corun serve on a node of several GPUs: where registrations go, how requests are routed to
// each model's GPU, what the node answers (plans, models, telemetry, metrics) and what survives
// a restart. In process: NodeService::handle() as the HTTP server would call it.
#include "corun/serve/node_service.h"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>

#include "corun/runtime/twin_source.h"
#include "serve_test_util.h"

namespace corun::serve::node_service_test {
namespace {

using nlohmann::json;
using testing::kCam0;
using testing::kCam1;
using testing::kChat;
using testing::TempDir;

constexpr const char* kToken = "node-token-0123456789abcdef";

// An LLM that keeps an RTX 3090 busy: a camera next to it costs the LLM (or the camera) more
// than it would on an idle GPU.
constexpr const char* kBusyLlm =
    R"({"name":"busy","model":"qwen2.5-3b","knobs":{"precision":["fp16","awq"],)"
    R"("request_concurrency":[2,8]},"demand":{"rps":4,"prompt_tokens":1024,"output_tokens":256},)"
    R"("sla":{"ttft_ms_p95":1500,"tpot_ms_p95":60},"weight":3,"gpu":0})";

// Each GPU's predictions: the catalog twin.
Result<std::unique_ptr<PredictorSource>> twin_source() {
  return std::unique_ptr<PredictorSource>(std::make_unique<TwinSource>());
}

std::unique_ptr<NodeService> open_node(const std::filesystem::path& dir, std::size_t gpus) {
  ServiceOptions o;
  o.state_dir = dir;
  o.token = kToken;
  o.solver = "greedy";
  o.telemetry_flush_ms = 100;
  o.min_replan_interval_ms = 0;
  auto n = NodeService::open(Context{}, o, gpus, {}, Catalog::default_catalog(), twin_source);
  EXPECT_TRUE(n.ok()) << (n.ok() ? "" : n.error().what());
  return n.ok() ? std::move(*n) : nullptr;
}

HttpResponse call(HttpHandler& h, const std::string& method, const std::string& path,
                  const std::string& body = "", bool auth = true) {
  return testing::call_service(h, auth ? kToken : "", method, path, body);
}

json body_of(const HttpResponse& r) { return json::parse(r.body, nullptr, false); }

json with(const char* entry, const json& extra) {
  json j = json::parse(entry);
  j.update(extra);
  return j;
}

// Every GPU's plan in force covers all of its models (at most 20 s).
void settle(NodeService& n) {
  for (std::size_t k = 0; k < n.gpus(); ++k) {
    Service& u = n.unit(k);
    const std::size_t models = body_of(call(u, "GET", "/v1/models"))["models"].size();
    if (models == 0) continue;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (true) {
      const json plan = body_of(call(u, "GET", "/v1/plan"));
      if (plan.is_object() && plan.contains("models") && plan["models"].size() == models) break;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "gpu " << k << " never planned";
      u.wait_for_plan(u.plan_id(), 100);
    }
  }
}

TEST(NodeService, AModelGoesToTheGpuWhereItCostsLeastAndPinsAreHonoured) {
  TempDir dir;
  auto node = open_node(dir.path(), 2);
  ASSERT_TRUE(node);
  // Pinned: GPU 0, whatever the what-ifs say.
  auto r = call(*node, "POST", "/v1/models", kBusyLlm);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(body_of(r)["gpu"], 0);
  EXPECT_FALSE(body_of(r)["model"].contains("gpu"));  // the GPU's service plans one GPU
  settle(*node);

  // A camera asks: GPU 1 is idle, GPU 0 runs the LLM; the node prefers GPU 1.
  r = call(*node, "POST", "/v1/whatif", kCam0);
  ASSERT_EQ(r.status, 200) << r.body;
  const json w = body_of(r);
  EXPECT_EQ(w["gpu"], 1) << w.dump();
  EXPECT_TRUE(w["fits"].get<bool>()) << w.dump();
  ASSERT_EQ(w["gpus"].size(), 2u);
  EXPECT_GT(w["gpus"][1]["utility_gain"].get<double>(), w["gpus"][0]["utility_gain"].get<double>());
  EXPECT_NEAR(w["utility_after"].get<double>() - w["utility_before"].get<double>(),
              w["utility_gain"].get<double>(), 1e-9);
  // The question changed nothing.
  EXPECT_EQ(body_of(call(*node, "GET", "/v1/models"))["models"].size(), 1u);

  r = call(*node, "POST", "/v1/models", kCam0);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(body_of(r)["gpu"], 1);
  // A pin overrides the preference.
  r = call(*node, "POST", "/v1/models", with(kCam1, {{"gpu", 0}}).dump());
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(body_of(r)["gpu"], 0);
  settle(*node);

  const json plan = body_of(call(*node, "GET", "/v1/plan"));
  ASSERT_EQ(plan["models"].size(), 3u) << plan.dump();
  EXPECT_EQ(plan["models"]["busy"]["gpu"], 0);
  EXPECT_EQ(plan["models"]["cam0"]["gpu"], 1);
  EXPECT_EQ(plan["models"]["cam1"]["gpu"], 0);
  ASSERT_EQ(plan["units"].size(), 2u);
  EXPECT_NEAR(plan["predicted_utility"].get<double>(),
              plan["units"][0]["plan"]["predicted_utility"].get<double>() +
                  plan["units"][1]["plan"]["predicted_utility"].get<double>(),
              1e-9);
  // Each GPU plans only its own models.
  EXPECT_EQ(body_of(call(node->unit(1), "GET", "/v1/models"))["models"].size(), 1u);
}

TEST(NodeService, BadRequestsAreRefusedBeforeAnythingChanges) {
  TempDir dir;
  auto node = open_node(dir.path(), 2);
  ASSERT_TRUE(node);
  ASSERT_EQ(call(*node, "POST", "/v1/models", kCam0).status, 201);
  ASSERT_EQ(call(*node, "POST", "/v1/models", with(kChat, {{"gpu", 1}}).dump()).status, 201);
  settle(*node);

  // No token: refused before any GPU plans.
  auto r = call(*node, "POST", "/v1/models", kCam1, false);
  EXPECT_EQ(r.status, 401) << r.body;
  // A GPU the node does not have.
  r = call(*node, "POST", "/v1/models", with(kCam1, {{"gpu", 2}}).dump());
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(body_of(r)["error"]["field"], "gpu");
  r = call(*node, "POST", "/v1/whatif", with(kCam1, {{"gpu", "one"}}).dump());
  EXPECT_EQ(r.status, 422) << r.body;
  // A name registered on the other GPU.
  r = call(*node, "POST", "/v1/models", with(kCam0, {{"gpu", 1}}).dump());
  EXPECT_EQ(r.status, 409) << r.body;
  // Malformed JSON.
  r = call(*node, "POST", "/v1/models", "{\"name\":");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(body_of(call(*node, "GET", "/v1/models"))["models"].size(), 2u);

  // A batch with an unknown model: nothing is taken, on any GPU, and the field is named.
  const json before = body_of(call(*node, "GET", "/v1/telemetry"));
  const std::string batch =
      R"([{"model":"cam0","latency_ms_p95":10,"throughput":30},)"
      R"({"model":"chat","ttft_ms_p95":200,"tpot_ms_p95":20,"throughput":60},)"
      R"({"model":"ghost","throughput":1}])";
  r = call(*node, "POST", "/v1/telemetry", batch);
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(body_of(r)["error"]["field"], "[2].model");
  // A bad value in one GPU's sample: the other GPU's sample is not taken either.
  r = call(*node, "POST", "/v1/telemetry",
           R"([{"model":"cam0","latency_ms_p95":10},{"model":"chat","ttft_ms_p95":-5}])");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(body_of(r)["error"]["field"], "[1].ttft_ms_p95");
  EXPECT_EQ(body_of(call(*node, "GET", "/v1/telemetry")), before);

  // A good batch is split between the GPUs.
  r = call(*node, "POST", "/v1/telemetry",
           R"([{"model":"cam0","latency_ms_p95":10,"throughput":30},)"
           R"({"model":"chat","ttft_ms_p95":200,"tpot_ms_p95":20,"throughput":60}])");
  ASSERT_EQ(r.status, 202) << r.body;
  const json a = body_of(r);
  EXPECT_EQ(a["accepted"], 2);
  ASSERT_EQ(a["gpus"].size(), 2u);
  const json t = body_of(call(*node, "GET", "/v1/telemetry"))["models"];
  EXPECT_EQ(t["cam0"]["gpu"], 0);
  EXPECT_EQ(t["chat"]["gpu"], 1);
}

TEST(NodeService, ResolvesRequestsAgainstTheServicesRouteTable) {
  // Every row of the node's own handling names a row of the one API table.
  for (const auto& n : NodeService::node_routes()) {
    SCOPED_TRACE(std::string(n.method) + " " + std::string(n.pattern));
    bool found = false;
    for (const auto& r : Service::routes()) {
      found = found || (r.method == n.method && r.pattern == n.pattern);
    }
    EXPECT_TRUE(found);
  }
  TempDir dir;
  auto node = open_node(dir.path(), 2);
  ASSERT_TRUE(node);
  ASSERT_EQ(call(*node, "POST", "/v1/models", with(kCam0, {{"gpu", 1}}).dump()).status, 201);
  // A trailing slash is the same route, as on one GPU: the node's list (GPU 1's model).
  const json models = body_of(call(*node, "GET", "/v1/models/"))["models"];
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0]["gpu"], 1);
  // A model's route goes to its GPU, with or without the slash.
  EXPECT_EQ(call(*node, "GET", "/v1/models/cam0/").status, 200);
  // A method the path does not allow, and an unknown path: answered as one GPU answers.
  auto r = call(*node, "PATCH", "/v1/models");
  EXPECT_EQ(r.status, 405) << r.body;
  EXPECT_EQ(call(*node, "GET", "/v1/nothing").status, 404);
  // A removal without the token is its GPU's 401, and changes nothing.
  EXPECT_EQ(call(*node, "DELETE", "/v1/models/cam0", "", false).status, 401);
  EXPECT_EQ(call(*node, "GET", "/v1/models/cam0").status, 200);
  EXPECT_EQ(call(*node, "DELETE", "/v1/models/cam0").status, 200);
  EXPECT_EQ(call(*node, "GET", "/v1/models/cam0").status, 404);
}

TEST(NodeService, ModelsStayOnTheirGpuAcrossARestart) {
  TempDir dir;
  {
    auto node = open_node(dir.path(), 2);
    ASSERT_TRUE(node);
    ASSERT_EQ(call(*node, "POST", "/v1/models", with(kCam0, {{"gpu", 1}}).dump()).status, 201);
    ASSERT_EQ(call(*node, "POST", "/v1/models", kCam1).status, 201);
    settle(*node);
    ASSERT_EQ(call(*node, "DELETE", "/v1/models/cam1").status, 200);
  }
  auto stored = NodeService::stored_gpus(dir.path());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->value_or(0), 2u);
  // Another GPU count is refused, naming both.
  ServiceOptions o;
  o.state_dir = dir.path();
  o.token = kToken;
  auto wrong = NodeService::open(Context{}, o, 3, {}, Catalog::default_catalog(), twin_source);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(std::string(wrong.error().what()).find("2 GPU(s), not 3"), std::string::npos);

  auto node = open_node(dir.path(), 2);
  ASSERT_TRUE(node);
  const json models = body_of(call(*node, "GET", "/v1/models"))["models"];
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0]["name"], "cam0");
  EXPECT_EQ(models[0]["gpu"], 1);
  auto r = call(*node, "GET", "/v1/models/cam0");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(call(*node, "GET", "/v1/models/cam1").status, 404);
  r = call(*node, "POST", "/v1/telemetry", R"({"model":"cam0","latency_ms_p95":9})");
  EXPECT_EQ(r.status, 202) << r.body;
  r = call(*node, "PUT", "/v1/models/cam0/demand", R"({"fps":10})");
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST(NodeService, MetricsKeepEachFamilyTogetherWithAGpuLabel) {
  TempDir dir;
  auto node = open_node(dir.path(), 3);
  ASSERT_TRUE(node);
  ASSERT_EQ(call(*node, "POST", "/v1/models", kCam0).status, 201);
  settle(*node);
  const auto r = call(*node, "GET", "/metrics");
  ASSERT_EQ(r.status, 200);
  std::set<std::string> typed;
  std::string family;
  std::set<std::string> closed;  // families whose group has ended
  std::istringstream in(r.body);
  int samples = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(typed.insert(name).second) << "second TYPE line for " << name;
      if (!family.empty()) closed.insert(family);
      EXPECT_FALSE(closed.contains(name)) << name << " appears in two groups";
      family = name;
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    ++samples;
    EXPECT_NE(line.find("gpu=\""), std::string::npos) << line;
  }
  EXPECT_GT(samples, 0);
  EXPECT_NE(r.body.find("gpu=\"2\""), std::string::npos);
}

}  // namespace
}  // namespace corun::serve::node_service_test
