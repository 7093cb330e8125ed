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
#include "corun/core/rng.h"
#include "corun/core/strings.h"
#include "corun/plan/objective.h"
#include "corun/runtime/surrogate_source.h"
#include "corun/runtime/testbed_predictor.h"
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

// Nesting depth of a JSON text (brackets outside strings), checked before parsing so that no
// recursive parser or destructor ever sees a deeply nested document.
bool json_depth_ok(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
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

// YAML -> JSON for the initial workload's model entries (scalars typed as YAML would).
json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : n) a.push_back(yaml_to_json(e));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted
      if (s == "true") return true;
      if (s == "false") return false;
      char* end = nullptr;
      const long long i = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && *end == '\0') return i;
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0') return d;
      return s;
    }
    default:
      return nullptr;
  }
}

// The twin: a TestbedPredictor that owns the workload it measures against.
class TwinPredictor final : public Predictor {
 public:
  TwinPredictor(const Workload& w, const Testbed& t, std::uint64_t seed)
      : w_(std::make_unique<Workload>(w)), inner_(*w_, t, 1.0, seed) {}
  [[nodiscard]] std::size_t models() const override { return inner_.models(); }
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override {
    inner_.predict(configs, rows, out);
  }

 private:
  std::unique_ptr<Workload> w_;  // stable address for inner_
  TestbedPredictor inner_;
};

class TwinSource final : public PredictorSource {
 public:
  TwinSource(std::unique_ptr<Testbed> t, double margin, std::uint64_t seed)
      : testbed_(std::move(t)), margin_(margin), seed_(seed) {}
  Result<std::unique_ptr<Predictor>> predictor_for(const Workload& current) override {
    return std::unique_ptr<Predictor>(std::make_unique<TwinPredictor>(current, *testbed_, seed_));
  }
  std::vector<double> margins(const Workload& current) override {
    return std::vector<double>(current.models.size(), margin_);
  }

 private:
  std::unique_ptr<Testbed> testbed_;
  double margin_;
  std::uint64_t seed_;
};

std::unique_ptr<Testbed> sim_testbed() {
  auto t = make_testbed("sim");
  CORUN_CHECK(t.ok());
  return std::move(*t);
}

// Registrations arrive as JSON objects, whose keys (the knobs) come back sorted: the same
// knobs as the surrogate's, in another order, number local configurations differently. This
// view gives a workload the surrogate's knob order and maps local indices between the two.
struct KnobOrder {
  Workload reordered;                             // `current` with the surrogate's knob order
  std::vector<std::vector<std::int32_t>> to_fit;  // [model][service local] -> surrogate local
};

std::optional<KnobOrder> match_knob_order(const Workload& current,
                                          const surrogate::Surrogate& s) {
  const auto& sig = s.signature();
  if (sig.size() != current.models.size()) return std::nullopt;
  KnobOrder k{current, {}};
  for (std::size_t m = 0; m < sig.size(); ++m) {
    ModelSpec& spec = k.reordered.models[m];
    if (spec.knobs.size() != sig[m].knobs.size()) return std::nullopt;
    std::vector<KnobSpec> ordered;
    for (const auto& want : sig[m].knobs) {
      auto it = std::find_if(spec.knobs.begin(), spec.knobs.end(),
                             [&](const KnobSpec& have) { return have.id == want.id; });
      if (it == spec.knobs.end()) return std::nullopt;
      ordered.push_back(*it);
    }
    const ModelSpec original = current.models[m];
    spec.knobs = std::move(ordered);
    std::vector<std::int32_t> map(original.local_config_count());
    for (std::size_t l = 0; l < map.size(); ++l) {
      std::vector<std::pair<std::string, std::string>> assign;
      const Settings st = original.settings(l);
      for (const auto& knob : original.knobs) {
        assign.emplace_back(knob_decl(knob.id).name, format_knob_value(knob.id, st.get(knob.id)));
      }
      auto idx = spec.find_config(assign);
      if (!idx) return std::nullopt;
      map[l] = static_cast<std::int32_t>(*idx);
    }
    k.to_fit.push_back(std::move(map));
  }
  if (!s.check_workload(k.reordered).ok()) return std::nullopt;
  return k;
}

