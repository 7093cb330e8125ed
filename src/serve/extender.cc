#include "corun/serve/extender.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <future>
#include <set>
#include <string_view>
#include <variant>

#include "corun/core/clock.h"
#include "corun/core/strings.h"
#include "corun/serve/json_input.h"
#include "extender_internal.h"

namespace corun::serve {

using detail::member;
using nlohmann::json;

namespace {

// A Pod with its spec, a NodeList with whole Node objects: deeper and with longer keys (label
// and annotation names reach 317 bytes) than the service's own bodies.
constexpr int kMaxArgsDepth = 64;
constexpr std::size_t kMaxArgsKeyBytes = 512;
// More candidate nodes than a cluster has; bounds the threads one request starts.
constexpr std::size_t kMaxCandidates = 5000;
constexpr std::size_t kMaxConcurrentAsks = 32;

// `http://HOST[:PORT][/]` -> host and port.
struct ParsedUrl {
  std::string host;
  int port = 80;
};
Result<ParsedUrl> parse_url(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) {
    return Error("'" + url + "' is not an http:// URL (corun serve speaks plain HTTP; put TLS in " +
                 "a proxy or a service mesh)");
  }
  std::string rest = url.substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.empty() || rest.find('/') != std::string::npos) {
    return Error("'" + url + "' must be http://HOST[:PORT] without a path");
  }
  ParsedUrl out;
  const auto colon = rest.rfind(':');
  if (colon != std::string::npos && rest.find(']') == std::string::npos) {
    const std::string port = rest.substr(colon + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 65535) {
      return Error("'" + url + "': the port must be in 1..65535");
    }
    out.port = static_cast<int>(p);
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) return Error("'" + url + "' has no host");
  out.host = rest;
  return out;
}

HttpResponse json_answer(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', true, json::error_handler_t::replace) + "\n";
  return r;
}

const char* const kUnknownNode =
    "unknown node: no corun serve is known for it (corun extender --node, or a Running corun "
    "serve pod on it found by --kube)";

template <class NodeT>
std::unique_ptr<httplib::Client> node_client(const NodeT& n, const ExtenderOptions& o) {
  auto client = std::make_unique<httplib::Client>(n.host, n.port);
  const auto connect_ms = o.node_connect_timeout_ms;
  const auto timeout_ms = o.node_timeout_ms;
  client->set_connection_timeout(connect_ms / 1000, (connect_ms % 1000) * 1000);
  client->set_read_timeout(timeout_ms / 1000, (timeout_ms % 1000) * 1000);
  client->set_write_timeout(timeout_ms / 1000, (timeout_ms % 1000) * 1000);
  return client;
}

// The path of an annotation value in the Pod, as Go's field names and a map key write it.
const std::string kAnnotationField =
    std::string("Pod.metadata.annotations[") + kModelAnnotation + "]";

}  // namespace

Extender::Extender(ExtenderOptions options, std::optional<KubeClient> kube)
    : options_(std::move(options)), kube_(std::move(kube)) {}

Result<std::map<std::string, Extender::Node>> Extender::check_nodes(
    const std::vector<ExtenderNode>& nodes) {
  std::map<std::string, Node> out;
  for (const auto& n : nodes) {
    if (n.name.empty()) return Error("--node: a node name is empty (NAME=URL)");
    auto url = parse_url(n.url);
    if (!url) return url.error().wrap("--node " + n.name);
    if (!out.emplace(n.name, Node{n.name, url->host, url->port}).second) {
      return Error("--node: node '" + n.name + "' is given twice");
    }
  }
  return out;
}

Result<std::unique_ptr<Extender>> Extender::make(ExtenderOptions options,
                                                 std::optional<KubeClient> kube) {
  auto nodes = check_nodes(options.nodes);
  if (!nodes) return nodes.error();
  if (options.node_connect_timeout_ms < 1 || options.node_timeout_ms < 1) {
    return Error("node timeouts must be at least 1 ms");
  }
  std::unique_ptr<Extender> e(new Extender(std::move(options), std::move(kube)));
  MutexLock lock(e->nodes_mutex_);
  e->nodes_ = std::move(*nodes);
  return e;
}

