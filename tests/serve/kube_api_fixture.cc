#include "kube_api_fixture.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <fstream>
#include <set>
#include <stdexcept>
#include <utility>

#include "corun/core/mutex.h"

// Test builds define it as the repository root (tests/CMakeLists.txt); a syntax-only check
// without it still compiles, and the constructor then names the template it could not read.
#ifndef CORUN_SOURCE_DIR
#define CORUN_SOURCE_DIR "."
#endif

namespace corun::serve::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// A watch with nothing to send re-checks its end conditions this often; a change or the
// fixture's end wakes it at once.
constexpr auto kWatchPoll = std::chrono::milliseconds(100);
// The timeoutSeconds of a watch that names none (the real server picks one in 30..60 min).
constexpr int kDefaultWatchTimeoutS = 300;
// A longer timeoutSeconds is cut to this (a day: longer than any test; no clock overflow).
constexpr int kMaxWatchTimeoutS = 86400;
// Workers of the server: each open watch holds one until its stream ends (a watch whose client
// went away is noticed at its next write, its timeout or the fixture's end).
constexpr std::size_t kServerThreads = 64;
// Paths httplib routes to the fixture (everything else is a 404 from the error handler);
// bounded so that std::regex never recurses deeply (as src/serve/server.cc does).
constexpr const char* kAnyPath = R"(/[^?#\r\n]{0,512})";
// 2025-01-01T00:00:00Z: creation timestamps are this plus the object's resourceVersion in
// seconds, so that runs are reproducible.
constexpr std::time_t kEpoch = 1735689600;

enum class Kind { kNode, kPod };

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string kube_time(std::int64_t seconds) {
  const std::time_t t = kEpoch + static_cast<std::time_t>(seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// UUID-shaped (version 4 layout) and deterministic: the n-th uid of this fixture.
std::string make_uid(std::int64_t n) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "00000000-0000-4000-8000-%012lld", static_cast<long long>(n));
  return buf;
}

// The suffix the API server appends to a generateName: 5 characters of this alphabet
// (k8s.io/apiserver/pkg/storage/names, utilrand.String), here from a counter, not at random.
std::string name_suffix(std::int64_t n) {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  constexpr std::int64_t kBase = sizeof kAlphabet - 1;
  std::string s(5, kAlphabet[0]);
  for (auto i = s.size(); i-- > 0 && n > 0; n /= kBase) s[i] = kAlphabet[n % kBase];
  return s;
}

// The member `key` of `*obj` when `obj` is an object that has it, else nullptr.
const json* member(const json* obj, const char* key) {
  if (obj == nullptr || !obj->is_object()) return nullptr;
  const auto it = obj->find(key);
  return it == obj->end() ? nullptr : &*it;
}

// obj[a][b] when it is a string, else "".
std::string text(const json& obj, const char* a, const char* b = nullptr) {
  const json* v = member(&obj, a);
  if (b != nullptr) v = member(v, b);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

// ---- Status bodies (meta/v1 Status; reasons from meta/v1 types.go StatusReason*).

const char* reason_for(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "";  // StatusReasonUnknown
  }
}

