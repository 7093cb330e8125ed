// corun extender: the kube-scheduler extender protocol over the nodes' POST /v1/whatif.
//
// The request and answer shapes follow the upstream Go types in k8s.io/kube-scheduler,
// extender/v1/types.go (ExtenderArgs{Pod *v1.Pod, Nodes *v1.NodeList, NodeNames *[]string},
// ExtenderFilterResult{Nodes, NodeNames, FailedNodes, FailedAndUnresolvableNodes, Error},
// HostPriorityList = []HostPriority{Host string, Score int64}). Those structs carry no json
// tags, so Go's encoder writes the field names as declared ("Pod", "NodeNames") and a nil
// pointer as null; v1.Pod and v1.NodeList carry lowercase tags ("metadata", "items"). The golden
// requests below are written by hand from those types the way encoding/json would marshal them.
#include "corun/serve/extender.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "corun/catalog/catalog.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/server.h"
#include "corun/serve/service.h"
#include "serve_test_util.h"

namespace corun::serve::extender_test {
namespace {

using nlohmann::json;
using testing::raw_http;
using testing::request;
using testing::TempDir;

constexpr const char* kToken = "extender-token-0123456789abcdef";

// The model the pod asks for: 8 ms at p95 holds next to a light load, not next to a heavy one
// (the twin predicts 3.6 ms alone at imgsz=640 and 4.1 ms at best next to two YOLO11x at 30 fps;
// with the twin's planned margin of 102 % only the first is within 8 ms).
constexpr const char* kEntry =
    R"({"name":"det","model":"yolo11s","knobs":{"imgsz":[320,640]},"demand":{"fps":30},)"
    R"("sla":{"latency_ms_p95":8}})";
// The light node's load.
constexpr const char* kLight =
    R"({"name":"cam0","model":"yolo11n","knobs":{"imgsz":[320]},"demand":{"fps":5},)"
    R"("sla":{"latency_ms_p95":200}})";
// The heavy node's load: two large detectors at 30 fps, whose own SLAs hold.
constexpr const char* kHeavy1 =
    R"({"name":"big1","model":"yolo11x","knobs":{"imgsz":[640]},"demand":{"fps":30},)"
    R"("sla":{"latency_ms_p95":500}})";
constexpr const char* kHeavy2 =
    R"({"name":"big2","model":"yolo11x","knobs":{"imgsz":[640]},"demand":{"fps":30},)"
    R"("sla":{"latency_ms_p95":500}})";

// One `corun serve` node in-process on a loopback ephemeral port.
struct Node {
  TempDir dir;
  std::unique_ptr<Service> service;
  std::unique_ptr<HttpServer> server;

