#pragma once

// One placement decision end to end: a named policy decides a mapping for a problem, the
// mapping is checked, and the executor runs it noise-free (the makespan the decision is
// judged on) and with the scenario's noise (what a run would observe). `corun map` and
// `POST /v1/tools/place` both answer through place(), so that the same inputs give the same
// placement in both.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/mapping/executor.h"
#include "corun/mapping/llm_agent.h"
#include "corun/mapping/policy.h"
#include "corun/mapping/problem.h"

namespace corun::mapping {

/// @brief Which policy decides: a name of policy_names(), and for "agent" which agent (a name
/// of agent_names(); "llm" needs `llm`).
struct PlaceOptions {
  std::string policy = "agent";
  std::string agent = "builtin";
  std::optional<LlmConfig> llm;
};

/// @brief A placement decided and run.
struct Placed {
  PolicyResult decision;  ///< the mapping, the executions spent, the policy's log
  std::string agent;      ///< the agent's name ("" unless the policy is "agent")
  RunResult truth;        ///< the mapping run noise-free
  RunResult observed;     ///< the mapping run with the scenario's noise, seeded by the seed
};

/// @brief Decides a mapping for `problem` with `options`' policy, every random choice seeded
/// by `seed`, and runs it. A policy or agent name that does not exist is an error of kind
/// kInvalidInput that names `--policy` / `--agent` and suggests the nearest name; a policy
/// that returns an invalid mapping is an internal error.
/// Thread-safety: reentrant; `problem` is only read (each call has its own executor). With
/// the "llm" agent it makes HTTP requests.
///
/// @code
///   const Catalog& cat = Catalog::default_catalog();
///   auto tools = mapping::tool_catalog(cat);
///   if (!tools) return tools.error();
///   auto scenario = mapping::load_scenario("workloads/tools-serve/voice-and-photo.yaml", *tools);
///   if (!scenario) return scenario.error();
///   auto problem = mapping::PlacementProblem::build(*scenario, *tools, cat);  // no co-runners
///   if (!problem) return problem.error();
///   auto placed = mapping::place(*problem, {"heft", "builtin", std::nullopt},
///                                 Context{.seed = scenario->seed});
///   if (!placed) return placed.error();
///   double ms = placed->truth.makespan_ms;  // noise-free; placed->observed: with noise
///   nlohmann::json j = mapping::placed_json(*problem, *placed);  // as `corun map --json`
/// @endcode
Result<Placed> place(const PlacementProblem& problem, const PlaceOptions& options,
                     const Context& ctx);

/// @brief "done", "failed", "skipped".
std::string_view to_string(ToolRun::Status s);

/// @brief A placement as `corun map --json` prints it: `mapping` ({id: placement}),
/// `makespan_ms` (noise-free; null when a tool failed), `observed_makespan_ms`, `executions`,
/// `predicted_makespan_ms` (when the policy has a model), `agent` (for the agent policy),
/// `failed`, `failures`, `tools` (one row per node of the noise-free run: id, tool, placement,
/// status, ready/start/end and queue times in ms, GPU co-runners) and `log`.
/// Thread-safety: pure function.
nlohmann::json placed_json(const PlacementProblem& problem, const Placed& placed);

}  // namespace corun::mapping
