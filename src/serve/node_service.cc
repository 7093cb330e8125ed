#include "corun/serve/node_service.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <future>
#include <sstream>
#include <string_view>

#include "corun/core/atomic_file.h"
#include "corun/serve/api_error.h"
#include "corun/serve/telemetry.h"

namespace corun::serve {

using nlohmann::json;

namespace {

constexpr const char* kNodeFile = "node.json";

json body_json(const HttpResponse& r) { return json::parse(r.body, nullptr, false); }

bool ok_status(int status) { return status >= 200 && status < 300; }

HttpRequest with_body(const HttpRequest& req, const std::string& path, const json& body) {
  HttpRequest r = req;
  r.path = path;
  r.body = body.dump(-1, ' ', true, json::error_handler_t::replace);
  r.content_type = "application/json";
  return r;
}

HttpRequest get(const std::string& path) {
  HttpRequest r;
  r.method = "GET";
  r.path = path;
  return r;
}

// `name{labels} value` with `gpu="K"` first among its labels.
std::string with_gpu_label(std::string_view line, std::size_t gpu) {
  const std::string label = "gpu=\"" + std::to_string(gpu) + "\"";
  const std::size_t brace = line.find('{');
  const std::size_t space = line.find(' ');
  if (brace != std::string_view::npos && (space == std::string_view::npos || brace < space)) {
    const bool empty = brace + 1 < line.size() && line[brace + 1] == '}';
    return std::string(line.substr(0, brace + 1)) + label + (empty ? "" : ",") +
           std::string(line.substr(brace + 1));
  }
  if (space == std::string_view::npos) return std::string(line);
  return std::string(line.substr(0, space)) + "{" + label + "}" + std::string(line.substr(space));
}

}  // namespace

std::filesystem::path NodeService::unit_dir(const std::filesystem::path& state_dir, std::size_t k) {
  return state_dir / ("gpu" + std::to_string(k));
}

Result<std::optional<std::size_t>> NodeService::stored_gpus(
    const std::filesystem::path& state_dir) {
  const auto file = state_dir / kNodeFile;
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::optional<std::size_t>();
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  const json j = json::parse(ss.str(), nullptr, false);
  if (!j.is_object() || !j.contains("gpus") || !j["gpus"].is_number_unsigned() ||
      j["gpus"].get<std::size_t>() < 1 || j["gpus"].get<std::size_t>() > 64) {
    return Error(file.string() + ": gpus: not a GPU count (1..64)", Error::Kind::kDamaged);
  }
  return std::optional<std::size_t>(j["gpus"].get<std::size_t>());
}

Result<std::unique_ptr<NodeService>> NodeService::open(
    const Context& ctx, const ServiceOptions& options, std::size_t gpus,
    const std::vector<std::string>& initial, const Catalog& catalog, const SourceFactory& source) {
  if (gpus < 1 || gpus > 64) return Error("a node has 1 to 64 GPUs", Error::Kind::kInvalidInput);
  auto stored = stored_gpus(options.state_dir);
  if (!stored) return stored.error();
  if (*stored && **stored != gpus) {
    return Error(options.state_dir.string() + " holds a node of " + std::to_string(**stored) +
                     " GPU(s), not " + std::to_string(gpus),
                 Error::Kind::kInvalidInput);
  }
  std::error_code ec;
  std::filesystem::create_directories(options.state_dir, ec);
  if (ec) {
    return Error("cannot create " + options.state_dir.string() + ": " + ec.message(),
                 Error::Kind::kIo);
  }
  if (!*stored) {
    const json node = {{"gpus", gpus}, {"device", options.device}};
    if (auto ok = write_file_atomic(options.state_dir / kNodeFile, node.dump() + "\n"); !ok) {
      return ok.error();
    }
  }
  std::vector<std::unique_ptr<Service>> units;
  for (std::size_t k = 0; k < gpus; ++k) {
    ServiceOptions o = options;
    o.state_dir = unit_dir(options.state_dir, k);
    o.workload_file = k < initial.size() ? initial[k] : "";
    if (!o.stack.dcgm_labels.empty() && gpus > 1) {
      // Each GPU reads its own dcgm-exporter series: gpu="K" beside the labels given.
      auto& l = o.stack.dcgm_labels;
      l.erase(std::remove_if(l.begin(), l.end(), [](const auto& kv) { return kv.first == "gpu"; }),
              l.end());
      l.emplace_back("gpu", std::to_string(k));
    }
    auto src = source();
    if (!src) return src.error().wrap("gpu" + std::to_string(k));
    auto s = Service::open(ctx, std::move(o), catalog, std::move(*src));
    if (!s) return s.error().wrap("gpu" + std::to_string(k));
    units.push_back(std::move(*s));
  }
  std::unique_ptr<NodeService> node(new NodeService(std::move(units)));
  MutexLock lock(node->where_mutex_);
  for (std::size_t k = 0; k < node->units_.size(); ++k) {
    const json list = body_json(node->forward(k, get("/v1/models")));
    if (!list.is_object() || !list.contains("models") || !list["models"].is_array()) continue;
    for (const auto& m : list["models"]) {
      const std::string name = m.value("name", "");
      if (!node->where_.emplace(name, k).second) {
        return Error(
            "model '" + name + "' is registered on two GPUs of " + options.state_dir.string(),
            Error::Kind::kDamaged);
      }
    }
  }
  return node;
}

NodeService::NodeService(std::vector<std::unique_ptr<Service>> units) : units_(std::move(units)) {}

NodeService::~NodeService() { stop(); }

void NodeService::stop() {
  for (auto& u : units_) u->stop();
}

HttpResponse NodeService::transport_error(int status, const std::string& path,
                                          const std::string& reason, const std::string& field) {
  return units_.front()->transport_error(status, path, reason, field);
}

HttpResponse NodeService::handle(const HttpRequest& req) {
  try {
    return route(req);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corun serve: internal error on %s %s: %s\n",
                 req.method.substr(0, 16).c_str(), req.path.substr(0, 128).c_str(), e.what());
    return error_response({500, "internal", std::string("internal error: ") + e.what(), ""});
  }
}

