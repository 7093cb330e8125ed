// corun serve --on-plan: a plan that changes what runs goes through the user's deployer before it
// counts as in force (ServiceOptions::on_plan). The hook's own bounds (time-outs, garbage output,
// process groups) are tested in plan_hook_test.cc; here, what the service makes of its answer.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "corun/catalog/catalog.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/service.h"
#include "serve_test_util.h"

namespace corun::serve::on_plan_test {
namespace {

using nlohmann::json;
using testing::TempDir;

constexpr const char* kToken = "on-plan-test-token-0123456789";
constexpr const char* kChat =
    R"({"name":"chat","model":"qwen2.5-0.5b","knobs":{"precision":["fp16","awq"]},"demand":{"rps":1,"prompt_tokens":256,"output_tokens":64},"sla":{"ttft_ms_p95":800}})";
constexpr const char* kCam =
    R"({"name":"cam0","model":"yolo11n","knobs":{"imgsz":[320,640]},"demand":{"fps":30},"sla":{"latency_ms_p95":50}})";

HttpResponse call(Service& s, const std::string& method, const std::string& path,
                  const std::string& body = "") {
  return testing::call_service(s, kToken, method, path, body);
}

void settle(Service& s) { ASSERT_TRUE(testing::settle(s, kToken)) << "the planner did not settle"; }

std::unique_ptr<Service> open_with_hook(const TempDir& dir, const std::string& command,
                                        int timeout_ms = 10000) {
  ServiceOptions o;
  o.state_dir = dir.path();
  o.token = kToken;
  o.solver = "exhaustive";
  o.min_replan_interval_ms = 0;
  o.on_plan.command = command;
  o.on_plan.timeout_ms = timeout_ms;
  auto opened =
      Service::open(Context{}, o, Catalog::default_catalog(), std::make_unique<TwinSource>());
  EXPECT_TRUE(opened.ok()) << opened.error().what();
  return opened.ok() ? std::move(*opened) : nullptr;
}

TEST(OnPlan, AnAppliedPlanComesInForceWithItsTransitionOnTheHooksInput) {
  TempDir dir;
  const std::string seen = (dir.path() / "seen.json").string();
  auto s = open_with_hook(dir, "cat > " + seen);
  ASSERT_TRUE(s);
  ASSERT_EQ(call(*s, "POST", "/v1/models", kChat).status, 201);
  settle(*s);
  const json first = json::parse(call(*s, "GET", "/v1/plan").body);
  ASSERT_EQ(call(*s, "POST", "/v1/models", kCam).status, 201);
  settle(*s);
  const json plan = json::parse(call(*s, "GET", "/v1/plan").body);
  EXPECT_GT(plan["id"].get<std::int64_t>(), first["id"].get<std::int64_t>());
  ASSERT_TRUE(plan.contains("on_plan")) << plan.dump();
  EXPECT_TRUE(plan["on_plan"]["applied"].get<bool>());
  // The hook read the plan it applied: the same id and models, with its transition (a new
  // model set is planned afresh, so its transition lists no step yet).
  std::ifstream in(seen);
  std::stringstream text;
  text << in.rdbuf();
  const json given = json::parse(text.str());
  EXPECT_EQ(given["id"], plan["id"]);
  EXPECT_EQ(given["models"], plan["models"]);
  EXPECT_TRUE(given.contains("transition")) << given.dump();
  EXPECT_NE(call(*s, "GET", "/metrics")
                .body.find("corun_serve_on_plan_hooks_total{outcome=\"applied\"} 1"),
            std::string::npos);
}

TEST(OnPlan, AFailingOrHangingHookKeepsThePreviousPlanInForceAndSaysSo) {
  for (const std::string command : {"echo refused >&2; exit 3", "sleep 30"}) {
    TempDir dir;
    auto s = open_with_hook(dir, command, 300);
    ASSERT_TRUE(s);
    ASSERT_EQ(call(*s, "POST", "/v1/models", kChat).status, 201);
    settle(*s);
    const json first = json::parse(call(*s, "GET", "/v1/plan").body);
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(call(*s, "POST", "/v1/models", kCam).status, 201);
    settle(*s);
    // Bounded: a hook that hangs is killed at its time-out (300 ms), not waited for.
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << command;
    const json plan = json::parse(call(*s, "GET", "/v1/plan").body);
    EXPECT_EQ(plan["id"], first["id"]) << command;
    EXPECT_EQ(plan["models"], first["models"]) << command;
    ASSERT_TRUE(plan.contains("on_plan")) << plan.dump();
    EXPECT_FALSE(plan["on_plan"]["applied"].get<bool>()) << command;
    EXPECT_GT(plan["on_plan"]["plan_id"].get<std::int64_t>(), first["id"].get<std::int64_t>());
    EXPECT_FALSE(plan["on_plan"]["reason"].get<std::string>().empty());
    EXPECT_NE(call(*s, "GET", "/metrics")
                  .body.find("corun_serve_on_plan_hooks_total{outcome=\"failed\"} 1"),
              std::string::npos)
        << command;
  }
}

}  // namespace
}  // namespace corun::serve::on_plan_test
