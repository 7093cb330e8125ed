// POST /v1/capacity: how many GPUs of the served device a set of models needs (docs/serve.md).

#include <set>

#include "corun/runtime/node_plan.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/registry.h"
#include "corun/serve/service.h"

namespace corun::serve {

using nlohmann::json;

namespace {

constexpr std::int64_t kMaxCapacityGpus = 8;

}  // namespace

HttpResponse Service::post_capacity(const RouteCall& call) {
  const json& body = call.body;
  if (!body.is_null() && !body.is_object()) {
    return error({400, "bad_type", "the body must be a JSON object (or absent)", ""});
  }
  if (body.is_object()) {
    for (const auto& [k, v] : body.items()) {
      (void)v;
      if (k != "models" && k != "max_gpus") {
        return error({400, "unknown_field",
                      "unknown field '" + k.substr(0, 64) + "' (known: models, max_gpus)",
                      k.substr(0, 64)});
      }
    }
  }
  std::int64_t max_gpus = kMaxCapacityGpus;
  if (body.is_object() && body.contains("max_gpus")) {
    const json& g = body["max_gpus"];
    if (!g.is_number_integer() || g.get<std::int64_t>() < 1 ||
        g.get<std::int64_t>() > kMaxCapacityGpus) {
      return error({400, "out_of_range",
                    "max_gpus must be an integer in [1, " + std::to_string(kMaxCapacityGpus) + "]",
                    "max_gpus"});
    }
    max_gpus = g.get<std::int64_t>();
  }
  Workload w;
  if (body.is_object() && body.contains("models")) {
    const json& ms = body["models"];
    if (!ms.is_array() || ms.empty() || ms.size() > ModelRegistry::kMaxModels) {
      return error({400, "bad_type",
                    "models must be a non-empty array of at most " +
                        std::to_string(ModelRegistry::kMaxModels) + " model entries",
                    "models"});
    }
    w.device = device_;
    w.file = "capacity request";
    std::set<std::string> names;
    for (std::size_t i = 0; i < ms.size(); ++i) {
      auto parsed = parse_model_json(ms[i], *catalog_);
      const std::string at = "models[" + std::to_string(i) + "]";
      if (auto* e = std::get_if<ApiError>(&parsed)) {
        ApiError named = *e;
        named.field = e->field.empty() ? at : at + "." + e->field;
        return error(named);
      }
      ModelSpec m = std::move(std::get<ModelSpec>(parsed));
      if (!names.insert(m.name).second) {
        return error({422, "invalid_spec", "model '" + m.name + "' is listed twice", at + ".name"});
      }
      w.models.push_back(std::move(m));
    }
  } else {
    MutexLock lock(state_mutex_);
    if (registry_.empty()) {
      return error({404, "no_models", "no models are registered; send them as 'models'", ""});
    }
    w = registry_.workload(device_);
  }
  // The node planner on the catalog twin: what telemetry taught of this GPU is not carried to
  // GPUs that do not exist yet.
  TwinSource twin;
  auto solver = make_solver(options_.solver);
  if (!solver) return error({500, "internal", solver.error().what(), ""});
  const NodePlanOptions options;
  auto a = gpus_needed(ctx_, w, twin, **solver, options, 1, static_cast<std::size_t>(max_gpus));
  if (!a) return error({503, "planning_failed", a.error().what(), ""});
  json out = {{"device", device_.name},
              {"gpus_needed", a->gpus == 0 ? json(nullptr) : json(a->gpus)},
              {"tried_up_to", a->tried_up_to},
              {"predictor", twin.describe()}};
  if (a->gpus > 0) {
    json placement = json::object();
    for (std::size_t m = 0; m < w.models.size(); ++m) {
      const auto u = a->plan.assignment[m];
      if (u == kNotPlaced) continue;
      placement[w.models[m].name] = a->plan.layout.units[static_cast<std::size_t>(u)].label();
    }
    out["placement"] = std::move(placement);
    out["predicted_utility"] = a->plan.utility;
  }
  return json_response(200, out);
}

}  // namespace corun::serve
