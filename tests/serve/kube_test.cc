// corun's Kubernetes side in process: the reservation a bind makes (POST /v1/models?if_fits),
// the `pod` member of a registration, the informer's list and watch against an API server
// fixture (kube_api_fixture.h: shapes from k8s.io/api core/v1), serve's registration of its
// node's annotated pods, and the extender's node table from the serve DaemonSet's pods.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <fstream>
#include <thread>
#include <set>
#include <nlohmann/json.hpp>

#include "corun/runtime/twin_source.h"
#include "corun/serve/extender.h"
#include "corun/serve/kube.h"
#include "corun/serve/kube_registrar.h"
#include "corun/serve/node_service.h"
#include "kube_api_fixture.h"
#include "serve_test_util.h"

namespace corun::serve::kube_test {
namespace {

using nlohmann::json;
using testing::big_llm;
using testing::call_service;
using testing::KubeApiFixture;
using testing::reserve;
using testing::TempDir;
using testing::wait_until;

constexpr const char* kToken = "kube-test-serve-token-0123456789";
constexpr const char* kApiToken = "kube-test-api-token";

std::unique_ptr<Service> open_service(const TempDir& dir) {
  ServiceOptions o;
  o.state_dir = dir.path() / "state";
  o.token = kToken;
  o.solver = "greedy";
  o.min_replan_interval_ms = 0;
  auto s = Service::open(Context{}, o, Catalog::default_catalog(), std::make_unique<TwinSource>());
  EXPECT_TRUE(s.ok()) << s.error().what();
  return s ? std::move(*s) : nullptr;
}

KubeClient api_client(const KubeApiFixture& api, const TempDir& dir) {
  const std::string token_file = dir.file("api-token");
  std::ofstream(token_file) << kApiToken << "\n";
  auto c = KubeClient::create({api.url(), token_file, "", 5000});
  EXPECT_TRUE(c.ok()) << c.error().what();
  return *c;
}

json models_of(Service& s) {
  return json::parse(call_service(s, kToken, "GET", "/v1/models").body)["models"];
}

const json* model_named(const json& models, const std::string& name) {
  for (const auto& m : models) {
    if (m.value("name", "") == name) return &m;
  }
  return nullptr;
}

// -------------------------------------------------------------------------------------------
// The reservation and the pod member.

TEST(ServeReservation, IfFitsRefusesAModelNoPlanHoldsAndKeepsTheOthers) {
  TempDir dir;
  auto s = open_service(dir);
  ASSERT_TRUE(s);
  auto r = reserve(*s, kToken, big_llm("a"));
  ASSERT_EQ(r.status, 201) << r.body;
  r = reserve(*s, kToken, big_llm("b"));
  EXPECT_EQ(r.status, 409) << r.body;
  const json err = json::parse(r.body)["error"];
  EXPECT_EQ(err["code"], "does_not_fit");
  EXPECT_NE(err["message"].get<std::string>().find("'b'"), std::string::npos) << err;
  EXPECT_EQ(models_of(*s).size(), 1U);
  // Without the reservation the model joins (a pod already running elsewhere's decision).
  EXPECT_EQ(call_service(*s, kToken, "POST", "/v1/models", big_llm("b")).status, 201);
  EXPECT_EQ(models_of(*s).size(), 2U);
  r = reserve(*s, kToken, big_llm("c"), "yes");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["field"], "if_fits");
  s->stop();
}

TEST(ServeReservation, ThePodMemberIsKeptAndABadOneNamesItsField) {
  TempDir dir;
  auto s = open_service(dir);
  ASSERT_TRUE(s);
  json entry = json::parse(testing::kCam0);
  entry["pod"] = {{"namespace", "default"}, {"name", "cam0-7d9"}, {"uid", "u-1"},
                  {"scheduler", "default-scheduler"}, {"checked", false}};
  auto r = call_service(*s, kToken, "POST", "/v1/models", entry.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  const json listed = models_of(*s);
  const json* m = model_named(listed, "cam0");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ((*m)["pod"]["uid"], "u-1");
  EXPECT_EQ((*m)["pod"]["scheduler"], "default-scheduler");

  const std::vector<std::pair<json, std::string>> bad = {
      {"default/cam1", "pod"},
      {{{"namespace", "default"}, {"name", "cam1"}}, "pod.uid"},
      {{{"namespace", "default"}, {"name", "cam1"}, {"uid", 7}}, "pod.uid"},
      {{{"namespace", "default"}, {"name", ""}, {"uid", "u"}}, "pod.name"},
      {{{"namespace", "default"}, {"name", "cam1"}, {"uid", "u"}, {"node", "n"}}, "pod.node"},
      {{{"namespace", "default"}, {"name", "cam1"}, {"uid", "u"}, {"checked", "yes"}},
       "pod.checked"}};
  for (const auto& [pod, field] : bad) {
    json e = json::parse(testing::kCam1);
    e["pod"] = pod;
    r = call_service(*s, kToken, "POST", "/v1/models", e.dump());
    EXPECT_EQ(r.status, 422) << pod << " " << r.body;
    EXPECT_EQ(json::parse(r.body)["error"]["field"], field) << pod << " " << r.body;
  }
  s->stop();
}

// -------------------------------------------------------------------------------------------
// The informer.

TEST(KubeInformer, ListsWatchesAndListsAgainWhenItsVersionIsCompacted) {
  TempDir dir;
  KubeApiFixture api(kApiToken);
  api.add_node("n1");
  Mutex mutex;
  std::vector<std::string> seen;
  KubeInformerOptions o;
  o.path = "/api/v1/nodes";
  o.retry_ms = 20;
  KubeInformer informer(api_client(api, dir), o, [&](const KubeEvent& e) {
    MutexLock lock(mutex);
    const char* type = e.type == KubeEvent::Type::kAdded      ? "added "
                       : e.type == KubeEvent::Type::kModified ? "modified "
                                                              : "deleted ";
    seen.push_back(type + KubeInformer::key(e.object));
  });
  informer.start();
  ASSERT_TRUE(wait_until([&] { return api.watches("/api/v1/nodes") >= 1; }));
  EXPECT_TRUE(informer.synced());
  api.add_node("n2");
  ASSERT_TRUE(wait_until([&] { return informer.objects().size() == 2; }));
  // Compaction: the next watch from the last version gets 410 and the informer lists again;
  // what changed in between (n1 gone, n3 new) comes out as events.
  api.compact();
  api.delete_node("n1");
  api.add_node("n3");
  api.end_watches();
  ASSERT_TRUE(wait_until([&] {
    const auto objects = informer.objects();
    return objects.size() == 2 && objects.count("n3") == 1 && objects.count("n1") == 0;
  })) << informer.last_error();
  informer.stop();
  MutexLock lock(mutex);
  const std::vector<std::string> want = {"added n1", "added n2", "deleted n1", "added n3"};
  EXPECT_EQ(seen, want);
}

TEST(KubeInformer, RetriesAnApiServerThatRefusesAndSaysWhy) {
  TempDir dir;
  KubeApiFixture api("another-token");
  KubeInformerOptions o;
  o.path = "/api/v1/nodes";
  o.retry_ms = 20;
  KubeInformer informer(api_client(api, dir), o, [](const KubeEvent&) {});
  informer.start();
  ASSERT_TRUE(wait_until([&] { return !informer.last_error().empty(); }));
  EXPECT_NE(informer.last_error().find("401"), std::string::npos) << informer.last_error();
  EXPECT_FALSE(informer.synced());
  informer.stop();
}

// A watch whose connection goes silent (a node or a proxy that died without closing it) is
// given up after the server's timeout plus the margin, and watched again.
TEST(KubeInformer, ASilentWatchIsAbandonedAndWatchedAgain) {
  TempDir dir;
  httplib::Server server;
  std::atomic<int> watches{0};
  std::atomic<bool> done{false};
  server.Get("/api/v1/nodes", [&](const httplib::Request& req, httplib::Response& res) {
    if (!req.has_param("watch")) {
      res.set_content(R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"5"},)"
                      R"("items":[]})",
                      "application/json");
      return;
    }
    ++watches;
    // Headers, then nothing at all until the test ends.
    res.set_chunked_content_provider("application/json", [&](std::size_t, httplib::DataSink&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return !done.load();
    });
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { server.listen_after_bind(); });
  auto client = KubeClient::create({"http://127.0.0.1:" + std::to_string(port), "", "", 2000});
  ASSERT_TRUE(client.ok());
  KubeInformerOptions o;
  o.path = "/api/v1/nodes";
  o.watch_timeout_s = 1;
  o.silence_margin_s = 1;
  o.retry_ms = 20;
  KubeInformer informer(*client, o, [](const KubeEvent&) {});
  informer.start();
  EXPECT_TRUE(wait_until([&] { return watches.load() >= 2; }, 15000)) << watches.load();
  done = true;
  informer.stop();
  server.stop();
  serving.join();
}

// -------------------------------------------------------------------------------------------
// The extender's node table.

TEST(KubeNodeDiscovery, ANodeCountsWhenItRunsAServePodThatIsRunning) {
  const auto pod = [](const std::string& name, const std::string& node, const std::string& phase,
                      int host_port) {
    json p = {{"metadata", {{"name", name}, {"namespace", "corun-system"}}},
              {"spec",
               {{"nodeName", node},
                {"containers",
                 {{{"name", "serve"},
                   {"ports",
                    {{{"name", "http"}, {"containerPort", 8080}, {"hostPort", host_port}}}}}}}}},
              {"status", {{"phase", phase}, {"hostIP", "10.0.0." + name.substr(6)}}}};
    return p;
  };
  const std::map<std::string, json> nodes = {
      {"a", {{"metadata", {{"name", "a"}}}}},
      {"b", {{"metadata", {{"name", "b"}}}}},
      {"c", {{"metadata", {{"name", "c"}}}}},
      {"d", {{"metadata", {{"name", "d"}, {"deletionTimestamp", "2026-01-01T00:00:00Z"}}}}}};
  const std::map<std::string, json> pods = {
      {"corun-system/serve-1", pod("serve-1", "a", "Running", 9001)},
      {"corun-system/serve-2", pod("serve-2", "b", "Pending", 9002)},
      {"corun-system/serve-3", pod("serve-3", "d", "Running", 9003)},
      {"corun-system/serve-4", pod("serve-4", "gone", "Running", 9004)}};
  KubeDiscoveryOptions o;
  auto table = KubeNodeDiscovery::nodes_of(nodes, pods, o);
  ASSERT_EQ(table.size(), 1U);
  EXPECT_EQ(table[0].name, "a");
  EXPECT_EQ(table[0].url, "http://10.0.0.1:9001");
  o.use_pod_ip = true;
  json with_ip = pods.at("corun-system/serve-1");
  with_ip["status"]["podIP"] = "192.168.1.5";
  table = KubeNodeDiscovery::nodes_of(nodes, {{"corun-system/serve-1", with_ip}}, o);
  ASSERT_EQ(table.size(), 1U);
  EXPECT_EQ(table[0].url, "http://192.168.1.5:8080");
}

// -------------------------------------------------------------------------------------------
// Serve's registration of its node's pods.

class KubeRegistrarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_ = std::make_unique<KubeApiFixture>(kApiToken);
    service_ = open_service(dir_);
    ASSERT_TRUE(service_);
    KubeRegistrarOptions o;
    o.node = "node-a";
    o.resync_ms = 50;
    o.reservation_s = 5;
    o.informer.retry_ms = 20;
    registrar_ =
        std::make_unique<KubeRegistrar>(*service_, kToken, api_client(*api_, dir_), o);
    registrar_->start();
    ASSERT_TRUE(wait_until([&] { return api_->watches("/api/v1/pods") >= 1; }));
  }
  void TearDown() override {
    if (registrar_) registrar_->stop();
    if (service_) service_->stop();
  }
  bool has_model(const std::string& name) {
    const json listed = models_of(*service_);
    return model_named(listed, name) != nullptr;
  }
  TempDir dir_;
  std::unique_ptr<KubeApiFixture> api_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<KubeRegistrar> registrar_;
};

