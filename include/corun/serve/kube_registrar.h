#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "corun/core/mutex.h"
#include "corun/serve/http.h"
#include "corun/serve/kube.h"

namespace corun::serve {

/// @brief How `corun serve --kube-node NAME` follows the pods of its node.
struct KubeRegistrarOptions {
  std::string node;  ///< the Kubernetes node this serve plans for (required)
  /// The scheduler whose extender checks a pod's fit before binding it (serve/extender.h): a
  /// pod another scheduler placed is registered all the same, flagged `checked: false`.
  std::string scheduler = "corun-scheduler";
  /// A model the extender registered for a pod that has not appeared on this node is removed
  /// after this (the bind failed and its rollback did not arrive); check = [5, 3600].
  int reservation_s = 120;
  int resync_ms = 1000;  ///< how often the pods and the registered models are compared
  KubeInformerOptions informer;  ///< its path is set from `node`
};

/// @brief Registration without an agent: keeps the models of `corun serve` equal to the
/// annotated pods bound to its node. It lists and watches the node's pods
/// (`fieldSelector=spec.nodeName=NODE`) and, for each pod that carries the `corun.io/model`
/// annotation and has not ended (phase Succeeded or Failed):
/// - registers its model (the annotation's entry, named after the pod when it has no name,
///   with a `pod` member naming the pod) unless a model of that pod is registered already (the
///   extender's bind registers first);
/// - flags a pod placed by a scheduler other than `scheduler` (`pod.checked: false`);
/// - on a bad annotation, or a name another model holds, posts a Warning Event on the pod and
///   logs it, once per annotation text.
/// It removes a model whose pod is deleted or has ended. Models registered without a `pod`
/// (POST /v1/models by a serving stack) are never touched. Registration goes through
/// `service.handle()`, so that it is checked and stored as a POSTed one is.
/// Thread-safety: start() and stop() from one thread.
class KubeRegistrar {
 public:
  KubeRegistrar(HttpHandler& service, std::string token, KubeClient client,
                KubeRegistrarOptions options);
  ~KubeRegistrar();
  KubeRegistrar(const KubeRegistrar&) = delete;
  KubeRegistrar& operator=(const KubeRegistrar&) = delete;

  void start();
  void stop();
  /// @brief Compares the pods with the registered models once and acts (the resync thread's
  /// work; tests call it).
  void reconcile();

 private:
  struct Wanted {
    PodInfo pod;
    std::string model;     ///< the model's name
    nlohmann::json entry;  ///< the registration body, `pod` included
  };
  void loop();
  /// One annotated pod's wanted registration, or none (after reporting a bad annotation).
  std::optional<Wanted> wanted(const PodInfo& pod);
  void warn(const PodInfo& pod, const std::string& reason, const std::string& message);
  void event(const PodInfo& pod, const std::string& type, const std::string& reason,
             const std::string& message);
  HttpResponse call(const std::string& method, const std::string& path,
                    const std::string& body = "");

  HttpHandler& service_;
  std::string token_;
  KubeClient client_;
  KubeRegistrarOptions options_;
  std::unique_ptr<KubeInformer> informer_;
  Mutex mutex_;
  CondVar cv_;
  bool stopping_ CORUN_GUARDED_BY(mutex_) = false;
  bool dirty_ CORUN_GUARDED_BY(mutex_) = true;
  /// Pods seen on this node with their model registered: their reservations are confirmed,
  /// so that a deleted pod's model goes at once rather than when its reservation expires.
  std::set<std::string> confirmed_;
  /// Warnings already given, by pod uid: the annotation text (or reason) they were about.
  std::map<std::string, std::string> warned_;
  std::thread thread_;
};

}  // namespace corun::serve