Status Extender::set_nodes(const std::vector<ExtenderNode>& nodes) {
  auto checked = check_nodes(nodes);
  if (!checked) return checked.error();
  MutexLock lock(nodes_mutex_);
  nodes_ = std::move(*checked);
  return {};
}

std::vector<ExtenderNode> Extender::nodes() const {
  MutexLock lock(nodes_mutex_);
  std::vector<ExtenderNode> out;
  for (const auto& [name, n] : nodes_) {
    out.push_back({name, "http://" + n.host + ":" + std::to_string(n.port)});
  }
  return out;
}

std::optional<Extender::Node> Extender::node(const std::string& name) const {
  MutexLock lock(nodes_mutex_);
  const auto it = nodes_.find(name);
  if (it == nodes_.end()) return std::nullopt;
  return it->second;
}

HttpResponse Extender::error(int status, const BadRequest& e) const {
  json err = {{"code", e.code}, {"message", e.message}};
  if (!e.field.empty()) err["field"] = e.field;
  return json_answer(status, {{"error", err}});
}

HttpResponse Extender::transport_error(int status, const std::string& path,
                                       const std::string& reason, const std::string& field) {
  const int s = status >= 400 && status < 600 ? status : 400;
  std::string message = reason;
  if (message.empty()) {
    message = s == 413
                  ? "request body exceeds " + std::to_string(options_.max_body_bytes) + " bytes"
              : s == 404 ? "no route " + path
                         : "malformed HTTP request" + (path.empty() ? "" : " for " + path);
  }
  const std::string code = s == 413 ? "body_too_large" : s == 404 ? "not_found" : "bad_request";
  return error(s, {code, message, field});
}

HttpResponse Extender::handle(const HttpRequest& req) {
  try {
    std::string path = req.path;
    if (path.size() > 1 && path.back() == '/') path.pop_back();
    const bool known =
        path == "/filter" || path == "/prioritize" || path == "/bind" || path == "/healthz";
    if (!known) return error(404, {"not_found", "no route " + path.substr(0, 128), ""});
    const std::string allowed = path == "/healthz" ? "GET" : "POST";
    if (req.method != allowed) {
      HttpResponse r = error(405, {"method_not_allowed",
                                   req.method.substr(0, 16) + " is not allowed on " + path +
                                       " (allowed: " + allowed + ")",
                                   ""});
      r.headers.emplace_back("Allow", allowed);
      return r;
    }
    if (path == "/healthz") {
      json names = json::array();
      for (const auto& n : nodes()) names.push_back(n.name);
      return json_answer(200, {{"status", "ok"}, {"nodes", names.size()}, {"node_names", names}});
    }
    if (path == "/bind") return bind(req);
    return path == "/filter" ? filter(req) : prioritize(req);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corun extender: internal error on %s %s: %s\n",
                 req.method.substr(0, 16).c_str(), req.path.substr(0, 128).c_str(), e.what());
    return error(500, {"internal", std::string("internal error: ") + e.what(), ""});
  }
}