std::optional<std::size_t> NodeService::gpu_of(const std::string& model) const {
  MutexLock lock(where_mutex_);
  const auto it = where_.find(model);
  if (it == where_.end()) return std::nullopt;
  return it->second;
}

std::span<const NodeService::NodeRoute> NodeService::node_routes() {
  using N = NodeService;
  static const NodeRoute kTable[] = {
      {"GET", "/healthz", &N::health},
      {"GET", "/metrics", &N::metrics},
      {"GET", "/v1/models", &N::list_models},
      {"POST", "/v1/models", &N::register_model},
      {"DELETE", "/v1/models/{name}", &N::remove_model},
      {"GET", "/v1/telemetry", &N::get_telemetry},
      {"POST", "/v1/telemetry", &N::post_telemetry},
      {"GET", "/v1/plan", &N::get_plan},
      {"GET", "/v1/plan/history", &N::get_history},
      {"POST", "/v1/replan", &N::replan},
      {"POST", "/v1/whatif", &N::whatif},
      {"POST", "/v1/tools/place", &N::tools_place},
      {"POST", "/v1/capacity", &N::capacity},
  };
  return kTable;
}

HttpResponse NodeService::route(const HttpRequest& req) {
  std::string path = req.path;
  if (path.size() > 1 && path.back() == '/') path.pop_back();
  const auto found = lookup_route(Service::routes(), req.method, path);
  // No row (an unknown path, a method the path does not allow): GPU 0 answers, as every GPU
  // would.
  if (found.route == nullptr) return forward(0, req);
  const Route<Service>& row = *found.route;
  for (const NodeRoute& r : node_routes()) {
    if (r.method == row.method && r.pattern == row.pattern) {
      return (this->*r.handler)(RouteCall{req, found.captured, nlohmann::json()});
    }
  }
  // A model's route goes to its GPU; an unknown model to GPU 0, which answers 404.
  if (!found.captured.empty()) return forward(gpu_of(found.captured).value_or(0), req);
  return forward(0, req);
}

