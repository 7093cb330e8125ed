#include "corun/mapping/place.h"

#include <memory>
#include <utility>

namespace corun::mapping {

Result<Placed> place(const PlacementProblem& problem, const PlaceOptions& options,
                     const Context& ctx) {
  std::shared_ptr<Agent> agent;
  if (options.policy == "agent") {
    auto a = make_agent(options.agent, options.llm);
    if (!a) return a.error().wrap("--agent");
    agent = *a;
  }
  auto policy = make_policy(options.policy, agent);
  if (!policy) return policy.error().wrap("--policy");
  Executor ex(problem);
  TrialRunner runner(ex);
  auto d = (*policy)->decide(runner, ctx);
  if (!d) return d.error();
  if (const Status s = problem.validate(d->mapping); !s.ok()) {
    return Error("policy returned an invalid mapping: " + s.error().what(),
                 Error::Kind::kInternal);
  }
  Placed out;
  out.truth = ex.run(d->mapping);
  out.observed = ex.run(ctx, d->mapping);
  out.decision = std::move(*d);
  if (agent) out.agent = std::string(agent->name());
  return out;
}

std::string_view to_string(ToolRun::Status s) {
  switch (s) {
    case ToolRun::Status::kDone:
      return "done";
    case ToolRun::Status::kFailed:
      return "failed";
    case ToolRun::Status::kSkipped:
      return "skipped";
  }
  return "?";
}

nlohmann::json placed_json(const PlacementProblem& problem, const Placed& placed) {
  using nlohmann::json;
  const RunResult& truth = placed.truth;
  json j;
  json m = json::object();
  for (std::size_t i = 0; i < problem.size(); ++i) {
    m[problem.id(i)] = std::string(to_string(placed.decision.mapping[i]));
  }
  j["mapping"] = m;
  j["makespan_ms"] = truth.failed ? json(nullptr) : json(truth.makespan_ms);
  j["observed_makespan_ms"] =
      placed.observed.failed ? json(nullptr) : json(placed.observed.makespan_ms);
  j["executions"] = placed.decision.executions;
  if (placed.decision.predicted_makespan_ms) {
    j["predicted_makespan_ms"] = *placed.decision.predicted_makespan_ms;
  }
  if (!placed.agent.empty()) j["agent"] = placed.agent;
  j["failed"] = truth.failed;
  j["failures"] = truth.failures;
  json rows = json::array();
  for (std::size_t i = 0; i < problem.size(); ++i) {
    const ToolRun& t = truth.tools[i];
    rows.push_back({{"id", problem.id(i)},
                    {"tool", problem.tool(i).name},
                    {"placement", std::string(to_string(t.placement))},
                    {"status", std::string(to_string(t.status))},
                    {"ready_ms", t.ready_ms},
                    {"start_ms", t.start_ms},
                    {"end_ms", t.end_ms},
                    {"queue_wait_ms", t.queue_wait_ms},
                    {"gpu_corunners", t.gpu_corunners}});
  }
  j["tools"] = rows;
  j["log"] = placed.decision.log;
  return j;
}

}  // namespace corun::mapping