std::variant<Extender::Args, Extender::BadRequest> Extender::parse_args(
    const HttpRequest& req) const {
  if (req.body.size() > options_.max_body_bytes) {
    return BadRequest{"body_too_large",
                      "request body exceeds " + std::to_string(options_.max_body_bytes) + " bytes",
                      ""};
  }
  if (req.body.empty())
    return BadRequest{"empty_body", "an ExtenderArgs JSON body is required", ""};
  JsonLimits limits;
  limits.max_depth = kMaxArgsDepth;
  limits.max_key_bytes = kMaxArgsKeyBytes;
  auto parsed = parse_json_input(req.body, limits);
  if (auto* e = std::get_if<JsonInputError>(&parsed)) {
    return BadRequest{e->code, e->message, e->field};
  }
  const json& body = std::get<json>(parsed);
  if (!body.is_object()) {
    return BadRequest{"bad_type", "ExtenderArgs must be a JSON object", ""};
  }
  Args a;
  // Candidates: NodeNames (nodeCacheCapable) or Nodes.items[].metadata.name.
  const json* names = member(body, "NodeNames");
  const json* nodes = member(body, "Nodes");
  if (names != nullptr && !names->is_null()) {
    if (!names->is_array())
      return BadRequest{"bad_type", "NodeNames must be an array", "NodeNames"};
    a.by_name = true;
    for (std::size_t i = 0; i < names->size(); ++i) {
      const json& n = (*names)[i];
      const std::string field = "NodeNames[" + std::to_string(i) + "]";
      if (!n.is_string()) return BadRequest{"bad_type", field + " must be a string", field};
      a.names.push_back(n.get<std::string>());
    }
  } else if (nodes != nullptr && !nodes->is_null()) {
    if (!nodes->is_object()) return BadRequest{"bad_type", "Nodes must be a NodeList", "Nodes"};
    const json* items = member(*nodes, "items");
    if (items == nullptr || items->is_null()) {
      a.node_items = json::array();
    } else if (!items->is_array()) {
      return BadRequest{"bad_type", "Nodes.items must be an array", "Nodes.items"};
    } else {
      a.node_items = *items;
    }
    for (std::size_t i = 0; i < a.node_items.size(); ++i) {
      const std::string field = "Nodes.items[" + std::to_string(i) + "].metadata.name";
      const json* node_meta = member(a.node_items[i], "metadata");
      const json* name = node_meta != nullptr ? member(*node_meta, "name") : nullptr;
      if (name == nullptr) return BadRequest{"missing_field", field + " is required", field};
      if (!name->is_string()) return BadRequest{"bad_type", field + " must be a string", field};
      a.names.push_back(name->get<std::string>());
    }
  } else {
    return BadRequest{"missing_field",
                      "ExtenderArgs needs NodeNames (nodeCacheCapable: true) or Nodes",
                      "NodeNames"};
  }
  if (a.names.size() > kMaxCandidates) {
    return BadRequest{"out_of_range",
                      "at most " + std::to_string(kMaxCandidates) + " candidate nodes",
                      "NodeNames"};
  }
  // The pod and its model entry.
  const json* pod = member(body, "Pod");
  if (pod == nullptr || pod->is_null())
    return BadRequest{"missing_field", "Pod is required", "Pod"};
  if (!pod->is_object()) return BadRequest{"bad_type", "Pod must be an object", "Pod"};
  auto entry = entry_of(*pod);
  if (auto* e = std::get_if<BadRequest>(&entry)) return *e;
  a.entry = std::move(std::get<json>(entry));
  return a;
}

std::variant<json, Extender::BadRequest> Extender::entry_of(const json& pod) {
  const json* meta = member(pod, "metadata");
  if (meta != nullptr && !meta->is_null() && !meta->is_object()) {
    return BadRequest{"bad_type", "Pod.metadata must be an object", "Pod.metadata"};
  }
  const json* annotations = meta != nullptr ? member(*meta, "annotations") : nullptr;
  if (annotations != nullptr && !annotations->is_null() && !annotations->is_object()) {
    return BadRequest{"bad_type", "Pod.metadata.annotations must be an object of strings",
                      "Pod.metadata.annotations"};
  }
  // Annotation names are map keys: Go matches them exactly.
  const json* value = nullptr;
  if (annotations != nullptr && annotations->is_object()) {
    const auto it = annotations->find(kModelAnnotation);
    if (it != annotations->end()) value = &*it;
  }
  if (value == nullptr) {
    return BadRequest{"missing_annotation",
                      std::string("the pod has no ") + kModelAnnotation +
                          " annotation (its corun model entry as a JSON string)",
                      kAnnotationField, true};
  }
  if (!value->is_string()) {
    return BadRequest{"bad_type", kAnnotationField + " must be a string", kAnnotationField};
  }
  auto parsed = parse_json_input(value->get<std::string>());
  if (auto* e = std::get_if<JsonInputError>(&parsed)) {
    const std::string field =
        e->field.empty() ? kAnnotationField : kAnnotationField + "." + e->field;
    return BadRequest{e->code, kAnnotationField + " is not valid JSON: " + e->message, field, true};
  }
  json entry = std::move(std::get<json>(parsed));
  if (!entry.is_object()) {
    return BadRequest{"bad_type",
                      kAnnotationField + " must be a JSON object (a workload 'models' entry)",
                      kAnnotationField, true};
  }
  // An unnamed entry is named after its pod (what `corun serve --kube-node` registers it as),
  // so that one annotation serves every replica of a Deployment.
  const json* name = meta != nullptr ? member(*meta, "name") : nullptr;
  if (!entry.contains("name") && name != nullptr && name->is_string()) entry["name"] = *name;
  return entry;
}