TEST_F(KubeRegistrarTest, RegistersTheNodesAnnotatedPodsAndRemovesThemWhenTheyGo) {
  const std::string uid = api_->add_pod("default", "cam0-5f7", {}, {{kModelAnnotation, testing::kCam0}},
                                        "node-a", "default-scheduler");
  api_->add_pod("default", "cam1-elsewhere", {}, {{kModelAnnotation, testing::kCam1}}, "node-b");
  api_->add_pod("default", "plain", {}, {}, "node-a");
  ASSERT_TRUE(wait_until([&] { return has_model("cam0"); }));
  const json listed = models_of(*service_);
  const json* m = model_named(listed, "cam0");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ((*m)["pod"]["uid"], uid);
  EXPECT_EQ((*m)["pod"]["name"], "cam0-5f7");
  // Placed by another scheduler: registered all the same, flagged as not checked.
  EXPECT_EQ((*m)["pod"]["scheduler"], "default-scheduler");
  EXPECT_EQ((*m)["pod"]["checked"], false);
  EXPECT_EQ(models_of(*service_).size(), 1U);
  // A model a serving stack POSTed (no pod) is never touched.
  ASSERT_EQ(call_service(*service_, kToken, "POST", "/v1/models", testing::kChat).status, 201);
  // Ended, then deleted: removed at the first.
  api_->set_pod_phase("default", "cam0-5f7", "Succeeded");
  ASSERT_TRUE(wait_until([&] { return !has_model("cam0"); }));
  api_->delete_pod("default", "cam0-5f7");
  // An unnamed entry takes the pod's name.
  json unnamed = json::parse(testing::kCam1);
  unnamed.erase("name");
  api_->add_pod("default", "det-x", {}, {{kModelAnnotation, unnamed.dump()}}, "node-a");
  ASSERT_TRUE(wait_until([&] { return has_model("det-x"); }));
  api_->delete_pod("default", "det-x");
  ASSERT_TRUE(wait_until([&] { return !has_model("det-x"); }));
  EXPECT_TRUE(has_model("chat"));
}

