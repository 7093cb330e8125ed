#include "corun/serve/service.h"

// corun serve's model routes: the registry (list, get, register, remove, demand) and the
// questions asked of it (what-if, tool placement).

#include <algorithm>
#include <chrono>

#include "corun/core/strings.h"
#include "corun/serve/plan_record.h"
#include "corun/serve/tool_placement.h"

namespace corun::serve {

using nlohmann::json;


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
  std::optional<std::pair<std::int64_t, JointConfig>> in_force;
  json entries = json::array();
  {
    MutexLock lock(state_mutex_);
    if (!registry_.empty()) {
      in_force = config_in_force_locked();
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
  // The placement and its co-runners draw from the scenario's own seed, not the service's.
  const Context place_ctx{.seed = req.scenario.context.seed, .threads = ctx_.threads};
  std::shared_ptr<const mapping::CoRunners> co;
  const std::int64_t plan_id = in_force ? in_force->first : 0;
  if (in_force) {
    const std::string key = std::to_string(plan_id) + "|" + std::to_string(place_ctx.seed) +
                            "|" + device_.name + "|" + entries.dump();
    auto c = cached_corunners(key, workload, in_force->second, plan_id, place_ctx);
    if (!c) return error({503, "corunners_failed", c.error().what(), ""});
    co = *c;
  }
  auto problem = mapping::PlacementProblem::build(req.scenario, *tools_, *catalog_, co);
  if (!problem) return error({422, "invalid_spec", problem.error().what(), "scenario"});
  auto placed = mapping::place(*problem, {req.policy, "builtin", std::nullopt}, place_ctx);
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

std::optional<std::pair<std::int64_t, JointConfig>> Service::config_in_force_locked() const {
  if (!in_force_ || in_force_->names.size() != registry_.size() || registry_.empty()) {
    return std::nullopt;
  }
  const InForce& f = *in_force_;
  JointConfig config;
  for (const auto& r : registry_.entries()) {
    const auto at = std::find(f.names.begin(), f.names.end(), r.name);
    if (at == f.names.end()) return std::nullopt;
    const std::int32_t l = f.decision->config[static_cast<std::size_t>(at - f.names.begin())];
    const bool in_range =
        l == kAbsent || (l >= 0 && static_cast<std::size_t>(l) < r.model.local_config_count());
    if (!in_range) return std::nullopt;
    config.push_back(l);
  }
  return std::pair{f.decision->id, std::move(config)};
}

Result<std::shared_ptr<const mapping::CoRunners>> Service::cached_corunners(
    const std::string& key, const Workload& workload, const JointConfig& config,
    std::int64_t plan_id, const Context& ctx) {
  {
    MutexLock lock(corunners_mutex_);
    for (const auto& [k, co] : corunners_cache_) {
      if (k == key) return co;
    }
  }
  auto c = plan_corunners(ctx, workload, config, plan_id, *twin_);
  if (!c) return c;
  MutexLock lock(corunners_mutex_);
  if (corunners_cache_.size() >= kCoRunnersCached) corunners_cache_.pop_front();
  corunners_cache_.emplace_back(key, *c);
  return c;
}

}  // namespace corun::serve
