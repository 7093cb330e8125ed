#include "corun/serve/service.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "corun/core/json_number.h"
#include "corun/core/strings.h"
#include "corun/export/catalog_record.h"
#include "corun/serve/json_input.h"
#include "corun/serve/openapi.h"
#include "corun/serve/plan_record.h"
#include "corun/serve/prometheus.h"
#include "corun/serve/tool_placement.h"

namespace corun::serve {

using nlohmann::json;

namespace {

constexpr int kMaxJsonDepth = 16;
// Metric labels of requests no route row answers.
constexpr std::string_view kUnknownRoute = "unknown";
constexpr std::string_view kTransportRoute = "transport";

std::string now_iso8601() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

// Compares without an early exit, so that the time taken does not reveal a matching prefix.
bool constant_time_equal(std::string_view a, std::string_view b) {
  const std::size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0U : 1U;
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0U;
    const auto y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0U;
    diff |= x ^ y;
  }
  return diff == 0;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Paths are plain: letters, digits and "-._~/", no empty, "." or ".." segments.
bool path_ok(const std::string& path) {
  if (path.empty() || path.size() > 512 || path[0] != '/') return false;
  for (char c : path) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ||
          c == '~' || c == '/')) {
      return false;
    }
  }
  const auto segments = split(path.substr(1), '/');
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const auto& s = segments[i];
    if (s == "." || s == "..") return false;
    if (s.empty() && i + 1 != segments.size()) return false;  // "//"
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The route table

std::span<const Route<Service>> Service::routes() {
  using A = Access;
  using B = BodyUse;
  using S = Service;
  static constexpr Route<Service> kTable[] = {
      {"GET", "/healthz", "healthz", A::kOpen, B::kNone, "", &S::get_health},
      {"GET", "/metrics", "metrics", A::kOpen, B::kNone, "", &S::get_metrics},
      {"GET", "/v1/models", "models", A::kOpen, B::kNone, "", &S::list_models},
      {"POST", "/v1/models", "models", A::kToken, B::kJson, "", &S::register_model},
      {"GET", "/v1/models/{name}", "model", A::kOpen, B::kNone, "", &S::get_model},
      {"DELETE", "/v1/models/{name}", "model", A::kToken, B::kNone, "", &S::remove_model},
      {"PUT", "/v1/models/{name}/demand", "demand", A::kToken, B::kJson, "demand",
       &S::update_demand},
      {"GET", "/v1/telemetry", "telemetry", A::kOpen, B::kNone, "", &S::get_telemetry},
      {"POST", "/v1/telemetry", "telemetry", A::kToken, B::kJson, "", &S::post_telemetry},
      {"GET", "/v1/plan", "plan", A::kOpen, B::kNone, "", &S::get_plan},
      {"GET", "/v1/plan/history", "history", A::kOpen, B::kNone, "", &S::get_history},
      {"POST", "/v1/replan", "replan", A::kToken, B::kOptionalJson, "", &S::post_replan},
      // A what-if changes nothing: a scheduler extender asks it without the service's token.
      {"POST", "/v1/whatif", "whatif", A::kOpen, B::kJson, "", &S::post_whatif},
      // A placement changes nothing either: an agent runtime asks it before running its tools.
      {"POST", "/v1/tools/place", "tools_place", A::kOpen, B::kJson, "", &S::post_tools_place},
      // A capacity answer changes nothing: a planner of the fleet asks it.
      {"POST", "/v1/capacity", "capacity", A::kOpen, B::kOptionalJson, "", &S::post_capacity},
      {"GET", "/v1/openapi.json", "openapi", A::kOpen, B::kNone, "", &S::get_openapi},
  };
  return kTable;
}

