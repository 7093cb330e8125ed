#include "corun/serve/tool_placement.h"

#include <algorithm>
#include <utility>

#include "corun/core/strings.h"
#include "corun/core/yaml.h"
#include "corun/export/plan_input.h"
#include "corun/serve/json_input.h"

namespace corun::serve {

using nlohmann::json;

namespace {

// A problem of the scenario object, named as a field of the body.
ApiError scenario_error(std::string field, std::string reason) {
  const std::string path = field.empty() ? "scenario" : "scenario." + field;
  return {422, "invalid_spec", path + ": " + reason, path};
}

}  // namespace

std::variant<PlaceRequest, ApiError> parse_place_request(const json& body,
                                                         const mapping::ToolCatalog& tools,
                                                         const std::string& device) {
  if (!body.is_object()) {
    return ApiError{400, "bad_type", "the body must be a JSON object ({\"scenario\": {...}})", ""};
  }
  Diagnostics diags;
  const YAML::Node root = to_yaml_node(body);
  const YamlField top(root, "request", "", &diags);
  top.check_keys({"scenario", "policy"});
  PlaceRequest out;
  if (const auto p = top.string_at("policy", false)) {
    const auto& names = mapping::policy_names();
    if (std::find(names.begin(), names.end(), *p) == names.end()) {
      top["policy"].error("unknown policy '" + p->substr(0, 64) + "'" +
                          did_you_mean(p->substr(0, 64), names) + " (known: " + join(names, ", ") +
                          ")");
    }
    out.policy = *p;
  }
  const YamlField s = top["scenario"];
  if (!s.present()) s.error("missing required field");
  if (!diags.empty()) return spec_error(diags);
  const json& sj = body["scenario"];
  if (!sj.is_object()) return scenario_error("", "must be an object (a tool DAG scenario)");
  // Counted before the DAG is read: the limit bounds the work of every check that follows.
  if (sj.contains("tools") && sj["tools"].is_array() && sj["tools"].size() > kMaxPlacementTools) {
    ApiError e = scenario_error("tools", std::to_string(sj["tools"].size()) +
                                             " tool calls; at most " +
                                             std::to_string(kMaxPlacementTools) + " are placed");
    e.code = "too_many_tools";
    return e;
  }
  if (sj.contains("co_running")) {
    return scenario_error("co_running",
                          "the service places next to its own plan in force; name no other");
  }
  if (sj.contains("background") && sj["background"].is_object() &&
      (sj["background"].contains("gpu_sm_util") || sj["background"].contains("gpu_bw_util"))) {
    return scenario_error("background",
                          "the GPU's load is the service's plan in force; only cpu_busy_cores "
                          "may be given");
  }
  auto scenario = mapping::parse_scenario_node(s.node(), "request", tools, diags);
  if (!scenario) {
    ApiError e = spec_error(diags);
    e.field = e.field.empty() ? "scenario" : "scenario." + e.field;
    return e;
  }
  if (!sj.contains("device")) {
    scenario->device = device;
  } else if (scenario->device != device) {
    return scenario_error("device", "'" + scenario->device.substr(0, 64) +
                                        "' is not the service's device (" + device + ")");
  }
  out.scenario = std::move(*scenario);
  return out;
}

Result<std::shared_ptr<const mapping::CoRunners>> plan_corunners(const Context& ctx,
                                                                  const Workload& workload,
                                                                  const JointConfig& config,
                                                                  std::int64_t plan_id,
                                                                  const Testbed& twin) {
  exporting::PlanInput plan;
  plan.plan_file = "plan " + std::to_string(plan_id);
  plan.kind = exporting::PlanKind::kServedPlan;
  plan.label = "the plan in force (id " + std::to_string(plan_id) + ")";
  plan.workload = workload;
  for (std::size_t m = 0; m < workload.models.size() && m < config.size(); ++m) {
    if (config[m] == kAbsent) continue;
    const auto l = static_cast<std::size_t>(config[m]);
    plan.models.push_back({m, l, workload.models[m].settings(l), 1.0});
  }
  if (plan.models.empty()) return std::shared_ptr<const mapping::CoRunners>();
  return mapping::guarded_corunners(ctx, std::move(plan), twin);
}

double sla_headroom(const mapping::SlaOutcome& o) {
  if (o.sla <= 0) return 0;
  return -o.excess();
}

json placement_answer_json(const mapping::PlacementProblem& problem, const PlaceRequest& request,
                           const mapping::Placed& placed, std::int64_t plan_id,
                           const std::vector<mapping::SlaOutcome>& during,
                           const std::string& twin_name) {
  json j = mapping::placed_json(problem, placed);
  j["device"] = problem.device().name;
  j["scenario"] = request.scenario.name;
  j["policy"] = request.policy;
  j["seed"] = request.scenario.context.seed;
  j["plan_id"] = plan_id;
  j["vram_budget_gb"] = problem.vram_budget_bytes() / 1e9;
  if (const auto& co = problem.corunners()) {
    const mapping::BurstLoad& burst = placed.truth.burst;
    json slas = json::array();
    for (const auto& o : during) {
      json row = mapping::to_json(o);
      row["headroom"] = sla_headroom(o);
      slas.push_back(std::move(row));
    }
    j["corunners"] = {{"models", co->running()},
                      {"vram_gb", co->vram_gb()},
                      {"sm_util", co->measured.gpu.sm_util},
                      {"bw_util", co->measured.gpu.mem_bw_util},
                      {"predicted_by", twin_name},
                      {"burst_sm_util", burst.sm_util},
                      {"burst_bw_util", burst.bw_util},
                      {"burst_ms", burst.end_ms - burst.start_ms},
                      {"slas", slas}};
  }
  return j;
}

}  // namespace corun::serve
