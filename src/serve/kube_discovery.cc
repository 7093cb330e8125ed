// Kubernetes discovery for `corun extender --kube`: the extender's node table follows the
// cluster's nodes and the pods of the corun serve DaemonSet.

#include "corun/serve/extender.h"

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "corun/core/strings.h"
#include "extender_internal.h"

namespace corun::serve {

using detail::member;
using nlohmann::json;

KubeNodeDiscovery::KubeNodeDiscovery(Extender& extender, KubeClient client,
                                     KubeDiscoveryOptions options)
    : extender_(extender), options_(std::move(options)) {
  KubeInformerOptions nodes = options_.informer;
  nodes.path = "/api/v1/nodes";
  KubeInformerOptions pods = options_.informer;
  pods.path = "/api/v1/namespaces/" + options_.serve_namespace + "/pods?" +
              kube_query("labelSelector", options_.serve_selector);
  nodes_ = std::make_unique<KubeInformer>(client, nodes, [this](const KubeEvent&) { update(); });
  pods_ = std::make_unique<KubeInformer>(client, pods, [this](const KubeEvent&) { update(); });
}

KubeNodeDiscovery::~KubeNodeDiscovery() { stop(); }

void KubeNodeDiscovery::start() {
  nodes_->start();
  pods_->start();
}

void KubeNodeDiscovery::stop() {
  nodes_->stop();
  pods_->stop();
}

std::vector<ExtenderNode> KubeNodeDiscovery::nodes_of(const std::map<std::string, json>& nodes,
                                                      const std::map<std::string, json>& pods,
                                                      const KubeDiscoveryOptions& options) {
  std::map<std::string, std::string> url_of;  // node name -> its serve
  for (const auto& [key, object] : pods) {
    const PodInfo p = read_pod(object);
    if (p.node.empty() || p.phase != "Running" || p.deleting) continue;
    const std::string& ip = options.use_pod_ip ? p.pod_ip : p.host_ip;
    if (ip.empty()) continue;
    int port = options.serve_port;
    const json* spec = member(object, "spec");
    const json* containers = spec != nullptr ? member(*spec, "containers") : nullptr;
    if (containers != nullptr && containers->is_array()) {
      for (const json& c : *containers) {
        const json* ports = member(c, "ports");
        if (ports == nullptr || !ports->is_array()) continue;
        for (const json& cp : *ports) {
          if (!cp.is_object() || cp.value("name", std::string()) != options.serve_port_name) {
            continue;
          }
          const char* which = options.use_pod_ip ? "containerPort" : "hostPort";
          if (cp.contains(which) && cp[which].is_number_integer()) port = cp[which].get<int>();
        }
      }
    }
    const std::string host = ip.find(':') != std::string::npos ? "[" + ip + "]" : ip;
    url_of[p.node] = "http://" + host + ":" + std::to_string(port);
  }
  std::vector<ExtenderNode> out;
  for (const auto& [name, object] : nodes) {
    const json* meta = member(object, "metadata");
    if (meta != nullptr && member(*meta, "deletionTimestamp") != nullptr &&
        !member(*meta, "deletionTimestamp")->is_null()) {
      continue;
    }
    const auto it = url_of.find(name);
    if (it != url_of.end()) out.push_back({name, it->second});
  }
  return out;
}

void KubeNodeDiscovery::update() {
  MutexLock lock(update_mutex_);  // the two informers' threads: one table at a time
  if (!nodes_->synced() || !pods_->synced()) return;
  const auto now = nodes_of(nodes_->objects(), pods_->objects(), options_);
  const auto before = extender_.nodes();
  const auto same = [](const std::vector<ExtenderNode>& a, const std::vector<ExtenderNode>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i].name != b[i].name || a[i].url != b[i].url) return false;
    }
    return true;
  };
  if (same(now, before)) return;
  if (auto ok = extender_.set_nodes(now); !ok) {
    std::fprintf(stderr, "corun extender: kubernetes discovery: %s\n", ok.error().what().c_str());
    return;
  }
  std::vector<std::string> shown;
  for (const auto& n : now) shown.push_back(n.name + "=" + n.url);
  std::fprintf(stderr, "corun extender: nodes now %s\n",
               shown.empty() ? "(none)" : join(shown, " ").c_str());
  std::fflush(stderr);
}

}  // namespace corun::serve
