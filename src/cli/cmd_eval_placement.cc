// corun eval placement DIR: every placement policy on every tool-DAG scenario, judged against
// the brute-force optimum.
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "command.h"
#include "common.h"
#include "corun/core/strings.h"
#include "corun/core/version.h"
#include "corun/mapping/evaluate.h"
#include "corun/mapping/llm_agent.h"

namespace corun::cli {
namespace {

const bool registered = register_command({
    "eval placement",
    "Run every placement policy on every scenario of DIR (or on --random N generated ones) "
    "and compare each final mapping with the brute-force optimum",
    [](CLI::App& sub) {
      auto dir = std::make_shared<std::string>();
      auto policies = std::make_shared<std::string>("all-gpu,heft,dmda,bandit,brute-force,agent");
      auto agent_name = std::make_shared<std::string>("builtin");
      auto catalog_dir = std::make_shared<std::string>();
      auto device = std::make_shared<std::string>("rtx3090");
      auto json = std::make_shared<bool>(false);
      auto random = std::make_shared<int>(0);
      auto random_seed = std::make_shared<std::uint64_t>(1);
      auto threads = std::make_shared<int>(1);
      auto tolerance = std::make_shared<double>(0.01);
      sub.add_option("dir", *dir, "directory of scenario YAML files (workloads/tools)");
      sub.add_option("--policies", *policies, "comma-separated policies");
      sub.add_option("--agent", *agent_name, "agent behind the 'agent' policy: builtin | llm");
      sub.add_option("--random", *random, "evaluate N generated scenarios instead of DIR")
          ->check(CLI::Range(0, 100000));
      sub.add_option("--random-seed", *random_seed, "first seed of the generated scenarios");
      sub.add_option("--device", *device, "device of generated scenarios");
      sub.add_option("--threads", *threads, "scenarios evaluated in parallel (builtin only)")
          ->check(CLI::Range(1, 256));
      sub.add_option("--tolerance", *tolerance, "optimal = within this fraction of the oracle")
          ->check(CLI::Range(0.0, 1.0));
      sub.add_option("--catalog", *catalog_dir, "catalog directory (default: built in)");
      sub.add_flag("--json", *json, "print JSON");
      return std::function<int()>([=] {
        auto cat = load_catalog(*catalog_dir);
        if (!cat) return report_error(cat.error());
        auto tools = mapping::tool_catalog(**cat);
        if (!tools) return report_error(tools.error());
        std::vector<mapping::PlacementProblem> problems;
        std::string source;
        if (*random > 0) {
          const Device* d = (*cat)->find_device(*device);
          if (!d) {
            return report_error(Error("--device: unknown device '" + *device + "'" +
                                      did_you_mean(*device, (*cat)->device_names())));
          }
          for (int k = 0; k < *random; ++k) {
            auto s = mapping::generate_scenario(*tools, *d, *random_seed + std::uint64_t(k));
            auto p = mapping::PlacementProblem::build(std::move(s), *tools, *d);
            if (!p) return report_error(p.error());
            problems.push_back(std::move(*p));
          }
          source = "random: " + std::to_string(*random) + " scenarios from seed " +
                   std::to_string(*random_seed);
        } else {
          if (dir->empty()) return report_error(Error("give a scenario DIR or --random N"));
          auto scenarios = mapping::load_scenario_dir(*dir, *tools);
          if (!scenarios) return report_error(scenarios.error());
          for (auto& s : *scenarios) {
            auto p = mapping::PlacementProblem::build(std::move(s), *tools, **cat);
            if (!p) return report_error(p.error());
            problems.push_back(std::move(*p));
          }
          source = *dir;
        }
        mapping::EvalOptions opts;
        opts.policies = split(*policies, ',');
        opts.tolerance = *tolerance;
        opts.threads = *threads;
        std::optional<mapping::LlmConfig> llm;
        if (*agent_name == "llm") {
          auto c = mapping::LlmConfig::from_env();
          if (!c) return report_error(c.error());
          llm = *c;
          opts.threads = 1;  // one HTTP conversation at a time
        }
        auto agent = mapping::make_agent(*agent_name, llm);
        if (!agent) return report_error(agent.error().wrap("--agent"));
        opts.agent = *agent;
        auto rows = mapping::evaluate(problems, opts);
        if (!rows) return report_error(rows.error().wrap("--policies"));
        struct Sum {
          int optimal = 0;
          int scenarios = 0;
          double executions = 0;
        };
        std::map<std::string, Sum> sums;
        for (const auto& r : *rows) {
          Sum& s = sums[r.policy];
          s.optimal += r.optimal ? 1 : 0;
          ++s.scenarios;
          s.executions += static_cast<double>(r.executions);
        }
        if (*json) {
          nlohmann::json j;
          j["corun_version"] = std::string(version());
          j["git"] = std::string(git_hash());
          j["testbed"] = "mapping-executor";
          j["source"] = source;
          j["agent"] = *agent_name;
          j["tolerance"] = *tolerance;
          j["optimal_definition"] =
              "final mapping's noise-free makespan <= (1 + tolerance) x the smallest noise-free "
              "makespan over all valid mappings, and no tool fails";
          nlohmann::json arr = nlohmann::json::array();
          for (const auto& r : *rows) arr.push_back(mapping::to_json(r));
          j["rows"] = arr;
          nlohmann::json summary = nlohmann::json::array();
          for (const auto& name : opts.policies) {
            const Sum& s = sums[name];
            summary.push_back({{"policy", name},
                               {"optimal", s.optimal},
                               {"scenarios", s.scenarios},
                               {"mean_executions", s.scenarios ? s.executions / s.scenarios : 0}});
          }
          j["summary"] = summary;
          std::printf("%s\n", j.dump(2).c_str());
          return kExitOk;
        }
        Table t({"scenario", "policy", "optimal", "makespan ms", "oracle ms", "executions"});
        for (const auto& r : *rows) {
          t.add({r.scenario, r.policy, r.optimal ? "yes" : "no",
                 !r.error.empty() ? "error" : (r.failed ? "failed" : fixed(r.makespan_ms, 2)),
                 fixed(r.oracle_makespan_ms, 2), std::to_string(r.executions)});
        }
        std::printf("%s\n", t.render().c_str());
        for (const auto& name : opts.policies) {
          const Sum& s = sums[name];
          std::printf("%-12s optimal %d/%d, mean executions %.1f\n", name.c_str(), s.optimal,
                      s.scenarios, s.scenarios ? s.executions / s.scenarios : 0.0);
        }
        return kExitOk;
      });
    },
});

}  // namespace
}  // namespace corun::cli
