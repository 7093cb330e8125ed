#pragma once

// POST /v1/tools/place (docs/serve.md): a tool DAG placed on the service's GPU next to the
// models of the plan in force. The placement is mapping::place() on the problem `corun map
// --plan` builds, so that the service and the CLI answer the same inputs with the same
// placement; what the service adds is where the co-runners come from (its registry and plan
// record instead of files) and their predicted headroom during the tools' burst.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/mapping/corunners.h"
#include "corun/mapping/place.h"
#include "corun/mapping/scenario.h"
#include "corun/mapping/tools.h"
#include "corun/serve/api_error.h"
#include "corun/spec/workload.h"
#include "corun/testbed/testbed.h"

namespace corun::serve {

/// @brief The most tool calls one request may place. Every policy stays within a request's
/// time at this size: the exhaustive ones (brute force, bandit) run each of the at most
/// 3^8 = 6,561 valid mappings once or twice.
inline constexpr std::size_t kMaxPlacementTools = 8;

/// @brief A validated POST /v1/tools/place body.
struct PlaceRequest {
  mapping::Scenario scenario;   ///< the tool DAG, bound to the service's device
  std::string policy = "agent";  ///< a name of mapping::policy_names()
};

/// @brief Validates a POST /v1/tools/place body before anything runs: an object with
/// `scenario` (required: the JSON form of a scenario file, docs/placement.md, read by
/// mapping::parse_scenario_node so that its errors are a file's) and `policy` (optional). A
/// scenario may not name co-runners or a GPU background (the plan in force is the GPU's load),
/// nor a device other than `device` (absent: `device`), nor more than kMaxPlacementTools tools.
/// Errors are 400 (not an object) or 422 naming the field (`scenario.tools[2].after[0]`,
/// `policy`). Thread-safety: pure function; `tools` is only read.
std::variant<PlaceRequest, ApiError> parse_place_request(const nlohmann::json& body,
                                                         const mapping::ToolCatalog& tools,
                                                         const std::string& device);

/// @brief The models co-running under a plan of the service: `config` (one local index per
/// model of `workload`, kAbsent: not run) read as `corun map --plan` reads a served plan,
/// measured on `twin` with `seed` and guarded by a MeanField surrogate fitted on `twin`
/// (mapping::guarded_corunners), exactly as mapping::load_corunners measures and guards a plan
/// file, so that the agent sets aside the same mappings as `corun map`. `plan_id` names the
/// plan in errors ("plan 7"). nullptr when the plan runs no model. Costs a surrogate fit
/// (about a second): the service caches the result per plan.
/// Thread-safety: reentrant when `twin` is (the simulator is).
Result<std::shared_ptr<const mapping::CoRunners>> plan_corunners(const Context& ctx,
                                                                  const Workload& workload,
                                                                  const JointConfig& config,
                                                                  std::int64_t plan_id,
                                                                  const Testbed& twin);

/// @brief Fraction of an SLA left during the tools' burst: 1 − during/sla for a bound from
/// above (latencies), during/sla − 1 for `min_throughput`; negative when the burst breaks it.
/// Thread-safety: pure function.
double sla_headroom(const mapping::SlaOutcome& o);

/// @brief The answer of POST /v1/tools/place: the placement and its run as `corun map --json`
/// names them (`mapping`, `makespan_ms`, `observed_makespan_ms`, `executions`,
/// `predicted_makespan_ms`, `failed`, `failures`, `tools`, `log`), the VRAM budget the plan
/// left, and, next to a plan, `corunners` with every SLA's predicted value alone and during the
/// burst and its headroom (`during` is what `twin_name` predicts with the burst on the GPU).
/// Thread-safety: pure function.
nlohmann::json placement_answer_json(const mapping::PlacementProblem& problem,
                                     const PlaceRequest& request, const mapping::Placed& placed,
                                     std::int64_t plan_id,
                                     const std::vector<mapping::SlaOutcome>& during,
                                     const std::string& twin_name);

}  // namespace corun::serve