// Predicts in the service's numbering through a predictor in the surrogate's.
class RenumberedPredictor final : public AggregatePredictor {
 public:
  RenumberedPredictor(std::unique_ptr<Predictor> inner,
                      std::vector<std::vector<std::int32_t>> to_fit)
      : inner_(std::move(inner)),
        agg_(dynamic_cast<const AggregatePredictor*>(inner_.get())),
        to_fit_(std::move(to_fit)) {}
  [[nodiscard]] std::size_t models() const override { return inner_->models(); }
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override {
    std::vector<std::int32_t> mapped(configs.begin(), configs.begin() + rows * models());
    for (std::size_t i = 0; i < mapped.size(); ++i) mapped[i] = map(i % models(), mapped[i]);
    inner_->predict(mapped, rows, out);
  }
  [[nodiscard]] bool monotone() const override { return agg_ != nullptr && agg_->monotone(); }
  [[nodiscard]] std::size_t aggregate_dims() const override {
    return agg_ != nullptr ? agg_->aggregate_dims() : 0;
  }
  void contribution(std::size_t m, std::int32_t l, std::span<float> out) const override {
    CORUN_CHECK(agg_ != nullptr);
    agg_->contribution(m, map(m, l), out);
  }
  [[nodiscard]] Predicted predict_given(std::size_t m, std::int32_t l,
                                        std::span<const float> others) const override {
    CORUN_CHECK(agg_ != nullptr);
    return agg_->predict_given(m, map(m, l), others);
  }

 private:
  [[nodiscard]] std::int32_t map(std::size_t m, std::int32_t l) const {
    return l == kAbsent ? kAbsent : to_fit_[m][static_cast<std::size_t>(l)];
  }
  std::unique_ptr<Predictor> inner_;
  const AggregatePredictor* agg_;
  std::vector<std::vector<std::int32_t>> to_fit_;
};

// The surrogate while the registered models match it, the twin otherwise.
class SurrogateOrTwin final : public PredictorSource {
 public:
  SurrogateOrTwin(surrogate::Surrogate s, std::unique_ptr<Testbed> t, double margin,
                  std::uint64_t seed)
      : surrogate_(s), testbed_(std::move(t)),
        fitted_(std::move(s), *testbed_, SurrogateSourceOptions{3, 10, seed}),
        twin_(sim_testbed(), margin, seed) {}
  Result<std::unique_ptr<Predictor>> predictor_for(const Workload& current) override {
    order_ = match_knob_order(current, surrogate_);
    if (!order_) {
      const Status fits = surrogate_.check_workload(current);
      const std::string reason = fits.ok() ? "" : fits.error().what();
      if (reason != last_reason_) {
        std::fprintf(stderr,
                     "corun serve: planning with the twin: the surrogate does not fit: %s\n",
                     reason.c_str());
      }
      last_reason_ = reason;
      return twin_.predictor_for(current);
    }
    last_reason_.clear();
    auto inner = fitted_.predictor_for(order_->reordered);
    if (!inner) return inner.error();
    return std::unique_ptr<Predictor>(
        std::make_unique<RenumberedPredictor>(std::move(*inner), order_->to_fit));
  }
  std::vector<double> margins(const Workload& current) override {
    return order_ ? fitted_.margins(order_->reordered) : twin_.margins(current);
  }

 private:
  surrogate::Surrogate surrogate_;
  std::unique_ptr<Testbed> testbed_;  // where changed demands are re-profiled alone
  SurrogateSource fitted_;
  TwinSource twin_;
  std::optional<KnobOrder> order_;  // set while the surrogate fits the registered models
  std::string last_reason_;
};

}  // namespace

Result<std::unique_ptr<PredictorSource>> make_surrogate_source(surrogate::Surrogate s,
                                                               double twin_margin,
                                                               std::uint64_t seed) {
  auto t = make_testbed(s.provenance().testbed.empty() ? "sim" : s.provenance().testbed);
  if (!t) return t.error().wrap("the surrogate's testbed");
  return std::unique_ptr<PredictorSource>(
      std::make_unique<SurrogateOrTwin>(std::move(s), std::move(*t), twin_margin, seed));
}

Result<std::unique_ptr<PredictorSource>> make_twin_source(double margin, std::uint64_t seed) {
  auto t = make_testbed("sim");
  if (!t) return t.error();
  return std::unique_ptr<PredictorSource>(
      std::make_unique<TwinSource>(std::move(*t), margin, seed));
}

// ---------------------------------------------------------------------------------------------
// Construction and recovery

Service::Service(ServiceOptions options, const Catalog& catalog,
                 std::unique_ptr<PredictorSource> source, std::unique_ptr<StateStore> store,
                 std::unique_ptr<Solver> solver)
    : options_(std::move(options)),
      catalog_(&catalog),
      source_(std::move(source)),
      store_(std::move(store)),
      solver_(std::move(solver)) {}