HttpResponse NodeService::remove_model(const RouteCall& call) {
  const HttpRequest& req = call.request;
  const auto k = gpu_of(call.name);
  if (!units_.front()->authorised(req)) return forward(k.value_or(0), req);  // its GPU's 401
  MutexLock mutate(mutate_mutex_);
  HttpResponse r = forward(gpu_of(call.name).value_or(0), req);
  if (ok_status(r.status)) {
    MutexLock lock(where_mutex_);
    where_.erase(call.name);
  }
  return r;
}

HttpResponse NodeService::capacity(const RouteCall& call) {
  const HttpRequest& req = call.request;
  // GPU 0 answers for the node: with no `models` in the body, the models of every GPU (their
  // pins set aside: the answer is a new node's).
  json body = json::object();
  if (!req.body.empty()) {
    auto parsed = units_.front()->parse_body(req);
    if (auto* e = std::get_if<ApiError>(&parsed)) return error_response(*e);
    body = std::move(std::get<json>(parsed));
  }
  if (body.is_object() && !body.contains("models")) {
    json all = json::array();
    for (std::size_t k = 0; k < units_.size(); ++k) {
      const json list = body_json(forward(k, get("/v1/models")));
      if (!list.contains("models")) continue;
      for (json m : list["models"]) {
        m.erase("gpu");
        all.push_back(std::move(m));
      }
    }
    if (!all.empty()) body["models"] = std::move(all);
  }
  return forward(0, with_body(req, "/v1/capacity", body));
}

std::variant<std::optional<std::size_t>, HttpResponse> NodeService::take_pin(json& entry) const {
  if (!entry.is_object() || !entry.contains("gpu")) return std::optional<std::size_t>();
  const json& g = entry["gpu"];
  if (!g.is_number_integer() || g.get<std::int64_t>() < 0 ||
      g.get<std::int64_t>() >= static_cast<std::int64_t>(units_.size())) {
    return error_response({422, "invalid_spec",
                           "gpu must be an integer in [0, " + std::to_string(units_.size() - 1) +
                               "]: this node has " + std::to_string(units_.size()) + " GPU(s)",
                           "gpu"});
  }
  const auto k = g.get<std::size_t>();
  entry.erase("gpu");
  return std::optional<std::size_t>(k);
}

std::variant<NodeService::Entry, HttpResponse> NodeService::read_entry(
    const HttpRequest& req) const {
  auto parsed = units_.front()->parse_body(req);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error_response(*e);
  Entry out;
  out.body = std::move(std::get<json>(parsed));
  auto pin = take_pin(out.body);
  if (auto* r = std::get_if<HttpResponse>(&pin)) return *r;
  out.pin = std::get<std::optional<std::size_t>>(pin);
  const json& b = out.body;
  if (b.is_object() && b.contains("name") && b["name"].is_string()) {
    out.name = b["name"].get<std::string>();
  }
  return out;
}

std::variant<NodeService::Placement, HttpResponse> NodeService::place(
    const HttpRequest& req, const json& entry, std::optional<std::size_t> pin) {
  // Every GPU's what-if, in parallel: each plans its own model set plus the entry.
  const HttpRequest ask = with_body(req, "/v1/whatif", entry);
  std::vector<std::future<HttpResponse>> asked;
  for (std::size_t k = 0; k < units_.size(); ++k) {
    asked.push_back(std::async(std::launch::async, [this, k, &ask] { return forward(k, ask); }));
  }
  Placement out;
  std::optional<HttpResponse> failed;
  for (std::size_t k = 0; k < asked.size(); ++k) {
    HttpResponse r = asked[k].get();
    if (!ok_status(r.status) && !failed) failed = r;
    out.answers.push_back(body_json(r));
  }
  if (failed) return *failed;
  if (pin) {
    out.gpu = *pin;
    return out;
  }
  auto better = [&](std::size_t a, std::size_t b) {  // whether GPU a's answer beats GPU b's
    const bool fa = out.answers[a].value("fits", false);
    const bool fb = out.answers[b].value("fits", false);
    if (fa != fb) return fa;
    return out.answers[a].value("utility_gain", 0.0) > out.answers[b].value("utility_gain", 0.0);
  };
  for (std::size_t k = 1; k < units_.size(); ++k) {
    if (better(k, out.gpu)) out.gpu = k;
  }
  return out;
}