json failure(int code, const std::string& message, json details = json::object()) {
  json s = {{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", json::object()}};
  s["status"] = "Failure";
  s["message"] = message;
  s["reason"] = reason_for(code);
  if (!details.empty()) s["details"] = std::move(details);
  s["code"] = code;
  return s;
}

// apierrors.NewNotFound: `pods "x" not found`, details {name, kind: the resource}.
json not_found(const std::string& resource, const std::string& name) {
  return failure(404, resource + " \"" + name + "\" not found",
                 {{"name", name}, {"kind", resource}});
}

// apierrors.NewConflict: `Operation cannot be fulfilled on pods/binding "x": why`.
json conflict(const std::string& resource, const std::string& name, const std::string& why) {
  return failure(409, "Operation cannot be fulfilled on " + resource + " \"" + name + "\": " + why,
                 {{"name", name}, {"kind", resource}});
}

void respond(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(dump(body), "application/json");
}

// ---- Selectors (equality-based: k=v, k==v, k!=v, comma-separated: an AND of the terms).

struct Term {
  std::string key;
  std::string value;
  bool equal = true;
};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

// Parses `selector` into `out`; the error message ("" when it parsed).
std::string parse_terms(const std::string& selector, std::vector<Term>& out) {
  if (trim(selector).empty()) return "";
  std::size_t start = 0;
  while (start <= selector.size()) {
    auto end = selector.find(',', start);
    if (end == std::string::npos) end = selector.size();
    const std::string part = trim(selector.substr(start, end - start));
    Term t;
    std::size_t at = part.find("!=");
    std::size_t len = 2;
    if (at != std::string::npos) {
      t.equal = false;
    } else if ((at = part.find("==")) == std::string::npos) {
      at = part.find('=');
      len = 1;
    }
    if (at == std::string::npos || at == 0) {
      return "unable to parse requirement: \"" + part + "\" (this fixture takes k=v, k==v, k!=v)";
    }
    t.key = trim(part.substr(0, at));
    t.value = trim(part.substr(at + len));
    out.push_back(std::move(t));
    start = end + 1;
  }
  return "";
}

// The value of a selectable field of an object (what the real server's field-label conversion
// functions accept for the kind), or nullopt for a field the kind cannot be selected by.
std::optional<std::string> field_of(Kind kind, const json& obj, const std::string& field) {
  if (field == "metadata.name") return text(obj, "metadata", "name");
  if (field == "metadata.namespace") return text(obj, "metadata", "namespace");
  if (kind == Kind::kPod) {
    if (field == "spec.nodeName") return text(obj, "spec", "nodeName");
    if (field == "spec.schedulerName") return text(obj, "spec", "schedulerName");
    if (field == "status.phase") return text(obj, "status", "phase");
  }
  return std::nullopt;
}

// One collection request: which objects it covers.
struct Collection {
  Kind kind = Kind::kNode;
  std::string ns;    ///< pods of this namespace; "" = every namespace
  std::string path;  ///< "/api/v1/nodes", "/api/v1/pods", "/api/v1/namespaces/NS/pods"
  std::vector<Term> labels;
  std::vector<Term> fields;
};

bool matches(const Collection& c, Kind kind, const json& obj) {
  if (kind != c.kind || obj.is_null()) return false;
  if (!c.ns.empty() && text(obj, "metadata", "namespace") != c.ns) return false;
  const json* labels = member(member(&obj, "metadata"), "labels");
  for (const auto& t : c.labels) {
    const json* v = member(labels, t.key.c_str());
    const bool same = v != nullptr && v->is_string() && v->get<std::string>() == t.value;
    if (same != t.equal) return false;
  }
  for (const auto& t : c.fields) {
    if ((field_of(kind, obj, t.key).value_or("") == t.value) != t.equal) return false;
  }
  return true;
}

// One change of the state, kept for the watches that have not sent it yet.
struct Change {
  std::int64_t rv = 0;
  Kind kind = Kind::kNode;
  json before;  ///< null: the object was added
  json after;   ///< null: the object was deleted
};

// What one change looks like to a watch on `c` (the cacher's rule, apiserver
// pkg/storage/cacher/cache_watcher.go convertToWatchEvent): "" when it does not concern it.
std::string event_line(const Change& change, const Collection& c) {
  const bool now = matches(c, change.kind, change.after);
  const bool was = matches(c, change.kind, change.before);
  json event;
  if (now) {
    event = {{"type", was ? "MODIFIED" : "ADDED"}, {"object", change.after}};
  } else if (was) {
    // The object's last content that matched, with the resourceVersion of the change.
    json last = change.before;
    last["metadata"]["resourceVersion"] = std::to_string(change.rv);
    event = {{"type", "DELETED"}, {"object", std::move(last)}};
  } else {
    return "";
  }
  return dump(event) + "\n";
}

// One open watch stream: where it stands in the history and what it still has to send. Used by
// the one worker thread that serves it, with the state's mutex held.
struct WatchStream {
  Collection what;
  std::int64_t cursor = 0;  ///< changes after this resourceVersion are still to be sent
  std::vector<std::string> pending;
  bool final = false;       ///< end once `pending` is sent (the 410 answer)
  std::uint64_t epoch = 0;  ///< end_watches() count when it started
  Clock::time_point deadline;
};

bool truthy(const std::string& v) {
  return v == "true" || v == "1" || v == "True" || v == "TRUE" || v == "t" || v == "T";
}

// A non-negative integer query value; nullopt when it is not one.
std::optional<std::int64_t> non_negative(const std::string& v) {
  if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoll(v);
}

json load_template(const std::string& name) {
  const std::string path = std::string(CORUN_SOURCE_DIR) + "/tests/data/kube/" + name;
  std::ifstream in(path);
  json j = json::parse(in, nullptr, false);
  if (!in || j.is_discarded() || !j.is_object() || !j.contains("metadata")) {
    throw std::runtime_error("kube_api_fixture: cannot read the template " + path);
  }
  return j;
}

json string_map(const std::map<std::string, std::string>& m) {
  json j = json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

}  // namespace

// Everything the server threads and the test share, behind one mutex.
class KubeApiState {
 public:
  KubeApiState(std::string token, json node_template, json pod_template)
      : token_(std::move(token)),
        node_template_(std::move(node_template)),
        pod_template_(std::move(pod_template)) {}

  mutable Mutex mutex;
  // Notified on every change and at the end: wakes the watches.
  CondVar changed;
  bool stopping CORUN_GUARDED_BY(mutex) = false;
  std::int64_t rv CORUN_GUARDED_BY(mutex) = 0;
  // Watches from a resourceVersion below this get 410 Expired.
  std::int64_t compacted CORUN_GUARDED_BY(mutex) = 0;
  std::int64_t uids CORUN_GUARDED_BY(mutex) = 0;
  std::int64_t generated_names CORUN_GUARDED_BY(mutex) = 0;
  std::map<std::string, json> nodes CORUN_GUARDED_BY(mutex);  // by name
  std::map<std::string, json> pods CORUN_GUARDED_BY(mutex);   // by "namespace/name"
  // Every change since the start, in resourceVersion order (kept whole: a compaction must not
  // take changes from a watch that is already open).
  std::vector<Change> changes CORUN_GUARDED_BY(mutex);
  std::vector<json> events CORUN_GUARDED_BY(mutex);
  std::set<std::string> event_names CORUN_GUARDED_BY(mutex);  // "namespace/name"
  std::vector<std::string> log CORUN_GUARDED_BY(mutex);
  int fail_next_binding CORUN_GUARDED_BY(mutex) = 0;
  std::map<std::string, int> watches CORUN_GUARDED_BY(mutex);
  std::map<std::string, int> open_watches CORUN_GUARDED_BY(mutex);
  std::uint64_t epoch CORUN_GUARDED_BY(mutex) = 0;
  // on_binding()'s hook; shared so that a call in progress survives its replacement.
  std::shared_ptr<std::function<void(const json&)>> binding_hook CORUN_GUARDED_BY(mutex);
  // Serializes the hook's calls (taken without `mutex`, which the hook must not wait for).
  Mutex hook_mutex;

  void stop() {
    MutexLock lock(mutex);
    stopping = true;
    changed.notify_all();
  }

  // Stamps a new object's identity (uid, creationTimestamp; the resourceVersion comes with
  // commit()).
  void stamp(json& obj) CORUN_REQUIRES(mutex) {
    auto& m = obj["metadata"];
    m["uid"] = make_uid(++uids);
    m["creationTimestamp"] = kube_time(rv + 1);
  }

  json make_node(const std::string& name) CORUN_REQUIRES(mutex) {
    json n = node_template_;
    n["metadata"]["name"] = name;
    n["metadata"]["labels"]["kubernetes.io/hostname"] = name;
    n["status"]["addresses"] = json::array({{{"type", "InternalIP"}, {"address", "127.0.0.1"}},
                                            {{"type", "Hostname"}, {"address", name}}});
    stamp(n);
    return n;
  }

  // Puts `pod` on `node` as a running pod: what the binding and then the kubelet would do.
  void place(json& pod, const std::string& node) const {
    pod["spec"]["nodeName"] = node;
    json status = pod_template_["status"];
    status["phase"] = "Running";
    status["hostIP"] = "127.0.0.1";
    status["hostIPs"] = json::array({{{"ip", "127.0.0.1"}}});
    status["podIP"] = "127.0.0.1";
    status["podIPs"] = json::array({{{"ip", "127.0.0.1"}}});
    pod["status"] = std::move(status);
  }

  json make_pod(const std::string& ns, const std::string& name,
                const std::map<std::string, std::string>& labels,
                const std::map<std::string, std::string>& annotations, const std::string& node,
                const std::string& scheduler) CORUN_REQUIRES(mutex) {
    json p = pod_template_;
    auto& m = p["metadata"];
    m["name"] = name;
    m["namespace"] = ns;
    // Empty maps are omitted, as the API's omitempty tags do.
    if (labels.empty()) {
      m.erase("labels");
    } else {
      m["labels"] = string_map(labels);
    }
    if (annotations.empty()) {
      m.erase("annotations");
    } else {
      m["annotations"] = string_map(annotations);
    }
    p["spec"]["schedulerName"] = scheduler;
    if (node.empty()) {
      // Created, not yet seen by a scheduler: no node, no conditions, no IPs.
      p["spec"].erase("nodeName");
      p["status"] = {{"phase", "Pending"}, {"qosClass", text(pod_template_, "status", "qosClass")}};
    } else {
      place(p, node);
    }
    stamp(p);
    return p;
  }

  // Applies one change: a new resourceVersion, the object stored (or removed when `after` is
  // null), the change kept for the watches, which are woken.
  void commit(Kind kind, const std::string& key, json after) CORUN_REQUIRES(mutex) {
    auto& objects = kind == Kind::kNode ? nodes : pods;
    json before;
    if (const auto it = objects.find(key); it != objects.end()) before = it->second;
    ++rv;
    if (after.is_null()) {
      objects.erase(key);
    } else {
      after["metadata"]["resourceVersion"] = std::to_string(rv);
      objects[key] = after;
    }
    changes.push_back(Change{rv, kind, std::move(before), std::move(after)});
    changed.notify_all();
  }

  json& pod_ref(const std::string& ns, const std::string& name) CORUN_REQUIRES(mutex) {
    const auto it = pods.find(ns + "/" + name);
    if (it == pods.end()) throw std::out_of_range("kube_api_fixture: no pod " + ns + "/" + name);
    return it->second;
  }

  // Adds the changes after the watch's cursor that concern it to `out`.
  void collect(WatchStream& w, std::vector<std::string>& out) CORUN_REQUIRES(mutex) {
    if (w.final) return;
    auto it = std::upper_bound(changes.begin(), changes.end(), w.cursor,
                               [](std::int64_t v, const Change& c) { return v < c.rv; });
    for (; it != changes.end(); ++it) {
      auto line = event_line(*it, w.what);
      if (!line.empty()) out.push_back(std::move(line));
      w.cursor = it->rv;
    }
  }

  bool ended(const WatchStream& w) const CORUN_REQUIRES(mutex) {
    return stopping || w.final || w.epoch != epoch || Clock::now() >= w.deadline;
  }

  // ---- HTTP.

  void handle(const httplib::Request& req, httplib::Response& res) {
    if (!token_.empty() && req.get_header_value("Authorization") != "Bearer " + token_) {
      respond(res, 401, failure(401, "Unauthorized"));
      return;
    }
    std::vector<std::string> p;
    for (std::size_t start = 1; start <= req.path.size();) {
      auto end = req.path.find('/', start);
      if (end == std::string::npos) end = req.path.size();
      p.push_back(req.path.substr(start, end - start));
      start = end + 1;
    }
    const auto is = [&p](std::initializer_list<const char*> want) {
      if (p.size() != want.size()) return false;
      std::size_t i = 0;
      for (const char* w : want) {
        if (p[i].empty() || (*w != '*' && p[i] != w)) return false;
        ++i;
      }
      return true;
    };
    const auto only = [&req, &res](const char* method) {
      if (req.method == method || (std::string(method) == "GET" && req.method == "HEAD")) {
        return true;
      }
      respond(res, 405,
              failure(405, "the server does not allow this method on the requested resource"));
      return false;
    };
    if (is({"api", "v1", "nodes"})) {
      if (only("GET")) collection(req, res, {Kind::kNode, "", "/api/v1/nodes", {}, {}});
    } else if (is({"api", "v1", "pods"})) {
      if (only("GET")) collection(req, res, {Kind::kPod, "", "/api/v1/pods", {}, {}});
    } else if (is({"api", "v1", "namespaces", "*", "pods"})) {
      if (only("GET")) {
        collection(req, res, {Kind::kPod, p[3], "/api/v1/namespaces/" + p[3] + "/pods", {}, {}});
      }
    } else if (is({"api", "v1", "nodes", "*"})) {
      if (only("GET")) get_one(res, Kind::kNode, p[3], p[3]);
    } else if (is({"api", "v1", "namespaces", "*", "pods", "*"})) {
      if (only("GET")) get_one(res, Kind::kPod, p[3] + "/" + p[5], p[5]);
    } else if (is({"api", "v1", "namespaces", "*", "pods", "*", "binding"})) {
      if (only("POST")) binding(req, res, p[3], p[5]);
    } else if (is({"api", "v1", "namespaces", "*", "events"})) {
      if (only("POST")) event(req, res, p[3]);
    } else {
      respond(res, 404, failure(404, "the server could not find the requested resource"));
    }
  }

 private:
  void get_one(httplib::Response& res, Kind kind, const std::string& key, const std::string& name) {
    MutexLock lock(mutex);
    const auto& objects = kind == Kind::kNode ? nodes : pods;
    const auto it = objects.find(key);
    if (it == objects.end()) {
      respond(res, 404, not_found(kind == Kind::kNode ? "nodes" : "pods", name));
    } else {
      respond(res, 200, it->second);
    }
  }

  void collection(const httplib::Request& req, httplib::Response& res, Collection c) {
    std::string error = parse_terms(req.get_param_value("labelSelector"), c.labels);
    if (error.empty()) error = parse_terms(req.get_param_value("fieldSelector"), c.fields);
    for (const auto& t : c.fields) {
      if (error.empty() && !field_of(c.kind, json::object(), t.key)) {
        error = "field label not supported: " + t.key;
      }
    }
    if (!error.empty()) {
      respond(res, 400, failure(400, error));
      return;
    }
    if (truthy(req.get_param_value("watch"))) {
      watch(req, res, std::move(c));
      return;
    }
    // A list is served from the current state whatever resourceVersion it names.
    MutexLock lock(mutex);
    json items = json::array();
    for (const auto& [key, obj] : c.kind == Kind::kNode ? nodes : pods) {
      if (!matches(c, c.kind, obj)) continue;
      json item = obj;
      item.erase("kind");
      item.erase("apiVersion");
      items.push_back(std::move(item));
    }
    respond(res, 200,
            {{"kind", c.kind == Kind::kNode ? "NodeList" : "PodList"},
             {"apiVersion", "v1"},
             {"metadata", {{"resourceVersion", std::to_string(rv)}}},
             {"items", std::move(items)}});
  }

  // A watch (https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-
  // of-changes): a chunked 200 answer with one WatchEvent per line.
  void watch(const httplib::Request& req, httplib::Response& res, Collection c) {
    std::int64_t timeout_s = kDefaultWatchTimeoutS;
    if (req.has_param("timeoutSeconds")) {
      const auto t = non_negative(req.get_param_value("timeoutSeconds"));
      if (!t) {
        respond(res, 400, failure(400, "timeoutSeconds: not a non-negative integer"));
        return;
      }
      if (*t > 0) timeout_s = std::min<std::int64_t>(*t, kMaxWatchTimeoutS);
    }
    const std::string rv_text = req.get_param_value("resourceVersion");
    std::int64_t from = 0;
    if (!rv_text.empty()) {
      const auto v = non_negative(rv_text);
      if (!v) {
        respond(
            res, 400,
            failure(400, "resourceVersion: Invalid value: \"" + rv_text + "\": not an integer"));
        return;
      }
      from = *v;
    }
    auto w = std::make_shared<WatchStream>();
    w->what = std::move(c);
    w->deadline = Clock::now() + std::chrono::seconds(timeout_s);
    const std::string path = w->what.path;
    {
      MutexLock lock(mutex);
      ++watches[path];
      ++open_watches[path];
      w->epoch = epoch;
      if (from > 0 && from < compacted) {
        // As the watch cache answers a version older than it holds (410, reason Expired).
        const json expired = failure(410, "too old resource version: " + std::to_string(from) +
                                              " (" + std::to_string(rv) + ")");
        w->pending.push_back(dump({{"type", "ERROR"}, {"object", expired}}) + "\n");
        w->final = true;
      } else if (from == 0) {
        // "Start at most recent": the current objects as ADDED, then the changes after them.
        for (const auto& [key, obj] : w->what.kind == Kind::kNode ? nodes : pods) {
          if (matches(w->what, w->what.kind, obj)) {
            w->pending.push_back(dump({{"type", "ADDED"}, {"object", obj}}) + "\n");
          }
        }
        w->cursor = rv;
      } else {
        w->cursor = from;
      }
    }
    res.status = 200;
    res.set_chunked_content_provider(
        "application/json",
        [this, w](std::size_t, httplib::DataSink& sink) {
          std::vector<std::string> out;
          bool end = false;
          {
            MutexLock lock(mutex);
            out.swap(w->pending);
            collect(*w, out);
            if (out.empty() && !ended(*w)) {
              changed.wait_until(lock, std::min(Clock::now() + kWatchPoll, w->deadline));
              collect(*w, out);
            }
            end = ended(*w);
          }
          for (const auto& line : out) {
            if (!sink.write(line.data(), line.size())) return false;  // the client went away
          }
          if (end) sink.done();
          return true;
        },
        [this, path](bool) {
          MutexLock lock(mutex);
          --open_watches[path];
        });
  }

  // POST .../pods/{name}/binding (core/v1 Binding; the server side is
  // kubernetes pkg/registry/core/pod/storage/storage.go, BindingREST).
  void binding(const httplib::Request& req, httplib::Response& res, const std::string& ns,
               const std::string& name) {
    const json b = json::parse(req.body, nullptr, false);
    const std::string node = text(b, "target", "name");
    std::shared_ptr<std::function<void(const json&)>> hook;
    {
      MutexLock lock(mutex);
      hook = binding_hook;
    }
    if (hook) {
      MutexLock serial(hook_mutex);
      (*hook)(b.is_discarded() ? json() : b);
    }
    MutexLock lock(mutex);
    const auto answer = [&](int code, const json& body) CORUN_REQUIRES(mutex) {
      log.push_back("binding " + ns + "/" + name + " " + (node.empty() ? "-" : node) + " " +
                    std::to_string(code));
      respond(res, code, body);
    };
    if (b.is_discarded() || !b.is_object()) {
      answer(400, failure(400, "the body is not a JSON object"));
      return;
    }
    if (text(b, "kind") != "Binding") {
      answer(400, failure(400, "kind is \"" + text(b, "kind") + "\", not \"Binding\""));
      return;
    }
    const std::string target_kind = text(b, "target", "kind");
    if (node.empty() || (!target_kind.empty() && target_kind != "Node")) {
      answer(400, failure(400, "target.name is required and target.kind must be empty or Node"));
      return;
    }
    if (const auto bns = text(b, "metadata", "namespace"); !bns.empty() && bns != ns) {
      answer(400, failure(400,
                          "the namespace of the provided object does not match the "
                          "namespace sent on the request"));
      return;
    }
    if (text(b, "metadata", "name") != name) {
      answer(400, failure(400, "name in URL does not match name in Binding object"));
      return;
    }
    if (fail_next_binding != 0) {
      const int code = std::exchange(fail_next_binding, 0);
      answer(code, failure(code, "injected by the test (fail_next_binding)"));
      return;
    }
    const auto it = pods.find(ns + "/" + name);
    if (it == pods.end()) {
      answer(404, not_found("pods", name));
      return;
    }
    const json& pod = it->second;
    // Preconditions on the pod (storage.Preconditions), checked as GuaranteedUpdate does.
    const std::string storage_error =
        "StorageError: invalid object, Code: 4, Key: /registry/pods/" + ns + "/" + name +
        ", ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: ";
    if (const auto uid = text(b, "metadata", "uid");
        !uid.empty() && uid != text(pod, "metadata", "uid")) {
      answer(409, conflict("pods", name,
                           storage_error + "UID in precondition: " + uid +
                               ", UID in object meta: " + text(pod, "metadata", "uid")));
      return;
    }
    if (const auto want = text(b, "metadata", "resourceVersion");
        !want.empty() && want != text(pod, "metadata", "resourceVersion")) {
      answer(409, conflict("pods", name,
                           storage_error + "ResourceVersion in precondition: " + want +
                               ", ResourceVersion in object meta: " +
                               text(pod, "metadata", "resourceVersion")));
      return;
    }
    if (!text(pod, "metadata", "deletionTimestamp").empty()) {
      answer(409, conflict("pods/binding", name,
                           "pod " + name + " is being deleted, cannot be assigned to a host"));
      return;
    }
    if (const auto on = text(pod, "spec", "nodeName"); !on.empty()) {
      answer(409, conflict("pods/binding", name,
                           "pod " + name + " is already assigned to node \"" + on + "\""));
      return;
    }
    json bound = pod;
    place(bound, node);
    // The binding's annotations are copied onto the pod.
    if (const json* a = member(member(&b, "metadata"), "annotations"); a && a->is_object()) {
      for (const auto& [k, v] : a->items()) bound["metadata"]["annotations"][k] = v;
    }
    commit(Kind::kPod, it->first, std::move(bound));
    answer(201, {{"kind", "Status"},
                 {"apiVersion", "v1"},
                 {"metadata", json::object()},
                 {"status", "Success"},
                 {"code", 201}});
  }

  // POST /api/v1/namespaces/{ns}/events (core/v1 Event).
  void event(const httplib::Request& req, httplib::Response& res, const std::string& ns) {
    json e = json::parse(req.body, nullptr, false);
    const auto bad = [&res](const std::string& why) { respond(res, 400, failure(400, why)); };
    if (e.is_discarded() || !e.is_object()) return bad("the body is not a JSON object");
    if (e.contains("kind") && text(e, "kind") != "Event") return bad("kind is not \"Event\"");
    if (e.contains("apiVersion") && text(e, "apiVersion") != "v1") {
      return bad("apiVersion is not \"v1\"");
    }
    if (e.contains("metadata") && !e["metadata"].is_object()) {
      return bad("metadata is not an object");
    }
    if (const auto ens = text(e, "metadata", "namespace"); !ens.empty() && ens != ns) {
      return bad(
          "the namespace of the provided object does not match the namespace sent on the "
          "request");
    }
    const json* involved = member(&e, "involvedObject");
    if (involved == nullptr || !involved->is_object() || involved->empty()) {
      return bad("involvedObject is required");
    }
    if (text(e, "reason").empty()) return bad("reason is required");
    MutexLock lock(mutex);
    std::string name = text(e, "metadata", "name");
    if (name.empty()) {
      const std::string generate = text(e, "metadata", "generateName");
      if (generate.empty()) return bad("metadata.name or metadata.generateName is required");
      name = generate + name_suffix(++generated_names);
    }
    if (!event_names.insert(ns + "/" + name).second) {
      json exists = failure(409, "events \"" + name + "\" already exists",
                            {{"name", name}, {"kind", "events"}});
      exists["reason"] = "AlreadyExists";
      respond(res, 409, exists);
      return;
    }
    e["kind"] = "Event";
    e["apiVersion"] = "v1";
    auto& m = e["metadata"];
    m["name"] = name;
    m["namespace"] = ns;
    m["uid"] = make_uid(++uids);
    m["resourceVersion"] = std::to_string(++rv);
    m["creationTimestamp"] = kube_time(rv);
    events.push_back(e);
    log.push_back("event " + ns + "/" + text(*involved, "name") + " " + text(e, "reason"));
    respond(res, 201, e);
  }

  const std::string token_;
  const json node_template_;
  const json pod_template_;
};

// ---- KubeApiFixture.

KubeApiFixture::KubeApiFixture(std::string token)
    : state_(std::make_unique<KubeApiState>(std::move(token), load_template("node.json"),
                                            load_template("pod.json"))),
      server_(std::make_unique<httplib::Server>()) {
  auto& s = *server_;
  s.new_task_queue = [] { return new httplib::ThreadPool(kServerThreads); };
  // One request per connection: the answer says "Connection: close", and at the end no worker
  // waits out an idle keep-alive connection. A connection that sends nothing is dropped after
  // 2 s.
  s.set_keep_alive_max_count(1);
  s.set_keep_alive_timeout(2);
  KubeApiState* state = state_.get();
  const httplib::Server::Handler handler =
      [state](const httplib::Request& req, httplib::Response& res) { state->handle(req, res); };
  s.Get(kAnyPath, handler);
  s.Post(kAnyPath, handler);
  s.Put(kAnyPath, handler);
  s.Patch(kAnyPath, handler);
  s.Delete(kAnyPath, handler);
  s.Options(kAnyPath, handler);
  // What no pattern matched (or httplib refused) still gets a Status body.
  s.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        respond(res, res.status,
                failure(res.status, res.status == 404
                                        ? "the server could not find the requested resource"
                                        : "the request could not be served"));
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string cause = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          cause = e.what();
        } catch (...) {
        }
        respond(res, 500, failure(500, "Internal error occurred: " + cause));
      });
  port_ = s.bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("kube_api_fixture: cannot bind 127.0.0.1");
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    listen_returned_ = true;
  });
  // httplib's stop() does nothing before listen_after_bind() has marked the server running:
  // wait for that here, so that the destructor's stop() always takes (bounded; it is the
  // first thing the new thread does).
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!server_->is_running() && !listen_returned_ && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!server_->is_running()) {
    if (!listen_returned_) server_->stop();
    thread_.join();
    throw std::runtime_error("kube_api_fixture: the server did not start");
  }
}

