// End to end on a fixture Kubernetes API server (kube_api_fixture.h): two real `corun serve
// --kube-node` processes and a real `corun extender --kube-api` follow the cluster. A node
// appears and is used without a restart; the extender's bind registers an annotated pod's model
// on its node before the Binding is created; two pods competing for the last headroom: one
// binds, the other's bind fails; a failed Binding's registration is rolled back; a deleted
// pod's model is removed; a bad annotation is a Warning event. Bounded: every wait has a
// deadline, and every child is killed and reaped.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "../core/child_process.h"
#include "corun/serve/extender.h"
#include "kube_api_fixture.h"
#include "serve_test_util.h"

namespace corun::serve::kube_e2e_test {
namespace {

using corun::testing::ChildOptions;
using corun::testing::ChildProcess;
using nlohmann::json;
using testing::big_llm;
using testing::KubeApiFixture;
using testing::raw_http;
using testing::request;
using testing::TempDir;
using testing::wait_until;

constexpr const char* kServeToken = "kube-e2e-serve-token-0123456789";
constexpr const char* kApiToken = "kube-e2e-api-token";

// A corun verb as a child process (its output in `log`), listening on a port it writes to a
// port file; SIGKILLed and reaped at scope exit.
class Child {
 public:
  Child(const std::filesystem::path& dir, const std::string& name, std::vector<std::string> args) {
    const auto port_file = dir / (name + ".port");
    log_ = dir / (name + ".log");
    args.insert(args.begin(), CORUN_BINARY);
    args.insert(args.end(), {"--port", "0", "--port-file", port_file.string()});
    ChildOptions options;
    options.stdout_path = options.stderr_path = log_;
    process_ = ChildProcess(std::move(args), options);
    // Until it wrote its port, or ended first.
    wait_until(
        [&] {
          std::ifstream in(port_file);
          if (!process_.running()) return true;
          return static_cast<bool>(in >> port_) && port_ > 0;
        },
        30000);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  [[nodiscard]] int port() const { return port_; }
  // It wrote its port and had not ended before.
  [[nodiscard]] bool running() const { return port_ > 0 && !process_.exit_status(); }
  [[nodiscard]] std::string log() const {
    std::ifstream in(log_);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

 private:
  ChildProcess process_;
  int port_ = 0;
  std::filesystem::path log_;
};

// The serve DaemonSet's pod on `node`: its container's port "http" is the hostPort the
// extender reaches it at (deploy/kubernetes/serve-daemonset.yaml).
json serve_pod(const std::string& node, int port) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", "corun-serve-" + node},
            {"namespace", "corun-system"},
            {"labels", {{"app.kubernetes.io/name", "corun-serve"}}}}},
          {"spec",
           {{"nodeName", node},
            {"schedulerName", "default-scheduler"},
            {"containers",
             {{{"name", "serve"},
               {"image", "corun:latest"},
               {"ports",
                {{{"name", "http"},
                  {"containerPort", 8080},
                  {"hostPort", port},
                  {"protocol", "TCP"}}}}}}}}},
          {"status", {{"phase", "Running"}, {"hostIP", "127.0.0.1"}, {"podIP", "10.1.0.2"}}}};
}

json get(int port, const std::string& path, const std::string& token = "") {
  return raw_http(port, request("GET", path, "", token)).json();
}

std::vector<std::string> extender_nodes(int port) {
  const json h = get(port, "/healthz");
  return h.is_object() && h.contains("node_names") ? h["node_names"].get<std::vector<std::string>>()
                                                   : std::vector<std::string>{};
}

json models(int port) {
  const json m = get(port, "/v1/models");
  return m.is_object() && m.contains("models") ? m["models"] : json::array();
}

bool has_model(int port, const std::string& name) {
  for (const auto& m : models(port)) {
    if (m.value("name", "") == name) return true;
  }
  return false;
}

std::string bind(int port, const std::string& pod, const std::string& uid,
                 const std::string& node) {
  const json args = {
      {"PodName", pod}, {"PodNamespace", "default"}, {"PodUID", uid}, {"Node", node}};
  const auto r = raw_http(port, request("POST", "/bind", args.dump()), 60);
  if (r.status != 200) return "HTTP " + std::to_string(r.status) + " " + r.body;
  return r.json().value("Error", std::string("no Error member"));
}