TEST_F(KubeRegistrarTest, ABadAnnotationIsAWarningEventOnceAndNoModel) {
  api_->add_pod("default", "broken", {}, {{kModelAnnotation, "{not json"}}, "node-a");
  api_->add_pod("default", "unknown-model", {},
                {{kModelAnnotation, R"({"name":"u","model":"yolo99","demand":{"fps":5}})"}},
                "node-a");
  const auto warnings = [&](const std::string& pod) {
    int n = 0;
    for (const auto& e : api_->events()) {
      if (e["involvedObject"]["name"] == pod && e["type"] == "Warning" &&
          e["reason"] == "CorunBadAnnotation") {
        ++n;
      }
    }
    return n;
  };
  ASSERT_TRUE(wait_until([&] { return warnings("broken") == 1 && warnings("unknown-model") == 1; }));
  for (const auto& e : api_->events()) {
    if (e["involvedObject"]["name"] != "unknown-model") continue;
    // The spec reader's own message: the field, and the nearest catalog name.
    EXPECT_NE(e["message"].get<std::string>().find("yolo99"), std::string::npos) << e;
  }
  // Further resyncs do not repeat the warning; a corrected annotation registers the model.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(warnings("broken"), 1);
  api_->set_pod_annotation("default", "broken", kModelAnnotation, testing::kCam1);
  ASSERT_TRUE(wait_until([&] { return has_model("cam1"); }));
  EXPECT_EQ(models_of(*service_).size(), 1U);
}