HttpResponse NodeService::register_model(const RouteCall& call) {
  const HttpRequest& req = call.request;
  Service& first = *units_.front();
  if (!first.authorised(req)) return forward(0, req);  // 401, before any planning
  auto read = read_entry(req);
  if (auto* r = std::get_if<HttpResponse>(&read)) return *r;
  const Entry& entry = std::get<Entry>(read);
  const std::string& name = entry.name;
  MutexLock mutate(mutate_mutex_);
  // Already on a GPU: that GPU refuses the duplicate, as it would alone.
  if (const auto k = gpu_of(name)) return forward(*k, with_body(req, req.path, entry.body));
  // A pin needs no what-if: its GPU validates and plans it.
  std::size_t k = entry.pin.value_or(0);
  if (!entry.pin) {
    auto placed = place(req, entry.body, std::nullopt);
    if (auto* r = std::get_if<HttpResponse>(&placed)) return *r;
    k = std::get<Placement>(placed).gpu;
  }
  HttpResponse r = forward(k, with_body(req, req.path, entry.body));
  if (!ok_status(r.status)) return r;
  {
    MutexLock lock(where_mutex_);
    where_[name] = k;
  }
  json out = body_json(r);
  out["gpu"] = k;
  return json_response(r.status, out);
}

HttpResponse NodeService::whatif(const RouteCall& call) {
  const HttpRequest& req = call.request;
  auto read = read_entry(req);
  if (auto* r = std::get_if<HttpResponse>(&read)) return *r;
  const Entry& entry = std::get<Entry>(read);
  if (const auto k = gpu_of(entry.name)) {
    return forward(*k, with_body(req, req.path, entry.body));
  }
  auto placed = place(req, entry.body, entry.pin);
  if (auto* r = std::get_if<HttpResponse>(&placed)) return *r;
  const Placement& pl = std::get<Placement>(placed);
  // The node's utility: every GPU's plan now; the chosen one's changes by its gain.
  double before = 0;
  json candidates = json::array();
  for (std::size_t k = 0; k < pl.answers.size(); ++k) {
    const json& a = pl.answers[k];
    before += a.value("utility_before", 0.0);
    candidates.push_back({{"gpu", k},
                          {"fits", a.value("fits", false)},
                          {"utility_gain", a.value("utility_gain", 0.0)}});
  }
  json out = pl.answers[pl.gpu];
  out["gpu"] = pl.gpu;
  out["utility_before"] = before;
  out["utility_after"] = before + out.value("utility_gain", 0.0);
  out["gpus"] = candidates;
  return json_response(200, out);
}

