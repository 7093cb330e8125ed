#include "corun/serve/service.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>

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

// The models and device of `file`, the workload a new state starts from: one GPU, no declared
// tool burst, a catalog device. `device_name` becomes its device.
Status read_initial_models(const std::string& file, const Catalog& catalog,
                           std::string& device_name, std::vector<json>& initial) {
  auto w = load_workload(file, catalog);
  if (!w) return w.error();
  if (w->tools) {
    // The service places each burst as it comes (POST /v1/tools/place) next to the plan in
    // force; it does not plan ahead for a declared one.
    return Error(file + ":" + std::to_string(w->tools->line) +
                     ": tools: corun serve does not plan for a declared tool burst; place "
                     "each burst with POST /v1/tools/place, or plan the workload with "
                     "'corun plan'",
                 Error::Kind::kInvalidInput);
  }
  if (!w->node.single_gpu()) {
    return Error(file +
                     ": gpus/mig: corun serve serves one GPU; this "
                     "workload describes a node of " +
                     std::to_string(w->node.gpus()) +
                     " GPU(s) (run one corun serve per GPU, or run the node with 'corun run')",
                 Error::Kind::kInvalidInput);
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const std::exception& e) {
    return Error(file + ": " + e.what());
  }
  if (!root["device"].IsScalar()) {
    return Error(file + ": serve needs a catalog device name (inline devices are not served)");
  }
  device_name = root["device"].Scalar();
  for (const auto& m : root["models"]) initial.push_back(yaml_to_json(m));
  return {};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Construction and recovery

Service::Service(const Context& ctx, ServiceOptions options, const Catalog& catalog,
                 std::unique_ptr<StateStore> store)
    : ctx_(ctx),
      options_(std::move(options)),
      catalog_(&catalog),
      catalog_record_(exporting::catalog_record_json(catalog).dump()),
      store_(std::move(store)),
      metrics_(metric_labels(routes())),
      planner_([this](const std::string& reason) { return plan_once(reason); },
               options_.min_replan_interval_ms) {}

Result<std::unique_ptr<Service>> Service::open(const Context& ctx, ServiceOptions options,
                                               const Catalog& catalog,
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
  std::unique_ptr<Service> s(new Service(ctx, std::move(options), catalog, std::move(*store)));
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
  if (s->prometheus_ && s->options_.stack.poll)
    s->stack_poller_ = std::thread([p = s.get()] { p->stack_loop(); });
  return s;
}

Status Service::restore(const StoredState& st, std::unique_ptr<PredictorSource> source) {
  const auto names = catalog_->device_names();
  if (names.empty()) return Error("the catalog has no devices");
  const bool fresh = st.device.empty() && st.models.empty() && st.plans.empty();

  std::vector<json> initial;
  std::string device_name = st.device.empty() ? options_.device : st.device;
  if (fresh && !options_.workload_file.empty()) {
    if (auto ok = read_initial_models(options_.workload_file, *catalog_, device_name, initial);
        !ok) {
      return ok;
    }
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
  if (auto ok = restore_models_locked(st, initial); !ok) return ok;
  return restore_controller_locked(st, std::move(source));
}

Status Service::restore_models_locked(const StoredState& st, const std::vector<json>& initial) {
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
  for (const auto& spec : initial) {
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
  return {};
}

Status Service::restore_controller_locked(const StoredState& st,
                                          std::unique_ptr<PredictorSource> source) {
  // The controller: the registered models, what telemetry taught (replayed in order), and the
  // plan in force; decision ids continue the stored ones.
  ControllerOptions co;
  co.solver = options_.solver;
  co.learning = options_.learning;
  co.transitions = options_.transitions;
  co.admission = options_.admission;
  controller_ =
      std::make_unique<Controller>(ctx_, registry_.workload(device_), std::move(source), co);
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
      InForce in_force{{}, std::make_shared<const Decision>(*stored)};
      for (const auto& r : registry_.entries()) in_force.names.push_back(r.name);
      in_force_ = std::make_shared<const InForce>(std::move(in_force));
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

}  // namespace corun::serve
