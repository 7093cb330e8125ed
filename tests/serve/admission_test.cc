// corun serve runs the same admission control as corun run (runtime/admission.h): a model whose
// SLA no plan holds is given a share of its demand in its plan's `admitted`, and a breach
// reported at that share lowers it, as the AIMD rule says.
#include <gtest/gtest.h>

#include <string>

#include "corun/catalog/catalog.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/service.h"
#include "serve_test_util.h"

namespace corun::serve::admission_test {
namespace {

using nlohmann::json;
using testing::TempDir;

constexpr const char* kToken = "admission-test-token-0123456789";

// An LLM whose demand (2 requests/s of 2,048-token prompts) is beyond what any of its
// configurations serves on an RTX 3090 (the plan's own line says about 0.73 requests/s), next to
// a camera that fits easily: the workload of tests/runtime/infeasibility_test.cc at a tenth of
// its demand.
const std::string kAssistant =
    R"({"name":"assistant","model":"qwen2.5-7b","knobs":{"precision":["fp16","awq"],"request_concurrency":[1,4]},"demand":{"rps":2,"prompt_tokens":2048,"output_tokens":256},"sla":{"ttft_ms_p95":1500,"tpot_ms_p95":80},"weight":3})";
const std::string kCamera =
    R"({"name":"cam0","model":"yolo11n","knobs":{"imgsz":[320,640]},"demand":{"fps":30},"sla":{"latency_ms_p95":60}})";

HttpResponse call(Service& s, const std::string& method, const std::string& path,
                  const std::string& body = "") {
  return testing::call_service(s, kToken, method, path, body);
}

std::unique_ptr<Service> open_service(const TempDir& dir, bool shed) {
  ServiceOptions o;
  o.state_dir = dir.path();
  o.token = kToken;
  o.solver = "exhaustive";
  o.min_replan_interval_ms = 0;
  o.admission.enabled = shed;
  auto opened =
      Service::open(Context{}, o, Catalog::default_catalog(), std::make_unique<TwinSource>());
  EXPECT_TRUE(opened.ok()) << opened.error().what();
  if (!opened.ok()) return nullptr;
  auto s = std::move(*opened);
  EXPECT_EQ(call(*s, "POST", "/v1/models", kAssistant).status, 201);
  EXPECT_EQ(call(*s, "POST", "/v1/models", kCamera).status, 201);
  EXPECT_TRUE(testing::settle(*s, kToken));
  return s;
}

TEST(ServeAdmission, AnUnholdableModelIsGivenAShareAndABreachAtItHalvesIt) {
  TempDir dir;
  auto s = open_service(dir, /*shed=*/true);
  ASSERT_NE(s, nullptr);
  json plan = json::parse(call(*s, "GET", "/v1/plan").body);
  const double first = plan["models"]["assistant"]["admitted"].get<double>();
  // Some of its demand, not all, and the camera all of its own.
  EXPECT_GT(first, 0.0) << plan.dump();
  EXPECT_LT(first, 1.0) << plan.dump();
  EXPECT_EQ(plan["models"]["cam0"]["admitted"].get<double>(), 1.0);
  ASSERT_EQ(plan["infeasible"].size(), 1u) << plan.dump();
  EXPECT_NE(plan["infeasible"][0].get<std::string>().find("corun admits"), std::string::npos)
      << plan["infeasible"][0];

  // The front end admitted that share, and the client reports a TTFT above the SLA there: the
  // ceiling becomes first x 0.5 (AdmissionOptions::backoff), and the next plan admits at most it.
  const json samples = json::array(
      {{{"model", "assistant"},
        {"plan_id", plan["id"]},
        {"ttft_ms_p95", 2400},
        {"tpot_ms_p95", 40},
        {"throughput", 2 * first}},
       {{"model", "cam0"}, {"plan_id", plan["id"]}, {"latency_ms_p95", 12}, {"throughput", 30}}});
  ASSERT_EQ(call(*s, "POST", "/v1/telemetry", samples.dump()).status, 202);
  ASSERT_TRUE(testing::settle(*s, kToken));
  plan = json::parse(call(*s, "GET", "/v1/plan").body);
  const double second = plan["models"]["assistant"]["admitted"].get<double>();
  EXPECT_LE(second, 0.5 * first + 1e-9) << plan.dump();
}

TEST(ServeAdmission, BestEffortRunsItWithAllOfItsDemand) {
  TempDir dir;
  auto s = open_service(dir, /*shed=*/false);
  ASSERT_NE(s, nullptr);
  const json plan = json::parse(call(*s, "GET", "/v1/plan").body);
  EXPECT_EQ(plan["models"]["assistant"]["admitted"].get<double>(), 1.0) << plan.dump();
  EXPECT_TRUE(plan["models"]["assistant"]["best_effort"].get<bool>()) << plan.dump();
}

}  // namespace
}  // namespace corun::serve::admission_test
