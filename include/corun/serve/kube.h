#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "corun/core/mutex.h"
#include "corun/core/result.h"

namespace corun::serve {

/// @brief Where the Kubernetes API server is and how to authenticate to it.
struct KubeConfig {
  std::string url;         ///< "https://10.96.0.1:443" in a cluster; "http://127.0.0.1:PORT" in tests
  std::string token_file;  ///< bearer token, re-read at every request (bound tokens rotate); "" = none
  std::string ca_file;     ///< CA bundle of an https API server ("" = the system's)
  int timeout_ms = 10000;  ///< connect and read time-out of a request that is not a watch
};

/// @brief The in-cluster configuration, as client-go's rest.InClusterConfig() reads it: the API
/// server at https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, the service account's
/// token and CA under /var/run/secrets/kubernetes.io/serviceaccount/ (`sa_dir` for tests). An
/// error says which variable or file is missing (not in a pod, or automountServiceAccountToken
/// is false).
Result<KubeConfig> in_cluster_config(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

/// @brief One answer of the API server: its HTTP status (0: no answer, `error` says why) and
/// its JSON body (null when it was not JSON).
struct KubeAnswer {
  int status = 0;
  nlohmann::json body;
  std::string error;
  [[nodiscard]] bool ok() const { return status >= 200 && status < 300; }
  /// @brief What went wrong, for a log line: the transport error, or the status and the
  /// message of the API's Status body.
  [[nodiscard]] std::string describe() const;
};

/// @brief A client of the Kubernetes API's JSON REST interface: get, post and delete, and
/// watches that stream events (https://kubernetes.io/docs/reference/using-api/api-concepts/).
/// Thread-safety: every method may be called from several threads; each call opens its own
/// connection.
class KubeClient {
 public:
  /// @brief Checks the URL (http:// or https://HOST[:PORT], no path) and that the token and CA
  /// files are readable now.
  static Result<KubeClient> create(KubeConfig config);

  [[nodiscard]] KubeAnswer get(const std::string& path) const;
  [[nodiscard]] KubeAnswer post(const std::string& path, const nlohmann::json& body) const;

  /// @brief A cancellable watch stream (one at a time per object).
  class Watch {
   public:
    Watch();
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;
    /// @brief Ends a run() in progress (from another thread) and every later one.
    void cancel();
    [[nodiscard]] bool cancelled() const { return cancelled_.load(); }

   private:
    friend class KubeClient;
    struct Impl;
    std::unique_ptr<Impl> impl_;
    std::atomic<bool> cancelled_{false};
  };
  /// @brief Runs a watch request (`path` with `watch=true` in its query) on `watch`, calling
  /// `on_event` with each event object ({"type", "object"}) as its line arrives, until the
  /// server ends the stream, `on_event` returns false or the watch is cancelled. The answer's
  /// status is the HTTP status of the stream (200 for a stream that ran). `silence_s`: a
  /// stream that sends nothing for this long is a dead connection (the server ends a watch at
  /// its timeoutSeconds, so a caller passes a little more than the timeout it asked for).
  KubeAnswer watch(const std::string& path, Watch& watch,
                   const std::function<bool(const nlohmann::json&)>& on_event,
                   int silence_s = 3600) const;

  [[nodiscard]] const KubeConfig& config() const { return config_; }

 private:
  explicit KubeClient(KubeConfig config) : config_(std::move(config)) {}
  [[nodiscard]] std::string token() const;
  KubeConfig config_;
};

/// @brief `key=value` for a URL query: the value percent-encoded (a selector's '=' and ',').
std::string kube_query(const std::string& key, const std::string& value);

/// @brief A change an informer saw.
struct KubeEvent {
  enum class Type { kAdded, kModified, kDeleted };
  Type type = Type::kAdded;
  nlohmann::json object;
};

/// @brief What an informer watches and how it retries.
struct KubeInformerOptions {
  /// The collection's path and its selectors ("/api/v1/pods?fieldSelector=spec.nodeName%3Dn1").
  std::string path;
  int watch_timeout_s = 300;  ///< asked of the server per watch request (it ends the stream)
  /// A watch silent for watch_timeout_s plus this is a dead connection: watched again.
  int silence_margin_s = 30;
  int retry_ms = 1000;        ///< first wait after a failed list or watch; doubles up to max
  int max_retry_ms = 30000;
};

/// @brief A list-then-watch loop over one collection, as client-go's reflector runs it: list
/// (the objects and the collection's resourceVersion), then watch from that resourceVersion,
/// resuming from the last event's; on 410 Gone (the version was compacted away) list again and
/// report the difference as events. Keeps the objects by namespace/name. `on_event` is called on
/// the informer's thread, one event at a time, after the informer's own copy is updated;
/// `on_synced` after every list (the first: the initial state is complete).
/// Thread-safety: objects() and synced() may be called from any thread.
class KubeInformer {
 public:
  using EventHandler = std::function<void(const KubeEvent&)>;
  KubeInformer(KubeClient client, KubeInformerOptions options, EventHandler on_event,
               std::function<void()> on_synced = {});
  ~KubeInformer();
  KubeInformer(const KubeInformer&) = delete;
  KubeInformer& operator=(const KubeInformer&) = delete;

  void start();
  /// @brief Ends the watch in progress and joins the thread (also done by the destructor).
  void stop();
  /// @brief The objects known now, by "namespace/name" (cluster-scoped objects: "name").
  [[nodiscard]] std::map<std::string, nlohmann::json> objects() const;
  [[nodiscard]] bool synced() const { return synced_.load(); }
  /// @brief The last list or watch failure ("" when the last one worked).
  [[nodiscard]] std::string last_error() const;

  /// @brief An object's key: "namespace/name", or "name" without a namespace.
  static std::string key(const nlohmann::json& object);

 private:
  void loop();
  /// Lists, replaces the objects, reports the difference; the collection's resourceVersion.
  std::optional<std::string> relist();
  void fail(const std::string& what);
  bool wait_retry();

  KubeClient client_;
  KubeInformerOptions options_;
  EventHandler on_event_;
  std::function<void()> on_synced_;
  mutable Mutex mutex_;
  std::map<std::string, nlohmann::json> objects_ CORUN_GUARDED_BY(mutex_);
  std::string last_error_ CORUN_GUARDED_BY(mutex_);
  bool stopping_ CORUN_GUARDED_BY(mutex_) = false;
  CondVar cv_;
  int backoff_ms_ = 0;
  std::atomic<bool> synced_{false};
  std::atomic<bool> done_{false};  ///< the thread has left loop()
  KubeClient::Watch watch_;
  std::thread thread_;
};

/// @brief The fields of a Pod corun reads (k8s.io/api/core/v1 Pod).
struct PodInfo {
  std::string ns, name, uid, node, scheduler, phase, host_ip, pod_ip;
  bool deleting = false;  ///< metadata.deletionTimestamp is set
  std::map<std::string, std::string> annotations;
  /// @brief Succeeded or Failed: the pod's containers have ended for good.
  [[nodiscard]] bool terminal() const { return phase == "Succeeded" || phase == "Failed"; }
};
/// @brief Reads a Pod object; fields it lacks stay empty (never throws).
PodInfo read_pod(const nlohmann::json& pod);

}  // namespace corun::serve
