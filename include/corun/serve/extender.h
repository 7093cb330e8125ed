#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "corun/core/mutex.h"
#include "corun/core/result.h"
#include "corun/export/export.h"
#include "corun/serve/http.h"
#include "corun/serve/kube.h"

namespace corun::serve {

/// @brief The pod annotation that carries a pod's corun model entry (export/export.h).
using exporting::kModelAnnotation;

/// @brief One GPU node the extender knows: its Kubernetes node name and the base URL of the
/// `corun serve` running on it ("http://10.0.0.7:8080").
struct ExtenderNode {
  std::string name;
  std::string url;
};

/// @brief How `corun extender` runs. Every setting is declared once here; cmd_extender.cc
/// derives its flags from the same names.
struct ExtenderOptions {
  /// The nodes given as flags (`--node NAME=URL`); with Kubernetes discovery
  /// (KubeNodeDiscovery) the node table follows the cluster instead.
  std::vector<ExtenderNode> nodes;
  /// The bearer token of the nodes' `corun serve` (the Secret corun-token): the bind verb
  /// registers the pod's model with it. "" = no bind verb.
  std::string serve_token;
  /// A node that does not accept the connection within this is "unreachable".
  int node_connect_timeout_ms = 1000;
  /// A node that does not answer its what-if within this is "unreachable" (a what-if is one
  /// solver search: milliseconds with greedy, up to a second or two with ga on many models).
  int node_timeout_ms = 5000;
  /// Largest ExtenderArgs body: without nodeCacheCapable the scheduler sends whole Node objects.
  std::size_t max_body_bytes = 8 * 1024 * 1024;
  /// How /prioritize ranks the nodes that fit: by predicted utility gain alone ("gain"), or
  /// nodes whose GPU already runs models first, then by gain ("pack": a pod opens an idle GPU
  /// only when no busy one holds every SLA with it; `corun eval cluster`'s corun-pack rule).
  enum class Ranking { kGain, kPack };
  Ranking ranking = Ranking::kGain;
};

/// @brief A kube-scheduler extender (the HTTP protocol of k8s.io/kube-scheduler
/// extender/v1/types.go) over the `corun serve` of each GPU node: `POST /filter` keeps the
/// candidate nodes whose `POST /v1/whatif` says the pod's model fits with every SLA held and
/// names why each other node failed; `POST /prioritize` scores the nodes 0..10 by the predicted
/// utility gain; `POST /bind` (ExtenderBindingArgs) reserves the pod's place and binds it:
/// it registers the model on the chosen node's serve only if it still fits
/// (`POST /v1/models?if_fits=true`), then creates the pod's Binding through the API, and
/// removes the registration again when the Binding fails. The pod's model entry is its
/// `corun.io/model` annotation (named after the pod when it has no `name`). Filter and
/// prioritize keep no state: every call asks the nodes again. See README.md, "Kubernetes",
/// for the error conventions.
/// Thread-safety: handle() and set_nodes() may be called from many threads at once.
class Extender final : public HttpHandler {
 public:
  /// @brief Checks the node names (unique, non-empty) and URLs (`http://HOST[:PORT]`). `kube`:
  /// the API server the bind verb reads pods from and creates Bindings through (none: the bind
  /// verb answers that it is not configured).
  static Result<std::unique_ptr<Extender>> make(ExtenderOptions options,
                                                std::optional<KubeClient> kube = std::nullopt);

  /// @brief Replaces the node table (what Kubernetes discovery found); the same checks as
  /// make(). A request in flight keeps the table it started with.
  Status set_nodes(const std::vector<ExtenderNode>& nodes);
  /// @brief The node table now, by name.
  [[nodiscard]] std::vector<ExtenderNode> nodes() const;

  HttpResponse handle(const HttpRequest& req) override;
  HttpResponse transport_error(int status, const std::string& path, const std::string& reason,
                               const std::string& field) override;

  /// @brief The highest score of the extender protocol (extender/v1 MaxExtenderPriority).
  static constexpr int kMaxScore = 10;

 private:
  struct Node {
    std::string name;
    std::string host;
    int port = 80;
  };
  /// What one node said of the pod's model.
  struct Verdict {
    bool fits = false;
    bool opens_gpu = false;  ///< the node's GPU runs no model yet
    double gain = 0;
    std::string reason;          ///< why it does not fit ("" when it does)
    bool entry_refused = false;  ///< the node refused the entry itself (4xx naming a field)
    std::string field;           ///< the field of the entry it blamed
  };
  /// The parts of ExtenderArgs the extender reads.
  struct Args {
    nlohmann::json entry;            ///< the model entry from the annotation
    std::vector<std::string> names;  ///< candidate node names, in the request's order
    nlohmann::json node_items;       ///< Nodes.items when the request had Nodes
    bool by_name = false;            ///< the request had NodeNames
  };
  struct BadRequest {
    std::string code;
    std::string message;
    std::string field;
    bool pod_level = false;  ///< the request is well formed, the pod's annotation is not
  };

