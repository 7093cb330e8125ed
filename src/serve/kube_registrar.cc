#include "corun/serve/kube_registrar.h"

#include <cstdio>
#include <variant>

#include "corun/core/clock.h"
#include "corun/serve/extender.h"
#include "corun/serve/json_input.h"
#include "corun/serve/registry.h"

namespace corun::serve {

using nlohmann::json;

namespace {

std::string pod_name(const PodInfo& p) { return p.ns + "/" + p.name; }

}  // namespace

KubeRegistrar::KubeRegistrar(HttpHandler& service, std::string token, KubeClient client,
                             KubeRegistrarOptions options)
    : service_(service),
      token_(std::move(token)),
      client_(std::move(client)),
      options_(std::move(options)) {
  options_.informer.path =
      "/api/v1/pods?" + kube_query("fieldSelector", "spec.nodeName=" + options_.node);
  informer_ = std::make_unique<KubeInformer>(client_, options_.informer, [this](const KubeEvent&) {
    {
      MutexLock lock(mutex_);
      dirty_ = true;
    }
    cv_.notify_all();
  });
}

KubeRegistrar::~KubeRegistrar() { stop(); }

void KubeRegistrar::start() {
  informer_->start();
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

void KubeRegistrar::stop() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  informer_->stop();
  if (thread_.joinable()) thread_.join();
}

void KubeRegistrar::loop() {
  for (;;) {
    {
      MutexLock lock(mutex_);
      const auto until =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.resync_ms);
      while (!stopping_ && !dirty_ && std::chrono::steady_clock::now() < until) {
        cv_.wait_until(lock, until);
      }
      if (stopping_) return;
      dirty_ = false;
    }
    reconcile();
  }
}

HttpResponse KubeRegistrar::call(const std::string& method, const std::string& path,
                                 const std::string& body) {
  HttpRequest req;
  req.method = method;
  req.path = path;
  req.authorization = "Bearer " + token_;
  req.body = body;
  if (!body.empty()) req.content_type = "application/json";
  return service_.handle(req);
}

void KubeRegistrar::event(const PodInfo& pod, const std::string& type, const std::string& reason,
                          const std::string& message) {
  // A core/v1 Event on the pod (what `kubectl describe pod` and `kubectl get events` show).
  const std::string now = utc_now_rfc3339();
  const json ev = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", pod.name + "."}, {"namespace", pod.ns}}},
      {"involvedObject",
       {{"apiVersion", "v1"},
        {"kind", "Pod"},
        {"namespace", pod.ns},
        {"name", pod.name},
        {"uid", pod.uid}}},
      {"reason", reason},
      {"message", message},
      {"type", type},
      {"source", {{"component", "corun-serve"}, {"host", options_.node}}},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
      {"count", 1},
      {"reportingComponent", "corun.io/serve"},
      {"reportingInstance", options_.node}};
  const KubeAnswer a = client_.post("/api/v1/namespaces/" + pod.ns + "/events", ev);
  if (!a.ok()) {
    std::fprintf(stderr, "corun serve: could not post event %s on pod %s: %s\n", reason.c_str(),
                 pod_name(pod).c_str(), a.describe().c_str());
  }
}

void KubeRegistrar::warn(const PodInfo& pod, const std::string& reason,
                         const std::string& message) {
  std::string& said = warned_[pod.uid];
  if (said == reason + message) return;  // once per annotation text
  said = reason + message;
  std::fprintf(stderr, "corun serve: pod %s: %s: %s\n", pod_name(pod).c_str(), reason.c_str(),
               message.c_str());
  std::fflush(stderr);
  event(pod, "Warning", reason, message);
}

std::optional<KubeRegistrar::Wanted> KubeRegistrar::wanted(const PodInfo& pod) {
  const std::string field = std::string("metadata.annotations[") + kModelAnnotation + "]";
  auto parsed = parse_json_input(pod.annotations.at(kModelAnnotation));
  if (auto* e = std::get_if<JsonInputError>(&parsed)) {
    warn(pod, "CorunBadAnnotation", field + " is not valid JSON: " + e->message);
    return std::nullopt;
  }
  json entry = std::move(std::get<json>(parsed));
  if (!entry.is_object()) {
    warn(pod, "CorunBadAnnotation",
         field + " must be a JSON object (a workload 'models' entry)");
    return std::nullopt;
  }
  if (!entry.contains("name")) entry["name"] = pod.name;
  if (!entry["name"].is_string()) {
    warn(pod, "CorunBadAnnotation", field + ".name must be a string");
    return std::nullopt;
  }
  entry[kPodField] = {{"namespace", pod.ns},
                      {"name", pod.name},
                      {"uid", pod.uid},
                      {"scheduler", pod.scheduler},
                      {"checked", false}};
  return Wanted{pod, entry["name"].get<std::string>(), std::move(entry)};
}