namespace {

// The request metrics' labels: the route table's, then those of requests no row answers.
std::vector<std::string> metric_labels(std::span<const Route<Service>> routes) {
  auto labels = route_labels(routes);
  labels.emplace_back(kUnknownRoute);
  labels.emplace_back(kTransportRoute);
  return labels;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Construction and recovery

Service::Service(ServiceOptions options, const Catalog& catalog, std::unique_ptr<StateStore> store)
    : options_(std::move(options)),
      catalog_(&catalog),
      catalog_record_(exporting::catalog_record_json(catalog).dump()),
      store_(std::move(store)),
      metrics_(metric_labels(routes())),
      planner_([this](const std::string& reason) { return plan_once(reason); },
               options_.min_replan_interval_ms) {}

Result<std::unique_ptr<Service>> Service::open(ServiceOptions options, const Catalog& catalog,
                                               std::unique_ptr<PredictorSource> source) {
  if (options.token.empty()) return Error("serve needs a non-empty bearer token");
  if (!source) return Error("serve needs a predictor source");
  if (auto solver = make_solver(options.solver); !solver) return solver.error().wrap("--solver");
  if (auto ok = check(options.stack); !ok) return ok.error();
  std::optional<PrometheusClient> prometheus;
  if (!options.stack.prometheus_url.empty()) {
    auto c = PrometheusClient::create(options.stack.prometheus_url, options.stack.timeout_ms);
    if (!c) return c.error();
    prometheus = std::move(*c);
  }
  auto store = StateStore::open(options.state_dir);
  if (!store) return store.error();
  auto st = (*store)->load(options.history_in_memory);
  if (!st) return st.error().wrap("loading " + options.state_dir.string());
  auto twin = make_testbed("sim");
  if (!twin) return twin.error();
  std::unique_ptr<Service> s(new Service(std::move(options), catalog, std::move(*store)));
  s->twin_ = std::move(*twin);
  s->prometheus_ = std::move(prometheus);
  if (auto tools = mapping::tool_catalog(catalog)) {
    s->tools_ = std::move(*tools);
  } else {
    s->tools_error_ = tools.error().what();
  }
  Status ok;
  try {
    ok = s->restore(*st, std::move(source));
  } catch (const nlohmann::json::exception& e) {
    // A stored plan or sample whose fields have the wrong type or range: a damaged state
    // directory is reported with its path, never a crash.
    return Error(s->options_.state_dir.string() + ": damaged state: " + e.what(),
                 Error::Kind::kDamaged);
  }
  // What restore finds wrong in the stored state names the state database.
  if (!ok) {
    return ok.error().kind() == Error::Kind::kDamaged
               ? ok.error().wrap((s->options_.state_dir / "serve.db").string())
               : ok.error();
  }
  // A state with models but no plan of exactly them gets one at start.
  std::string initial;
  {
    MutexLock lock(s->state_mutex_);
    if (!s->registry_.empty()) {
      const bool in_force = s->controller_->plan() != nullptr;
      if (s->history_.empty()) {
        initial = "start";
      } else if (!in_force) {
        initial = "restart";
      }
    }
  }
  s->planner_.start(initial);
  s->flusher_ = std::thread([p = s.get()] { p->flusher_loop(); });
  if (s->prometheus_) s->stack_poller_ = std::thread([p = s.get()] { p->stack_loop(); });
  return s;
}

Status Service::restore(const StoredState& st, std::unique_ptr<PredictorSource> source) {
  const auto names = catalog_->device_names();
  if (names.empty()) return Error("the catalog has no devices");
  const bool fresh = st.device.empty() && st.models.empty() && st.plans.empty();

  std::vector<json> initial;
  std::string device_name = st.device.empty() ? options_.device : st.device;
  if (fresh && !options_.workload_file.empty()) {
    auto w = load_workload(options_.workload_file, *catalog_);
    if (!w) return w.error();
    if (w->tools) {
      // The service places each burst as it comes (POST /v1/tools/place) next to the plan in
      // force; it does not plan ahead for a declared one.
      return Error(options_.workload_file + ":" + std::to_string(w->tools->line) +
                       ": tools: corun serve does not plan for a declared tool burst; place "
                       "each burst with POST /v1/tools/place, or plan the workload with "
                       "'corun plan'",
                   Error::Kind::kInvalidInput);
    }
    if (!w->node.single_gpu()) {
      return Error(options_.workload_file +
                       ": gpus/mig: corun serve serves one GPU; this "
                       "workload describes a node of " +
                       std::to_string(w->node.gpus()) +
                       " GPU(s) (run one corun serve per GPU, or run the node with 'corun run')",
                   Error::Kind::kInvalidInput);
    }
    YAML::Node root;
    try {
      root = YAML::LoadFile(options_.workload_file);
    } catch (const std::exception& e) {
      return Error(options_.workload_file + ": " + e.what());
    }
    if (!root["device"].IsScalar()) {
      return Error(options_.workload_file +
                   ": serve needs a catalog device name (inline devices are not served)");
    }
    device_name = root["device"].Scalar();
    for (const auto& m : root["models"]) initial.push_back(yaml_to_json(m));
  }
  const Device* d = catalog_->find_device(device_name);
  if (d == nullptr) {
    return Error("unknown catalog device '" + device_name + "'" + did_you_mean(device_name, names));
  }
  device_ = *d;
  if (st.device.empty()) {
    auto ok = store_->set_device(device_name);
    if (!ok) return ok;
  }

  MutexLock lock(state_mutex_);
  std::vector<ModelRegistry::Entry> entries;
  for (const auto& sm : st.models) {
    json spec = json::parse(sm.spec_json, nullptr, false);
    auto parsed = parse_model_json(spec, *catalog_);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      return Error("stored model '" + sm.name + "' no longer validates: " + e->message,
                   Error::Kind::kDamaged);
    }
    entries.push_back({sm.name, spec, std::get<ModelSpec>(parsed)});
  }
  for (auto& spec : initial) {
    auto parsed = parse_model_json(spec, *catalog_);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      return Error(options_.workload_file + ": " + e->field + ": " + e->message);
    }
    auto& m = std::get<ModelSpec>(parsed);
    auto ok = store_->insert_model(m.name, spec.dump());
    if (!ok) return ok;
    entries.push_back({m.name, spec, m});
  }
  registry_.restore(std::move(entries));
  for (const auto& e : registry_.entries()) telemetry_.track(e.name);
  for (const auto& [name, summary] : st.telemetry) telemetry_.restore(name, summary);
  for (const auto& p : st.plans) {
    json rec = json::parse(p.record_json, nullptr, false);
    if (!rec.is_object()) {
      return Error("stored plan " + std::to_string(p.id) + " is not JSON", Error::Kind::kDamaged);
    }
    history_.push_back(std::move(rec));
  }

