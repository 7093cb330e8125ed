// deploy/: every YAML document parses (yaml-cpp), has the kinds corun's Kubernetes setup needs,
// and the KubeSchedulerConfiguration's extender stanza names routes `corun extender` serves.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "corun/serve/extender.h"
#include "corun/serve/json_input.h"
#include "corun/serve/openapi.h"

namespace corun::serve::deploy_test {
namespace {

namespace fs = std::filesystem;
const fs::path kDeploy = fs::path(CORUN_SOURCE_DIR) / "deploy";

struct Doc {
  fs::path file;
  YAML::Node node;
};

std::vector<Doc> all_documents() {
  std::vector<Doc> out;
  for (const auto& e : fs::recursive_directory_iterator(kDeploy)) {
    const auto ext = e.path().extension();
    if (!e.is_regular_file() || (ext != ".yaml" && ext != ".yml")) continue;
    for (const auto& n : YAML::LoadAllFromFile(e.path().string())) out.push_back({e.path(), n});
  }
  return out;
}

std::vector<std::string> args_of(const YAML::Node& workload) {
  std::vector<std::string> out;
  for (const auto& a : workload["spec"]["template"]["spec"]["containers"][0]["args"]) {
    out.push_back(a.as<std::string>());
  }
  return out;
}

std::string flag(const std::vector<std::string>& args, const std::string& name) {
  for (std::size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == name) return args[i + 1];
  }
  return "";
}

// The extender answers the verb's route: not 404 (an empty body is a 400 of the route).
int status_of(Extender& e, const std::string& verb) {
  HttpRequest r{"POST", "/" + verb, {}, "", "application/json", "{}"};
  return e.handle(r).status;
}

TEST(Deploy, EveryDocumentParsesWithAKnownKind) {
  const auto docs = all_documents();
  ASSERT_GE(docs.size(), 10U);
  const std::set<std::string> known = {
      "Namespace", "ServiceAccount",     "DaemonSet", "Deployment",  "Service",
      "ConfigMap", "ClusterRoleBinding", "Role",      "RoleBinding", "KubeSchedulerConfiguration",
      "Pod",       "ResourceClaim",      "ClusterRole"};
  std::map<std::string, int> kinds;
  for (const auto& d : docs) {
    SCOPED_TRACE(d.file.string());
    ASSERT_TRUE(d.node.IsMap());
    ASSERT_TRUE(d.node["apiVersion"] && d.node["kind"]);
    const std::string kind = d.node["kind"].as<std::string>();
    EXPECT_TRUE(known.count(kind)) << kind;
    ++kinds[kind];
    if (kind != "KubeSchedulerConfiguration") {
      EXPECT_FALSE(d.node["metadata"]["name"].as<std::string>().empty());
    }
  }
  for (const char* k : {"DaemonSet", "Deployment", "Service", "ServiceAccount", "ConfigMap",
                        "ClusterRoleBinding", "KubeSchedulerConfiguration"}) {
    EXPECT_GE(kinds[k], 1) << k;
  }
}

TEST(Deploy, SchedulerConfigurationsCallTheExtenderItsServiceExposes) {
  const auto docs = all_documents();
  std::vector<YAML::Node> configs;
  YAML::Node service, extender, daemonset;
  for (const auto& d : docs) {
    const std::string kind = d.node["kind"].as<std::string>();
    const std::string name = d.node["metadata"] ? d.node["metadata"]["name"].as<std::string>() : "";
    if (kind == "KubeSchedulerConfiguration") configs.push_back(d.node);
    // A ConfigMap that carries a scheduler configuration: the text parses to one too.
    if (kind == "ConfigMap") {
      for (const auto& kv : d.node["data"]) {
        const YAML::Node inner = YAML::Load(kv.second.as<std::string>());
        if (inner["kind"] && inner["kind"].as<std::string>() == "KubeSchedulerConfiguration") {
          configs.push_back(inner);
        }
      }
    }
    if (kind == "Service" && name == "corun-extender") service = d.node;
    if (kind == "Deployment" && name == "corun-extender") extender = d.node;
    if (kind == "DaemonSet" && name == "corun-serve") daemonset = d.node;
  }
  ASSERT_EQ(configs.size(), 2U);  // scheduler-config.yaml and the ConfigMap of scheduler.yaml
  ASSERT_TRUE(service && extender && daemonset);
  // The two copies of the configuration say the same.
  EXPECT_EQ(yaml_to_json(configs[0]), yaml_to_json(configs[1]));

  auto made = Extender::make({});
  ASSERT_TRUE(made.ok());
  Extender& e = **made;
  ASSERT_EQ(status_of(e, "no-such-verb"), 404);
  const int service_port = service["spec"]["ports"][0]["port"].as<int>();
  const auto ext_args = args_of(extender);
  EXPECT_EQ(ext_args.at(0), "extender");
  EXPECT_EQ(flag(ext_args, "--port"), std::to_string(service_port));
  EXPECT_EQ(
      extender["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"].as<int>(),
      service_port);
  for (const auto& c : configs) {
    EXPECT_EQ(c["apiVersion"].as<std::string>(), "kubescheduler.config.k8s.io/v1");
    ASSERT_EQ(c["extenders"].size(), 1U);
    const YAML::Node x = c["extenders"][0];
    const std::string filter = x["filterVerb"].as<std::string>();
    const std::string prioritize = x["prioritizeVerb"].as<std::string>();
    EXPECT_EQ(filter, "filter");
    EXPECT_EQ(prioritize, "prioritize");
    EXPECT_NE(status_of(e, filter), 404);
    EXPECT_NE(status_of(e, prioritize), 404);
    // The extender binds (reservation, then Binding) and knows the nodes itself.
    EXPECT_EQ(x["bindVerb"].as<std::string>(), "bind");
    EXPECT_NE(status_of(e, x["bindVerb"].as<std::string>()), 404);
    EXPECT_TRUE(x["nodeCacheCapable"].as<bool>());
    EXPECT_FALSE(x["ignorable"].as<bool>());
    EXPECT_GT(x["weight"].as<int>(), 0);
    // urlPrefix: the extender's Service, in its namespace, on its port.
    EXPECT_EQ(x["urlPrefix"].as<std::string>(),
              "http://" + service["metadata"]["name"].as<std::string>() + "." +
                  service["metadata"]["namespace"].as<std::string>() +
                  ".svc:" + std::to_string(service_port));
  }
  // Each node's corun serve listens on the port the extender's --node URLs use.
  const auto serve_args = args_of(daemonset);
  EXPECT_EQ(serve_args.at(0), "serve");
  // Each node's serve reads its own GPU, not one device written for every node.
  EXPECT_EQ(flag(serve_args, "--device"), "auto");
  // Its catalog overlay is the optional ConfigMap corun-catalog, mounted where --catalog reads.
  const auto pod = daemonset["spec"]["template"]["spec"];
  std::string catalog_volume;
  for (const auto& m : pod["containers"][0]["volumeMounts"]) {
    if (m["mountPath"].as<std::string>() == flag(serve_args, "--catalog")) {
      catalog_volume = m["name"].as<std::string>();
    }
  }
  ASSERT_FALSE(catalog_volume.empty()) << "no volume mounted at --catalog";
  bool optional_config_map = false;
  for (const auto& v : pod["volumes"]) {
    if (v["name"].as<std::string>() != catalog_volume) continue;
    optional_config_map = v["configMap"] && v["configMap"]["name"].as<std::string>() ==
                                                "corun-catalog" &&
                          v["configMap"]["optional"].as<bool>();
  }
  EXPECT_TRUE(optional_config_map) << "the catalog volume is the optional ConfigMap corun-catalog";
  // The extender finds each node's serve (--kube): the DaemonSet's pods by the labels and
  // namespace it looks for, at the hostPort of their port named http, which is serve's --port.
  EXPECT_NE(std::find(ext_args.begin(), ext_args.end(), "--kube"), ext_args.end());
  EXPECT_TRUE(flag(ext_args, "--node").empty());
  const KubeDiscoveryOptions discovery;
  EXPECT_EQ(daemonset["metadata"]["namespace"].as<std::string>(), discovery.serve_namespace);
  const auto eq = discovery.serve_selector.find('=');
  EXPECT_EQ(daemonset["spec"]["template"]["metadata"]["labels"]
                [discovery.serve_selector.substr(0, eq)]
                    .as<std::string>(""),
            discovery.serve_selector.substr(eq + 1));
  std::string host_port;
  for (const auto& p : pod["containers"][0]["ports"]) {
    if (p["name"].as<std::string>() == discovery.serve_port_name) {
      host_port = p["hostPort"].as<std::string>();
    }
  }
  EXPECT_EQ(host_port, flag(serve_args, "--port"));
  // Registration: serve follows the pods of the node it runs on (the downward API).
  EXPECT_EQ(flag(serve_args, "--kube-node"), "$(NODE_NAME)");
  std::string node_name_from;
  for (const auto& v : pod["containers"][0]["env"]) {
    if (v["name"].as<std::string>() == "NODE_NAME") {
      node_name_from = v["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>();
    }
  }
  EXPECT_EQ(node_name_from, "spec.nodeName");
  // The bind verb's serve token is the Secret the nodes' serve reads theirs from.
  const auto ext_pod = extender["spec"]["template"]["spec"];
  const std::string token_file = flag(ext_args, "--serve-token-file");
  ASSERT_FALSE(token_file.empty());
  std::string token_secret;
  for (const auto& m : ext_pod["containers"][0]["volumeMounts"]) {
    if (token_file.rfind(m["mountPath"].as<std::string>() + "/", 0) != 0) continue;
    for (const auto& v : ext_pod["volumes"]) {
      if (v["name"].as<std::string>() == m["name"].as<std::string>() && v["secret"]) {
        token_secret = v["secret"]["secretName"].as<std::string>();
      }
    }
  }
  EXPECT_EQ(token_secret, "corun-token");
}

// RBAC grants what the code asks of the API and nothing more: the extender lists and watches
// nodes and (in corun-system) pods, gets a pod and creates its Binding; serve lists and watches
// pods and creates Events.
TEST(Deploy, RolesGrantOnlyTheRequestsCorunMakes) {
  std::map<std::string, std::set<std::string>> granted;  // "account resource" -> verbs
  std::map<std::string, std::string> role_of;            // role kind/name -> service account
  std::map<std::string, YAML::Node> roles;
  for (const auto& d : all_documents()) {
    const std::string kind = d.node["kind"].as<std::string>();
    if (kind == "ClusterRole" || kind == "Role") {
      roles[kind + "/" + d.node["metadata"]["name"].as<std::string>()] = d.node;
    }
    if (kind == "ClusterRoleBinding" || kind == "RoleBinding") {
      const std::string ref =
          d.node["roleRef"]["kind"].as<std::string>() + "/" +
          d.node["roleRef"]["name"].as<std::string>();
      for (const auto& sub : d.node["subjects"]) role_of[ref] = sub["name"].as<std::string>();
    }
  }
  for (const auto& [ref, role] : roles) {
    const std::string account = role_of[ref];
    if (account != "corun-extender" && account != "corun-serve") continue;
    for (const auto& rule : role["rules"]) {
      for (const auto& res : rule["resources"]) {
        for (const auto& verb : rule["verbs"]) {
          granted[account + " " + res.as<std::string>()].insert(verb.as<std::string>());
        }
      }
    }
  }
  using Verbs = std::set<std::string>;
  const std::map<std::string, Verbs> want = {
      {"corun-extender nodes", {"list", "watch"}},
      {"corun-extender pods", {"get", "list", "watch"}},
      {"corun-extender pods/binding", {"create"}},
      {"corun-serve pods", {"list", "watch"}},
      {"corun-serve events", {"create"}}};
  EXPECT_EQ(granted, want);
}

TEST(Deploy, TheExamplePodCarriesAModelEntry) {
  for (const auto& d : all_documents()) {
    if (d.node["kind"].as<std::string>() != "Pod") continue;
    const auto text = d.node["metadata"]["annotations"][kModelAnnotation].as<std::string>();
    const auto entry = parse_json_input(text);
    ASSERT_TRUE(std::holds_alternative<nlohmann::json>(entry)) << text;
    EXPECT_TRUE(std::get<nlohmann::json>(entry).contains("sla"));
    EXPECT_EQ(d.node["spec"]["schedulerName"].as<std::string>(), "corun-scheduler");
  }
}

}  // namespace
}  // namespace corun::serve::deploy_test
