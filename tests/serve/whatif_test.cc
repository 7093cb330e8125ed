// POST /v1/whatif: can this node take one more model with every SLA held? The answer is planned
// on a copy of the workload; nothing in the service changes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "corun/catalog/catalog.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/service.h"
#include "serve_test_util.h"

namespace corun::serve::whatif_test {
namespace {

using nlohmann::json;
using testing::kCam0;
using testing::kChat;
using testing::TempDir;

constexpr const char* kToken = "whatif-token-0123456789abcdef";

std::unique_ptr<Service> open_service(const std::filesystem::path& dir) {
  ServiceOptions o;
  o.state_dir = dir;
  o.token = kToken;
  o.solver = "greedy";
  o.min_replan_interval_ms = 0;
  auto s = Service::open(Context{}, o, Catalog::default_catalog(), std::make_unique<TwinSource>());
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
  return s.ok() ? std::move(*s) : nullptr;
}

HttpResponse call(Service& s, const std::string& method, const std::string& path,
                  const std::string& body = "", bool auth = true) {
  return testing::call_service(s, auth ? kToken : "", method, path, body);
}

json body_of(const HttpResponse& r) { return json::parse(r.body, nullptr, false); }

// A small detector with an SLA the twin meets next to cam0 and chat.
constexpr const char* kCam2 =
    R"({"name":"cam2","model":"yolo11n","knobs":{"imgsz":[320,640]},"demand":{"fps":10},)"
    R"("sla":{"latency_ms_p95":200}})";
// The same detector with a latency no configuration reaches, even alone on the GPU.
constexpr const char* kImpossible =
    R"({"name":"fast","model":"yolo11n","knobs":{"imgsz":[320]},"demand":{"fps":10},)"
    R"("sla":{"latency_ms_p95":0.01}})";

class WhatIfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service_ = open_service(dir_.path());
    ASSERT_NE(service_, nullptr);
    ASSERT_EQ(call(*service_, "POST", "/v1/models", kCam0).status, 201);
    ASSERT_EQ(call(*service_, "POST", "/v1/models", kChat).status, 201);
    // The plan of both registrations (the planner may fold them into one decision).
    for (std::int64_t seen = 0;;) {
      ASSERT_TRUE(service_->wait_for_plan(seen, 30000));
      seen = service_->plan_id();
      if (body_of(call(*service_, "GET", "/v1/plan"))["models"].size() == 2) break;
    }
  }
  TempDir dir_;
  std::unique_ptr<Service> service_;
};

