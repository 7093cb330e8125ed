// corun map SCENARIO --policy P: places one tool DAG and reports the final mapping's run.
#include <cmath>
#include <cstdio>
#include <optional>

#include "command.h"
#include "common.h"
#include "corun/core/strings.h"
#include "corun/core/version.h"
#include "corun/eval/placement_eval.h"
#include "corun/mapping/guard.h"
#include "corun/mapping/llm_agent.h"
#include "corun/mapping/place.h"

namespace corun::cli::cmd_map {
namespace {

// The flags of corun map.
struct Flags {
  std::string file, policy_name = "agent", agent_name = "builtin", catalog_dir;
  std::optional<std::uint64_t> seed;
  bool json = false, no_oracle = false;
  std::string plan_file, workload_file, testbed_name = "sim";
};

/// What one placement decided and what the testbed saw, as the reports read it.
struct MapOutcome {
  const mapping::PlacementProblem& problem;
  const mapping::Scenario& scenario;
  const mapping::Placed& placed;
  const std::optional<mapping::Oracle>& oracle;
  const std::vector<mapping::SlaOutcome>& co_slas;       // measured during the final burst
  const std::vector<mapping::SlaOutcome>& co_predicted;  // the guard's view of the same burst
  bool optimal = false;
};

/// Prints the placement as JSON (--json).
void print_map_json(const Flags& f, const MapOutcome& o) {
  const mapping::PlacementProblem& problem = o.problem;
  const mapping::PolicyResult* d = &o.placed.decision;
  const mapping::RunResult& truth = o.placed.truth;
  nlohmann::json j = mapping::placed_json(problem, o.placed);
  j["corun_version"] = std::string(version());
  j["git"] = std::string(git_hash());
  j["testbed"] = "mapping-executor";
  j["device"] = problem.device().name;
  j["scenario"] = o.scenario.name;
  j["file"] = o.scenario.file;
  j["policy"] = f.policy_name;
  j["seed"] = o.scenario.context.seed;
  if (o.oracle) {
    j["oracle_makespan_ms"] = o.oracle->makespan_ms;
    if (o.oracle->unconstrained_makespan_ms) {
      j["unconstrained_oracle_makespan_ms"] = *o.oracle->unconstrained_makespan_ms;
    }
    j["optimal"] = o.optimal;
  }
  if (problem.corunners()) {
    const auto list = [](const std::vector<mapping::SlaOutcome>& outcomes) {
      nlohmann::json cs = nlohmann::json::array();
      for (const auto& x : outcomes) cs.push_back(mapping::to_json(x));
      return cs;
    };
    nlohmann::json excluded = nlohmann::json::array();
    for (const auto& e : d->excluded) {
      excluded.push_back(
          {{"mapping", problem.describe(e.mapping)}, {"predicted", list(e.predicted)}});
    }
    j["corunners"] = {{"plan", problem.corunners()->plan.plan_file},
                      {"testbed", problem.corunners()->testbed},
                      {"burst_sm_util", truth.burst.sm_util},
                      {"burst_bw_util", truth.burst.bw_util},
                      {"burst_ms", truth.burst.end_ms - truth.burst.start_ms},
                      {"slas_measured", list(o.co_slas)},
                      {"slas_predicted", list(o.co_predicted)},
                      {"excluded", excluded}};
    if (const auto* g = problem.guard()) j["corunners"]["predictor"] = g->source();
  }
  std::printf("%s\n", j.dump(2).c_str());
}

/// Prints the placement for people: the policy's log, the tools' run, the makespans and the
/// co-runners' SLAs.
void print_map_text(const Flags& f, const MapOutcome& o) {
  const mapping::PlacementProblem& problem = o.problem;
  const mapping::PolicyResult* d = &o.placed.decision;
  const mapping::RunResult& truth = o.placed.truth;
  const mapping::RunResult& observed = o.placed.observed;
  const double truth_ms = truth.failed ? INFINITY : truth.makespan_ms;
  for (const auto& line : d->log) std::printf("  %s\n", line.c_str());
  Table t({"tool", "placement", "status", "start ms", "end ms", "queue ms", "co-runners"});
  for (std::size_t i = 0; i < problem.size(); ++i) {
    const auto& r = truth.tools[i];
    t.add({problem.id(i), std::string(mapping::to_string(r.placement)),
           std::string(mapping::to_string(r.status)), fixed(r.start_ms, 2), fixed(r.end_ms, 2),
           fixed(r.queue_wait_ms, 2), std::to_string(r.gpu_corunners)});
  }
  std::printf("%s", t.render().c_str());
  std::printf(
      "%s on %s, policy %s: makespan %s ms (noise-free), %s ms observed, "
      "%llu executions",
      o.scenario.name.c_str(), problem.device().name.c_str(), f.policy_name.c_str(),
      truth.failed ? "FAILED" : fixed(truth_ms, 2).c_str(),
      observed.failed ? "FAILED" : fixed(observed.makespan_ms, 2).c_str(),
      static_cast<unsigned long long>(d->executions));
  if (o.oracle) {
    std::printf("; oracle %s ms (%s)", fixed(o.oracle->makespan_ms, 2).c_str(),
                o.optimal ? "optimal" : "not optimal");
  }
  std::printf("\n");
  for (std::size_t k = 0; k < o.co_slas.size(); ++k) {
    const auto& x = o.co_slas[k];
    const std::string predicted =
        k < o.co_predicted.size() ? ", predicted " + fixed(o.co_predicted[k].during, 1) : "";
    std::printf("  co-runner %s: %s measured %s alone, %s during the burst%s (SLA %s)%s\n",
                x.model.c_str(), x.metric.c_str(), fixed(x.alone, 1).c_str(),
                fixed(x.during, 1).c_str(), predicted.c_str(), fixed(x.sla, 1).c_str(),
                x.breached         ? ": BREACHED by the burst"
                : x.breached_alone ? ": already breached without the tools"
                                   : "");
  }
  for (const auto& e : d->excluded) {
    std::string why;
    for (const auto& x : e.predicted) why += (why.empty() ? "" : "; ") + x.describe();
    std::printf("  excluded %s: predicted to break %s\n", problem.describe(e.mapping).c_str(),
                why.c_str());
  }
}

/// Places the scenario's tool DAG with the policy, runs it, and compares it with the oracle.
int run_map(const Flags& f) {
  auto cat = load_catalog_for_plan(f.catalog_dir, f.plan_file);
  if (!cat) return report_error(cat.error());
  auto tools = mapping::tool_catalog(**cat);
  if (!tools) return report_error(tools.error());
  auto scenario = mapping::load_scenario(f.file, *tools);
  if (!scenario) return report_error(scenario.error());
  if (f.seed) scenario->context.seed = *f.seed;
  // The co-runners' measurement and the placement draw from the scenario's seed.
  const Context ctx = scenario->context;
  if (!f.workload_file.empty() && f.plan_file.empty()) {
    return report_error(
        Error("--workload: give the plan too (--plan FILE)", Error::Kind::kInvalidInput));
  }
  auto testbed = make_testbed(f.testbed_name);
  if (!testbed) return report_error(testbed.error().wrap("--testbed"));
  auto co = f.plan_file.empty() ? mapping::scenario_corunners(*scenario, **cat, **testbed)
                                : mapping::load_corunners(ctx, f.plan_file, f.workload_file,
                                                          **cat, **testbed);
  if (!co) return report_error(co.error());
  auto problem = mapping::PlacementProblem::build(*scenario, *tools, **cat, *co);
  if (!problem) return report_error(problem.error());
  mapping::PlaceOptions how{f.policy_name, f.agent_name, std::nullopt};
  if (f.policy_name == "agent" && f.agent_name == "llm") {
    auto c = mapping::LlmConfig::from_env();
    if (!c) return report_error(c.error());
    how.llm = *c;
  }
  auto placed = mapping::place(*problem, how, ctx);
  if (!placed) return report_error(placed.error());
  const mapping::RunResult& truth = placed->truth;
  std::optional<mapping::Oracle> oracle;
  if (!f.no_oracle) {
    auto o = mapping::brute_force_oracle(*problem);
    if (o) oracle = *o;
  }
  const double truth_ms = truth.failed ? INFINITY : truth.makespan_ms;
  // Next to a plan: every co-runner SLA measured while the final mapping's burst runs.
  std::vector<mapping::SlaOutcome> co_slas;
  // ... and as the guard predicts them for the same burst (the planner's view).
  std::vector<mapping::SlaOutcome> co_predicted;
  if (problem->corunners() && !truth.failed) {
    auto o = problem->corunners()->during(truth.burst, **testbed);
    if (!o) return report_error(o.error());
    co_slas = std::move(*o);
    if (const auto* g = problem->guard()) co_predicted = g->predict(truth.burst);
  }
  const bool measured_breach = !mapping::breaches(co_slas).empty();
  const bool optimal =
      oracle && !truth.failed && !measured_breach && truth_ms <= oracle->makespan_ms * 1.01;
  const MapOutcome outcome{*problem, *scenario, *placed, oracle, co_slas, co_predicted, optimal};
  if (f.json) {
    print_map_json(f, outcome);
    return kExitOk;
  }
  print_map_text(f, outcome);
  return kExitOk;
}

const bool registered = register_command({
    "map",
    "Place a tool DAG (workloads/tools/*.yaml) with a policy: all-gpu, heft, dmda, bandit, "
    "brute-force or agent (--agent builtin|llm)",
    [](CLI::App& sub) {
      auto f = std::make_shared<Flags>();
      sub.add_option("scenario", f->file, "tool DAG scenario YAML")->required();
      sub.add_option("--policy", f->policy_name,
                     "all-gpu | heft | dmda | bandit | brute-force | agent");
      sub.add_option("--agent", f->agent_name,
                     "builtin | llm (CORUN_LLM_URL, CORUN_LLM_MODEL, CORUN_LLM_API_KEY)");
      sub.add_option("--seed", f->seed, "override the scenario's seed");
      sub.add_option("--catalog", f->catalog_dir, kCatalogFlagHelp);
      sub.add_flag("--json", f->json, "print JSON");
      sub.add_flag("--no-oracle", f->no_oracle, "skip the brute-force comparison");
      sub.add_option("--plan", f->plan_file,
                     "plan in force of the models co-running on the GPU (corun plan --json, a "
                     "run report, or GET /v1/plan); replaces the scenario's co_running");
      sub.add_option("--workload", f->workload_file,
                     "workload of --plan (default: the file the plan names)");
      sub.add_option("--testbed", f->testbed_name, "testbed that measures the co-running plan")
          ->capture_default_str();
      return std::function<int()>([f] { return run_map(*f); });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_map