void KubeRegistrar::reconcile() {
  if (!informer_->synced()) return;  // a partial view would remove models of pods not yet seen
  std::map<std::string, Wanted> want;  // by pod uid
  std::set<std::string> present;       // uids of every pod of the node
  for (const auto& [key, object] : informer_->objects()) {
    const PodInfo p = read_pod(object);
    present.insert(p.uid);
    if (p.node != options_.node || p.terminal() || p.uid.empty()) continue;
    if (p.annotations.count(kModelAnnotation) == 0) continue;
    if (auto w = wanted(p)) want.emplace(p.uid, std::move(*w));
  }
  for (auto it = warned_.begin(); it != warned_.end();) {
    it = present.count(it->first) != 0 ? std::next(it) : warned_.erase(it);
  }

  const HttpResponse listed = call("GET", "/v1/models");
  const json models = json::parse(listed.body, nullptr, false);
  if (listed.status != 200 || !models.is_object() || !models.contains("models")) {
    std::fprintf(stderr, "corun serve: kubernetes registration: GET /v1/models answered %d\n",
                 listed.status);
    return;
  }
  std::set<std::string> names;
  std::map<std::string, std::pair<std::string, json>> by_uid;  // uid -> model name, its pod
  for (const json& m : models["models"]) {
    const std::string name = m.value("name", std::string());
    names.insert(name);
    if (m.contains(kPodField) && m[kPodField].is_object()) {
      by_uid[m[kPodField].value("uid", std::string())] = {name, m[kPodField]};
    }
  }

  // Models whose pod is gone from the node (deleted, ended, or a reservation that expired).
  const std::int64_t now = unix_now_ms();
  for (const auto& [uid, held] : by_uid) {
    if (want.count(uid) != 0) continue;
    const json& ref = held.second;
    const bool pending = ref.contains("reserved_unix_ms") && confirmed_.count(uid) == 0 &&
                         present.count(uid) == 0 &&
                         now - ref.value("reserved_unix_ms", std::int64_t{0}) <
                             std::int64_t{options_.reservation_s} * 1000;
    if (pending) continue;  // the extender reserved it; its pod is being bound
    const HttpResponse r = call("DELETE", "/v1/models/" + held.first);
    confirmed_.erase(uid);
    if (r.status == 200 || r.status == 404) {
      std::fprintf(stderr, "corun serve: removed model %s: pod %s/%s %s\n", held.first.c_str(),
                   ref.value("namespace", std::string()).c_str(),
                   ref.value("name", std::string()).c_str(),
                   present.count(uid) != 0 ? "has ended" : "is gone from the node");
    } else {
      std::fprintf(stderr, "corun serve: could not remove model %s: HTTP %d %s\n",
                   held.first.c_str(), r.status, r.body.c_str());
    }
  }

  // Pods whose model is not registered yet.
  for (auto& [uid, w] : want) {
    if (by_uid.count(uid) != 0) {
      confirmed_.insert(uid);
      continue;
    }
    if (names.count(w.model) != 0) {
      warn(w.pod, "CorunModelNameTaken",
           "a model named '" + w.model + "' is registered already on node " + options_.node +
               " (by another pod or a serving stack); give this pod's model another name");
      continue;
    }
    const HttpResponse r = call("POST", "/v1/models", w.entry.dump());
    if (r.status == 201) {
      names.insert(w.model);
      confirmed_.insert(uid);
      const bool checked = w.pod.scheduler == options_.scheduler;
      const std::string how =
          checked ? "placed by " + options_.scheduler
                  : "placed by scheduler '" + w.pod.scheduler + "', not " + options_.scheduler +
                        ": its fit was not checked before it was bound";
      std::fprintf(stderr, "corun serve: registered model %s of pod %s (%s)\n", w.model.c_str(),
                   pod_name(w.pod).c_str(), how.c_str());
      std::fflush(stderr);
      event(w.pod, "Normal", "CorunRegistered",
            "model '" + w.model + "' registered with corun serve on node " + options_.node +
                " (" + how + ")");
      continue;
    }
    const json err = json::parse(r.body, nullptr, false);
    std::string message = r.body;
    std::string where;
    if (err.is_object() && err.contains("error") && err["error"].is_object()) {
      message = err["error"].value("message", r.body);
      where = err["error"].value("field", std::string());
    }
    if (r.status >= 400 && r.status < 500) {
      warn(w.pod, "CorunBadAnnotation",
           std::string("metadata.annotations[") + kModelAnnotation + "]" +
               (where.empty() ? "" : "." + where) + ": " + message);
    } else {
      std::fprintf(stderr, "corun serve: could not register model %s of pod %s: HTTP %d %s\n",
                   w.model.c_str(), pod_name(w.pod).c_str(), r.status, message.c_str());
    }
  }
}

}  // namespace corun::serve
