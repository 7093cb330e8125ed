// POST /v1/tools/place: a tool DAG placed next to the plan in force. Its answer must be the one
// `corun map --plan` gives on the same DAG, plan and workload, for every policy.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "corun/catalog/catalog.h"
#include "corun/mapping/corunners.h"
#include "corun/mapping/place.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/openapi.h"
#include "corun/serve/service.h"
#include "corun/serve/tool_placement.h"
#include "corun/testbed/testbed.h"
#include "serve_test_util.h"

namespace corun::serve::tools_place_test {
namespace {

using nlohmann::json;
using testing::TempDir;

namespace fs = std::filesystem;

constexpr const char* kToken = "tools-place-token-0123456789";
const fs::path kWorkload = fs::path(CORUN_SOURCE_DIR) / "workloads" / "paper-n5.yaml";

// Six tool calls (a voice note and a photo), as a scenario file and as the JSON of a body.
const fs::path kDagFile =
    fs::path(CORUN_SOURCE_DIR) / "workloads" / "tools-serve" / "voice-and-photo.yaml";
const json kDag = yaml_to_json(YAML::LoadFile(kDagFile.string()));

std::unique_ptr<Service> open_service(const fs::path& dir, const std::string& workload) {
  ServiceOptions o;
  o.state_dir = dir;
  o.token = kToken;
  o.solver = "greedy";
  o.workload_file = workload;
  o.min_replan_interval_ms = 0;
  auto s = Service::open(Context{}, o, Catalog::default_catalog(), std::make_unique<TwinSource>());
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
  return s.ok() ? std::move(*s) : nullptr;
}

json place(Service& s, const json& body, int want = 200) {
  const auto r = testing::call_service(s, "", "POST", "/v1/tools/place", body.dump());
  EXPECT_EQ(r.status, want) << r.body;
  return json::parse(r.body, nullptr, false);
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
}

// `corun map` run as a process; its --json output, or null when it did not answer.
json run_corun_map(const std::string& args) {
  const std::string cmd = std::string(CORUN_BINARY) + " map " + args + " --json --no-oracle";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return nullptr;
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int rc = ::pclose(p);
  EXPECT_EQ(rc, 0) << cmd;
  return json::parse(out, nullptr, false);
}

// The fields both answers name for the placement itself.
void expect_same_placement(const json& route, const json& cli) {
  for (const char* k : {"mapping", "makespan_ms", "observed_makespan_ms", "executions",
                        "predicted_makespan_ms", "failed", "failures", "tools", "log", "agent"}) {
    EXPECT_EQ(route.contains(k), cli.contains(k)) << k;
    if (cli.contains(k)) {
      EXPECT_EQ(route[k], cli[k]) << k;
    }
  }
}

class ToolsPlaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service_ = open_service(dir_.path(), kWorkload.string());
    ASSERT_NE(service_, nullptr);
    ASSERT_TRUE(service_->wait_for_plan(0, 60000));
    const auto r = testing::call_service(*service_, "", "GET", "/v1/plan");
    ASSERT_EQ(r.status, 200);
    plan_ = json::parse(r.body);
    ASSERT_EQ(plan_["models"].size(), 5U) << r.body;
    write(dir_.path() / "plan.json", r.body);
    // The models in force as a workload file: the registered entries as the service holds
    // them (a JSON registration numbers its configurations in its own knob order, so the
    // plan's local indices are the registry's), the file `corun map --workload` is given.
    const auto models = testing::call_service(*service_, "", "GET", "/v1/models");
    ASSERT_EQ(models.status, 200);
    const json workload = {{"name", "served"},
                           {"device", "rtx3090"},
                           {"models", json::parse(models.body)["models"]}};
    write(workload_file(), workload.dump());
  }
  void TearDown() override {
    if (service_) service_->stop();
  }
  [[nodiscard]] fs::path workload_file() const { return dir_.path() / "served.yaml"; }
  TempDir dir_;
  std::unique_ptr<Service> service_;
  json plan_;
};

TEST_F(ToolsPlaceTest, AnswersAsMapOnTheSamePlanWorkloadAndDag) {
  const Catalog& cat = Catalog::default_catalog();
  auto tools = mapping::tool_catalog(cat);
  ASSERT_TRUE(tools.ok());
  auto scenario = mapping::load_scenario(kDagFile, *tools);
  ASSERT_TRUE(scenario.ok()) << scenario.error().what();
  auto sim = make_testbed("sim");
  ASSERT_TRUE(sim.ok());
  // What `corun map voice-and-photo.yaml --plan plan.json --workload served.yaml` runs.
  auto co = mapping::load_corunners(scenario->context, dir_.path() / "plan.json",
                                    workload_file().string(), cat, **sim);
  ASSERT_TRUE(co.ok()) << co.error().what();
  ASSERT_NE(*co, nullptr);
  auto problem = mapping::PlacementProblem::build(*scenario, *tools, cat, *co);
  ASSERT_TRUE(problem.ok()) << problem.error().what();
  const std::int64_t plan_before = service_->plan_id();
  const std::uint64_t generation = service_->generation();
  for (const auto& policy : mapping::policy_names()) {
    SCOPED_TRACE(policy);
    const json answer = place(*service_, {{"scenario", kDag}, {"policy", policy}});
    auto placed = mapping::place(*problem, {policy, "builtin", std::nullopt}, scenario->context);
    ASSERT_TRUE(placed.ok()) << placed.error().what();
    expect_same_placement(answer, mapping::placed_json(*problem, *placed));
    EXPECT_EQ(answer["plan_id"], plan_["id"]);
    // The co-runners: the plan's five models, and every SLA as `corun map` measures it.
    const json& c = answer["corunners"];
    EXPECT_EQ(c["models"], (*co)->running());
    EXPECT_EQ(c["vram_gb"], (*co)->vram_gb());
    auto during = (*co)->during(placed->truth.burst, **sim);
    ASSERT_TRUE(during.ok());
    ASSERT_EQ(c["slas"].size(), during->size());
    for (std::size_t i = 0; i < during->size(); ++i) {
      const auto& o = (*during)[i];
      EXPECT_EQ(c["slas"][i]["model"], o.model);
      EXPECT_EQ(c["slas"][i]["during"], o.during);
      EXPECT_EQ(c["slas"][i]["headroom"], sla_headroom(o));
    }
  }
  // Placing changed nothing in the service.
  EXPECT_EQ(service_->plan_id(), plan_before);
  EXPECT_EQ(service_->generation(), generation);
}