  // The controller: the registered models, what telemetry taught (replayed in order), and the
  // plan in force; decision ids continue the stored ones.
  ControllerOptions co;
  co.solver = options_.solver;
  co.seed = options_.seed;
  co.threads = options_.solver_threads;
  co.learning = options_.learning;
  co.transitions = options_.transitions;
  co.admission = options_.admission;
  controller_ = std::make_unique<Controller>(registry_.workload(device_), std::move(source), co);
  std::vector<LearningSample> learned;
  for (std::size_t i = 0; i < st.learning.size(); ++i) {
    auto sample = learning_sample_from_json(json::parse(st.learning[i], nullptr, false));
    if (!sample) {
      return sample.error()
          .wrap("stored learning sample " + std::to_string(i + 1))
          .as(Error::Kind::kDamaged);
    }
    learned.push_back(std::move(*sample));
  }
  if (!learned.empty()) {
    if (auto ok = controller_->replay(learned); !ok) return ok.error();
  }
  if (!history_.empty()) {
    plan_ = history_.back();
    {
      MutexLock body(plan_body_mutex_);
      plan_body_ = std::make_shared<const std::string>(plan_body(plan_));
    }
    plan_id_ = json_number_or(plan_, "id", std::int64_t{0});
    decision_ = json_number_or(plan_, "decision", plan_id_.load());
    // The stored plan is the one in force when it covers exactly the registered models.
    if (auto stored = decision_in_force(plan_, registry_)) {
      controller_->restore(std::move(*stored));
    } else {
      controller_->continue_after(plan_id_.load(), decision_.load());
    }
  }
  return {};
}

Service::~Service() { stop(); }