Result<std::unique_ptr<Service>> Service::open(ServiceOptions options, const Catalog& catalog,
                                               std::unique_ptr<PredictorSource> source) {
  if (options.token.empty()) return Error("serve needs a non-empty bearer token");
  if (!source) return Error("serve needs a predictor source");
  auto solver = make_solver(options.solver);
  if (!solver) return solver.error().wrap("--solver");
  auto store = StateStore::open(options.state_dir);
  if (!store) return store.error();
  auto st = (*store)->load(options.history_in_memory);
  if (!st) return st.error().wrap("loading " + options.state_dir.string());
  std::unique_ptr<Service> s(new Service(std::move(options), catalog, std::move(source),
                                         std::move(*store), std::move(*solver)));
  auto ok = s->restore(*st);
  if (!ok) return ok.error();
  s->planner_ = std::thread([p = s.get()] { p->planner_loop(); });
  s->flusher_ = std::thread([p = s.get()] { p->flusher_loop(); });
  return s;
}

Status Service::restore(const StoredState& st) {
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
      return Error("stored model '" + sm.name + "' no longer validates: " + e->message);
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
    t.error_ewma = j.value("error_ewma", 0.0);
    t.abs_error_ewma = j.value("abs_error_ewma", 0.0);
    t.margin_boost = j.value("margin_boost", 0.0);
    t.boosted_for_plan = j.value("boosted_for_plan", std::int64_t{-1});
    if (j.contains("last")) t.last = j["last"];
  }
  for (const auto& p : st.plans) {
    json rec = json::parse(p.record_json, nullptr, false);
    if (!rec.is_object()) return Error("stored plan " + std::to_string(p.id) + " is not JSON");
    history_.push_back(std::move(rec));
  }
  if (!history_.empty()) {
    plan_ = history_.back();
    plan_body_ = std::make_shared<const std::string>(plan_body(plan_));
    plan_id_ = plan_.value("id", std::int64_t{0});
    if (plan_.contains("models") && plan_["models"].is_object()) {
      for (const auto& [name, m] : plan_["models"].items()) {
        plan_local_[name] = m.value("index", std::int32_t{0});
        if (m.contains("predicted")) plan_predicted_[name] = predicted_from_json(m["predicted"]);
      }
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

HttpResponse Service::transport_error(int status, const std::string& path) {
  metrics_.count_request(kTransport, status);
  switch (status) {
    case 413:
      return error({413, "body_too_large",
                    "request body exceeds " + std::to_string(options_.max_body_bytes) + " bytes",
                    ""});
    case 414:
      return error({414, "uri_too_long", "request target is too long", ""});
    case 404:
      return error({404, "not_found", "no route for this path", ""});
    default:
      return error({status >= 400 && status < 600 ? status : 400, "bad_request",
                    "malformed HTTP request" + (path.empty() ? std::string() : " for " + path),
                    ""});
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
  if (!json_depth_ok(req.body, kMaxJsonDepth)) {
    err = {400, "bad_json", "JSON nests deeper than " + std::to_string(kMaxJsonDepth), ""};
    return Error(err.message);
  }
  try {
    return json::parse(req.body);
  } catch (const json::parse_error& e) {
    err = {400, "bad_json", std::string("malformed JSON: ") + e.what(), ""};
    return Error(err.message);
  }
}

HttpResponse Service::handle(const HttpRequest& req) {
  std::size_t route_index = kUnknown;
  HttpResponse r;
  try {
    r = route(req, route_index);
  } catch (const std::exception& e) {
    r = error({500, "internal", std::string("internal error: ") + e.what(), ""});
  } catch (...) {
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
  const bool mutating = req.method != "GET";
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
      if (!body) return error(e);
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
  const std::string text = "device: " + wrapper_device_ + "\nmodels:\n  - " +
                           spec.dump(-1, ' ', true, json::error_handler_t::replace) + "\n";
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
    if (index_.count(m.name) != 0) {
      return error(
          {409, "duplicate_model", "model '" + m.name + "' is already registered", "name"});
    }
    if (models_.size() >= kMaxModels) {
      return error({422, "too_many_models",
                    "at most " + std::to_string(kMaxModels) + " models are served", ""});
    }
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
  }
  request_replan("demand " + name);
  return json_response(200, {{"model", spec}});
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
  bool notify = false;
  {
    std::lock_guard lock(state_mutex_);
    for (std::size_t i = 0; i < samples.size(); ++i) {
      if (index_.count(samples[i].model) == 0) {
        return error({404, "unknown_model", "no model '" + samples[i].model.substr(0, 64) + "'",
                      batch ? "[" + std::to_string(i) + "].model" : "model"});
      }
    }
    current = plan_id_.load();
    for (const auto& s : samples) {
      const ModelSpec& spec = models_[index_[s.model]].model;
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
      if (s.plan_id && *s.plan_id != current) {
        ++t.stale;  // observed under another plan: says nothing about this one
        continue;
      }
      // Ground truth: the observed metrics against the SLA, without margin.
      const Sla& sla = spec.sla;
      bool breach = false;
      auto over = [&](const std::optional<double>& limit, const std::optional<double>& v) {
        if (limit && v && *v > *limit) breach = true;
      };
      over(sla.latency_ms_p95, s.latency_ms_p95);
      over(sla.ttft_ms_p95, s.ttft_ms_p95);
      over(sla.tpot_ms_p95, s.tpot_ms_p95);
      if (sla.min_throughput && s.throughput && *s.throughput < *sla.min_throughput) breach = true;

      // Prediction error against the plan in force, on the latency metrics observed.
      double ratio = 1;
      bool have_ratio = false;
      const auto pit = plan_predicted_.find(s.model);
      if (pit != plan_predicted_.end()) {
        const Predicted& p = pit->second;
        auto cmp = [&](float pred, const std::optional<double>& v, bool primary) {
          if (!v || !(pred > 0) || pred >= std::numeric_limits<float>::max()) return;
          const double r = *v / static_cast<double>(pred);
          if (primary && !have_ratio) {
            const double a = options_.error_ewma_alpha;
            t.error_ewma = (1 - a) * t.error_ewma + a * (r - 1);
            t.abs_error_ewma = (1 - a) * t.abs_error_ewma + a * std::abs(r - 1);
          }
          ratio = std::max(ratio, r);
          have_ratio = true;
        };
        cmp(p.latency_ms_p95, s.latency_ms_p95, true);
        cmp(p.ttft_ms_p95, s.ttft_ms_p95, true);
        cmp(p.tpot_ms_p95, s.tpot_ms_p95, false);
      }
      if (!breach) continue;
      ++t.breaches;
      ++breaches;
      // One margin step and one re-plan per model per plan: a flood of breaching samples
      // under the same plan is one piece of evidence, not thousands.
      if (current > 0 && t.boosted_for_plan != current) {
        t.boosted_for_plan = current;
        t.margin_boost = std::min(kMaxMargin, std::max(t.margin_boost + options_.breach_margin_step,
                                                       ratio - 1 + options_.breach_margin_step));
        if (!replan_pending_) {
          replan_pending_ = true;
          replan_reason_ = "breach " + s.model;
        }
        notify = true;
      }
    }
  }
  if (notify) planner_cv_.notify_one();
  metrics_.count_samples(samples.size());
  return json_response(
      202, {{"accepted", samples.size()}, {"breaches", breaches}, {"plan_id", current}});
}

json Service::telemetry_json(const std::string& name, const ModelTelemetry& t) const {
  (void)name;
  return {{"samples", t.samples},
          {"breaches", t.breaches},
          {"stale", t.stale},
          {"error_ewma", t.error_ewma},
          {"abs_error_ewma", t.abs_error_ewma},
          {"margin_boost", t.margin_boost},
          {"boosted_for_plan", t.boosted_for_plan},
          {"last", t.last}};
}

HttpResponse Service::get_telemetry() {
  json out = json::object();
  {
    std::lock_guard lock(state_mutex_);
    for (const auto& m : models_) out[m.name] = telemetry_json(m.name, telemetry_.at(m.name));
  }
  return json_response(200, {{"models", out}, {"flush_interval_ms", options_.telemetry_flush_ms}});
}

void Service::flush_telemetry() {
  std::vector<std::pair<std::string, std::string>> rows;
  {
    std::lock_guard lock(state_mutex_);
    if (!telemetry_dirty_) return;
    telemetry_dirty_ = false;
    for (const auto& [name, t] : telemetry_)
      rows.emplace_back(name, telemetry_json(name, t).dump());
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
  Workload w;
  std::uint64_t generation = 0;
  std::vector<double> boosts;
  JointConfig warm;
  std::int64_t id = 0;
  {
    std::lock_guard lock(state_mutex_);
    w.file = "<serve>";
    w.device = device_;
    for (const auto& m : models_) {
      w.models.push_back(m.model);
      const auto& t = telemetry_.at(m.name);
      boosts.push_back(std::max(0.0, t.error_ewma) + t.margin_boost);
      const auto it = plan_local_.find(m.name);
      warm.push_back(it != plan_local_.end() &&
                             it->second < static_cast<std::int32_t>(m.model.local_config_count())
                         ? it->second
                         : 0);
    }
    generation = generation_;
    id = plan_id_.load() + 1;
  }
  const std::size_t n = w.models.size();
  json rec = {{"id", id},
              {"created_at", now_iso8601()},
              {"reason", reason},
              {"solver", options_.solver},
              {"device", device_.name}};
  json models = json::object();
  std::vector<Predicted> predicted(n);
  JointConfig config;
  double seconds = 0;
  if (n > 0) {
    auto p = source_->predictor_for(w);
    if (!p) return p.error().wrap("predictor");
    std::vector<double> margins = source_->margins(w);
    margins.resize(n, 0.0);
    for (std::size_t m = 0; m < n; ++m)
      margins[m] = std::clamp(margins[m] + boosts[m], 0.0, kMaxMargin);
    const PlanProblem problem(w, std::vector<bool>(n, true), **p, margins);
    SolverOptions so;
    so.seed = derive_seed(options_.seed, {static_cast<std::uint64_t>(id)});
    so.threads = options_.solver_threads;
    so.warm_start = warm;
    const auto start = std::chrono::steady_clock::now();
    auto r = solver_->solve(problem, so);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!r) return r.error().wrap("solving");
    config = r->config;
    predicted = r->predicted;
    rec["feasible"] = r->feasible;
    rec["predicted_utility"] = r->utility;
    rec["evaluated"] = r->stats.evaluated;
    for (std::size_t m = 0; m < n; ++m) {
      const auto l = config[m];
      json e = {{"index", l}, {"margin", margins[m]}, {"predicted", predicted_json(predicted[m])}};
      if (l >= 0) {
        const std::string d = w.models[m].describe(static_cast<std::size_t>(l));
        e["settings"] = d;
        e["config"] = settings_json(d);
      }
      models[w.models[m].name] = e;
    }
  } else {
    rec["feasible"] = true;
    rec["predicted_utility"] = 0.0;
    rec["evaluated"] = 0;
  }
  rec["decision_ms"] = seconds * 1e3;
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
  metrics_.observe_decision(seconds);
  metrics_.count_replan();
  // Everything is built outside the lock; the critical section only moves and swaps, so a
  // planner descheduled there (it runs at low priority) holds request handlers up the least.
  std::unordered_map<std::string, std::int32_t> local;
  std::unordered_map<std::string, Predicted> preds;
  for (std::size_t m = 0; m < n; ++m) {
    local[w.models[m].name] = config[m];
    preds[w.models[m].name] = predicted[m];
  }
  auto body = std::make_shared<const std::string>(plan_body(rec));
  json copy = rec;
  {
    std::lock_guard lock(state_mutex_);
    plan_local_.swap(local);
    plan_predicted_.swap(preds);
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
  HttpResponse r;
  r.body = *body;
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
  out +=
      "# HELP corun_serve_prediction_error_ratio Moving average of (observed - predicted) / "
      "predicted latency, by model.\n";
  out += "# TYPE corun_serve_prediction_error_ratio gauge\n";
  for (const auto& m : models_) {
    std::snprintf(line, sizeof line, "corun_serve_prediction_error_ratio{model=\"%s\"} %.6f\n",
                  m.name.c_str(), telemetry_.at(m.name).error_ewma);
    out += line;
  }
  out +=
      "# HELP corun_serve_prediction_abs_error_ratio Moving average of |observed - predicted| "
      "/ predicted latency, by model.\n";
  out += "# TYPE corun_serve_prediction_abs_error_ratio gauge\n";
  for (const auto& m : models_) {
    std::snprintf(line, sizeof line, "corun_serve_prediction_abs_error_ratio{model=\"%s\"} %.6f\n",
                  m.name.c_str(), telemetry_.at(m.name).abs_error_ewma);
    out += line;
  }
  out += "# HELP corun_serve_margin_boost_ratio Margin added after observed breaches, by model.\n";
  out += "# TYPE corun_serve_margin_boost_ratio gauge\n";
  for (const auto& m : models_) {
    std::snprintf(line, sizeof line, "corun_serve_margin_boost_ratio{model=\"%s\"} %.6f\n",
                  m.name.c_str(), telemetry_.at(m.name).margin_boost);
    out += line;
  }
  HttpResponse r;
  r.status = 200;
  r.content_type = "text/plain; version=0.0.4";
  r.body = std::move(out);
  return r;
}

}  // namespace corun::serve