  explicit Node(const std::vector<std::string>& entries) {
    ServiceOptions o;
    o.state_dir = dir.path();
    o.token = kToken;
    o.solver = "greedy";
    o.min_replan_interval_ms = 0;
    auto s =
        Service::open(Context{}, o, Catalog::default_catalog(), std::make_unique<TwinSource>());
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    if (!s.ok()) return;
    service = std::move(*s);
    ServerOptions so;
    so.port = 0;
    server = std::make_unique<HttpServer>(*service, so);
    EXPECT_TRUE(server->start().ok());
    for (const auto& e : entries) {
      HttpRequest r{"POST", "/v1/models", {}, std::string("Bearer ") + kToken, "application/json",
                    e};
      EXPECT_EQ(service->handle(r).status, 201) << e;
    }
    // The plan of every registration (the planner may fold several into one decision).
    for (std::int64_t seen = 0; !entries.empty();) {
      EXPECT_TRUE(service->wait_for_plan(seen, 30000));
      seen = service->plan_id();
      HttpRequest g{"GET", "/v1/plan", {}, "", "", ""};
      const json p = json::parse(service->handle(g).body, nullptr, false);
      if (p.contains("models") && p["models"].size() == entries.size()) break;
    }
  }
  ~Node() {
    if (server) server->stop();
    if (service) service->stop();
  }
  [[nodiscard]] std::string url() const {
    return "http://127.0.0.1:" + std::to_string(server->port());
  }
};

// A loopback port nothing listens on: bound by a socket that never listens, then closed (the
// kernel does not hand an ephemeral port out again at once).
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A Pod as Go's encoder writes a v1.Pod with this annotation (or none when `annotation` is
// null), lowercase json tags of k8s.io/api/core/v1.
json pod(const json& annotation) {
  json meta = {{"name", "det-7f9c"},
               {"namespace", "default"},
               {"uid", "6c1a4f6e-4a8b-4f0e-9d3e-2b1c0a9f8e7d"},
               {"creationTimestamp", nullptr}};
  if (!annotation.is_null()) meta["annotations"] = {{kModelAnnotation, annotation}};
  return {{"metadata", meta},
          {"spec",
           {{"containers", json::array({{{"name", "det"},
                                         {"image", "registry.example/det:1"},
                                         {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}})},
            {"schedulerName", "default-scheduler"}}},
          {"status", json::object()}};
}

// ExtenderArgs with NodeNames (nodeCacheCapable: true): Nodes is a nil pointer, encoded null.
json args_by_name(const json& p, const std::vector<std::string>& names) {
  return {{"Pod", p}, {"Nodes", nullptr}, {"NodeNames", names}};
}

// ExtenderArgs with a NodeList (nodeCacheCapable: false): NodeNames is nil.
json args_by_list(const json& p, const std::vector<std::string>& names) {
  json items = json::array();
  for (const auto& n : names) {
    items.push_back({{"metadata",
                      {{"name", n},
                       {"uid", "node-" + n},
                       {"labels", {{"kubernetes.io/hostname", n}}},
                       {"creationTimestamp", nullptr}}},
                     {"spec", json::object()},
                     {"status", {{"capacity", {{"nvidia.com/gpu", "1"}}}}}});
  }
  return {{"Pod", p},
          {"Nodes", {{"metadata", {{"resourceVersion", "42"}}}, {"items", items}}},
          {"NodeNames", nullptr}};
}

class ExtenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    light_ = std::make_unique<Node>(std::vector<std::string>{kLight});
    heavy_ = std::make_unique<Node>(std::vector<std::string>{kHeavy1, kHeavy2});
    ASSERT_TRUE(light_->server && heavy_->server);
    ExtenderOptions o;
    o.nodes = {{"gpu-light", light_->url()},
               {"gpu-heavy", heavy_->url()},
               {"gpu-down", "http://127.0.0.1:" + std::to_string(closed_port())}};
    o.node_connect_timeout_ms = 1000;
    o.node_timeout_ms = 10000;
    auto e = Extender::make(o);
    ASSERT_TRUE(e.ok()) << e.error().what();
    extender_ = std::move(*e);
    ServerOptions so;
    so.port = 0;
    server_ = std::make_unique<HttpServer>(*extender_, so);
    ASSERT_TRUE(server_->start().ok());
  }
  void TearDown() override {
    if (server_) server_->stop();
  }
  testing::RawResponse post(const std::string& path, const std::string& body) {
    return raw_http(server_->port(), request("POST", path, body), 30);
  }
  std::unique_ptr<Node> light_, heavy_;
  std::unique_ptr<Extender> extender_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(ExtenderTest, FilterKeepsTheNodeThatHoldsEverySlaAndSaysWhyOthersFail) {
  const auto r =
      post("/filter",
           args_by_name(pod(kEntry), {"gpu-heavy", "gpu-light", "gpu-down", "cpu-only"}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json res = r.json();
  EXPECT_EQ(res["Error"], "");
  EXPECT_EQ(res["NodeNames"], json::array({"gpu-light"})) << res.dump(2);
  EXPECT_TRUE(res["Nodes"].is_null());
  const json& failed = res["FailedNodes"];
  ASSERT_EQ(failed.size(), 3U) << res.dump(2);
  const std::string heavy = failed["gpu-heavy"];
  EXPECT_NE(heavy.find("would break SLA"), std::string::npos) << heavy;
  EXPECT_NE(heavy.find("latency_ms_p95 of det"), std::string::npos) << heavy;
  EXPECT_NE(heavy.find("next to the other models"), std::string::npos) << heavy;
  EXPECT_NE(failed["gpu-down"].get<std::string>().find("unreachable node"), std::string::npos);
  EXPECT_NE(failed["cpu-only"].get<std::string>().find("unknown node"), std::string::npos);
  EXPECT_TRUE(res["FailedAndUnresolvableNodes"].empty());
  // The nodes were asked, not changed.
  HttpRequest g{"GET", "/v1/models", {}, "", "", ""};
  EXPECT_EQ(json::parse(light_->service->handle(g).body)["models"].size(), 1U);
  EXPECT_EQ(json::parse(heavy_->service->handle(g).body)["models"].size(), 2U);
}

TEST_F(ExtenderTest, FilterWithANodeListAnswersWithTheNodesThatPass) {
  const auto r = post("/filter", args_by_list(pod(kEntry), {"gpu-heavy", "gpu-light"}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json res = r.json();
  ASSERT_TRUE(res["Nodes"].is_object()) << res.dump(2);
  ASSERT_EQ(res["Nodes"]["items"].size(), 1U);
  // The node object comes back as it was sent.
  EXPECT_EQ(res["Nodes"]["items"][0],
            args_by_list(pod(kEntry), {"gpu-light"})["Nodes"]["items"][0]);
  EXPECT_TRUE(res["NodeNames"].is_null());
  EXPECT_TRUE(res["FailedNodes"].contains("gpu-heavy"));
}

TEST_F(ExtenderTest, PrioritizeRanksTheLightNodeAboveTheFullOne) {
  const auto r =
      post("/prioritize", args_by_name(pod(kEntry), {"gpu-heavy", "gpu-light", "gpu-down"}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json list = r.json();
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 3U);
  std::map<std::string, std::int64_t> score;
  for (const auto& h : list) score[h["Host"]] = h["Score"];
  EXPECT_EQ(score["gpu-light"], Extender::kMaxScore);
  EXPECT_EQ(score["gpu-heavy"], 0);
  EXPECT_EQ(score["gpu-down"], 0);
  EXPECT_EQ(list[0]["Host"], "gpu-heavy");  // the request's order
}

TEST_F(ExtenderTest, KeysAreMatchedAsGoDecodesThem) {
  // Lowercase (the tags third-party copies of the types use) and odd case: Go's decoder
  // matches struct fields case-insensitively; annotation names (map keys) stay exact.
  const json p = pod(kEntry);
  json lower = {{"pod", p}, {"nodenames", {"gpu-light"}}};
  json odd = {{"POD", {{"Metadata", p["metadata"]}}}, {"nodeNames", {"gpu-light"}}};
  for (const json& body : {lower, odd}) {
    const auto r = post("/filter", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["NodeNames"], json::array({"gpu-light"})) << body.dump();
  }
  json list = args_by_list(p, {"gpu-light"});
  list["nodes"] = list["Nodes"];
  list.erase("Nodes");
  list["nodes"]["Items"] = list["nodes"]["items"];
  list["nodes"].erase("items");
  const auto r = post("/prioritize", list.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()[0]["Host"], "gpu-light");
}

// Bad requests. Convention (README, "Kubernetes"): a body that is not ExtenderArgs is HTTP 400
// with a JSON error naming the field, on both verbs. A well-formed request for a pod whose
// corun.io/model annotation is missing or wrong is answered on /filter with the protocol's own
// `Error` (the scheduler reports it on the pod; an HTTP error's body would be lost) and on
// /prioritize (HostPriorityList has no error member) with HTTP 400 naming the field.
TEST_F(ExtenderTest, BadRequestsNameTheField) {
  struct Case {
    std::string name;
    std::string body;
    std::string field;
  };
  const json ok_pod = pod(kEntry);
  const std::vector<Case> malformed = {
      {"not JSON", "{\"Pod\":", ""},
      {"array", "[]", ""},
      {"no nodes", json({{"Pod", ok_pod}}).dump(), "NodeNames"},
      {"NodeNames not an array", json({{"Pod", ok_pod}, {"NodeNames", "gpu-light"}}).dump(),
       "NodeNames"},
      {"node name not a string", json({{"Pod", ok_pod}, {"NodeNames", {"a", 7}}}).dump(),
       "NodeNames[1]"},
      {"Nodes not a list", json({{"Pod", ok_pod}, {"Nodes", 3}}).dump(), "Nodes"},
      {"node without a name",
       json({{"Pod", ok_pod}, {"Nodes", {{"items", {{{"metadata", json::object()}}}}}}}).dump(),
       "Nodes.items[0].metadata.name"},
      {"no pod", json({{"NodeNames", {"gpu-light"}}}).dump(), "Pod"},
      {"pod not an object", json({{"Pod", "det"}, {"NodeNames", {"gpu-light"}}}).dump(), "Pod"},
      {"annotations not an object",
       json({{"Pod", {{"metadata", {{"annotations", 1}}}}}, {"NodeNames", {"gpu-light"}}}).dump(),
       "Pod.metadata.annotations"},
      {"annotation not a string",
       args_by_name(pod(json::object({{"name", "x"}})), {"gpu-light"}).dump(),
       "Pod.metadata.annotations[corun.io/model]"},
  };
  for (const auto& c : malformed) {
    for (const std::string verb : {"/filter", "/prioritize"}) {
      SCOPED_TRACE(c.name + " " + verb);
      const auto r = post(verb, c.body);
      EXPECT_EQ(r.status, 400) << r.body;
      const json j = r.json();
      ASSERT_TRUE(j.contains("error")) << r.body;
      EXPECT_FALSE(j["error"].value("message", "").empty());
      if (!c.field.empty()) {
        EXPECT_EQ(j["error"].value("field", ""), c.field) << r.body;
      }
    }
  }
  const std::string annotation = "Pod.metadata.annotations[corun.io/model]";
  const std::vector<Case> pod_level = {
      {"no annotation", args_by_name(pod(nullptr), {"gpu-light"}).dump(), annotation},
      // The JSON breaks where the value of "name" should be.
      {"annotation not JSON", args_by_name(pod("{\"name\":"), {"gpu-light"}).dump(),
       annotation + ".name"},
      {"annotation not an object", args_by_name(pod("[1]"), {"gpu-light"}).dump(), annotation},
      {"annotation with a bad field",
       args_by_name(pod(R"({"name":"det","model":"yolo11s","demand":{"fps":"many"}})"),
                    {"gpu-light"})
           .dump(),
       annotation + ".demand.fps"},
  };
  for (const auto& c : pod_level) {
    SCOPED_TRACE(c.name);
    const auto f = post("/filter", c.body);
    ASSERT_EQ(f.status, 200) << f.body;
    const std::string error = f.json()["Error"];
    EXPECT_EQ(error.rfind(c.field + ":", 0), 0U) << error;
    EXPECT_TRUE(f.json()["NodeNames"].is_null());
    const auto p = post("/prioritize", c.body);
    EXPECT_EQ(p.status, 400) << p.body;
    EXPECT_EQ(p.json()["error"].value("field", ""), c.field) << p.body;
  }
  // Wrong routes and methods, and the extender is still healthy.
  EXPECT_EQ(raw_http(server_->port(), request("GET", "/filter")).status, 405);
  EXPECT_EQ(raw_http(server_->port(), request("POST", "/unbind", "{}")).status, 404);
  // ExtenderBindingArgs without its members: a 400 naming the first; a well-formed one on an
  // extender without API access: the protocol's Error says what to configure.
  const auto b = post("/bind", "{}");
  EXPECT_EQ(b.status, 400);
  EXPECT_EQ(b.json()["error"]["field"], "PodName") << b.body;
  const auto unconfigured = post(
      "/bind", R"({"PodName":"p","PodNamespace":"default","PodUID":"u","Node":"gpu-light"})");
  EXPECT_EQ(unconfigured.status, 200);
  EXPECT_NE(unconfigured.json()["Error"].get<std::string>().find("--kube"), std::string::npos)
      << unconfigured.body;
  EXPECT_EQ(raw_http(server_->port(), request("GET", "/healthz")).status, 200);
}

// Ranking "pack": an idle node and the light node both hold the pod's SLA; by gain alone the
// idle one (no co-runner to slow) ranks at least as high, with --rank pack the busy one ranks
// above it (a pod opens an idle GPU only when no busy one holds it). The what-if says which
// node's GPU is idle.
TEST(ExtenderRanking, PackPutsTheBusyNodeThatHoldsTheSlaAboveTheIdleOne) {
  Node idle({});
  Node light({kLight});
  ASSERT_TRUE(idle.server && light.server);
  // Over HTTP, one node after the other: the first requests a process serves initialise
  // cpp-httplib's statics, which ThreadSanitizer cannot see guarded (scripts/tsan.supp) when
  // two servers meet them at once.
  const auto whatif = [](const Node& n) {
    return raw_http(n.server->port(), request("POST", "/v1/whatif", kEntry), 30).json();
  };
  const json idle_answer = whatif(idle);
  const json light_answer = whatif(light);
  EXPECT_EQ(idle_answer["opens_gpu"], true) << idle_answer.dump();
  EXPECT_EQ(light_answer["opens_gpu"], false) << light_answer.dump();
  ASSERT_EQ(idle_answer["fits"], true);
  ASSERT_EQ(light_answer["fits"], true);
  auto scores = [&](ExtenderOptions::Ranking ranking) {
    ExtenderOptions o;
    o.nodes = {{"gpu-idle", idle.url()}, {"gpu-light", light.url()}};
    o.node_timeout_ms = 10000;
    o.ranking = ranking;
    auto e = Extender::make(o);
    EXPECT_TRUE(e.ok());
    HttpRequest r{"POST", "/prioritize", {}, "", "application/json",
                  args_by_name(pod(kEntry), {"gpu-idle", "gpu-light"}).dump()};
    const auto res = (*e)->handle(r);
    EXPECT_EQ(res.status, 200) << res.body;
    std::map<std::string, std::int64_t> score;
    for (const auto& h : json::parse(res.body)) score[h["Host"]] = h["Score"];
    return score;
  };
  auto gain = scores(ExtenderOptions::Ranking::kGain);
  EXPECT_GE(gain["gpu-idle"], gain["gpu-light"]);
  auto pack = scores(ExtenderOptions::Ranking::kPack);
  EXPECT_EQ(pack["gpu-light"], Extender::kMaxScore);
  EXPECT_EQ(pack["gpu-idle"], 1);
}

TEST(ExtenderOptions, RefusesNodesItCannotAsk) {
  const auto make = [](std::vector<ExtenderNode> nodes) {
    ExtenderOptions o;
    o.nodes = std::move(nodes);
    return Extender::make(o);
  };
  EXPECT_FALSE(make({{"a", "https://10.0.0.1:8080"}}).ok());
  EXPECT_FALSE(make({{"a", "10.0.0.1:8080"}}).ok());
  EXPECT_FALSE(make({{"a", "http://10.0.0.1:99999"}}).ok());
  EXPECT_FALSE(make({{"a", "http://10.0.0.1:8080/x"}}).ok());
  EXPECT_FALSE(make({{"", "http://10.0.0.1:8080"}}).ok());
  EXPECT_FALSE(make({{"a", "http://h:1"}, {"a", "http://h:2"}}).ok());
  EXPECT_TRUE(make({{"a", "http://corun.gpu-a.svc:8080/"}, {"b", "http://h"}}).ok());
}

}  // namespace
}  // namespace corun::serve::extender_test