void Service::stop() {
  {
    MutexLock lock(state_mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  flusher_cv_.notify_all();
  stack_cv_.notify_all();
  plan_cv_.notify_all();
  planner_.stop();
  if (flusher_.joinable()) flusher_.join();
  if (stack_poller_.joinable()) stack_poller_.join();
  flush_telemetry();
}

// ---------------------------------------------------------------------------------------------
// HTTP plumbing

HttpResponse Service::transport_error(int status, const std::string& path,
                                      const std::string& reason, const std::string& field) {
  metrics_.count_request(kTransportRoute, status);
  switch (status) {
    case 413:
      return error({413, "body_too_large",
                    "request body exceeds " + std::to_string(options_.max_body_bytes) + " bytes",
                    field});
    case 414:
      return error({414, "uri_too_long", "request target is too long", field});
    case 431:
      return error({431, "headers_too_large",
                    reason.empty() ? "request header fields are too large" : reason, field});
    case 404:
      return error({404, "not_found", "no route for this path", field});
    case 408:
      return error({408, "request_timeout",
                    reason.empty() ? "the request did not arrive in time" : reason, field});
    case 503:
      return error({503, "too_many_connections",
                    reason.empty() ? "too many open connections" : reason, field, 1});
    case 500:
      return error({500, "internal", reason.empty() ? "internal error" : reason, field});
    default:
      return error({status >= 400 && status < 600 ? status : 400, "bad_request",
                    !reason.empty() ? reason
                                    : "malformed HTTP request" +
                                          (path.empty() ? std::string() : " for " + path),
                    field});
  }
}

bool Service::authorised(const HttpRequest& req) const {
  const std::string& h = req.authorization;
  if (h.size() < 7 || lower(h.substr(0, 7)) != "bearer ") return false;
  std::string_view tok(h);
  tok.remove_prefix(7);
  while (!tok.empty() && tok.front() == ' ') tok.remove_prefix(1);
  return constant_time_equal(tok, options_.token);
}

std::variant<json, ApiError> Service::parse_body(const HttpRequest& req) const {
  if (req.body.size() > options_.max_body_bytes) {
    return ApiError{413, "body_too_large",
                    "request body exceeds " + std::to_string(options_.max_body_bytes) + " bytes",
                    ""};
  }
  if (req.body.empty()) return ApiError{400, "empty_body", "a JSON body is required", ""};
  const std::string ct = lower(req.content_type);
  if (ct.rfind("application/json", 0) != 0) {
    return ApiError{
        415, "unsupported_media_type",
        "Content-Type must be application/json" +
            (req.content_type.empty() ? std::string(" (none given)")
                                      : " (got '" + req.content_type.substr(0, 64) + "')"),
        ""};
  }
  JsonLimits limits;
  limits.max_depth = kMaxJsonDepth;
  auto parsed = parse_json_input(req.body, limits);
  if (auto* e = std::get_if<JsonInputError>(&parsed)) return body_error(*e);
  return std::move(std::get<json>(parsed));
}

HttpResponse Service::handle(const HttpRequest& req) {
  std::string_view label = kUnknownRoute;
  HttpResponse r;
  try {
    r = route(req, label);
  } catch (const std::exception& e) {
    // Bad input is answered with a 4xx before it gets here: this is a fault of the server.
    std::fprintf(stderr, "corun serve: internal error on %s %s: %s\n",
                 req.method.substr(0, 16).c_str(), req.path.substr(0, 128).c_str(), e.what());
    r = error({500, "internal", std::string("internal error: ") + e.what(), ""});
  } catch (...) {
    std::fprintf(stderr, "corun serve: internal error on %s %s: unknown exception\n",
                 req.method.substr(0, 16).c_str(), req.path.substr(0, 128).c_str());
    r = error({500, "internal", "internal error", ""});
  }
  metrics_.count_request(label, r.status);
  return r;
}

HttpResponse Service::storage_failure(const RouteCall& call, const Error& e) const {
  // Nothing was acknowledged; the operator learns of it here (a full disk is theirs to fix).
  std::fprintf(stderr, "corun serve: state not written on %s %s: %s\n",
               call.request.method.substr(0, 16).c_str(), call.request.path.substr(0, 128).c_str(),
               e.what().c_str());
  return error(storage_error(e));
}

HttpResponse Service::route(const HttpRequest& req, std::string_view& label) {
  if (!path_ok(req.path)) {
    return error({400, "bad_path",
                  "path must use letters, digits and '-._~/' without empty, '.' or '..' segments",
                  ""});
  }
  std::string path = req.path;
  if (path.size() > 1 && path.back() == '/') path.pop_back();
  const auto found = lookup_route(routes(), req.method, path);
  if (!found.label.empty()) label = found.label;
  if (found.route == nullptr && found.allowed.empty()) {
    return error({404, "not_found", "no route " + path.substr(0, 128), ""});
  }
  if (found.route == nullptr) {
    HttpResponse r = error({405, "method_not_allowed",
                            req.method.substr(0, 16) + " is not allowed on " + path +
                                " (allowed: " + join(found.allowed, ", ") + ")",
                            ""});
    r.headers.emplace_back("Allow", join(found.allowed, ", "));
    return r;
  }
  const Route<Service>& row = *found.route;
  if (row.access == Access::kToken && !authorised(req)) {
    return error({401, req.authorization.empty() ? "missing_token" : "bad_token",
                  req.authorization.empty() ? "this endpoint needs 'Authorization: Bearer TOKEN'"
                                            : "the bearer token is not valid",
                  ""});
  }
  RouteCall call{req, found.captured, json()};
  const bool read_body =
      row.body == BodyUse::kJson || (row.body == BodyUse::kOptionalJson && !req.body.empty());
  if (read_body) {
    auto body = parse_body(req);
    if (auto* e = std::get_if<ApiError>(&body)) {
      if (!row.body_field.empty() && !e->field.empty()) {
        e->field = std::string(row.body_field) + (e->field[0] == '[' ? "" : ".") + e->field;
      }
      return error(*e);
    }
    call.body = std::move(std::get<json>(body));
  }
  return (this->*row.handler)(call);
}

HttpResponse Service::get_openapi(const RouteCall&) { return json_response(200, openapi_json()); }

// ---------------------------------------------------------------------------------------------
// Models

HttpResponse Service::list_models(const RouteCall&) {
  json out = json::array();
  {
    MutexLock lock(state_mutex_);
    for (const auto& m : registry_.entries()) out.push_back(m.spec);
  }
  return json_response(200, {{"models", out}});
}

HttpResponse Service::get_model(const RouteCall& call) {
  MutexLock lock(state_mutex_);
  const auto* m = registry_.find(call.name);
  if (m == nullptr) return error({404, "unknown_model", "no model '" + call.name + "'", "name"});
  return json_response(200, {{"model", m->spec}});
}

HttpResponse Service::register_model(const RouteCall& call) {
  const json& body = call.body;
  auto parsed = parse_model_json(body, *catalog_);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error(*e);
  ModelSpec& m = std::get<ModelSpec>(parsed);
  // ?if_fits=true: a reservation (the extender's bind, serve/extender.h) — the model joins only
  // when a plan holds every SLA with it. The check and the insert share the mutation lock, so
  // two reservations for the last headroom cannot both pass.
  bool if_fits = false;
  if (const auto q = call.request.query.find("if_fits"); q != call.request.query.end()) {
    if (q->second != "true" && q->second != "false") {
      return error({400, "bad_value", "if_fits must be true or false", "if_fits"});
    }
    if_fits = q->second == "true";
  }
  MutexLock mutate(mutate_mutex_);
  Workload with;
  {
    MutexLock lock(state_mutex_);
    if (auto refused = registry_.admission_error(m.name)) return error(*refused);
    if (if_fits) with = registry_.workload(device_);
  }
  if (if_fits) {
    with.models.push_back(m);
    auto d = controller_->plan_for(with, "reserve " + m.name);
    if (!d) return error({503, "planning_failed", d.error().what(), ""});
    if (!d->feasible) {
      std::vector<std::string> why;
      for (const auto& i : d->infeasible) why.push_back(i.message());
      return error({409, "does_not_fit",
                    "model '" + m.name + "' does not fit next to the registered models: " +
                        (why.empty() ? std::string("no plan holds every SLA") : join(why, "; ")),
                    ""});
    }
  }
  const std::string text = body.dump(-1, ' ', true, json::error_handler_t::replace);
  auto ok = store_->insert_model(m.name, text);
  if (!ok) return storage_failure(call, ok.error());
  const std::string name = m.name;
  {
    MutexLock lock(state_mutex_);
    registry_.add({name, body, std::move(m)});
    telemetry_.track(name);
    controller_->set_workload(registry_.workload(device_));
  }
  planner_.request("register " + name);
  return json_response(201, {{"model", body}});
}

HttpResponse Service::remove_model(const RouteCall& call) {
  const std::string& name = call.name;
  MutexLock mutate(mutate_mutex_);
  {
    MutexLock lock(state_mutex_);
    if (registry_.find(name) == nullptr) {
      return error({404, "unknown_model", "no model '" + name + "'", "name"});
    }
  }
  auto ok = store_->delete_model(name);
  if (!ok) return storage_failure(call, ok.error());
  {
    MutexLock lock(state_mutex_);
    registry_.remove(name);
    telemetry_.forget(name);
    controller_->set_workload(registry_.workload(device_));
  }
  planner_.request("remove " + name);
  return json_response(200, {{"removed", name}});
}

HttpResponse Service::update_demand(const RouteCall& call) {
  if (!call.body.is_object()) {
    return error({400, "bad_type", "demand must be a JSON object", "demand"});
  }
  auto changed = change_demand(call.name, call.body);
  if (auto* e = std::get_if<ApiError>(&changed)) return error(*e);
  if (auto* e = std::get_if<Error>(&changed)) return storage_failure(call, *e);
  return json_response(200, {{"model", std::get<json>(changed)}});
}

std::variant<json, ApiError, Error> Service::change_demand(const std::string& name,
                                                           const json& demand) {
  MutexLock mutate(mutate_mutex_);
  json spec;
  {
    MutexLock lock(state_mutex_);
    const auto* m = registry_.find(name);
    if (m == nullptr) return ApiError{404, "unknown_model", "no model '" + name + "'", "name"};
    spec = m->spec;
  }
  spec["demand"] = demand;
  auto parsed = parse_model_json(spec, *catalog_);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  auto ok = store_->update_model(name, spec.dump(-1, ' ', true, json::error_handler_t::replace));
  if (!ok) return ok.error();
  {
    MutexLock lock(state_mutex_);
    registry_.update(name, spec, std::move(std::get<ModelSpec>(parsed)));
    controller_->set_workload(registry_.workload(device_));
  }
  planner_.request("demand " + name);
  return spec;
}

HttpResponse Service::post_whatif(const RouteCall& call) {
  auto parsed = parse_model_json(call.body, *catalog_);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error(*e);
  const ModelSpec& m = std::get<ModelSpec>(parsed);
  Workload current;
  std::optional<double> before;
  {
    MutexLock lock(state_mutex_);
    if (auto refused = registry_.admission_error(m.name)) return error(*refused);
    current = registry_.workload(device_);
    // The plan in force is "before" when it covers exactly the registered models.
    const json& ms = plan_.contains("models") ? plan_["models"] : json();
    bool covers = ms.is_object() && ms.size() == registry_.size() &&
                  plan_.contains("predicted_utility") && plan_["predicted_utility"].is_number();
    for (const auto& r : registry_.entries()) covers = covers && ms.contains(r.name);
    if (registry_.empty()) {
      before = 0.0;
    } else if (covers) {
      before = plan_["predicted_utility"].get<double>();
    }
  }
  if (!before) {
    // No plan of these models yet (the first is being computed): search them as they are.
    auto d = controller_->plan_for(current, "whatif");
    if (!d) return error({503, "planning_failed", d.error().what(), ""});
    before = d->predicted_utility;
  }
  Workload with = current;
  with.models.push_back(m);
  auto d = controller_->plan_for(with, "whatif " + m.name);
  if (!d) return error({503, "planning_failed", d.error().what(), ""});
  json breaks = json::array();
  for (const auto& i : d->infeasible) breaks.push_back(infeasibility_json(i));
  json why = json::array();
  for (const auto& i : d->infeasible) why.push_back(i.message());
  const json plan = {{"feasible", d->feasible},
                     {"predicted_utility", d->predicted_utility},
                     {"source", d->source},
                     {"solver", options_.solver},
                     {"device", device_.name},
                     {"evaluated", d->stats.evaluated},
                     {"decision_ms", d->decision_ms},
                     {"infeasible", why},
                     {"models", decision_models_json(*d, with)}};
  return json_response(200, {{"model", m.name},
                             {"fits", d->feasible},
                             {"gpu", 0},
                             {"opens_gpu", current.models.empty()},
                             {"utility_before", *before},
                             {"utility_after", d->predicted_utility},
                             {"utility_gain", d->predicted_utility - *before},
                             {"breaks", breaks},
                             {"plan", plan}});
}

HttpResponse Service::post_tools_place(const RouteCall& call) {
  const auto started = std::chrono::steady_clock::now();
  if (!tools_) {
    return error({503, "no_tools", "the catalog describes no tools: " + tools_error_, ""});
  }
  auto parsed = parse_place_request(call.body, *tools_, device_.name);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error(*e);
  const PlaceRequest& req = std::get<PlaceRequest>(parsed);
  Workload workload;
  std::optional<Decision> in_force;
  json entries = json::array();
  {
    MutexLock lock(state_mutex_);
    if (!registry_.empty()) {
      in_force = decision_in_force(plan_, registry_);
      if (!in_force) {
        return error({503, "no_plan",
                      "no plan of the registered models is in force yet (a re-plan is under "
                      "way); retry when GET /v1/plan shows one",
                      ""});
      }
      workload = registry_.workload(device_);
      for (const auto& e : registry_.entries()) entries.push_back({e.name, e.spec});
    }
  }
  // Without registered models the tools have the GPU to themselves.
  std::shared_ptr<const mapping::CoRunners> co;
  const std::int64_t plan_id = in_force ? in_force->id : 0;
  if (in_force) {
    const std::string key = std::to_string(plan_id) + "|" + std::to_string(req.scenario.seed) +
                            "|" + device_.name + "|" + entries.dump();
    auto c = cached_corunners(key, workload, in_force->config, plan_id, req.scenario.seed);
    if (!c) return error({503, "corunners_failed", c.error().what(), ""});
    co = *c;
  }
  auto problem = mapping::PlacementProblem::build(req.scenario, *tools_, *catalog_, co);
  if (!problem) return error({422, "invalid_spec", problem.error().what(), "scenario"});
  auto placed = mapping::place(*problem, {req.policy, "builtin", std::nullopt}, req.scenario.seed);
  if (!placed) return error({500, "internal", placed.error().what(), ""});
  std::vector<mapping::SlaOutcome> during;
  if (co && !placed->truth.failed) {
    auto o = co->during(placed->truth.burst, *twin_);
    if (!o) return error({503, "corunners_failed", o.error().what(), ""});
    during = std::move(*o);
  }
  json answer =
      placement_answer_json(*problem, req, *placed, plan_id, during, std::string(twin_->name()));
  answer["decision_ms"] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return json_response(200, answer);
}

Result<std::shared_ptr<const mapping::CoRunners>> Service::cached_corunners(
    const std::string& key, const Workload& workload, const JointConfig& config,
    std::int64_t plan_id, std::uint64_t seed) {
  {
    MutexLock lock(corunners_mutex_);
    for (const auto& [k, co] : corunners_cache_) {
      if (k == key) return co;
    }
  }
  auto c = plan_corunners(workload, config, plan_id, *twin_, seed);
  if (!c) return c;
  MutexLock lock(corunners_mutex_);
  if (corunners_cache_.size() >= kCoRunnersCached) corunners_cache_.pop_front();
  corunners_cache_.emplace_back(key, *c);
  return c;
}

// ---------------------------------------------------------------------------------------------
// Telemetry

HttpResponse Service::post_telemetry(const RouteCall& call) {
  // Validate everything before touching state, so that a bad sample changes nothing.
  auto parsed = parse_telemetry(call.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error(*e);
  const auto& samples = std::get<std::vector<TelemetrySample>>(parsed);
  const bool batch = call.body.is_array();

  std::int64_t current = 0;
  Ingested in;
  {
    MutexLock lock(state_mutex_);
    for (std::size_t i = 0; i < samples.size(); ++i) {
      if (registry_.find(samples[i].model) == nullptr) {
        return error({404, "unknown_model", "no model '" + samples[i].model.substr(0, 64) + "'",
                      batch ? "[" + std::to_string(i) + "].model" : "model"});
      }
    }
    const auto plan = controller_->plan();
    current = plan ? plan->id : 0;
    in = ingest_locked(samples, current);
  }
  // What the samples taught is durable before they are acknowledged.
  if (auto ok = store_->append_learning(in.learned); !ok) {
    return storage_failure(call, ok.error());
  }
  if (in.wants.replan) planner_.request(in.wants.reason);
  metrics_.count_samples(samples.size());
  json out = {{"accepted", samples.size()}, {"breaches", in.breaches}, {"plan_id", current}};
  if (!in.held.empty()) {
    json held = json::array();
    for (const auto& i : in.held) held.push_back({{"metric", i.metric}, {"reason", i.detail}});
    out["held"] = std::move(held);
  }
  return json_response(202, out);
}

Service::Ingested Service::ingest_locked(const std::vector<TelemetrySample>& samples,
                                         std::int64_t current) {
  Ingested in;
  const auto plan = controller_->plan();
  for (const auto& given : samples) {
    const auto index = registry_.index_of(given.model);
    if (!index) continue;
    const std::size_t m = *index;
    // A sample without a plan id is taken to be of the plan in force.
    const std::int64_t of = given.plan_id.value_or(current);
    if (!plan || of != current || m >= plan->config.size() || plan->config[m] == kAbsent) {
      // Observed under another plan: it teaches nothing about this one, but an SLA it broke
      // was broken (the ledger counts what was measured).
      const bool breach =
          measured_breach(registry_.entries()[m].model, given.observation(m, kAbsent));
      telemetry_.record(given, true, breach);
      in.breaches += breach ? 1 : 0;
      continue;
    }
    // A lone window far outside the model's noise neither teaches nor breaches until the next
    // window confirms it (StackTelemetryOptions::outliers).
    TelemetrySample s = given;
    auto& [judged, gate] = outliers_[s.model];
    if (judged != of) gate = OutlierGate();  // a new plan: its own noise
    judged = of;
    const auto held = hold_outliers(s, gate, options_.stack.outliers);
    in.held.insert(in.held.end(), held.begin(), held.end());
    const ModelObservation o = s.observation(m, plan->config[m]);
    std::vector<LearningSample> taught;
    const ObservationResult r = controller_->observe(std::span(&o, 1), of, &taught);
    for (const auto& x : taught) in.learned.push_back(to_json(x).dump());
    const bool breach = m < r.breach.size() && r.breach[m];
    telemetry_.record(s, false, breach);
    in.breaches += breach ? 1 : 0;
    if (r.replan && !in.wants.replan) in.wants = r;
  }
  return in;
}

json Service::learning_json() const {
  const auto state = controller_->learning_state();
  const Workload w = controller_->workload();
  json out = json::object();
  for (std::size_t m = 0; m < state.size() && m < w.models.size(); ++m) {
    out[w.models[m].name] = learning_state_json(state[m]);
  }
  return out;
}

HttpResponse Service::get_telemetry(const RouteCall&) {
  json out = json::object();
  const json learning = learning_json();
  {
    MutexLock lock(state_mutex_);
    for (const auto& m : registry_.entries()) {
      json t = telemetry_.to_json(m.name);
      if (learning.contains(m.name)) t["learning"] = learning[m.name];
      out[m.name] = std::move(t);
    }
    if (prometheus_) {
      return json_response(200, {{"models", out},
                                 {"flush_interval_ms", options_.telemetry_flush_ms},
                                 {"stack", stack_json_locked()}});
    }
  }
  return json_response(200, {{"models", out}, {"flush_interval_ms", options_.telemetry_flush_ms}});
}

void Service::flush_telemetry() {
  std::vector<std::pair<std::string, std::string>> rows;
  {
    MutexLock lock(state_mutex_);
    rows = telemetry_.take_dirty();
  }
  if (rows.empty()) return;
  auto ok = store_->save_telemetry(rows);
  if (!ok) {
    std::fprintf(stderr, "corun serve: telemetry flush failed: %s\n", ok.error().what().c_str());
    MutexLock lock(state_mutex_);
    telemetry_.mark_dirty();
  }
}

void Service::flusher_loop() {
  MutexLock lock(state_mutex_);
  while (!stopping_) {
    const auto due =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.telemetry_flush_ms);
    while (!stopping_ && flusher_cv_.wait_until(lock, due)) {
    }
    if (stopping_) break;
    lock.unlock();
    flush_telemetry();
    lock.lock();
  }
}

// ---------------------------------------------------------------------------------------------
// Planning

HttpResponse Service::post_replan(const RouteCall& call) {
  if (!call.request.body.empty() && (!call.body.is_object() || !call.body.empty())) {
    return error({400, "unexpected_body", "replan takes no parameters (send {} or nothing)", ""});
  }
  planner_.request("requested");
  return json_response(
      202, {{"requested", true}, {"plan_id", plan_id_.load()}, {"decision", decision_.load()}});
}

Status Service::plan_once(const std::string& reason) {
  std::uint64_t generation = 0;
  bool empty = false;
  {
    MutexLock lock(state_mutex_);
    generation = registry_.generation();
    empty = registry_.empty();
  }
  json rec = {{"created_at", now_iso8601()},
              {"reason", reason},
              {"solver", options_.solver},
              {"device", device_.name}};
  json models = json::object();
  std::int64_t id = 0;
  std::int64_t decision = 0;
  double decision_ms = 0;
  std::shared_ptr<const Decision> before;  // the plan in force when the decision started
  bool changed = true;                     // the decision changed what runs
  if (empty) {
    // Nothing to plan: an empty plan says so (its id continues the sequence).
    id = plan_id_.load() + 1;
    decision = decision_.load() + 1;
    controller_->continue_after(id, decision);
    rec["feasible"] = true;
    rec["predicted_utility"] = 0.0;
    rec["evaluated"] = 0;
    rec["infeasible"] = json::array();
  } else {
    controller_->advance_to(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
    before = controller_->plan();
    auto decided = controller_->replan(reason);
    if (!decided) return decided.error();
    if (!*decided) {
      // The model set changed during the search: the controller wants another decision.
      planner_.request(reason);
      return {};
    }
    const Decision& d = **decided;
    const Workload w = controller_->workload();
    id = d.id;
    decision = d.decision;
    decision_ms = d.decision_ms;
    rec["source"] = d.source;
    rec["feasible"] = d.feasible;
    rec["predicted_utility"] = d.predicted_utility;
    rec["evaluated"] = d.stats.evaluated;
    json why = json::array();
    for (const auto& i : d.infeasible) why.push_back(i.message());
    rec["infeasible"] = why;
    models = decision_models_json(d, w);
    // The changes from the plan in force, and what applying them costs (space/transition.h).
    rec["transition"] = to_json(d.transition);
    changed = !before || before->config != d.config || before->admitted != d.admitted;
  }
  rec["id"] = id;
  rec["decision"] = decision;
  rec["decision_ms"] = decision_ms;
  rec["models"] = models;

  // The user's deployer applies a plan that changes what runs before it counts as in force; a
  // failure keeps the previous plan in force (in the controller too) and says so.
  if (changed && before && !options_.on_plan.command.empty()) {
    const HookOutcome hook = run_plan_hook(options_.on_plan, rec.dump() + "\n");
    metrics_.count_hook(hook.applied);
    const json outcome = {{"plan_id", id},
                          {"applied", hook.applied},
                          {"reason", hook.reason},
                          {"elapsed_ms", hook.elapsed_ms},
                          {"output", hook.output}};
    if (!hook.applied) {
      std::fprintf(stderr,
                   "corun serve: --on-plan did not apply plan %lld (%s): %s; plan %lld "
                   "stays in force\n",
                   static_cast<long long>(id), hook.reason.c_str(), hook.output.c_str(),
                   static_cast<long long>(before->id));
      controller_->restore(*before);
      std::shared_ptr<const std::string> body;
      {
        MutexLock lock(state_mutex_);
        plan_["on_plan"] = outcome;
        body = std::make_shared<const std::string>(plan_body(plan_));
      }
      {
        MutexLock body_lock(plan_body_mutex_);
        plan_body_.swap(body);
      }
      decision_ = decision;  // decided, and reported as not applied
      plan_cv_.notify_all();
      return {};
    }
    rec["on_plan"] = outcome;
  }

  // Publish: durable first, then visible. The mutation lock makes "the models this plan was
  // made for" and "the models registered" the same set at the moment of the write.
  MutexLock mutate(mutate_mutex_);
  {
    MutexLock lock(state_mutex_);
    // The model set changed: a re-plan is pending.
    if (generation != registry_.generation()) return {};
  }
  // Keyed by decision: the history keeps every decision, those that kept the plan's id too.
  auto ok = store_->append_plan(decision, rec.dump());
  if (!ok) return ok;
  metrics_.observe_decision(decision_ms / 1e3);
  metrics_.count_replan();
  // Everything is built outside the lock; the critical section only moves and swaps, so a
  // planner descheduled there (it runs at low priority) holds request handlers up the least.
  auto body = std::make_shared<const std::string>(plan_body(rec));
  json copy = rec;
  {
    MutexLock lock(state_mutex_);
    plan_.swap(rec);
    history_.push_back(std::move(copy));
    if (history_.size() > options_.history_in_memory) history_.pop_front();
    plan_id_ = id;
    decision_ = decision;
  }
  {
    MutexLock lock(plan_body_mutex_);
    plan_body_.swap(body);
  }
  plan_cv_.notify_all();
  return {};
}

bool Service::wait_for_plan(std::int64_t after, int timeout_ms) {
  return wait_for(plan_id_, after, timeout_ms);
}

bool Service::wait_for_decision(std::int64_t after, int timeout_ms) {
  return wait_for(decision_, after, timeout_ms);
}

bool Service::wait_for(const std::atomic<std::int64_t>& counter, std::int64_t after,
                       int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  MutexLock lock(state_mutex_);
  while (counter.load() <= after && !stopping_) {
    if (!plan_cv_.wait_until(lock, deadline)) break;
  }
  return counter.load() > after;
}

HttpResponse Service::get_plan(const RouteCall&) {
  // The hottest read: the serialised plan is shared, so no JSON work and no state lock here.
  std::shared_ptr<const std::string> body;
  {
    MutexLock lock(plan_body_mutex_);
    body = plan_body_;
  }
  if (!body) {
    MutexLock lock(state_mutex_);
    return error(
        {404, "no_plan",
         registry_.empty() ? "no models are registered" : "the first plan is being computed", ""});
  }
  // The stored plan plus what was learned since it was made: each model's prediction error and
  // the margin it is planned with now.
  HttpResponse r;
  r.body = body->substr(0, body->rfind('}'));
  r.body += ",\"learning\":" + learning_json().dump(-1, ' ', true, json::error_handler_t::replace);
  r.body += ",\"catalog\":" + catalog_record_;
  if (prometheus_) {
    MutexLock lock(state_mutex_);
    r.body +=
        ",\"telemetry\":" + stack_json_locked().dump(-1, ' ', true, json::error_handler_t::replace);
  }
  r.body += "}\n";
  return r;
}

HttpResponse Service::get_history(const RouteCall& call) {
  const HttpRequest& req = call.request;
  std::size_t limit = 50;
  const auto it = req.query.find("limit");
  if (it != req.query.end()) {
    const std::string& v = it->second;
    char* end = nullptr;
    const long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || v.size() > 6 || *end != '\0' || n < 1 || n > 1000) {
      return error({400, "bad_parameter", "limit must be an integer in [1, 1000]", "limit"});
    }
    limit = static_cast<std::size_t>(n);
  }
  for (const auto& [k, v] : req.query) {
    (void)v;
    if (k != "limit") {
      return error({400, "unknown_parameter", "unknown query parameter '" + k.substr(0, 64) + "'",
                    k.substr(0, 64)});
    }
  }
  json plans = json::array();
  {
    MutexLock lock(state_mutex_);
    const std::size_t from = history_.size() > limit ? history_.size() - limit : 0;
    for (std::size_t i = from; i < history_.size(); ++i) plans.push_back(history_[i]);
  }
  return json_response(200, {{"plans", plans}});
}

HttpResponse Service::get_health(const RouteCall&) {
  const PlannerStatus planner = planner_.status();
  MutexLock lock(state_mutex_);
  json out = {{"status", "ok"},
              {"models", registry_.size()},
              {"plan_id", plan_id_.load()},
              {"decision", decision_.load()},
              {"replanning", planner.replanning},
              {"replan_pending", planner.pending},
              {"device", device_.name}};
  if (!planner.last_error.empty()) out["last_plan_error"] = planner.last_error;
  if (prometheus_ && !prometheus_up_) {
    // Still serving the plan in force, but learning nothing: degraded, not down.
    out["status"] = "degraded";
    out["telemetry_error"] = prometheus_error_;
  }
  return json_response(200, out);
}

HttpResponse Service::get_metrics(const RouteCall&) {
  ServeGauges g;
  {
    MutexLock lock(state_mutex_);
    g.models = registry_.size();
    g.plan_id = plan_id_.load();
    for (const auto& m : registry_.entries()) {
      g.breaches.emplace_back(m.name, telemetry_.at(m.name).breaches);
    }
    if (prometheus_) {
      g.prometheus_up = prometheus_up_;
      for (const auto& [name, st] : stack_status_) {
        ServeGauges::StackModel sm{name, st.learned, {}};
        for (const auto& i : st.issues) sm.issues.push_back(i.quality);
        g.stack.push_back(std::move(sm));
      }
      if (gpu_reading_ && gpu_reading_->sm_active) g.gpu_sm_active = *gpu_reading_->sm_active;
      if (gpu_predicted_) {
        g.gpu_sm_active_predicted = gpu_predicted_->sm_util;
        g.gpu_unexplained_load = unexplained_.present();
      }
    }
  }
  {
    // From the plan record in force, by model name.
    MutexLock lock(state_mutex_);
    const json* ms = plan_.is_object() && plan_.contains("models") ? &plan_["models"] : nullptr;
    if (ms != nullptr && ms->is_object()) {
      for (const auto& [name, m] : ms->items()) {
        ServeGauges::PlanModel pm;
        pm.model = name;
        pm.best_effort = m.value("best_effort", false);
        pm.admitted = json_number_or(m, "admitted", 1.0);
        if (json_number_or(m, "index", std::int32_t{0}) == kAbsent) pm.admitted = 0;
        pm.feasible = !pm.best_effort && pm.admitted >= 1;
        g.plan_models.push_back(std::move(pm));
      }
    }
  }
  const auto state = controller_->learning_state();
  const Workload w = controller_->workload();
  for (std::size_t m = 0; m < state.size() && m < w.models.size(); ++m) {
    g.learning.emplace_back(w.models[m].name, state[m]);
  }
  HttpResponse r;
  r.status = 200;
  r.content_type = "text/plain; version=0.0.4";
  r.body = render_prometheus(metrics_.snapshot(), g);
  return r;
}

}  // namespace corun::serve