TEST(KubeEndToEnd, NodesComeBindsReserveAndPodsGo) {
  std::string why;
  if (testing::binary_skip_reason(why)) GTEST_SKIP() << why;
  TempDir dir;
  KubeApiFixture api(kApiToken);
  std::ofstream(dir.file("api-token")) << kApiToken << "\n";
  std::ofstream(dir.file("serve-token")) << kServeToken << "\n";
  const auto serve = [&](const std::string& node) {
    return std::make_unique<Child>(
        dir.path(), "serve-" + node,
        std::vector<std::string>{"serve", "--state", dir.file("state-" + node), "--token-file",
                                 dir.file("serve-token"), "--solver", "greedy",
                                 "--min-replan-ms", "20", "--kube-node", node, "--kube-api",
                                 api.url(), "--kube-token-file", dir.file("api-token")});
  };
  auto serve_a = serve("node-a");
  ASSERT_TRUE(serve_a->running()) << serve_a->log();
  Child extender(dir.path(), "extender",
                 {"extender", "--kube-api", api.url(), "--kube-token-file", dir.file("api-token"),
                  "--serve-token-file", dir.file("serve-token")});
  ASSERT_TRUE(extender.running()) << extender.log();
  const int ext = extender.port();

  // Nodes come: node-a with its serve pod; then node-b, used without restarting anything.
  api.add_node("node-a");
  api.add_pod_object(serve_pod("node-a", serve_a->port()));
  ASSERT_TRUE(wait_until([&] { return extender_nodes(ext).size() == 1; })) << extender.log();
  auto serve_b = serve("node-b");
  ASSERT_TRUE(serve_b->running()) << serve_b->log();
  api.add_node("node-b");
  api.add_pod_object(serve_pod("node-b", serve_b->port()));
  ASSERT_TRUE(wait_until([&] { return extender_nodes(ext).size() == 2; })) << extender.log();
  std::string entry = big_llm("chat-1");
  const std::string uid1 =
      api.add_pod("default", "chat-1", {}, {{kModelAnnotation, entry}}, "");
  json args = {{"Pod", *api.pod("default", "chat-1")},
               {"Nodes", nullptr},
               {"NodeNames", {"node-a", "node-b"}}};
  auto r = raw_http(ext, request("POST", "/filter", args.dump()), 60);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["NodeNames"], json({"node-a", "node-b"})) << r.body;

  // Bind registers first: when the Binding reaches the API server, node-b's serve already
  // holds the model, reserved for this pod.
  std::promise<json> at_binding;
  api.on_binding([&, done = false](const json&) mutable {
    if (!done) at_binding.set_value(models(serve_b->port()));
    done = true;
  });
  ASSERT_EQ(bind(ext, "chat-1", uid1, "node-b"), "") << extender.log();
  auto seen = at_binding.get_future();
  ASSERT_EQ(seen.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const json held = seen.get();
  ASSERT_EQ(held.size(), 1U) << held;
  EXPECT_EQ(held[0]["name"], "chat-1");
  EXPECT_EQ(held[0]["pod"]["uid"], uid1);
  EXPECT_EQ(held[0]["pod"]["checked"], true);
  EXPECT_EQ(api.pod("default", "chat-1")->at("spec").value("nodeName", ""), "node-b");
  api.on_binding(nullptr);

  // The last headroom of node-a: two pods, one binds, the other's bind fails.
  const std::string uid2 =
      api.add_pod("default", "chat-2", {}, {{kModelAnnotation, big_llm("chat-2")}}, "");
  const std::string uid3 =
      api.add_pod("default", "chat-3", {}, {{kModelAnnotation, big_llm("chat-3")}}, "");
  auto first = std::async(std::launch::async, [&] { return bind(ext, "chat-2", uid2, "node-a"); });
  auto second =
      std::async(std::launch::async, [&] { return bind(ext, "chat-3", uid3, "node-a"); });
  const std::string e2 = first.get();
  const std::string e3 = second.get();
  EXPECT_TRUE((e2.empty()) != (e3.empty())) << e2 << " | " << e3;
  const std::string& refused = e2.empty() ? e3 : e2;
  EXPECT_NE(refused.find("does_not_fit"), std::string::npos) << refused;
  EXPECT_EQ(models(serve_a->port()).size(), 1U);

  // A Binding the API server refuses: the reservation is rolled back.
  const std::string uid4 =
      api.add_pod("default", "cam-4", {}, {{kModelAnnotation, testing::kCam0}}, "");
  api.fail_next_binding(500);
  const std::string e4 = bind(ext, "cam-4", uid4, "node-b");
  EXPECT_NE(e4.find("rolled back"), std::string::npos) << e4;
  EXPECT_FALSE(has_model(serve_b->port(), "cam0"));

  // A deleted pod's model is removed from its node.
  api.delete_pod("default", "chat-1");
  ASSERT_TRUE(wait_until([&] { return !has_model(serve_b->port(), "chat-1"); }))
      << serve_b->log();

  // A bad annotation on a pod another scheduler placed: a Warning event, and serve goes on.
  api.add_pod("default", "broken", {}, {{kModelAnnotation, "{\"model\": 7}"}}, "node-b",
              "default-scheduler");
  ASSERT_TRUE(wait_until([&] {
    for (const auto& e : api.events()) {
      if (e["involvedObject"]["name"] == "broken" && e["reason"] == "CorunBadAnnotation") {
        return true;
      }
    }
    return false;
  })) << serve_b->log();
  EXPECT_EQ(get(serve_b->port(), "/healthz")["status"], "ok");

  // A node goes: the extender forgets it.
  api.delete_node("node-b");
  ASSERT_TRUE(wait_until([&] { return extender_nodes(ext) == std::vector<std::string>{"node-a"}; }))
      << extender.log();
  EXPECT_NE(bind(ext, "cam-4", uid4, "node-b").find("unknown node"), std::string::npos);
}

}  // namespace
}  // namespace corun::serve::kube_e2e_test