TEST_F(KubeRegistrarTest, AReservationWhosePodNeverArrivesExpires) {
  // What the extender's bind registers before it creates the Binding.
  json entry = json::parse(testing::kCam0);
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  entry["pod"] = {{"namespace", "default"}, {"name", "cam0-1"},      {"uid", "never"},
                  {"checked", true},        {"reserved_unix_ms", now_ms}};
  ASSERT_EQ(call_service(*service_, kToken, "POST", "/v1/models", entry.dump()).status, 201);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(has_model("cam0"));  // within its reservation (5 s here)
  ASSERT_TRUE(wait_until([&] { return !has_model("cam0"); }, 15000));
}

// A node of two GPUs (corun serve --gpus 2 --kube-node): the registrar goes through the node's
// API as through one GPU's; each model lands on a GPU, a reservation is checked on the GPU the
// node chose, and a deleted pod's model leaves its GPU.
TEST(KubeRegistrarNode, ANodeOfTwoGpusRegistersReservesAndRemoves) {
  TempDir dir;
  KubeApiFixture api(kApiToken);
  ServiceOptions o;
  o.state_dir = dir.path() / "state";
  o.token = kToken;
  o.solver = "greedy";
  o.min_replan_interval_ms = 0;
  auto opened = NodeService::open(Context{}, o, 2, {}, Catalog::default_catalog(),
                                  []() -> Result<std::unique_ptr<PredictorSource>> {
                                    return std::unique_ptr<PredictorSource>(
                                        std::make_unique<TwinSource>());
                                  });
  ASSERT_TRUE(opened.ok()) << opened.error().what();
  NodeService& node = **opened;
  // Two 7B models at fp16: one per GPU; a third fits neither, and its reservation is refused.
  std::set<int> gpus;
  for (const char* name : {"a", "b"}) {
    const HttpResponse r = reserve(node, kToken, big_llm(name));
    ASSERT_EQ(r.status, 201) << r.body;
    gpus.insert(json::parse(r.body)["gpu"].get<int>());
  }
  EXPECT_EQ(gpus, (std::set<int>{0, 1}));
  const HttpResponse refused = reserve(node, kToken, big_llm("c"));
  EXPECT_EQ(refused.status, 409) << refused.body;

  KubeRegistrarOptions ro;
  ro.node = "node-a";
  ro.resync_ms = 50;
  ro.informer.retry_ms = 20;
  KubeRegistrar registrar(node, kToken, api_client(api, dir), ro);
  registrar.start();
  api.add_pod("default", "cam0-1", {}, {{kModelAnnotation, testing::kCam0}}, "node-a");
  const auto listed = [&] {
    return json::parse(call_service(node, kToken, "GET", "/v1/models").body)["models"];
  };
  ASSERT_TRUE(wait_until([&] { return model_named(listed(), "cam0") != nullptr; }));
  const json all = listed();
  EXPECT_EQ((*model_named(all, "cam0"))["pod"]["name"], "cam0-1");
  api.delete_pod("default", "cam0-1");
  ASSERT_TRUE(wait_until([&] { return model_named(listed(), "cam0") == nullptr; }));
  EXPECT_EQ(listed().size(), 2U);  // the models registered without a pod stay
  registrar.stop();
  node.stop();
}

}  // namespace
}  // namespace corun::serve::kube_test
