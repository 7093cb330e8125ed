#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "corun/core/result.h"
#include "corun/serve/http.h"

namespace corun::serve {

/// @brief The pod annotation that carries a pod's corun model entry (a workload `models` entry
/// as a JSON string, the body `POST /v1/whatif` and `POST /v1/models` take).
inline constexpr const char* kModelAnnotation = "corun.io/model";

/// @brief One GPU node the extender knows: its Kubernetes node name and the base URL of the
/// `corun serve` running on it ("http://10.0.0.7:8080").
struct ExtenderNode {
  std::string name;
  std::string url;
};

/// @brief How `corun extender` runs. Every setting is declared once here; cmd_extender.cc
/// derives its flags from the same names.
struct ExtenderOptions {
  std::vector<ExtenderNode> nodes;
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
/// utility gain. The pod's model entry is its `corun.io/model` annotation. Stateless: every
/// call asks the nodes again. See README.md, "Kubernetes", for the error conventions.
/// Thread-safety: handle() may be called from many threads at once.
class Extender final : public HttpHandler {
 public:
  /// @brief Checks the node names (unique, non-empty) and URLs (`http://HOST[:PORT]`).
  static Result<std::unique_ptr<Extender>> make(ExtenderOptions options);

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

  explicit Extender(ExtenderOptions options, std::vector<Node> nodes);
  [[nodiscard]] HttpResponse error(int status, const BadRequest& e) const;
  [[nodiscard]] std::variant<Args, BadRequest> parse_args(const HttpRequest& req) const;
  /// Asks every candidate node's what-if at once (one thread per node, bounded timeouts).
  [[nodiscard]] std::vector<Verdict> ask(const Args& a) const;
  [[nodiscard]] Verdict ask_one(const std::string& name, const std::string& body) const;
  [[nodiscard]] HttpResponse filter(const HttpRequest& req) const;
  [[nodiscard]] HttpResponse prioritize(const HttpRequest& req) const;

  ExtenderOptions options_;
  std::vector<Node> nodes_;
};

}  // namespace corun::serve