KubeApiFixture::~KubeApiFixture() {
  // Watches first: each ends its stream cleanly at once, so that the workers are free when
  // stop() closes the listening socket and joins them.
  state_->stop();
  if (server_->is_running()) server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string KubeApiFixture::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

void KubeApiFixture::add_node(const std::string& name) {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  if (s.nodes.count(name) != 0) {
    throw std::invalid_argument("kube_api_fixture: node " + name + " exists");
  }
  s.commit(Kind::kNode, name, s.make_node(name));
}

void KubeApiFixture::delete_node(const std::string& name) {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  if (s.nodes.count(name) == 0) throw std::out_of_range("kube_api_fixture: no node " + name);
  s.commit(Kind::kNode, name, nullptr);
}

std::optional<nlohmann::json> KubeApiFixture::node(const std::string& name) const {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  const auto it = s.nodes.find(name);
  if (it == s.nodes.end()) return std::nullopt;
  return it->second;
}

std::string KubeApiFixture::add_pod(const std::string& ns, const std::string& name,
                                    const std::map<std::string, std::string>& labels,
                                    const std::map<std::string, std::string>& annotations,
                                    const std::string& node, const std::string& scheduler_name) {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  const std::string key = ns + "/" + name;
  if (s.pods.count(key) != 0) {
    throw std::invalid_argument("kube_api_fixture: pod " + key + " exists");
  }
  json p = s.make_pod(ns, name, labels, annotations, node, scheduler_name);
  std::string uid = p["metadata"]["uid"].get<std::string>();
  s.commit(Kind::kPod, key, std::move(p));
  return uid;
}

std::string KubeApiFixture::add_pod_object(nlohmann::json pod) {
  if (!pod.is_object() || text(pod, "metadata", "name").empty()) {
    throw std::invalid_argument("kube_api_fixture: a pod object needs metadata.name");
  }
  pod["kind"] = "Pod";
  pod["apiVersion"] = "v1";
  if (text(pod, "metadata", "namespace").empty()) pod["metadata"]["namespace"] = "default";
  const std::string key = text(pod, "metadata", "namespace") + "/" + text(pod, "metadata", "name");
  auto& s = *state_;
  MutexLock lock(s.mutex);
  if (s.pods.count(key) != 0) {
    throw std::invalid_argument("kube_api_fixture: pod " + key + " exists");
  }
  s.stamp(pod);
  std::string uid = text(pod, "metadata", "uid");
  s.commit(Kind::kPod, key, std::move(pod));
  return uid;
}

void KubeApiFixture::set_pod_annotation(const std::string& ns, const std::string& name,
                                        const std::string& key, const std::string& value) {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  json p = s.pod_ref(ns, name);
  p["metadata"]["annotations"][key] = value;
  s.commit(Kind::kPod, ns + "/" + name, std::move(p));
}

void KubeApiFixture::set_pod_phase(const std::string& ns, const std::string& name,
                                   const std::string& phase) {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  json p = s.pod_ref(ns, name);
  p["status"]["phase"] = phase;
  s.commit(Kind::kPod, ns + "/" + name, std::move(p));
}

void KubeApiFixture::set_pod_deleting(const std::string& ns, const std::string& name) {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  json p = s.pod_ref(ns, name);
  p["metadata"]["deletionTimestamp"] = kube_time(s.rv + 1);
  p["metadata"]["deletionGracePeriodSeconds"] = 30;
  s.commit(Kind::kPod, ns + "/" + name, std::move(p));
}

void KubeApiFixture::delete_pod(const std::string& ns, const std::string& name) {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  s.pod_ref(ns, name);  // throws when there is none
  s.commit(Kind::kPod, ns + "/" + name, nullptr);
}

std::optional<nlohmann::json> KubeApiFixture::pod(const std::string& ns,
                                                  const std::string& name) const {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  const auto it = s.pods.find(ns + "/" + name);
  if (it == s.pods.end()) return std::nullopt;
  return it->second;
}

std::vector<nlohmann::json> KubeApiFixture::events() const {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  return s.events;
}

std::vector<std::string> KubeApiFixture::log() const {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  return s.log;
}

void KubeApiFixture::compact() {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  // Every version so far becomes too old; the new current one (what a list now returns) is
  // not, so that a client that lists again can watch again.
  s.compacted = ++s.rv;
}

void KubeApiFixture::end_watches() {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  ++s.epoch;
  s.changed.notify_all();
}

void KubeApiFixture::on_binding(std::function<void(const nlohmann::json&)> hook) {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  s.binding_hook =
      hook ? std::make_shared<std::function<void(const json&)>>(std::move(hook)) : nullptr;
}

void KubeApiFixture::fail_next_binding(int status) {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  s.fail_next_binding = status;
}

std::string KubeApiFixture::resource_version() const {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  return std::to_string(s.rv);
}

int KubeApiFixture::watches(const std::string& path) const {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  const auto it = s.watches.find(path);
  return it == s.watches.end() ? 0 : it->second;
}

int KubeApiFixture::open_watches(const std::string& path) const {
  auto& s = *state_;
  MutexLock lock(s.mutex);
  const auto it = s.open_watches.find(path);
  return it == s.open_watches.end() ? 0 : it->second;
}

bool wait_until(const std::function<bool()>& done, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace corun::serve::testing