HttpResponse NodeService::post_telemetry(const RouteCall& call) {
  const HttpRequest& req = call.request;
  Service& first = *units_.front();
  if (!first.authorised(req)) return forward(0, req);
  auto parsed = first.parse_body(req);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error_response(*e);
  const json body = std::move(std::get<json>(parsed));
  // Validate every sample before any GPU takes one, so that a bad sample changes nothing.
  auto samples = parse_telemetry(body);
  if (auto* e = std::get_if<ApiError>(&samples)) return error_response(*e);
  const auto& s = std::get<std::vector<TelemetrySample>>(samples);
  const bool batch = body.is_array();
  std::vector<json> per_gpu(units_.size(), json::array());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto k = gpu_of(s[i].model);
    if (!k) {
      return error_response({404, "unknown_model", "no model '" + s[i].model.substr(0, 64) + "'",
                             batch ? "[" + std::to_string(i) + "].model" : "model"});
    }
    per_gpu[*k].push_back(batch ? body[i] : body);
  }
  std::size_t accepted = 0, breaches = 0;
  json units = json::array();
  for (std::size_t k = 0; k < units_.size(); ++k) {
    if (per_gpu[k].empty()) continue;
    const json part = batch ? per_gpu[k] : per_gpu[k][0];
    HttpResponse r = forward(k, with_body(req, req.path, part));
    if (!ok_status(r.status)) return r;  // a storage failure: that GPU names it
    json a = body_json(r);
    accepted += a.value("accepted", std::size_t{0});
    breaches += a.value("breaches", std::size_t{0});
    a["gpu"] = k;
    units.push_back(std::move(a));
  }
  json out = {{"accepted", accepted}, {"breaches", breaches}, {"gpus", units}};
  if (units.size() == 1) out["plan_id"] = units[0].value("plan_id", std::int64_t{0});
  return json_response(202, out);
}

HttpResponse NodeService::list_models(const RouteCall& call) {
  const HttpRequest& req = call.request;
  json models = json::array();
  for (std::size_t k = 0; k < units_.size(); ++k) {
    HttpResponse r = forward(k, req);
    if (!ok_status(r.status)) return r;
    const json a = body_json(r);
    if (!a.is_object() || !a.contains("models") || !a["models"].is_array()) continue;
    for (const auto& m : a["models"]) {
      json entry = m;
      entry["gpu"] = k;
      models.push_back(std::move(entry));
    }
  }
  return json_response(200, {{"models", models}, {"gpus", units_.size()}});
}

HttpResponse NodeService::get_telemetry(const RouteCall& call) {
  const HttpRequest& req = call.request;
  json models = json::object();
  json flush;
  for (std::size_t k = 0; k < units_.size(); ++k) {
    HttpResponse r = forward(k, req);
    if (!ok_status(r.status)) return r;
    const json a = body_json(r);
    if (!a.is_object()) continue;
    if (a.contains("flush_interval_ms")) flush = a["flush_interval_ms"];
    if (!a.contains("models") || !a["models"].is_object()) continue;
    for (const auto& [name, t] : a["models"].items()) {
      json entry = t;
      entry["gpu"] = k;
      models[name] = std::move(entry);
    }
  }
  return json_response(200, {{"models", models}, {"flush_interval_ms", flush}});
}

HttpResponse NodeService::get_plan(const RouteCall& call) {
  const HttpRequest& req = call.request;
  json units = json::array();
  json models = json::object();
  json learning = json::object();
  double utility = 0;
  bool feasible = true;
  std::optional<HttpResponse> none;
  for (std::size_t k = 0; k < units_.size(); ++k) {
    HttpResponse r = forward(k, req);
    if (r.status == 404) {
      if (!none) none = r;
      units.push_back({{"gpu", k}, {"plan", nullptr}});
      continue;
    }
    if (!ok_status(r.status)) return r;
    json plan = body_json(r);
    utility += plan.value("predicted_utility", 0.0);
    feasible = feasible && plan.value("feasible", false);
    const auto id = plan.value("id", std::int64_t{0});
    if (plan.contains("models") && plan["models"].is_object()) {
      for (const auto& [name, m] : plan["models"].items()) {
        json entry = m;
        entry["gpu"] = k;
        entry["plan_id"] = id;
        models[name] = std::move(entry);
      }
    }
    if (plan.contains("learning") && plan["learning"].is_object()) {
      for (const auto& [name, l] : plan["learning"].items()) learning[name] = l;
    }
    units.push_back({{"gpu", k}, {"plan", std::move(plan)}});
  }
  if (models.empty() && none) return *none;  // no GPU has a plan yet
  return json_response(200, {{"gpus", units_.size()},
                             {"feasible", feasible},
                             {"predicted_utility", utility},
                             {"models", models},
                             {"learning", learning},
                             {"units", units}});
}

