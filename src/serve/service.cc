#include "corun/serve/service.h"

#include <sys/resource.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>

#include "corun/core/atomic_file.h"
#include "corun/core/check.h"
#include "corun/core/json_number.h"
#include "corun/core/rng.h"
#include "corun/core/strings.h"
#include "corun/plan/objective.h"
#include "corun/runtime/surrogate_source.h"
#include "corun/runtime/testbed_predictor.h"
#include "corun/serve/json_input.h"
#include "corun/serve/openapi.h"
#include "corun/testbed/testbed.h"

namespace corun::serve {

using nlohmann::json;

namespace {

constexpr int kMaxJsonDepth = 16;
constexpr std::size_t kMaxModels = 64;
constexpr std::size_t kMaxSamplesPerPost = 256;
constexpr double kMaxMetric = 1e9;
constexpr double kMaxMargin = 5;

enum RouteIndex : std::size_t {
  kHealthz,
  kMetricsRoute,
  kModels,
  kModel,
  kDemand,
  kTelemetry,
  kPlan,
  kHistory,
  kReplan,
  kWhatIf,
  kOpenApi,
  kUnknown,
  kTransport
};

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

json predicted_json(const Predicted& p) {
  auto num = [](float v) -> json {
    if (!std::isfinite(v) || v >= std::numeric_limits<float>::max()) return nullptr;
    return static_cast<double>(v);
  };
  return {{"latency_ms_p95", num(p.latency_ms_p95)},
          {"ttft_ms_p95", num(p.ttft_ms_p95)},
          {"tpot_ms_p95", num(p.tpot_ms_p95)},
          {"throughput", num(p.throughput)}};
}

Predicted predicted_from_json(const json& j) {
  Predicted p;
  auto get = [&](const char* k) {
    const auto it = j.find(k);
    if (it == j.end() || !it->is_number()) return std::numeric_limits<float>::max();
    return static_cast<float>(it->get<double>());
  };
  if (!j.is_object()) return p;
  p.latency_ms_p95 = get("latency_ms_p95");
  p.ttft_ms_p95 = get("ttft_ms_p95");
  p.tpot_ms_p95 = get("tpot_ms_p95");
  p.throughput = get("throughput");
  if (p.throughput == std::numeric_limits<float>::max()) p.throughput = 0;
  return p;
}

// "imgsz=640,precision=awq" -> {"imgsz": 640, "precision": "awq"}.
json settings_json(const std::string& described) {
  json out = json::object();
  for (const auto& kv : split(described, ',')) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = kv.substr(0, eq);
    const std::string value = kv.substr(eq + 1);
    char* end = nullptr;
    const double d = std::strtod(value.c_str(), &end);
    if (!value.empty() && end != nullptr && *end == '\0') {
      out[key] = d;
    } else {
      out[key] = value;
    }
  }
  return out;
}

// A stored plan's per-model prediction back as Predicted (null fields: 0).
Predicted predicted_or_zero(const json& j) {
  Predicted p = predicted_from_json(j);
  for (float* v : {&p.latency_ms_p95, &p.ttft_ms_p95, &p.tpot_ms_p95, &p.throughput}) {
    if (*v >= std::numeric_limits<float>::max()) *v = 0;
  }
  return p;
}

json margin_json(const Margin& g) {
  return {{"latency", g.latency}, {"ttft", g.ttft}, {"tpot", g.tpot}};
}

Margin margin_from_json(const json& j) {
  Margin g;
  if (j.is_number()) return Margin::uniform(j.get<double>());
  if (!j.is_object()) return g;
  g.latency = j.value("latency", 0.0);
  g.ttft = j.value("ttft", 0.0);
  g.tpot = j.value("tpot", 0.0);
  return g;
}

// The per-model part of a plan record: what each model runs and what it is predicted to do.
json decision_models_json(const Decision& d, const Workload& w) {
  json models = json::object();
  for (std::size_t m = 0; m < d.config.size() && m < w.models.size(); ++m) {
    const auto l = d.config[m];
    json e = {{"index", l},
              {"margin", margin_json(d.margins[m])},
              {"predicted", predicted_json(d.predicted[m])},
              {"base", predicted_json(d.base[m])},
              {"best_effort", m < d.best_effort.size() && d.best_effort[m]}};
    if (l >= 0) {
      const std::string desc = w.models[m].describe(static_cast<std::size_t>(l));
      e["settings"] = desc;
      e["config"] = settings_json(desc);
    }
    models[w.models[m].name] = e;
  }
  return models;
}

// One SLA a plan cannot hold, as POST /v1/whatif names it.
json infeasibility_json(const Infeasibility& i) {
  auto num = [](double v) -> json {
    if (!std::isfinite(v)) return nullptr;
    return v;
  };
  return {{"model", i.name},       {"sla", i.sla_key},
          {"limit", num(i.limit)}, {"best", num(i.best)},
          {"alone", i.alone},      {"cause", i.cause},
          {"reason", i.message()}};
}

json learning_state_json(const ModelLearningState& s) {
  return {{"prediction_error", s.last_error},
          {"abs_error", s.abs_error},
          {"margin", s.margin},
          {"z", s.z},
          {"noise_sd", s.noise_sd},
          {"shared_error", s.shared_error},
          {"observations", s.observations},
          {"misses", s.misses}};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Construction and recovery

Service::Service(ServiceOptions options, const Catalog& catalog,
                 std::unique_ptr<StateStore> store)
    : options_(std::move(options)), catalog_(&catalog), store_(std::move(store)) {}

Result<std::unique_ptr<Service>> Service::open(ServiceOptions options, const Catalog& catalog,
                                               std::unique_ptr<PredictorSource> source) {
  if (options.token.empty()) return Error("serve needs a non-empty bearer token");
  if (!source) return Error("serve needs a predictor source");
  if (auto solver = make_solver(options.solver); !solver) return solver.error().wrap("--solver");
  auto store = StateStore::open(options.state_dir);
  if (!store) return store.error();
  auto st = (*store)->load(options.history_in_memory);
  if (!st) return st.error().wrap("loading " + options.state_dir.string());
  std::unique_ptr<Service> s(new Service(std::move(options), catalog, std::move(*store)));
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
  s->planner_ = std::thread([p = s.get()] { p->planner_loop(); });
  s->flusher_ = std::thread([p = s.get()] { p->flusher_loop(); });
  return s;
}

std::optional<Service::ApiError> Service::admission_error_locked(const std::string& name) const {
  if (index_.count(name) != 0) {
    return ApiError{409, "duplicate_model", "model '" + name + "' is already registered", "name"};
  }
  if (models_.size() >= kMaxModels) {
    return ApiError{422, "too_many_models",
                    "at most " + std::to_string(kMaxModels) + " models are served", ""};
  }
  return std::nullopt;
}

Workload Service::workload_locked() const {
  Workload w;
  w.file = "<serve>";
  w.device = device_;
  for (const auto& m : models_) w.models.push_back(m.model);
  return w;
}

Status Service::restore(const StoredState& st, std::unique_ptr<PredictorSource> source) {
  const auto names = catalog_->device_names();
  if (names.empty()) return Error("the catalog has no devices");
  wrapper_device_ = names.front();
  const bool fresh = st.device.empty() && st.models.empty() && st.plans.empty();

  std::vector<json> initial;
  std::string device_name = st.device.empty() ? options_.device : st.device;
  if (fresh && !options_.workload_file.empty()) {
    auto w = load_workload(options_.workload_file, *catalog_);
    if (!w) return w.error();
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

  for (const auto& sm : st.models) {
    json spec = json::parse(sm.spec_json, nullptr, false);
    auto parsed = parse_model(spec);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      return Error("stored model '" + sm.name + "' no longer validates: " + e->message,
                   Error::Kind::kDamaged);
    }
    models_.push_back({sm.name, spec, std::get<ModelSpec>(parsed)});
  }
  for (auto& spec : initial) {
    auto parsed = parse_model(spec);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      return Error(options_.workload_file + ": " + e->field + ": " + e->message);
    }
    auto& m = std::get<ModelSpec>(parsed);
    auto ok = store_->insert_model(m.name, spec.dump());
    if (!ok) return ok;
    models_.push_back({m.name, spec, m});
  }
  for (std::size_t i = 0; i < models_.size(); ++i) {
    index_[models_[i].name] = i;
    telemetry_[models_[i].name] = ModelTelemetry{};
  }
  for (const auto& [name, summary] : st.telemetry) {
    auto it = telemetry_.find(name);
    if (it == telemetry_.end()) continue;
    const json j = json::parse(summary, nullptr, false);
    if (!j.is_object()) continue;
    auto& t = it->second;
    t.samples = j.value("samples", std::uint64_t{0});
    t.breaches = j.value("breaches", std::uint64_t{0});
    t.stale = j.value("stale", std::uint64_t{0});
    if (j.contains("last")) t.last = j["last"];
  }
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
  controller_ = std::make_unique<Controller>(workload_locked(), std::move(source), co);
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
    plan_body_ = std::make_shared<const std::string>(plan_body(plan_));
    plan_id_ = json_number_or(plan_, "id", std::int64_t{0});
    // The stored plan is the one in force when it covers exactly the registered models.
    Decision stored;
    stored.id = plan_id_.load();
    stored.reason = plan_.value("reason", std::string());
    const json& ms = plan_.contains("models") ? plan_["models"] : json::object();
    bool complete = ms.is_object() && ms.size() == models_.size();
    for (const auto& r : models_) {
      if (!complete || !ms.contains(r.name)) {
        complete = false;
        break;
      }
      const json& m = ms[r.name];
      const auto l = json_number_or(m, "index", std::int32_t{kAbsent});
      complete = l == kAbsent || (l >= 0 && static_cast<std::size_t>(l) < r.model.local_config_count());
      stored.config.push_back(l);
      stored.predicted.push_back(m.contains("predicted") ? predicted_or_zero(m["predicted"])
                                                         : Predicted{});
      stored.base.push_back(m.contains("base") ? predicted_or_zero(m["base"])
                                               : stored.predicted.back());
      stored.margins.push_back(m.contains("margin") ? margin_from_json(m["margin"]) : Margin{});
      stored.best_effort.push_back(m.value("best_effort", false));
    }
    if (complete && !models_.empty()) {
      controller_->restore(std::move(stored));
    } else {
      controller_->continue_after(plan_id_.load());
      replan_pending_ = !models_.empty();
      replan_reason_ = "restart";
    }
  }
  if (!models_.empty() && history_.empty()) {
    replan_pending_ = true;
    replan_reason_ = "start";
  }
  return {};
}