Extender::Verdict Extender::ask_one(const std::string& name, const std::string& body) const {
  Verdict v;
  const auto it = node(name);
  if (!it) {
    v.reason = kUnknownNode;
    return v;
  }
  auto client = node_client(*it, options_);
  const std::string where = "http://" + it->host + ":" + std::to_string(it->port);
  const auto res = client->Post("/v1/whatif", body, "application/json");
  if (!res) {
    v.reason = "unreachable node: corun serve at " + where + " did not answer (" +
               httplib::to_string(res.error()) + ")";
    return v;
  }
  const json answer = json::parse(res->body, nullptr, false);
  if (res->status != 200) {
    const json* err = answer.is_object() ? member(answer, "error") : nullptr;
    const std::string message = err != nullptr && err->is_object()
                                    ? err->value("message", std::string())
                                    : res->body.substr(0, 200);
    const std::string code =
        err != nullptr && err->is_object() ? err->value("code", std::string()) : "";
    v.field = err != nullptr && err->is_object() ? err->value("field", std::string()) : "";
    // The node refused the entry itself: the pod's annotation is at fault, not the node.
    v.entry_refused = res->status == 400 || res->status == 415 || res->status == 422;
    v.reason = res->status == 409 && code == "duplicate_model"
                   ? "a model of this name already runs on the node: " + message
                   : "corun serve at " + where + " answered " + std::to_string(res->status) +
                         (code.empty() ? "" : " " + code) + ": " + message;
    return v;
  }
  if (!answer.is_object() || !answer.contains("fits") || !answer["fits"].is_boolean() ||
      !answer.contains("utility_gain") || !answer["utility_gain"].is_number()) {
    v.reason = "corun serve at " + where + " gave an answer that is not a what-if";
    return v;
  }
  v.fits = answer["fits"].get<bool>();
  v.gain = answer["utility_gain"].get<double>();
  v.opens_gpu = answer.contains("opens_gpu") && answer["opens_gpu"].is_boolean() &&
                answer["opens_gpu"].get<bool>();
  if (!v.fits) {
    std::vector<std::string> why;
    if (answer.contains("breaks") && answer["breaks"].is_array()) {
      for (const auto& b : answer["breaks"]) {
        if (b.is_object()) {
          why.push_back("would break SLA " + b.value("sla", std::string("?")) + " of " +
                        b.value("model", std::string("?")) + ": " +
                        b.value("reason", std::string()));
        }
      }
    }
    v.reason = why.empty() ? "would break an SLA" : join(why, "; ");
  }
  return v;
}

std::vector<Extender::Verdict> Extender::ask(const Args& a) const {
  const std::string body = a.entry.dump(-1, ' ', true, json::error_handler_t::replace);
  std::vector<Verdict> out(a.names.size());
  // The nodes are asked at once, a bounded number at a time: the slowest node, not their sum,
  // bounds the scheduler's wait.
  for (std::size_t from = 0; from < a.names.size(); from += kMaxConcurrentAsks) {
    const std::size_t to = std::min(a.names.size(), from + kMaxConcurrentAsks);
    std::vector<std::future<Verdict>> pending;
    for (std::size_t i = from; i < to; ++i) {
      pending.push_back(std::async(std::launch::async,
                                   [this, &a, &body, i] { return ask_one(a.names[i], body); }));
    }
    for (std::size_t i = from; i < to; ++i) out[i] = pending[i - from].get();
  }
  return out;
}