HttpResponse NodeService::get_history(const RouteCall& call) {
  const HttpRequest& req = call.request;
  json units = json::array();
  for (std::size_t k = 0; k < units_.size(); ++k) {
    HttpResponse r = forward(k, req);  // GPU 0 answers a bad query first
    if (!ok_status(r.status)) return r;
    const json a = body_json(r);
    json plans = a.is_object() && a.contains("plans") ? a["plans"] : json::array();
    units.push_back({{"gpu", k}, {"plans", std::move(plans)}});
  }
  return json_response(200, {{"gpus", units}});
}

HttpResponse NodeService::replan(const RouteCall& call) {
  const HttpRequest& req = call.request;
  json units = json::array();
  int status = 202;
  for (std::size_t k = 0; k < units_.size(); ++k) {
    HttpResponse r = forward(k, req);  // GPU 0 refuses a request without the token first
    if (!ok_status(r.status)) return r;
    status = r.status;
    json a = body_json(r);
    a["gpu"] = k;
    units.push_back(std::move(a));
  }
  return json_response(status, {{"requested", true}, {"gpus", units}});
}

HttpResponse NodeService::tools_place(const RouteCall& call) {
  const HttpRequest& req = call.request;
  HttpRequest r = req;
  std::size_t k = 0;
  if (const auto it = r.query.find("gpu"); it != r.query.end()) {
    const std::string& v = it->second;
    char* end = nullptr;
    const long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || v.size() > 3 || *end != '\0' || n < 0 ||
        n >= static_cast<long long>(units_.size())) {
      return error_response(
          {400, "bad_parameter",
           "gpu must be an integer in [0, " + std::to_string(units_.size() - 1) + "]", "gpu"});
    }
    k = static_cast<std::size_t>(n);
    r.query.erase(it);
  }
  HttpResponse out = forward(k, r);
  if (!ok_status(out.status)) return out;
  json a = body_json(out);
  a["gpu"] = k;
  return json_response(out.status, a);
}

HttpResponse NodeService::health(const RouteCall& call) {
  const HttpRequest& req = call.request;
  json units = json::array();
  std::size_t models = 0;
  for (std::size_t k = 0; k < units_.size(); ++k) {
    HttpResponse r = forward(k, req);
    json a = body_json(r);
    models += a.value("models", std::size_t{0});
    a["gpu"] = k;
    units.push_back(std::move(a));
  }
  return json_response(
      200, {{"status", "ok"}, {"gpus", units_.size()}, {"models", models}, {"units", units}});
}

HttpResponse NodeService::metrics(const RouteCall& call) {
  const HttpRequest& req = call.request;
  // Each GPU's exposition with a gpu label on every sample, families kept together (the text
  // format wants a family's samples in one group, under one HELP and TYPE).
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::string, std::string>> family;  // name -> (header, samples)
  HttpResponse first;
  for (std::size_t k = 0; k < units_.size(); ++k) {
    HttpResponse r = forward(k, req);
    if (k == 0) first = r;
    if (!ok_status(r.status)) return r;
    std::string current;
    std::istringstream in(r.body);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      if (line.rfind("# ", 0) == 0) {
        std::istringstream words(line.substr(2));
        std::string kind, name;
        words >> kind >> name;
        if (kind == "HELP" || kind == "TYPE") {
          current = name;
          if (family.emplace(name, std::pair<std::string, std::string>()).second) {
            order.push_back(name);
          }
          if (k == 0) family[name].first += line + "\n";
        }
        continue;
      }
      if (current.empty()) {
        current = line.substr(0, line.find_first_of("{ "));
        if (family.emplace(current, std::pair<std::string, std::string>()).second) {
          order.push_back(current);
        }
      }
      family[current].second += with_gpu_label(line, k) + "\n";
    }
  }
  std::string body;
  for (const auto& name : order) body += family[name].first + family[name].second;
  first.body = std::move(body);
  return first;
}

}  // namespace corun::serve
