// End-to-end tests of the real `corun serve` binary as a subprocess: register, breach,
// re-plan, kill -9, restart; and a kill -9 in the middle of load that must lose nothing that
// was acknowledged. Bounded: every wait has a deadline and every child is reaped.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

#include "../core/child_process.h"
#include "serve_test_util.h"

namespace corun::serve::process_test {
namespace {

using corun::testing::ChildOptions;
using corun::testing::ChildProcess;
using nlohmann::json;
using testing::kCam0;
using testing::kCam1;
using testing::kChat;
using testing::raw_http;
using testing::request;
using testing::TempDir;

constexpr const char* kToken = "process-test-token-0123456789";

// `corun serve` as a child process; killed with SIGKILL and reaped when it goes out of scope.
class ServerProcess {
 public:
  ServerProcess(const std::filesystem::path& dir, const std::string& solver,
                const std::vector<std::string>& extra = {}) {
    const auto state = dir / "state";
    const auto token_file = dir / "token";
    port_file_ = dir / "port";
    std::filesystem::remove(port_file_);
    std::ofstream(token_file) << kToken << "\n";
    log_ = dir / "serve.log";
    std::vector<std::string> args = {
        CORUN_BINARY, "serve",       "--state",           state.string(), "--port",
        "0",          "--port-file", port_file_.string(), "--token-file", token_file.string(),
        "--solver",   solver,        "--min-replan-ms",   "50",           "--flush-ms",
        "200"};
    args.insert(args.end(), extra.begin(), extra.end());
    ChildOptions options;
    options.stdout_path = options.stderr_path = log_;
    process_ = ChildProcess(std::move(args), options);
    // Wait for the port file (written after bind), at most 30 s.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(port_file_);
      if (in >> port_ && port_ > 0) break;
      if (!process_.running()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  [[nodiscard]] int port() const { return port_; }
  // It wrote its port and has been neither seen ended nor killed since.
  [[nodiscard]] bool running() const { return port_ > 0 && !process_.exit_status(); }
  [[nodiscard]] std::string log() const {
    std::ifstream in(log_);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  void kill9() { process_.stop(SIGKILL); }

 private:
  ChildProcess process_;
  int port_ = 0;
  std::filesystem::path port_file_;
  std::filesystem::path log_;
};

json get(int port, const std::string& path) { return raw_http(port, request("GET", path)).json(); }

// Polls GET /v1/plan until `pred` holds or 60 s pass.
template <class Pred>
json wait_plan(int port, Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  json p;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto r = raw_http(port, request("GET", "/v1/plan"));
    if (r.status == 200) {
      p = r.json();
      if (p.is_object() && pred(p)) return p;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return p;
}

TEST(ServeProcess, BreachReplansAndKill9RestartKeepsModelsAndPlan) {
  std::string why;
  if (testing::binary_skip_reason(why)) GTEST_SKIP() << why;
  TempDir dir;
  json models, plan;
  {
    ServerProcess server(dir.path(), "ga");
    ASSERT_TRUE(server.running()) << server.log();
    const int port = server.port();
    for (const char* m : {kCam0, kCam1, kChat}) {
      const auto r = raw_http(port, request("POST", "/v1/models", m, kToken));
      ASSERT_EQ(r.status, 201) << r.body << server.log();
    }
    const json first = wait_plan(port, [](const json& p) { return p["models"].size() == 3; });
    ASSERT_EQ(first["models"].size(), 3U) << first.dump() << server.log();
    const std::int64_t id = first["id"];

    // cam0's SLA is 50 ms p95; report 120 ms under the plan in force.
    const auto t = raw_http(port, request("POST", "/v1/telemetry",
                                          json({{"model", "cam0"},
                                                {"plan_id", id},
                                                {"latency_ms_p95", 120.0},
                                                {"throughput", 30.0}})
                                              .dump(),
                                          kToken));
    ASSERT_EQ(t.status, 202) << t.body;
    EXPECT_EQ(t.json()["breaches"], 1);
    // The breach asks for a decision (which may keep the plan, and its id).
    const std::int64_t decided = first["decision"];
    plan =
        wait_plan(port, [&](const json& p) { return p["decision"].get<std::int64_t>() > decided; });
    ASSERT_GT(plan["decision"].get<std::int64_t>(), decided) << server.log();
    ASSERT_GE(plan["id"].get<std::int64_t>(), id);
    EXPECT_EQ(plan["reason"], "breach cam0");
    // What the telemetry taught: cam0 is predicted slower than the plan before the breach said.
    EXPECT_GT(plan["learning"]["cam0"]["shared_error"].get<double>(), 0.3);
    EXPECT_EQ(plan["learning"]["cam0"]["observations"], 1);
    models = get(port, "/v1/models");
    ASSERT_EQ(models["models"].size(), 3U);
    server.kill9();
  }
  ServerProcess again(dir.path(), "ga");
  ASSERT_TRUE(again.running()) << again.log();
  EXPECT_EQ(get(again.port(), "/v1/models"), models);
  EXPECT_EQ(get(again.port(), "/v1/plan"), plan);
  const json history = get(again.port(), "/v1/plan/history?limit=1000");
  json decided = plan;
  decided.erase("learning");  // live state: the history keeps the plans as decided
  decided.erase("catalog");   // the catalog the service runs with, not part of the decision
  EXPECT_EQ(history["plans"].back(), decided);
  EXPECT_EQ(get(again.port(), "/healthz")["status"], "ok");
}

// A node workload (`gpus: 2`) makes the service a node: the node planner places the workload's
// models (c0 pinned to GPU 1), each GPU plans its own, and after kill -9 the service restarts
// from the state alone with every model on its GPU.
TEST(ServeProcess, ANodeWorkloadServesEachGpuAndSurvivesKill9) {
  std::string why;
  if (testing::binary_skip_reason(why)) GTEST_SKIP() << why;
  TempDir dir;
  const auto file = dir.path() / "node.yaml";
  std::ofstream(file) << "device: a100-80gb\n"
                         "gpus: 2\n"
                         "models:\n"
                         "  - {name: c0, model: yolo11n, knobs: {imgsz: [320, 640]}, demand: "
                         "{fps: 15}, sla: {latency_ms_p95: 200}, gpu: 1}\n"
                         "  - {name: c1, model: yolo11n, knobs: {imgsz: [320, 640]}, demand: "
                         "{fps: 15}, sla: {latency_ms_p95: 200}}\n"
                         "  - {name: c2, model: yolo11s, knobs: {imgsz: [320, 640]}, demand: "
                         "{fps: 15}, sla: {latency_ms_p95: 200}}\n";
  json plan;
  {
    ServerProcess server(dir.path(), "ga", {"--workload", file.string()});
    ASSERT_TRUE(server.running()) << server.log();
    plan = wait_plan(server.port(), [](const json& p) { return p["models"].size() == 3; });
    ASSERT_EQ(plan["models"].size(), 3U) << plan.dump() << server.log();
    EXPECT_EQ(plan["gpus"], 2);
    EXPECT_EQ(plan["models"]["c0"]["gpu"], 1);
    for (const auto& [name, m] : plan["models"].items()) {
      EXPECT_TRUE(m.contains("gpu") && m.contains("plan_id")) << name;
    }
    EXPECT_EQ(get(server.port(), "/healthz")["gpus"], 2);
    server.kill9();
  }
  // The state alone: no --workload.
  ServerProcess again(dir.path(), "ga");
  ASSERT_TRUE(again.running()) << again.log();
  const json after = wait_plan(again.port(), [](const json& p) { return p["models"].size() == 3; });
  for (const auto& [name, m] : plan["models"].items()) {
    EXPECT_EQ(after["models"][name]["gpu"], m["gpu"]) << name;
  }
  const json models = get(again.port(), "/v1/models");
  EXPECT_EQ(models["models"].size(), 3U);
}

TEST(ServeProcess, Kill9DuringLoadLosesNoAcknowledgedRegistrationOrPlan) {
  std::string why;
  if (testing::binary_skip_reason(why)) GTEST_SKIP() << why;
  TempDir dir;
  std::set<std::string> acked_models;
  std::map<std::int64_t, json> seen_plans;
  {
    ServerProcess server(dir.path(), "greedy");
    ASSERT_TRUE(server.running()) << server.log();
    const int port = server.port();
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::thread registrar([&] {
      for (int i = 0; i < 24 && !stop.load(); ++i) {
        const std::string name = "cam" + std::to_string(i);
        const json m = {{"name", name},
                        {"model", "yolo11n"},
                        {"knobs", {{"imgsz", {320, 640}}}},
                        {"demand", {{"fps", 10}}},
                        {"sla", {{"latency_ms_p95", 100}}}};
        const auto r = raw_http(port, request("POST", "/v1/models", m.dump(), kToken), 5);
        if (r.status == 201) {
          std::lock_guard lock(mu);
          acked_models.insert(name);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
      }
    });
    std::thread load([&] {
      int i = 0;
      while (!stop.load()) {
        const std::string m = "cam" + std::to_string(i++ % 4);
        (void)raw_http(port,
                       request("POST", "/v1/telemetry",
                               json({{"model", m}, {"latency_ms_p95", 20.0}}).dump(), kToken),
                       5);
        const auto p = raw_http(port, request("GET", "/v1/plan"), 5);
        if (p.status == 200) {
          // The kill can cut an answer after its status line: only a whole plan counts as seen.
          const json j = p.json();
          if (!j.is_object() || !j.contains("id")) continue;
          std::lock_guard lock(mu);
          seen_plans[j["decision"].get<std::int64_t>()] = j;
        }
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    server.kill9();  // mid-flight: requests in progress are cut off
    stop = true;
    registrar.join();
    load.join();
  }
  ASSERT_FALSE(acked_models.empty());
  ASSERT_FALSE(seen_plans.empty());
  ServerProcess again(dir.path(), "greedy");
  ASSERT_TRUE(again.running()) << again.log();
  std::set<std::string> stored;
  const json listed = get(again.port(), "/v1/models");
  ASSERT_TRUE(listed.contains("models")) << listed.dump() << again.log();
  for (const auto& m : listed["models"]) stored.insert(m["name"]);
  for (const auto& name : acked_models) {
    ASSERT_TRUE(stored.count(name)) << name << " was lost; listed " << listed.dump() << "\n"
                                    << again.log();
  }
  std::map<std::int64_t, json> history;
  const json served_history = get(again.port(), "/v1/plan/history?limit=1000");
  for (const auto& p : served_history["plans"]) {
    history[p["decision"].get<std::int64_t>()] = p;
  }
  for (const auto& [decision, p] : seen_plans) {
    ASSERT_TRUE(history.count(decision)) << "decision " << decision << " was served, then lost";
    json stored_plan = p;
    stored_plan.erase("learning");  // live state: the history keeps the plans as decided
    stored_plan.erase("catalog");   // the catalog the service runs with
    EXPECT_EQ(history[decision], stored_plan);
  }
  EXPECT_GE(get(again.port(), "/v1/plan")["decision"].get<std::int64_t>(),
            seen_plans.rbegin()->first);
}

}  // namespace
}  // namespace corun::serve::process_test