  Extender(ExtenderOptions options, std::optional<KubeClient> kube);
  static Result<std::map<std::string, Node>> check_nodes(const std::vector<ExtenderNode>& nodes);
  [[nodiscard]] std::optional<Node> node(const std::string& name) const;
  [[nodiscard]] HttpResponse error(int status, const BadRequest& e) const;
  [[nodiscard]] std::variant<Args, BadRequest> parse_args(const HttpRequest& req) const;
  /// The model entry of a Pod object: its annotation, named after the pod when unnamed.
  [[nodiscard]] static std::variant<nlohmann::json, BadRequest> entry_of(
      const nlohmann::json& pod);
  /// Asks every candidate node's what-if at once (one thread per node, bounded timeouts).
  [[nodiscard]] std::vector<Verdict> ask(const Args& a) const;
  [[nodiscard]] Verdict ask_one(const std::string& name, const std::string& body) const;
  [[nodiscard]] HttpResponse filter(const HttpRequest& req) const;
  [[nodiscard]] HttpResponse prioritize(const HttpRequest& req) const;
  [[nodiscard]] HttpResponse bind(const HttpRequest& req) const;
  /// One bind's state, from its arguments to the Binding (extender.cc).
  struct BindCall;
  /// Reads ExtenderBindingArgs into `call`; the HTTP error of a malformed request.
  [[nodiscard]] std::optional<HttpResponse> read_bind_args(const HttpRequest& req,
                                                           BindCall& call) const;
  /// Finds the node's serve and reads the pod and its model entry; the bind's Error when it
  /// cannot.
  [[nodiscard]] std::optional<std::string> find_bind_pod(BindCall& call) const;
  /// Registers the model on the node only if a plan still holds every SLA with it; the bind's
  /// Error when the node refuses it.
  [[nodiscard]] std::optional<std::string> reserve_on_node(BindCall& call) const;
  /// Whether the model the node holds under the entry's name is this pod's own reservation
  /// (a retried bind).
  [[nodiscard]] bool holds_reservation(const BindCall& call) const;
  /// Creates the pod's Binding, giving the reservation back when it fails; the bind's Error
  /// ("" when bound).
  [[nodiscard]] std::string create_binding(const BindCall& call) const;

  ExtenderOptions options_;
  std::optional<KubeClient> kube_;
  mutable Mutex nodes_mutex_;
  std::map<std::string, Node> nodes_ CORUN_GUARDED_BY(nodes_mutex_);
};

/// @brief Where the extender finds the nodes' `corun serve` in the cluster.
struct KubeDiscoveryOptions {
  std::string serve_namespace = "corun-system";  ///< the namespace of the serve DaemonSet
  std::string serve_selector = "app.kubernetes.io/name=corun-serve";  ///< its pods' labels
  /// The serve container's port of this name gives the port (its hostPort when the address is
  /// the host's, else its containerPort); `serve_port` when no port has the name.
  std::string serve_port_name = "http";
  int serve_port = 8080;
  bool use_pod_ip = false;  ///< reach serve at the pod's IP, not the node's (hostPort)
  KubeInformerOptions informer;  ///< watch time-outs and retries (the paths are set here)
};

/// @brief Kubernetes discovery for `corun extender --kube`: lists and watches the nodes and
/// the serve DaemonSet's pods, and keeps the extender's node table equal to the nodes that
/// exist and run a serve pod that is Running with an address: a node added, drained or
/// deleted changes the table without a restart. Thread-safety: start() and stop() from one
/// thread.
class KubeNodeDiscovery {
 public:
  KubeNodeDiscovery(Extender& extender, KubeClient client, KubeDiscoveryOptions options);
  ~KubeNodeDiscovery();
  KubeNodeDiscovery(const KubeNodeDiscovery&) = delete;
  KubeNodeDiscovery& operator=(const KubeNodeDiscovery&) = delete;
  void start();
  void stop();

  /// @brief The node table for these Node and serve Pod objects (keyed as KubeInformer keys
  /// them). Pure function.
  static std::vector<ExtenderNode> nodes_of(const std::map<std::string, nlohmann::json>& nodes,
                                            const std::map<std::string, nlohmann::json>& pods,
                                            const KubeDiscoveryOptions& options);

 private:
  void update();
  Extender& extender_;
  KubeDiscoveryOptions options_;
  Mutex update_mutex_;
  std::unique_ptr<KubeInformer> nodes_;
  std::unique_ptr<KubeInformer> pods_;
};

}  // namespace corun::serve