HttpResponse Extender::filter(const HttpRequest& req) const {
  auto parsed = parse_args(req);
  if (auto* e = std::get_if<BadRequest>(&parsed)) {
    if (!e->pod_level) return error(e->code == "body_too_large" ? 413 : 400, *e);
    // A well-formed request for a pod whose annotation is wrong: the protocol's Error, which
    // the scheduler reports on the pod (an HTTP error's body would be lost).
    return json_answer(200, {{"Nodes", nullptr},
                             {"NodeNames", nullptr},
                             {"FailedNodes", json::object()},
                             {"FailedAndUnresolvableNodes", json::object()},
                             {"Error", e->field + ": " + e->message}});
  }
  const Args& a = std::get<Args>(parsed);
  const auto verdicts = ask(a);
  for (const auto& v : verdicts) {
    if (v.entry_refused) {
      const std::string field =
          v.field.empty() ? kAnnotationField : kAnnotationField + "." + v.field;
      return json_answer(200, {{"Nodes", nullptr},
                               {"NodeNames", nullptr},
                               {"FailedNodes", json::object()},
                               {"FailedAndUnresolvableNodes", json::object()},
                               {"Error", field + ": " + v.reason}});
    }
  }
  json kept_names = json::array();
  json kept_items = json::array();
  json failed = json::object();
  for (std::size_t i = 0; i < verdicts.size(); ++i) {
    if (verdicts[i].fits) {
      kept_names.push_back(a.names[i]);
      if (!a.by_name) kept_items.push_back(a.node_items[i]);
    } else {
      failed[a.names[i]] = verdicts[i].reason;
    }
  }
  json result = {
      {"FailedNodes", failed}, {"FailedAndUnresolvableNodes", json::object()}, {"Error", ""}};
  if (a.by_name) {
    result["NodeNames"] = kept_names;
    result["Nodes"] = nullptr;
  } else {
    result["Nodes"] = {{"metadata", json::object()}, {"items", kept_items}};
    result["NodeNames"] = nullptr;
  }
  return json_answer(200, result);
}

HttpResponse Extender::prioritize(const HttpRequest& req) const {
  auto parsed = parse_args(req);
  if (auto* e = std::get_if<BadRequest>(&parsed)) {
    // HostPriorityList has no error member: every bad request is an HTTP error here.
    return error(e->code == "body_too_large" ? 413 : 400, *e);
  }
  const Args& a = std::get<Args>(parsed);
  const auto verdicts = ask(a);
  for (const auto& v : verdicts) {
    if (v.entry_refused) {
      const std::string field =
          v.field.empty() ? kAnnotationField : kAnnotationField + "." + v.field;
      return error(400, {"invalid_spec", v.reason, field});
    }
  }
  // Nodes that fit score 1..10 by their gain (linear between the smallest and the largest
  // gain among them; all equal: 10); nodes that do not fit score 0. Ranking "pack": when some
  // fitting nodes already run models and others would open an idle GPU, the busy ones score
  // 2..10 by gain and the idle ones 1.
  bool busy_fits = false;
  bool idle_fits = false;
  for (const auto& v : verdicts) {
    busy_fits = busy_fits || (v.fits && !v.opens_gpu);
    idle_fits = idle_fits || (v.fits && v.opens_gpu);
  }
  const bool pack = options_.ranking == ExtenderOptions::Ranking::kPack && busy_fits && idle_fits;
  const std::int64_t floor = pack ? 2 : 1;
  double lo = INFINITY;
  double hi = -INFINITY;
  for (const auto& v : verdicts) {
    if (!v.fits || (pack && v.opens_gpu)) continue;
    lo = std::min(lo, v.gain);
    hi = std::max(hi, v.gain);
  }
  json list = json::array();
  for (std::size_t i = 0; i < verdicts.size(); ++i) {
    const Verdict& v = verdicts[i];
    std::int64_t score = 0;
    if (v.fits && pack && v.opens_gpu) {
      score = 1;
    } else if (v.fits) {
      score = hi > lo ? floor + std::llround(static_cast<double>(kMaxScore - floor) *
                                             (v.gain - lo) / (hi - lo))
                      : kMaxScore;
    }
    list.push_back({{"Host", a.names[i]}, {"Score", score}});
  }
  return json_answer(200, list);
}

