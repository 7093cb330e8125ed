#pragma once

// A small in-process Kubernetes API server for end-to-end tests of corun's Kubernetes
// integration (serve/kube.h): the part of the core/v1 REST API that corun's informers, its
// binder and its event recorder use, over real HTTP on 127.0.0.1, with a state the test drives
// (add a node, add a pod, change an annotation, compact the history) and records of what the
// client did (bindings, events) to assert on.
//
// Shapes follow the API reference (https://kubernetes.io/docs/reference/kubernetes-api/) and
// the Go types they are generated from: k8s.io/api/core/v1/types.go (Pod, Node, Binding,
// Event), k8s.io/apimachinery/pkg/apis/meta/v1/types.go (Status, ListMeta) and
// k8s.io/apimachinery/pkg/apis/meta/v1/watch.go (WatchEvent). The objects are built from the
// golden templates in tests/data/kube/ (see the README.md there).
//
// Served (every request needs "Authorization: Bearer <token>", else 401):
//   GET  /api/v1/nodes, /api/v1/pods, /api/v1/namespaces/{ns}/pods   lists, or watches with
//        watch=true; labelSelector (k=v, k==v, k!=v, comma-separated) and fieldSelector
//        (metadata.name, metadata.namespace; for pods also spec.nodeName, spec.schedulerName,
//        status.phase) filter both
//   GET  /api/v1/nodes/{name}, /api/v1/namespaces/{ns}/pods/{name}
//   POST /api/v1/namespaces/{ns}/pods/{name}/binding                  binds an unbound pod
//   POST /api/v1/namespaces/{ns}/events                               records a core/v1 Event
// Anything else is a 404 Status, a known path with another method a 405 Status.
//
// As the real API server does: list items carry no kind/apiVersion (the list has them), watch
// event objects and single GETs do; a filtered watch reports an object that starts matching as
// ADDED and one that stops matching as DELETED (with its previous content and the change's
// resourceVersion); a watch from resourceVersion "" or "0" first sends an ADDED for every
// current object; a watch from a compacted resourceVersion gets one ERROR event (410 Expired).
// Every connection serves one request and is closed ("Connection: close"), so that the
// destructor never waits for an idle keep-alive connection.
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
}  // namespace httplib

namespace corun::serve::testing {

class KubeApiState;

/// @brief The fake API server. Thread-safety: every method may be called from any thread while
/// requests are served; the objects it hands out are copies.
class KubeApiFixture {
 public:
  /// @brief Loads the templates, binds 127.0.0.1 on a free port and serves from a thread of
  /// its own. Requests must carry "Authorization: Bearer <token>" (an empty `token` accepts
  /// every request). Throws std::runtime_error when a template cannot be read or the port not
  /// bound.
  explicit KubeApiFixture(std::string token);
  /// @brief Ends every open watch (a clean end of its stream), stops the server and joins its
  /// threads. Bounded: a watch notices within one poll (100 ms, woken at once in practice).
  ~KubeApiFixture();
  KubeApiFixture(const KubeApiFixture&) = delete;
  KubeApiFixture& operator=(const KubeApiFixture&) = delete;

  /// @brief "http://127.0.0.1:PORT".
  [[nodiscard]] std::string url() const;
  [[nodiscard]] int port() const { return port_; }

  // ---- Nodes. Each change is one watch event (ADDED, DELETED) with a new resourceVersion.

  /// @brief A Ready node with InternalIP 127.0.0.1 and one nvidia.com/gpu (node.json). Throws
  /// std::invalid_argument if it exists.
  void add_node(const std::string& name);
  /// @brief Throws std::out_of_range if there is no such node.
  void delete_node(const std::string& name);
  [[nodiscard]] std::optional<nlohmann::json> node(const std::string& name) const;

  // ---- Pods (pod.json). Mutators of a missing pod throw std::out_of_range.