Service::~Service() { stop(); }

void Service::stop() {
  {
    std::lock_guard lock(state_mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  planner_cv_.notify_all();
  flusher_cv_.notify_all();
  plan_cv_.notify_all();
  if (planner_.joinable()) planner_.join();
  if (flusher_.joinable()) flusher_.join();
  flush_telemetry();
}

// ---------------------------------------------------------------------------------------------
// HTTP plumbing

HttpResponse Service::json_response(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', true, json::error_handler_t::replace);
  r.body += "\n";
  return r;
}

HttpResponse Service::error(const ApiError& e) const {
  json err = {{"code", e.code}, {"message", e.message}};
  if (!e.field.empty()) err["field"] = e.field;
  HttpResponse r = json_response(e.status, {{"error", err}});
  if (e.status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

HttpResponse Service::transport_error(int status, const std::string& path,
                                      const std::string& reason, const std::string& field) {
  metrics_.count_request(kTransport, status);
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

Result<json> Service::parse_body(const HttpRequest& req, ApiError& err) const {
  if (req.body.size() > options_.max_body_bytes) {
    err = {413, "body_too_large",
           "request body exceeds " + std::to_string(options_.max_body_bytes) + " bytes", ""};
    return Error(err.message);
  }
  if (req.body.empty()) {
    err = {400, "empty_body", "a JSON body is required", ""};
    return Error(err.message);
  }
  const std::string ct = lower(req.content_type);
  if (ct.rfind("application/json", 0) != 0) {
    err = {415, "unsupported_media_type",
           "Content-Type must be application/json" +
               (req.content_type.empty() ? std::string(" (none given)")
                                         : " (got '" + req.content_type.substr(0, 64) + "')"),
           ""};
    return Error(err.message);
  }
  JsonLimits limits;
  limits.max_depth = kMaxJsonDepth;
  auto parsed = parse_json_input(req.body, limits);
  if (auto* e = std::get_if<JsonInputError>(&parsed)) {
    err = {400, e->code, e->message, e->field};
    return Error(err.message);
  }
  return std::move(std::get<json>(parsed));
}

HttpResponse Service::handle(const HttpRequest& req) {
  std::size_t route_index = kUnknown;
  HttpResponse r;
  try {
    r = route(req, route_index);
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
  metrics_.count_request(route_index, r.status);
  return r;
}

HttpResponse Service::route(const HttpRequest& req, std::size_t& route_index) {
  if (!path_ok(req.path)) {
    return error({400, "bad_path",
                  "path must use letters, digits and '-._~/' without empty, '.' or '..' segments",
                  ""});
  }
  std::string path = req.path;
  if (path.size() > 1 && path.back() == '/') path.pop_back();
  auto seg = split(path.substr(1), '/');

  // Route table: which methods each path accepts, and which of them mutate.
  std::vector<std::string> allowed;
  std::string model_name;
  if (path == "/healthz") {
    route_index = kHealthz;
    allowed = {"GET"};
  } else if (path == "/metrics") {
    route_index = kMetricsRoute;
    allowed = {"GET"};
  } else if (path == "/v1/models") {
    route_index = kModels;
    allowed = {"GET", "POST"};
  } else if (seg.size() == 3 && seg[0] == "v1" && seg[1] == "models") {
    route_index = kModel;
    allowed = {"GET", "DELETE"};
    model_name = seg[2];
  } else if (seg.size() == 4 && seg[0] == "v1" && seg[1] == "models" && seg[3] == "demand") {
    route_index = kDemand;
    allowed = {"PUT"};
    model_name = seg[2];
  } else if (path == "/v1/telemetry") {
    route_index = kTelemetry;
    allowed = {"GET", "POST"};
  } else if (path == "/v1/plan") {
    route_index = kPlan;
    allowed = {"GET"};
  } else if (path == "/v1/plan/history") {
    route_index = kHistory;
    allowed = {"GET"};
  } else if (path == "/v1/replan") {
    route_index = kReplan;
    allowed = {"POST"};
  } else if (path == "/v1/whatif") {
    route_index = kWhatIf;
    allowed = {"POST"};
  } else if (path == "/v1/openapi.json") {
    route_index = kOpenApi;
    allowed = {"GET"};
  } else {
    return error({404, "not_found", "no route " + path.substr(0, 128), ""});
  }
  if (std::find(allowed.begin(), allowed.end(), req.method) == allowed.end()) {
    HttpResponse r = error({405, "method_not_allowed",
                            req.method.substr(0, 16) + " is not allowed on " + path +
                                " (allowed: " + join(allowed, ", ") + ")",
                            ""});
    r.headers.emplace_back("Allow", join(allowed, ", "));
    return r;
  }
  // A what-if changes nothing: a scheduler extender asks it without the service's token.
  const bool mutating = req.method != "GET" && route_index != kWhatIf;
  if (mutating && !authorised(req)) {
    return error({401, req.authorization.empty() ? "missing_token" : "bad_token",
                  req.authorization.empty() ? "this endpoint needs 'Authorization: Bearer TOKEN'"
                                            : "the bearer token is not valid",
                  ""});
  }

  switch (route_index) {
    case kHealthz:
      return get_health();
    case kMetricsRoute:
      return get_metrics();
    case kModels: {
      if (req.method == "GET") return list_models();
      ApiError e{};
      auto body = parse_body(req, e);
      if (!body) return error(e);
      return register_model(*body);
    }
    case kModel:
      return req.method == "GET" ? get_model(model_name) : remove_model(model_name);
    case kDemand: {
      ApiError e{};
      auto body = parse_body(req, e);
      if (!body) {
        // The body is the entry's `demand`: name fields as the entry's validation does.
        if (!e.field.empty()) e.field = (e.field[0] == '[' ? "demand" : "demand.") + e.field;
        return error(e);
      }
      return update_demand(model_name, *body);
    }
    case kTelemetry: {
      if (req.method == "GET") return get_telemetry();
      ApiError e{};
      auto body = parse_body(req, e);
      if (!body) return error(e);
      return post_telemetry(*body);
    }
    case kPlan:
      return get_plan();
    case kWhatIf: {
      ApiError e{};
      auto body = parse_body(req, e);
      if (!body) return error(e);
      return post_whatif(*body);
    }
    case kOpenApi:
      return json_response(200, openapi_json());
    case kHistory:
      return get_history(req);
    case kReplan: {
      if (!req.body.empty()) {
        ApiError e{};
        auto body = parse_body(req, e);
        if (!body) return error(e);
        if (!body->is_object() || !body->empty()) {
          return error(
              {400, "unexpected_body", "replan takes no parameters (send {} or nothing)", ""});
        }
      }
      return post_replan();
    }
    default:
      return error({404, "not_found", "no route " + path.substr(0, 128), ""});
  }
}

// ---------------------------------------------------------------------------------------------
// Models

std::variant<ModelSpec, Service::ApiError> Service::parse_model(const json& spec) const {
  if (!spec.is_object()) {
    return ApiError{400, "bad_type", "a model must be a JSON object (a workload 'models' entry)",
                    ""};
  }
  // The workload parser is the one validator: wrap the entry in a one-model workload, so that
  // its errors (field path, reason, nearest known name) are exactly those of a workload file.
  // The entry goes over as YAML flow that keeps JSON's types (a quoted "30" stays a string).
  const std::string text =
      "device: " + wrapper_device_ + "\nmodels:\n  - " + to_yaml_flow(spec) + "\n";
  auto w = parse_workload(text, "request", *catalog_);
  if (!w) {
    std::string field;
    std::vector<std::string> reasons;
    for (const auto& line : split(w.error().message(), '\n')) {
      // "request:L:C: models[0].demand.fps: reason" -> field "demand.fps".
      std::string rest = line;
      if (rest.rfind("request", 0) == 0) {
        const auto p = rest.find(": ");
        rest = p == std::string::npos ? rest : rest.substr(p + 2);
      }
      std::string f;
      if (rest.rfind("models[0]", 0) == 0) {
        const auto p = rest.find(": ");
        if (p != std::string::npos) {
          f = rest.substr(0, p);
          rest = rest.substr(p + 2);
          f = f.size() > 10 ? f.substr(10) : std::string();  // drop "models[0]."
        }
      }
      if (field.empty()) field = f;
      reasons.push_back(f.empty() ? rest : f + ": " + rest);
    }
    return ApiError{422, "invalid_spec", join(reasons, "; "), field};
  }
  if (w->models.size() != 1) {
    return ApiError{422, "invalid_spec", "expected exactly one model", ""};
  }
  ModelSpec m = w->models.front();
  m.active = true;
  return m;
}

HttpResponse Service::list_models() {
  json out = json::array();
  {
    std::lock_guard lock(state_mutex_);
    for (const auto& m : models_) out.push_back(m.spec);
  }
  return json_response(200, {{"models", out}});
}

HttpResponse Service::get_model(const std::string& name) {
  std::lock_guard lock(state_mutex_);
  const auto it = index_.find(name);
  if (it == index_.end()) {
    return error({404, "unknown_model", "no model '" + name + "'", "name"});
  }
  return json_response(200, {{"model", models_[it->second].spec}});
}

HttpResponse Service::register_model(const json& body) {
  auto parsed = parse_model(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error(*e);
  ModelSpec& m = std::get<ModelSpec>(parsed);
  std::lock_guard mutate(mutate_mutex_);
  {
    std::lock_guard lock(state_mutex_);
    if (auto refused = admission_error_locked(m.name)) return error(*refused);
  }
  const std::string text = body.dump(-1, ' ', true, json::error_handler_t::replace);
  auto ok = store_->insert_model(m.name, text);
  if (!ok) return error({500, "storage_error", ok.error().what(), ""});
  {
    std::lock_guard lock(state_mutex_);
    index_[m.name] = models_.size();
    models_.push_back({m.name, body, m});
    telemetry_[m.name] = ModelTelemetry{};
    ++generation_;
    controller_->set_workload(workload_locked());
  }
  request_replan("register " + m.name);
  return json_response(201, {{"model", body}});
}

HttpResponse Service::remove_model(const std::string& name) {
  std::lock_guard mutate(mutate_mutex_);
  {
    std::lock_guard lock(state_mutex_);
    if (index_.count(name) == 0) {
      return error({404, "unknown_model", "no model '" + name + "'", "name"});
    }
  }
  auto ok = store_->delete_model(name);
  if (!ok) return error({500, "storage_error", ok.error().what(), ""});
  {
    std::lock_guard lock(state_mutex_);
    models_.erase(models_.begin() + static_cast<std::ptrdiff_t>(index_[name]));
    index_.clear();
    for (std::size_t i = 0; i < models_.size(); ++i) index_[models_[i].name] = i;
    telemetry_.erase(name);
    ++generation_;
    controller_->set_workload(workload_locked());
  }
  request_replan("remove " + name);
  return json_response(200, {{"removed", name}});
}

HttpResponse Service::update_demand(const std::string& name, const json& body) {
  if (!body.is_object()) {
    return error({400, "bad_type", "demand must be a JSON object", "demand"});
  }
  std::lock_guard mutate(mutate_mutex_);
  json spec;
  {
    std::lock_guard lock(state_mutex_);
    const auto it = index_.find(name);
    if (it == index_.end()) return error({404, "unknown_model", "no model '" + name + "'", "name"});
    spec = models_[it->second].spec;
  }
  spec["demand"] = body;
  auto parsed = parse_model(spec);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error(*e);
  auto ok = store_->update_model(name, spec.dump(-1, ' ', true, json::error_handler_t::replace));
  if (!ok) return error({500, "storage_error", ok.error().what(), ""});
  {
    std::lock_guard lock(state_mutex_);
    auto& r = models_[index_[name]];
    r.spec = spec;
    r.model = std::get<ModelSpec>(parsed);
    ++generation_;
    controller_->set_workload(workload_locked());
  }
  request_replan("demand " + name);
  return json_response(200, {{"model", spec}});
}

HttpResponse Service::post_whatif(const json& body) {
  auto parsed = parse_model(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error(*e);
  const ModelSpec& m = std::get<ModelSpec>(parsed);
  Workload current;
  std::optional<double> before;
  {
    std::lock_guard lock(state_mutex_);
    if (auto refused = admission_error_locked(m.name)) return error(*refused);
    current = workload_locked();
    // The plan in force is "before" when it covers exactly the registered models.
    const json& ms = plan_.contains("models") ? plan_["models"] : json();
    bool covers = ms.is_object() && ms.size() == models_.size() &&
                  plan_.contains("predicted_utility") && plan_["predicted_utility"].is_number();
    for (const auto& r : models_) covers = covers && ms.contains(r.name);
    if (models_.empty()) {
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
                             {"utility_before", *before},
                             {"utility_after", d->predicted_utility},
                             {"utility_gain", d->predicted_utility - *before},
                             {"breaks", breaks},
                             {"plan", plan}});
}

// ---------------------------------------------------------------------------------------------
// Telemetry and the monitor

namespace {

struct Sample {
  std::string model;
  std::optional<std::int64_t> plan_id;
  std::optional<double> latency_ms_p50, latency_ms_p95, ttft_ms_p95, tpot_ms_p95, throughput;
};

}  // namespace

HttpResponse Service::post_telemetry(const json& body) {
  // Validate everything before touching state, so that a bad sample changes nothing.
  std::vector<Sample> samples;
  const bool batch = body.is_array();
  if (!batch && !body.is_object()) {
    return error({400, "bad_type", "telemetry must be a sample object or an array of samples", ""});
  }
  if (batch && body.size() > kMaxSamplesPerPost) {
    return error({413, "too_many_samples",
                  "at most " + std::to_string(kMaxSamplesPerPost) + " samples per request", ""});
  }
  if (batch && body.empty()) return error({400, "empty_batch", "no samples", ""});
  const std::size_t count = batch ? body.size() : 1;
  samples.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const json& s = batch ? body[i] : body;
    const std::string prefix = batch ? "[" + std::to_string(i) + "]." : "";
    if (!s.is_object()) {
      return error({400, "bad_type", "a sample must be a JSON object",
                    batch ? "[" + std::to_string(i) + "]" : ""});
    }
    Sample out;
    bool any_metric = false;
    for (const auto& [key, v] : s.items()) {
      if (key == "model") {
        if (!v.is_string())
          return error({400, "bad_type", "model must be a string", prefix + "model"});
        out.model = v.get<std::string>();
      } else if (key == "plan_id") {
        if (!v.is_number_integer()) {
          return error({400, "bad_type", "plan_id must be an integer", prefix + "plan_id"});
        }
        out.plan_id = v.get<std::int64_t>();
      } else {
        std::optional<double>* slot = nullptr;
        if (key == "latency_ms_p50") slot = &out.latency_ms_p50;
        if (key == "latency_ms_p95") slot = &out.latency_ms_p95;
        if (key == "ttft_ms_p95") slot = &out.ttft_ms_p95;
        if (key == "tpot_ms_p95") slot = &out.tpot_ms_p95;
        if (key == "throughput") slot = &out.throughput;
        if (slot == nullptr) {
          static const std::vector<std::string> kKeys = {
              "model",       "plan_id",     "latency_ms_p50", "latency_ms_p95",
              "ttft_ms_p95", "tpot_ms_p95", "throughput"};
          return error({400, "unknown_field",
                        "unknown telemetry field '" + key.substr(0, 64) + "'" +
                            did_you_mean(key.substr(0, 64), kKeys),
                        prefix + key.substr(0, 64)});
        }
        if (!v.is_number())
          return error({400, "bad_type", key + " must be a number", prefix + key});
        const double d = v.get<double>();
        if (!std::isfinite(d) || d < 0 || d > kMaxMetric) {
          return error({400, "out_of_range", key + " must be in [0, 1e9]", prefix + key});
        }
        *slot = d;
        any_metric = true;
      }
    }
    if (out.model.empty())
      return error({400, "missing_field", "model is required", prefix + "model"});
    if (!any_metric) {
      return error(
          {400, "missing_field", "a sample needs at least one metric", prefix + "latency_ms_p95"});
    }
    samples.push_back(std::move(out));
  }

  std::size_t breaches = 0;
  std::int64_t current = 0;
  std::vector<std::string> learned;
  ObservationResult wants;
  {
    std::lock_guard lock(state_mutex_);
    for (std::size_t i = 0; i < samples.size(); ++i) {
      if (index_.count(samples[i].model) == 0) {
        return error({404, "unknown_model", "no model '" + samples[i].model.substr(0, 64) + "'",
                      batch ? "[" + std::to_string(i) + "].model" : "model"});
      }
    }
    const auto plan = controller_->plan();
    current = plan ? plan->id : 0;
    for (const auto& s : samples) {
      const std::size_t m = index_[s.model];
      ModelTelemetry& t = telemetry_[s.model];
      ++t.samples;
      json last = json::object();
      if (s.latency_ms_p50) last["latency_ms_p50"] = *s.latency_ms_p50;
      if (s.latency_ms_p95) last["latency_ms_p95"] = *s.latency_ms_p95;
      if (s.ttft_ms_p95) last["ttft_ms_p95"] = *s.ttft_ms_p95;
      if (s.tpot_ms_p95) last["tpot_ms_p95"] = *s.tpot_ms_p95;
      if (s.throughput) last["throughput"] = *s.throughput;
      if (s.plan_id) last["plan_id"] = *s.plan_id;
      t.last = std::move(last);
      telemetry_dirty_ = true;
      // A sample without a plan id is taken to be of the plan in force.
      const std::int64_t of = s.plan_id.value_or(current);
      if (!plan || of != current || m >= plan->config.size() || plan->config[m] == kAbsent) {
        // Observed under another plan: it teaches nothing about this one, but an SLA it broke
        // was broken (the ledger counts what was measured).
        ++t.stale;
        const ModelSpec& spec = models_[m].model;
        auto over = [](const std::optional<double>& limit, const std::optional<double>& v) {
          return limit && v && *v > *limit;
        };
        if (over(spec.sla.latency_ms_p95, s.latency_ms_p95) ||
            over(spec.sla.ttft_ms_p95, s.ttft_ms_p95) ||
            over(spec.sla.tpot_ms_p95, s.tpot_ms_p95) ||
            (spec.sla.min_throughput && s.throughput && *s.throughput < *spec.sla.min_throughput)) {
          ++t.breaches;
          ++breaches;
        }
        continue;
      }
      ModelObservation o;
      o.model = m;
      o.local = plan->config[m];
      auto put = [&](Target target, const std::optional<double>& v) {
        if (v) o.measured[static_cast<std::size_t>(target)] = *v;
      };
      put(Target::kLatencyP95, s.latency_ms_p95);
      put(Target::kTtftP95, s.ttft_ms_p95);
      put(Target::kTpotP95, s.tpot_ms_p95);
      put(Target::kThroughput, s.throughput);
      std::vector<LearningSample> taught;
      const ObservationResult r = controller_->observe(std::span(&o, 1), of, &taught);
      for (const auto& x : taught) learned.push_back(to_json(x).dump());
      if (m < r.breach.size() && r.breach[m]) {
        ++t.breaches;
        ++breaches;
      }
      if (r.replan && !wants.replan) wants = r;
    }
  }
  // What the samples taught is durable before they are acknowledged.
  if (auto ok = store_->append_learning(learned); !ok) {
    return error({503, "storage_error", ok.error().what(), ""});
  }
  if (wants.replan) request_replan(wants.reason);
  metrics_.count_samples(samples.size());
  return json_response(
      202, {{"accepted", samples.size()}, {"breaches", breaches}, {"plan_id", current}});
}

json Service::telemetry_json(const ModelTelemetry& t) const {
  return {{"samples", t.samples}, {"breaches", t.breaches}, {"stale", t.stale}, {"last", t.last}};
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

HttpResponse Service::get_telemetry() {
  json out = json::object();
  const json learning = learning_json();
  {
    std::lock_guard lock(state_mutex_);
    for (const auto& m : models_) {
      json t = telemetry_json(telemetry_.at(m.name));
      if (learning.contains(m.name)) t["learning"] = learning[m.name];
      out[m.name] = std::move(t);
    }
  }
  return json_response(200, {{"models", out}, {"flush_interval_ms", options_.telemetry_flush_ms}});
}

void Service::flush_telemetry() {
  std::vector<std::pair<std::string, std::string>> rows;
  {
    std::lock_guard lock(state_mutex_);
    if (!telemetry_dirty_) return;
    telemetry_dirty_ = false;
    for (const auto& [name, t] : telemetry_) rows.emplace_back(name, telemetry_json(t).dump());
  }
  auto ok = store_->save_telemetry(rows);
  if (!ok) {
    std::fprintf(stderr, "corun serve: telemetry flush failed: %s\n", ok.error().what().c_str());
    std::lock_guard lock(state_mutex_);
    telemetry_dirty_ = true;
  }
}

void Service::flusher_loop() {
  std::unique_lock lock(state_mutex_);
  while (!stopping_) {
    flusher_cv_.wait_for(lock, std::chrono::milliseconds(options_.telemetry_flush_ms),
                         [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    flush_telemetry();
    lock.lock();
  }
}

// ---------------------------------------------------------------------------------------------
// Planning

void Service::request_replan(const std::string& reason) {
  {
    std::lock_guard lock(state_mutex_);
    if (!replan_pending_) replan_reason_ = reason;
    replan_pending_ = true;
  }
  planner_cv_.notify_one();
}

HttpResponse Service::post_replan() {
  request_replan("requested");
  return json_response(202, {{"requested", true}, {"plan_id", plan_id_.load()}});
}

void Service::planner_loop() {
  // The planner yields the CPU to request handlers: a re-plan can wait a few milliseconds, a
  // telemetry post should not (Linux: nice applies per thread).
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10) != 0) {
    std::fprintf(stderr, "corun serve: could not lower the planner's priority\n");
  }
  auto last = std::chrono::steady_clock::now() - std::chrono::hours(1);
  std::unique_lock lock(state_mutex_);
  while (true) {
    planner_cv_.wait(lock, [&] { return stopping_ || replan_pending_; });
    if (stopping_) return;
    const auto next = last + std::chrono::milliseconds(options_.min_replan_interval_ms);
    if (std::chrono::steady_clock::now() < next) {
      planner_cv_.wait_until(lock, next, [&] { return stopping_; });
      if (stopping_) return;
    }
    const std::string reason = replan_reason_;
    replan_pending_ = false;
    replanning_ = true;
    lock.unlock();
    auto st = plan_once(reason);
    if (!st) std::fprintf(stderr, "corun serve: planning failed: %s\n", st.error().what().c_str());
    last = std::chrono::steady_clock::now();
    lock.lock();
    replanning_ = false;
    last_plan_error_ = st ? std::string() : st.error().what();
  }
}

Status Service::plan_once(const std::string& reason) {
  std::uint64_t generation = 0;
  bool empty = false;
  {
    std::lock_guard lock(state_mutex_);
    generation = generation_;
    empty = models_.empty();
  }
  json rec = {{"created_at", now_iso8601()},
              {"reason", reason},
              {"solver", options_.solver},
              {"device", device_.name}};
  json models = json::object();
  std::int64_t id = 0;
  double decision_ms = 0;
  if (empty) {
    // Nothing to plan: an empty plan says so (its id continues the sequence).
    id = plan_id_.load() + 1;
    controller_->continue_after(id);
    rec["feasible"] = true;
    rec["predicted_utility"] = 0.0;
    rec["evaluated"] = 0;
    rec["infeasible"] = json::array();
  } else {
    auto decided = controller_->replan(reason);
    if (!decided) return decided.error();
    if (!*decided) {
      // The model set changed during the search: the controller wants another decision.
      request_replan(reason);
      return {};
    }
    const Decision& d = **decided;
    const Workload w = controller_->workload();
    id = d.id;
    decision_ms = d.decision_ms;
    rec["source"] = d.source;
    rec["feasible"] = d.feasible;
    rec["predicted_utility"] = d.predicted_utility;
    rec["evaluated"] = d.stats.evaluated;
    json why = json::array();
    for (const auto& i : d.infeasible) why.push_back(i.message());
    rec["infeasible"] = why;
    models = decision_models_json(d, w);
  }
  rec["id"] = id;
  rec["decision_ms"] = decision_ms;
  rec["models"] = models;

  // Publish: durable first, then visible. The mutation lock makes "the models this plan was
  // made for" and "the models registered" the same set at the moment of the write.
  std::lock_guard mutate(mutate_mutex_);
  {
    std::lock_guard lock(state_mutex_);
    if (generation != generation_) return {};  // the model set changed: a re-plan is pending
  }
  auto ok = store_->append_plan(id, rec.dump());
  if (!ok) return ok;
  metrics_.observe_decision(decision_ms / 1e3);
  metrics_.count_replan();
  // Everything is built outside the lock; the critical section only moves and swaps, so a
  // planner descheduled there (it runs at low priority) holds request handlers up the least.
  auto body = std::make_shared<const std::string>(plan_body(rec));
  json copy = rec;
  {
    std::lock_guard lock(state_mutex_);
    plan_.swap(rec);
    history_.push_back(std::move(copy));
    if (history_.size() > options_.history_in_memory) history_.pop_front();
    plan_id_ = id;
  }
  {
    std::lock_guard lock(plan_body_mutex_);
    plan_body_.swap(body);
  }
  plan_cv_.notify_all();
  return {};
}

bool Service::wait_for_plan(std::int64_t after, int timeout_ms) {
  std::unique_lock lock(state_mutex_);
  return plan_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
    return plan_id_.load() > after || stopping_;
  }) && plan_id_.load() > after;
}

std::string Service::plan_body(const json& plan) {
  return plan.dump(-1, ' ', true, json::error_handler_t::replace) + "\n";
}

HttpResponse Service::get_plan() {
  // The hottest read: the serialised plan is shared, so no JSON work and no state lock here.
  std::shared_ptr<const std::string> body;
  {
    std::lock_guard lock(plan_body_mutex_);
    body = plan_body_;
  }
  if (!body) {
    std::lock_guard lock(state_mutex_);
    return error({404, "no_plan",
                  models_.empty() ? "no models are registered" : "the first plan is being computed",
                  ""});
  }
  // The stored plan plus what was learned since it was made: each model's prediction error and
  // the margin it is planned with now.
  HttpResponse r;
  r.body = body->substr(0, body->rfind('}'));
  r.body += ",\"learning\":" + learning_json().dump(-1, ' ', true, json::error_handler_t::replace) +
            "}\n";
  return r;
}

HttpResponse Service::get_history(const HttpRequest& req) {
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
    std::lock_guard lock(state_mutex_);
    const std::size_t from = history_.size() > limit ? history_.size() - limit : 0;
    for (std::size_t i = from; i < history_.size(); ++i) plans.push_back(history_[i]);
  }
  return json_response(200, {{"plans", plans}});
}

HttpResponse Service::get_health() {
  std::lock_guard lock(state_mutex_);
  json out = {{"status", "ok"},
              {"models", models_.size()},
              {"plan_id", plan_id_.load()},
              {"replanning", replanning_},
              {"replan_pending", replan_pending_},
              {"device", device_.name}};
  if (!last_plan_error_.empty()) out["last_plan_error"] = last_plan_error_;
  return json_response(200, out);
}

HttpResponse Service::get_metrics() {
  std::string out;
  out.reserve(4096);
  metrics_.render(out);
  char line[256];
  std::lock_guard lock(state_mutex_);
  out += "# HELP corun_serve_models Registered models.\n# TYPE corun_serve_models gauge\n";
  out += "corun_serve_models " + std::to_string(models_.size()) + "\n";
  out += "# HELP corun_serve_plan_id Id of the plan in force.\n# TYPE corun_serve_plan_id gauge\n";
  out += "corun_serve_plan_id " + std::to_string(plan_id_.load()) + "\n";
  out += "# HELP corun_serve_sla_breaches_total Observed SLA breaches, by model.\n";
  out += "# TYPE corun_serve_sla_breaches_total counter\n";
  for (const auto& m : models_) {
    std::snprintf(line, sizeof line, "corun_serve_sla_breaches_total{model=\"%s\"} %llu\n",
                  m.name.c_str(), static_cast<unsigned long long>(telemetry_.at(m.name).breaches));
    out += line;
  }
  // Learning gauges, one per model (GET /v1/plan's "learning").
  const auto state = controller_->learning_state();
  const Workload w = controller_->workload();
  auto gauge = [&](const char* name, const char* help, double ModelLearningState::*field) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n";
    for (std::size_t m = 0; m < state.size() && m < w.models.size(); ++m) {
      std::snprintf(line, sizeof line, "%s{model=\"%s\"} %.6f\n", name, w.models[m].name.c_str(),
                    state[m].*field);
      out += line;
    }
  };
  gauge("corun_serve_prediction_error_ratio",
        "Last (observed - predicted) / predicted of the SLA latency, by model.",
        &ModelLearningState::last_error);
  gauge("corun_serve_prediction_abs_error_ratio",
        "Moving average of |observed - predicted| / predicted of the SLA latency, by model.",
        &ModelLearningState::abs_error);
  gauge("corun_serve_margin_ratio", "Margin of the plan in force, by model (0.1 = 10 %).",
        &ModelLearningState::margin);
  gauge("corun_serve_bound_z",
        "Calibrated bound level of the SLA latency in standard deviations, by model.",
        &ModelLearningState::z);
  HttpResponse r;
  r.status = 200;
  r.content_type = "text/plain; version=0.0.4";
  r.body = std::move(out);
  return r;
}

}  // namespace corun::serve