// ---------------------------------------------------------------------------------------------
// Bind: reserve on the node, then bind through the API (ExtenderBindingArgs ->
// ExtenderBindingResult, k8s.io/kube-scheduler extender/v1/types.go).

/// One bind, from its arguments to the Binding: the pod, its model entry, the node's serve.
struct Extender::BindCall {
  std::map<std::string, std::string> args;  ///< PodName, PodNamespace, PodUID, Node
  std::string pod_ref;                      ///< NAMESPACE/NAME
  std::string pod_path;                     ///< the pod's path in the API
  Node target;
  PodInfo pod;
  json model;  ///< the entry registered on the node, with the pod's reservation
  std::string name;
  std::unique_ptr<httplib::Client> client;
  httplib::Headers auth;
  std::string where;            ///< the node's serve, as messages name it
  bool registered_now = false;  ///< this bind registered the model (not an earlier try)
};

HttpResponse Extender::bind(const HttpRequest& req) const {
  const auto result = [](const std::string& error) {
    return json_answer(200, {{"Error", error}});
  };
  BindCall call;
  if (auto bad = read_bind_args(req, call)) return *bad;
  if (auto e = find_bind_pod(call)) return result(*e);
  if (auto e = reserve_on_node(call)) return result(*e);
  return result(create_binding(call));
}

std::optional<HttpResponse> Extender::read_bind_args(const HttpRequest& req, BindCall& call) const {
  if (req.body.size() > options_.max_body_bytes) {
    return error(413, {"body_too_large",
                       "request body exceeds " + std::to_string(options_.max_body_bytes) +
                           " bytes",
                       ""});
  }
  if (req.body.empty()) {
    return error(400, {"empty_body", "an ExtenderBindingArgs JSON body is required", ""});
  }
  auto parsed = parse_json_input(req.body);
  if (auto* e = std::get_if<JsonInputError>(&parsed)) {
    return error(400, {e->code, e->message, e->field});
  }
  const json& body = std::get<json>(parsed);
  if (!body.is_object()) {
    return error(400, {"bad_type", "ExtenderBindingArgs must be a JSON object", ""});
  }
  std::map<std::string, std::string>& args = call.args;
  for (const char* k : {"PodName", "PodNamespace", "PodUID", "Node"}) {
    const json* v = member(body, k);
    if (v == nullptr || !v->is_string() || v->get<std::string>().empty()) {
      return error(400, {v == nullptr ? "missing_field" : "bad_type",
                         std::string(k) + " is required (a non-empty string)", k});
    }
    args[k] = v->get<std::string>();
  }
  return std::nullopt;
}

std::optional<std::string> Extender::find_bind_pod(BindCall& call) const {
  std::map<std::string, std::string>& args = call.args;
  call.pod_ref = args["PodNamespace"] + "/" + args["PodName"];
  const std::string& pod_ref = call.pod_ref;
  if (!kube_) {
    return "corun extender has no Kubernetes API access: run it with --kube (or "
           "--kube-api) to use the bind verb, or remove bindVerb from the scheduler's "
           "extender configuration";
  }
  if (options_.serve_token.empty()) {
    return "corun extender has no serve token (--serve-token-file): it cannot register pod " +
           pod_ref + " on node " + args["Node"];
  }
  const auto target = node(args["Node"]);
  if (!target) return "node " + args["Node"] + ": " + kUnknownNode;
  call.target = *target;
  call.pod_path = "/api/v1/namespaces/" + args["PodNamespace"] + "/pods/" + args["PodName"];
  const KubeAnswer got = kube_->get(call.pod_path);
  if (!got.ok()) return "reading pod " + pod_ref + ": " + got.describe();
  call.pod = read_pod(got.body);
  const PodInfo& pod = call.pod;
  if (pod.uid != args["PodUID"]) {
    return "pod " + pod_ref + " has uid " + pod.uid + ", not " + args["PodUID"] +
           " (it was deleted and created again)";
  }
  auto entry = entry_of(got.body);
  if (auto* e = std::get_if<BadRequest>(&entry)) return e->field + ": " + e->message;
  json& model = call.model;
  model = std::move(std::get<json>(entry));
  model["pod"] = {{"namespace", pod.ns}, {"name", pod.name},
                  {"uid", pod.uid},      {"scheduler", pod.scheduler},
                  {"checked", true},     {"reserved_unix_ms", unix_now_ms()}};
  call.name = model.value("name", std::string());
  return std::nullopt;
}