  /// @brief A pod: `node` "" = not yet bound (no spec.nodeName, phase Pending, no IPs); a node
  /// = bound there (phase Running, hostIP/podIP 127.0.0.1, the Ready conditions). Labels and
  /// annotations replace the template's (an empty map: none). Returns the uid assigned. Throws
  /// std::invalid_argument if the pod exists.
  std::string add_pod(const std::string& ns, const std::string& name,
                      const std::map<std::string, std::string>& labels,
                      const std::map<std::string, std::string>& annotations,
                      const std::string& node,
                      const std::string& scheduler_name = "corun-scheduler");
  /// @brief A pod given whole (e.g. a DaemonSet's pod with a hostPort), stored as it is but for
  /// its identity: metadata.uid, resourceVersion and creationTimestamp are assigned, kind and
  /// apiVersion set, metadata.namespace "default" when absent. Returns the uid. Throws
  /// std::invalid_argument without metadata.name or if the pod exists.
  std::string add_pod_object(nlohmann::json pod);
  /// @brief Sets (adds or replaces) one annotation: MODIFIED.
  void set_pod_annotation(const std::string& ns, const std::string& name, const std::string& key,
                          const std::string& value);
  /// @brief Sets status.phase ("Pending", "Running", "Succeeded", "Failed"): MODIFIED.
  void set_pod_phase(const std::string& ns, const std::string& name, const std::string& phase);
  /// @brief Sets metadata.deletionTimestamp (and deletionGracePeriodSeconds 30), as a graceful
  /// delete does before the kubelet has stopped the pod: MODIFIED. A binding of such a pod is
  /// refused (409).
  void set_pod_deleting(const std::string& ns, const std::string& name);
  /// @brief Removes the pod: DELETED, carrying its last state with a new resourceVersion.
  void delete_pod(const std::string& ns, const std::string& name);
  [[nodiscard]] std::optional<nlohmann::json> pod(const std::string& ns,
                                                  const std::string& name) const;

  // ---- What clients did.

  /// @brief The core/v1 Events POSTed and accepted (201), as stored, in order.
  [[nodiscard]] std::vector<nlohmann::json> events() const;
  /// @brief One line per state-changing request, in the order they were answered:
  /// "binding NS/NAME NODE CODE" for every binding POST that reached the binding handler
  /// (NODE "-" when the body named none; CODE the status answered, 201 on success),
  /// "event NS/INVOLVEDNAME REASON" for every Event stored.
  [[nodiscard]] std::vector<std::string> log() const;

  // ---- Failure injection and history.

  /// @brief Makes every resourceVersion handed out so far "too old": a watch from one of them
  /// gets an ERROR event with a 410 Expired Status, as after an etcd compaction. Lists (and
  /// watches from "" or "0") still work and return a resourceVersion that can be watched from.
  /// Open watches go on (the real server does not end them either): end_watches() ends them.
  void compact();
  /// @brief Ends every open watch stream now, cleanly (as when its timeoutSeconds pass), so
  /// that a client watches again from the last resourceVersion it saw.
  void end_watches();
  /// @brief Calls `hook` with the body of every binding POST as it arrives (null when it is not
  /// JSON), before the fixture checks or answers it: what the rest of the system holds at that
  /// instant can be recorded. Calls are serialized, on a server thread, without the fixture's
  /// lock (the hook may make requests, also to the fixture); the same callable is called each
  /// time (a mutable lambda keeps its state). nullptr removes it; a call in progress finishes.
  void on_binding(std::function<void(const nlohmann::json&)> hook);
  /// @brief The next well-formed binding POST (kind Binding, a target name, matching
  /// namespace and name) answers `status` with a Status body and binds nothing; later ones
  /// behave normally. Checked before the pod's existence and conflicts.
  void fail_next_binding(int status);
  /// @brief The current resourceVersion (the one a list would return now).
  [[nodiscard]] std::string resource_version() const;

  // ---- Watches.

  /// @brief How many watch requests (with watch=true) were received for a collection path
  /// ("/api/v1/nodes", "/api/v1/pods", "/api/v1/namespaces/default/pods"), query excluded.
  /// Counted when the watch's starting point is fixed: every change the test makes after
  /// seeing the count rise reaches that watch.
  [[nodiscard]] int watches(const std::string& path) const;
  /// @brief How many watch streams on that path are open now.
  [[nodiscard]] int open_watches(const std::string& path) const;

 private:
  std::unique_ptr<KubeApiState> state_;
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::atomic<bool> listen_returned_{false};
  std::thread thread_;
};

/// @brief Polls `done` every 2 ms until it holds (true) or `timeout_ms` pass (false).
bool wait_until(const std::function<bool()>& done, int timeout_ms = 10000);

}  // namespace corun::serve::testing