TEST_F(ToolsPlaceTest, AnswersAsTheCorunMapProcess) {
  if (!fs::exists(CORUN_BINARY)) GTEST_SKIP() << "no binary at " << CORUN_BINARY;
  const std::string args = kDagFile.string() + " --plan " +
                           (dir_.path() / "plan.json").string() + " --workload " +
                           workload_file().string();
  for (const std::string policy : {"agent", "heft"}) {
    SCOPED_TRACE(policy);
    const json cli = run_corun_map(args + " --policy " + policy);
    ASSERT_TRUE(cli.is_object());
    const json answer = place(*service_, {{"scenario", kDag}, {"policy", policy}});
    expect_same_placement(answer, cli);
    const json& measured = cli["corunners"]["slas_measured"];
    ASSERT_EQ(answer["corunners"]["slas"].size(), measured.size());
    for (std::size_t i = 0; i < measured.size(); ++i) {
      EXPECT_EQ(answer["corunners"]["slas"][i]["alone"], measured[i]["alone"]);
      EXPECT_EQ(answer["corunners"]["slas"][i]["during"], measured[i]["during"]);
    }
  }
}

// A restarted service holds the plan it restored from its store as the one in force, and
// places next to it as the running service did.
TEST_F(ToolsPlaceTest, AReopenedServicePlacesNextToTheRestoredPlan) {
  json dag = kDag;
  dag.erase("device");
  const json before = place(*service_, {{"scenario", dag}});
  ASSERT_EQ(before["plan_id"], plan_["id"]);
  service_->stop();
  service_.reset();
  service_ = open_service(dir_.path(), kWorkload.string());
  ASSERT_NE(service_, nullptr);
  const auto r = testing::call_service(*service_, "", "GET", "/v1/plan");
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(json::parse(r.body)["id"], plan_["id"]) << "the stored plan is the one in force";
  const json after = place(*service_, {{"scenario", dag}});
  EXPECT_EQ(after["plan_id"], plan_["id"]);
  expect_same_placement(after, before);
  EXPECT_EQ(after["corunners"], before["corunners"]);
}

TEST(ToolsPlace, WithoutModelsTheToolsHaveTheGpuToThemselves) {
  TempDir dir;
  auto service = open_service(dir.path(), "");
  ASSERT_NE(service, nullptr);
  json dag = kDag;
  dag.erase("device");  // the service's device
  const json answer = place(*service, {{"scenario", dag}});
  EXPECT_FALSE(answer.contains("corunners"));
  EXPECT_EQ(answer["plan_id"], 0);
  EXPECT_EQ(answer["device"], "rtx3090");
  EXPECT_EQ(answer["policy"], "agent");
  // The scenario's own budget, with no plan holding VRAM.
  EXPECT_DOUBLE_EQ(answer["vram_budget_gb"].get<double>(), 20.0);
  auto tools = mapping::tool_catalog(Catalog::default_catalog());
  ASSERT_TRUE(tools.ok());
  auto scenario = mapping::load_scenario(kDagFile, *tools);
  ASSERT_TRUE(scenario.ok());
  auto problem = mapping::PlacementProblem::build(*scenario, *tools, Catalog::default_catalog());
  ASSERT_TRUE(problem.ok());
  auto placed = mapping::place(*problem, {}, scenario->context);
  ASSERT_TRUE(placed.ok());
  expect_same_placement(answer, mapping::placed_json(*problem, *placed));
  service->stop();
}

TEST(ToolsPlace, HeadroomIsTheFractionOfTheSlaLeft) {
  // By hand: 600 ms against an 800 ms bound leaves 200 / 800 = 0.25; 1,000 ms is 0.25 over;
  // 12 req/s against a 10 req/s minimum is 0.2 above it.
  mapping::SlaOutcome lat{"chat", "ttft_ms_p95", 800, 500, 600, false, false};
  EXPECT_DOUBLE_EQ(sla_headroom(lat), 0.25);
  lat.during = 1000;
  EXPECT_DOUBLE_EQ(sla_headroom(lat), -0.25);
  const mapping::SlaOutcome tput{"cam0", "min_throughput", 10, 12, 12, false, false};
  EXPECT_DOUBLE_EQ(sla_headroom(tput), 0.2);
}

}  // namespace
}  // namespace corun::serve::tools_place_test