std::optional<std::string> Extender::reserve_on_node(BindCall& call) const {
  // 1. Reserve: the node registers the model only if a plan still holds every SLA with it.
  call.client = node_client(call.target, options_);
  call.auth = {{"Authorization", "Bearer " + options_.serve_token}};
  call.where = "corun serve of node " + call.target.name;
  const std::string& where = call.where;
  const auto reg = call.client->Post("/v1/models?if_fits=true", call.auth,
                                     call.model.dump(-1, ' ', true, json::error_handler_t::replace),
                                     "application/json");
  if (!reg) {
    return where + " did not answer (" + httplib::to_string(reg.error()) + ")";
  }
  call.registered_now = reg->status == 201;
  if (!call.registered_now) {
    const json answer = json::parse(reg->body, nullptr, false);
    const json* err = answer.is_object() ? member(answer, "error") : nullptr;
    const std::string code =
        err != nullptr && err->is_object() ? err->value("code", std::string()) : "";
    const std::string message = err != nullptr && err->is_object()
                                    ? err->value("message", std::string())
                                    : reg->body.substr(0, 200);
    // A retried bind: the model may be this pod's own reservation from the last try.
    const bool ours = reg->status == 409 && code == "duplicate_model" && holds_reservation(call);
    if (!ours) {
      return where + " refused pod " + call.pod_ref + " (HTTP " + std::to_string(reg->status) +
             (code.empty() ? "" : " " + code) + "): " + message;
    }
  }
  return std::nullopt;
}

bool Extender::holds_reservation(const BindCall& call) const {
  const auto held = call.client->Get("/v1/models/" + call.name);
  const json h = held ? json::parse(held->body, nullptr, false) : json();
  return held && held->status == 200 && h.is_object() && h.contains("model") &&
         h["model"].is_object() && h["model"].contains("pod") && h["model"]["pod"].is_object() &&
         h["model"]["pod"].value("uid", std::string()) == call.pod.uid;
}

std::string Extender::create_binding(const BindCall& call) const {
  const PodInfo& pod = call.pod;
  const std::string& pod_ref = call.pod_ref;
  const Node& target = call.target;
  // 2. Bind through the API (what kube-scheduler's DefaultBinder posts).
  const json binding = {
      {"apiVersion", "v1"},
      {"kind", "Binding"},
      {"metadata", {{"name", pod.name}, {"namespace", pod.ns}, {"uid", pod.uid}}},
      {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", target.name}}}};
  const KubeAnswer bound = kube_->post(call.pod_path + "/binding", binding);
  if (bound.ok()) {
    std::fprintf(stderr, "corun extender: bound pod %s to node %s (model %s reserved)\n",
                 pod_ref.c_str(), target.name.c_str(), call.name.c_str());
    return "";
  }
  // 3. The Binding failed: give the reservation back.
  std::string rolled = "kept (it was registered before this bind)";
  if (call.registered_now) {
    const auto del = call.client->Delete("/v1/models/" + call.name, call.auth);
    rolled = del && (del->status == 200 || del->status == 404)
                 ? "rolled back"
                 : "not rolled back (" + (del ? "HTTP " + std::to_string(del->status)
                                              : httplib::to_string(del.error())) +
                       "; corun serve --kube-node drops it when its reservation expires)";
  }
  std::fprintf(stderr, "corun extender: binding pod %s to node %s failed: %s; registration %s\n",
               pod_ref.c_str(), target.name.c_str(), bound.describe().c_str(), rolled.c_str());
  return "binding pod " + pod_ref + " to node " + target.name + ": " + bound.describe() +
         " (the model's registration was " + rolled + ")";
}

}  // namespace corun::serve