TEST_F(WhatIfTest, AnswersWithoutChangingAnything) {
  Service& s = *service_;
  const std::string plan = call(s, "GET", "/v1/plan").body;
  const std::string models = call(s, "GET", "/v1/models").body;
  const std::string history = call(s, "GET", "/v1/plan/history").body;
  const std::uint64_t generation = s.generation();
  const std::int64_t plan_id = s.plan_id();

  // No token: a what-if is a question, not a change.
  const auto r = call(s, "POST", "/v1/whatif", kCam2, /*auth=*/false);
  ASSERT_EQ(r.status, 200) << r.body;
  const json a = body_of(r);
  EXPECT_EQ(a["model"], "cam2");
  EXPECT_EQ(a["gpu"], 0);
  EXPECT_TRUE(a["fits"].get<bool>()) << a.dump(2);
  EXPECT_TRUE(a["breaks"].empty());
  EXPECT_TRUE(a["plan"]["feasible"].get<bool>());
  // The plan the node would run: the registered models and the new one.
  EXPECT_EQ(a["plan"]["models"].size(), 3U);
  EXPECT_TRUE(a["plan"]["models"].contains("cam2"));
  // Before is the plan in force; the gain is the difference.
  EXPECT_DOUBLE_EQ(a["utility_before"].get<double>(),
                   body_of(call(s, "GET", "/v1/plan"))["predicted_utility"].get<double>());
  EXPECT_DOUBLE_EQ(a["utility_after"].get<double>(), a["plan"]["predicted_utility"].get<double>());
  EXPECT_DOUBLE_EQ(a["utility_gain"].get<double>(),
                   a["utility_after"].get<double>() - a["utility_before"].get<double>());

  // The same question gets the same answer (the what-if left nothing behind).
  const json again = body_of(call(s, "POST", "/v1/whatif", kCam2));
  json a_no_time = a, again_no_time = again;
  a_no_time["plan"].erase("decision_ms");
  again_no_time["plan"].erase("decision_ms");
  EXPECT_EQ(a_no_time, again_no_time);

  // Nothing changed: the plan, the models, the history, the model set's version, the plan id.
  EXPECT_EQ(call(s, "GET", "/v1/plan").body, plan);
  EXPECT_EQ(call(s, "GET", "/v1/models").body, models);
  EXPECT_EQ(call(s, "GET", "/v1/plan/history").body, history);
  EXPECT_EQ(s.generation(), generation);
  EXPECT_EQ(s.plan_id(), plan_id);
  EXPECT_EQ(body_of(call(s, "GET", "/healthz"))["models"], 2);
  // And the next real decision continues the numbers where they were (its plan id changes only
  // if what runs does).
  const std::int64_t decided = s.decision();
  ASSERT_EQ(call(s, "POST", "/v1/replan").status, 202);
  ASSERT_TRUE(s.wait_for_decision(decided, 30000));
  EXPECT_EQ(s.decision(), decided + 1);
  EXPECT_GE(s.plan_id(), plan_id);
  EXPECT_LE(s.plan_id(), plan_id + 1);
  EXPECT_EQ(body_of(call(s, "GET", "/v1/plan"))["models"].size(), 2U);
}

TEST_F(WhatIfTest, NamesTheSlaThatWouldBreakAndWhy) {
  const auto r = call(*service_, "POST", "/v1/whatif", kImpossible);
  ASSERT_EQ(r.status, 200) << r.body;
  const json a = body_of(r);
  EXPECT_FALSE(a["fits"].get<bool>());
  EXPECT_FALSE(a["plan"]["feasible"].get<bool>());
  ASSERT_FALSE(a["breaks"].empty()) << a.dump(2);
  const json& b = a["breaks"][0];
  EXPECT_EQ(b["model"], "fast");
  EXPECT_EQ(b["sla"], "latency_ms_p95");
  EXPECT_DOUBLE_EQ(b["limit"].get<double>(), 0.01);
  EXPECT_GT(b["best"].get<double>(), 0.01);
  EXPECT_TRUE(b["alone"].get<bool>());  // not even alone on the GPU
  EXPECT_NE(b["reason"].get<std::string>().find("latency_ms_p95"), std::string::npos);
  EXPECT_EQ(a["plan"]["infeasible"].size(), a["breaks"].size());
  EXPECT_EQ(body_of(call(*service_, "GET", "/v1/models"))["models"].size(), 2U);
}

TEST(WhatIf, OnAnEmptyNodeBeforeIsZero) {
  TempDir dir;
  auto s = open_service(dir.path());
  ASSERT_NE(s, nullptr);
  const json a = body_of(call(*s, "POST", "/v1/whatif", kCam2));
  EXPECT_TRUE(a["fits"].get<bool>()) << a.dump(2);
  EXPECT_EQ(a["utility_before"], 0.0);
  EXPECT_DOUBLE_EQ(a["utility_gain"].get<double>(), a["utility_after"].get<double>());
  EXPECT_EQ(a["plan"]["models"].size(), 1U);
  EXPECT_EQ(s->plan_id(), 0);
  EXPECT_EQ(s->generation(), 0U);
  EXPECT_EQ(call(*s, "GET", "/v1/plan").status, 404);
}

}  // namespace
}  // namespace corun::serve::whatif_test
