// corun map SCENARIO --policy P: places one tool DAG and reports the final mapping's run.
#include <cmath>
#include <cstdio>
#include <optional>

#include "command.h"
#include "common.h"
#include "corun/core/strings.h"
#include "corun/core/version.h"
#include "corun/mapping/evaluate.h"
#include "corun/mapping/guard.h"
#include "corun/mapping/llm_agent.h"
#include "corun/mapping/place.h"

namespace corun::cli {
namespace {

const bool registered = register_command({
    "map",
    "Place a tool DAG (workloads/tools/*.yaml) with a policy: all-gpu, heft, dmda, bandit, "
    "brute-force or agent (--agent builtin|llm)",
    [](CLI::App& sub) {
      auto file = std::make_shared<std::string>();
      auto policy_name = std::make_shared<std::string>("agent");
      auto agent_name = std::make_shared<std::string>("builtin");
      auto catalog_dir = std::make_shared<std::string>();
      auto seed = std::make_shared<std::optional<std::uint64_t>>();
      auto json = std::make_shared<bool>(false);
      auto no_oracle = std::make_shared<bool>(false);
      auto plan_file = std::make_shared<std::string>();
      auto workload_file = std::make_shared<std::string>();
      auto testbed_name = std::make_shared<std::string>("sim");
      sub.add_option("scenario", *file, "tool DAG scenario YAML")->required();
      sub.add_option("--policy", *policy_name,
                     "all-gpu | heft | dmda | bandit | brute-force | agent");
      sub.add_option("--agent", *agent_name,
                     "builtin | llm (CORUN_LLM_URL, CORUN_LLM_MODEL, CORUN_LLM_API_KEY)");
      sub.add_option("--seed", *seed, "override the scenario's seed");
      sub.add_option("--catalog", *catalog_dir, kCatalogFlagHelp);
      sub.add_flag("--json", *json, "print JSON");
      sub.add_flag("--no-oracle", *no_oracle, "skip the brute-force comparison");
      sub.add_option("--plan", *plan_file,
                     "plan in force of the models co-running on the GPU (corun plan --json, a "
                     "run report, or GET /v1/plan); replaces the scenario's co_running");
      sub.add_option("--workload", *workload_file,
                     "workload of --plan (default: the file the plan names)");
      sub.add_option("--testbed", *testbed_name, "testbed that measures the co-running plan")
          ->capture_default_str();
      return std::function<int()>([=] {
        auto cat = load_catalog_for_plan(*catalog_dir, *plan_file);
        if (!cat) return report_error(cat.error());
        auto tools = mapping::tool_catalog(**cat);
        if (!tools) return report_error(tools.error());
        auto scenario = mapping::load_scenario(*file, *tools);
        if (!scenario) return report_error(scenario.error());
        if (*seed) scenario->seed = **seed;
        if (!workload_file->empty() && plan_file->empty()) {
          return report_error(
              Error("--workload: give the plan too (--plan FILE)", Error::Kind::kInvalidInput));
        }
        auto testbed = make_testbed(*testbed_name);
        if (!testbed) return report_error(testbed.error().wrap("--testbed"));
        auto co = plan_file->empty() ? mapping::scenario_corunners(*scenario, **cat, **testbed)
                                     : mapping::load_corunners(*plan_file, *workload_file, **cat,
                                                               **testbed, scenario->seed);
        if (!co) return report_error(co.error());
        auto problem = mapping::PlacementProblem::build(*scenario, *tools, **cat, *co);
        if (!problem) return report_error(problem.error());
        mapping::PlaceOptions how{*policy_name, *agent_name, std::nullopt};
        if (*policy_name == "agent" && *agent_name == "llm") {
          auto c = mapping::LlmConfig::from_env();
          if (!c) return report_error(c.error());
          how.llm = *c;
        }
        auto placed = mapping::place(*problem, how, scenario->seed);
        if (!placed) return report_error(placed.error());
        const mapping::PolicyResult* d = &placed->decision;
        const mapping::RunResult& truth = placed->truth;
        const mapping::RunResult& observed = placed->observed;
        std::optional<mapping::Oracle> oracle;
        if (!*no_oracle) {
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
        if (*json) {
          nlohmann::json j = mapping::placed_json(*problem, *placed);
          j["corun_version"] = std::string(version());
          j["git"] = std::string(git_hash());
          j["testbed"] = "mapping-executor";
          j["device"] = problem->device().name;
          j["scenario"] = scenario->name;
          j["file"] = scenario->file;
          j["policy"] = *policy_name;
          j["seed"] = scenario->seed;
          if (oracle) {
            j["oracle_makespan_ms"] = oracle->makespan_ms;
            if (oracle->unconstrained_makespan_ms) {
              j["unconstrained_oracle_makespan_ms"] = *oracle->unconstrained_makespan_ms;
            }
            j["optimal"] = optimal;
          }
          if (problem->corunners()) {
            const auto list = [](const std::vector<mapping::SlaOutcome>& outcomes) {
              nlohmann::json cs = nlohmann::json::array();
              for (const auto& o : outcomes) cs.push_back(mapping::to_json(o));
              return cs;
            };
            nlohmann::json excluded = nlohmann::json::array();
            for (const auto& e : d->excluded) {
              excluded.push_back(
                  {{"mapping", problem->describe(e.mapping)}, {"predicted", list(e.predicted)}});
            }
            j["corunners"] = {{"plan", problem->corunners()->plan.plan_file},
                              {"testbed", problem->corunners()->testbed},
                              {"burst_sm_util", truth.burst.sm_util},
                              {"burst_bw_util", truth.burst.bw_util},
                              {"burst_ms", truth.burst.end_ms - truth.burst.start_ms},
                              {"slas_measured", list(co_slas)},
                              {"slas_predicted", list(co_predicted)},
                              {"excluded", excluded}};
            if (const auto* g = problem->guard()) j["corunners"]["predictor"] = g->source();
          }
          std::printf("%s\n", j.dump(2).c_str());
          return kExitOk;
        }
        for (const auto& line : d->log) std::printf("  %s\n", line.c_str());
        Table t({"tool", "placement", "status", "start ms", "end ms", "queue ms", "co-runners"});
        for (std::size_t i = 0; i < problem->size(); ++i) {
          const auto& r = truth.tools[i];
          t.add({problem->id(i), std::string(mapping::to_string(r.placement)),
                 std::string(mapping::to_string(r.status)), fixed(r.start_ms, 2), fixed(r.end_ms, 2),
                 fixed(r.queue_wait_ms, 2), std::to_string(r.gpu_corunners)});
        }
        std::printf("%s", t.render().c_str());
        std::printf(
            "%s on %s, policy %s: makespan %s ms (noise-free), %s ms observed, "
            "%llu executions",
            scenario->name.c_str(), problem->device().name.c_str(), policy_name->c_str(),
            truth.failed ? "FAILED" : fixed(truth_ms, 2).c_str(),
            observed.failed ? "FAILED" : fixed(observed.makespan_ms, 2).c_str(),
            static_cast<unsigned long long>(d->executions));
        if (oracle) {
          std::printf("; oracle %s ms (%s)", fixed(oracle->makespan_ms, 2).c_str(),
                      optimal ? "optimal" : "not optimal");
        }
        std::printf("\n");
        for (std::size_t k = 0; k < co_slas.size(); ++k) {
          const auto& o = co_slas[k];
          const std::string predicted =
              k < co_predicted.size() ? ", predicted " + fixed(co_predicted[k].during, 1) : "";
          std::printf("  co-runner %s: %s measured %s alone, %s during the burst%s (SLA %s)%s\n",
                      o.model.c_str(), o.metric.c_str(), fixed(o.alone, 1).c_str(),
                      fixed(o.during, 1).c_str(), predicted.c_str(), fixed(o.sla, 1).c_str(),
                      o.breached         ? ": BREACHED by the burst"
                      : o.breached_alone ? ": already breached without the tools"
                                         : "");
        }
        for (const auto& e : d->excluded) {
          std::string why;
          for (const auto& o : e.predicted) why += (why.empty() ? "" : "; ") + o.describe();
          std::printf("  excluded %s: predicted to break %s\n",
                      problem->describe(e.mapping).c_str(), why.c_str());
        }
        return kExitOk;
      });
    },
});

}  // namespace
}  // namespace corun::cli
