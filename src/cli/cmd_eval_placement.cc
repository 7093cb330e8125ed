// corun eval placement DIR: every placement policy on every tool-DAG scenario, judged against
// the brute-force optimum.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "command.h"
#include "common.h"
#include "corun/core/atomic_file.h"
#include "corun/core/html.h"
#include "corun/core/strings.h"
#include "corun/core/svg.h"
#include "corun/core/version.h"
#include "corun/eval/placement_eval.h"
#include "corun/mapping/llm_agent.h"

namespace corun::cli::cmd_eval_placement {
namespace {

struct Sum {
  int optimal = 0;
  int scenarios = 0;
  double executions = 0;
  int next_to_plan = 0;         // scenarios with a co-running plan
  int breaching = 0;            // of those, where a co-runner's SLA was measured breached
  int predicted_breaching = 0;  // of those, where the guard predicts a breach
};

// Cell of the scenario table as docs/results/placement.md writes it: "**opt** 252.4 / 3".
std::string cell(const mapping::PlacementRow& r) {
  if (!r.error.empty()) return "error: " + r.error;
  const std::string verdict = r.optimal ? "**opt**" : "miss";
  return verdict + " " + (r.failed ? std::string("failed") : fixed(r.makespan_ms, 1)) + " / " +
         std::to_string(r.executions);
}

// A performance profile (Dolan and Moré, Math. Programming 2002): per policy, the share of
// scenarios whose final makespan is within τ times the oracle's, as τ grows. A policy
// that is always optimal is a line at 100 % from τ = 1; failures never count.
std::string profile_svg(const std::vector<mapping::PlacementRow>& rows,
                        const std::vector<std::string>& policies) {
  std::map<std::string, std::vector<double>> ratios;
  std::vector<double> taus = {1.0};
  for (const auto& r : rows) {
    const bool scored = r.error.empty() && !r.failed && r.oracle_makespan_ms > 0;
    const double x = scored ? r.makespan_ms / r.oracle_makespan_ms : INFINITY;
    ratios[r.policy].push_back(x);
    if (std::isfinite(x)) taus.push_back(std::max(1.0, x));
  }
  std::sort(taus.begin(), taus.end());
  taus.erase(std::unique(taus.begin(), taus.end()), taus.end());
  SvgPlot plot;
  plot.title = "Performance profile: scenarios within τ × the oracle's makespan";
  plot.x_label = "τ (final makespan / oracle makespan)";
  plot.y_label = "% of scenarios";
  plot.y_min = 0;
  plot.y_max = 100;
  for (const auto& policy : policies) {
    SvgSeries s;
    s.label = policy;
    const auto& mine = ratios[policy];
    for (double tau : taus) {
      const auto within =
          std::count_if(mine.begin(), mine.end(), [&](double x) { return x <= tau * (1 + 1e-12); });
      const double y = mine.empty()
                           ? NAN
                           : 100.0 * static_cast<double>(within) / static_cast<double>(mine.size());
      // A step: the share holds until the next ratio is reached.
      if (!s.y.empty()) {
        s.x.push_back(tau);
        s.y.push_back(s.y.back());
      }
      s.x.push_back(tau);
      s.y.push_back(y);
    }
    plot.series.push_back(std::move(s));
  }
  return plot.render();
}

// The evaluation as a results document (Markdown; the HTML page is made from it).
std::string placement_markdown(const std::vector<mapping::PlacementRow>& rows,
                               const std::vector<std::string>& policies,
                               const std::map<std::string, Sum>& sums, const std::string& command,
                               const std::string& source, double tolerance,
                               const std::string& svg_name) {
  std::vector<std::string> scenarios;
  std::map<std::string, const mapping::PlacementRow*> first;
  for (const auto& r : rows) {
    if (!first.count(r.scenario)) {
      scenarios.push_back(r.scenario);
      first[r.scenario] = &r;
    }
  }
  std::string md = "# Placement evaluation: tool DAGs on the GPU and the CPU\n\n";
  md += "Produced by\n\n```sh\n" + command + "\n```\n\n";
  md += "Scenarios: " + source + ", on the `mapping-executor` testbed (docs/placement.md). " +
        "**Optimal** means: the policy's final mapping, run once without noise, does not fail " +
        "and its makespan is within " + format_number(100 * tolerance) +
        " % of the oracle, the smallest noise-free makespan over all valid mappings. " +
        "**Executions** are DAG runs spent deciding.\n\n";
  md += "## Summary\n\n| policy | optimal | scenarios | mean executions |\n|---|---:|---:|---:|\n";
  for (const auto& name : policies) {
    const auto it = sums.find(name);
    const Sum s = it == sums.end() ? Sum{} : it->second;
    md += "| " + name + " | " + std::to_string(s.optimal) + " | " + std::to_string(s.scenarios) +
          " | " + fixed(s.scenarios ? s.executions / s.scenarios : 0.0, 1) + " |\n";
  }
  md +=
      "\n## Scenarios\n\nCells: optimal or miss, then the final mapping's makespan in ms / "
      "executions.\n\n| # | scenario | kind | oracle ms |";
  for (const auto& p : policies) md += " " + p + " |";
  md += "\n|---:|---|---|---:|";
  for (std::size_t i = 0; i < policies.size(); ++i) md += "---|";
  md += "\n";
  for (std::size_t k = 0; k < scenarios.size(); ++k) {
    const auto* r0 = first[scenarios[k]];
    md += "| " + std::to_string(k + 1) + " | " + scenarios[k] + " | " + r0->kind + " | " +
          fixed(r0->oracle_makespan_ms, 1) + " |";
    for (const auto& p : policies) {
      std::string c = "-";
      for (const auto& r : rows) {
        if (r.scenario == scenarios[k] && r.policy == p) c = cell(r);
      }
      md += " " + c + " |";
    }
    md += "\n";
  }
  md +=
      "\n## Performance profile\n\nFor each policy, the share of scenarios whose final "
      "mapping's makespan is within τ times the oracle's (Dolan and Moré, 2002): the higher "
      "and further left, the better; a failed mapping never counts.\n\n![performance "
      "profile](" +
      svg_name + ")\n";
  return md;
}

// The flags of corun eval placement.
struct Flags {
  std::string dir, policies = "all-gpu,heft,dmda,bandit,brute-force,agent", agent_name = "builtin",
                   catalog_dir, device = "rtx3090";
  bool json = false;
  int random = 0;
  std::uint64_t random_seed = 1;
  int threads = mapping::EvalOptions{}.threads;
  std::string html;
  double tolerance = 0.01;
  std::string testbed_name = "sim";
};

// The scenarios to evaluate, and where they came from in the document's words.
struct Problems {
  std::vector<mapping::PlacementProblem> problems;
  std::string source;
};

/// The scenarios of --random N (generated on --device) or of DIR (each next to the co-running
/// plan it names, measured on --testbed).
Result<Problems> load_problems(const Flags& f, const Catalog& cat,
                               const mapping::ToolCatalog& tools) {
  Problems out;
  if (f.random > 0) {
    const Device* d = cat.find_device(f.device);
    if (!d) {
      return Error("--device: unknown device '" + f.device + "'" +
                   did_you_mean(f.device, cat.device_names()));
    }
    for (int k = 0; k < f.random; ++k) {
      auto s = mapping::generate_scenario(Context{.seed = f.random_seed + std::uint64_t(k)},
                                          tools, *d);
      auto p = mapping::PlacementProblem::build(std::move(s), tools, *d);
      if (!p) return p.error();
      out.problems.push_back(std::move(*p));
    }
    out.source = "random: " + std::to_string(f.random) + " scenarios from seed " +
                 std::to_string(f.random_seed);
  } else {
    if (f.dir.empty()) return Error("give a scenario DIR or --random N");
    auto scenarios = mapping::load_scenario_dir(f.dir, tools);
    if (!scenarios) return scenarios.error();
    auto testbed = make_testbed(f.testbed_name);
    if (!testbed) return testbed.error().wrap("--testbed");
    for (auto& s : *scenarios) {
      // A scenario next to a planned workload shares the GPU with what the testbed
      // measures for that plan.
      auto co = mapping::scenario_corunners(s, cat, **testbed);
      if (!co) return co.error();
      auto p = mapping::PlacementProblem::build(std::move(s), tools, cat, *co);
      if (!p) return p.error();
      out.problems.push_back(std::move(*p));
    }
    out.source = f.dir;
  }
  return out;
}

/// The evaluation's options: the policies, the tolerance, the threads and the agent (--agent
/// llm: configured from the environment, one conversation at a time).
Result<mapping::EvalOptions> eval_options(const Flags& f) {
  mapping::EvalOptions opts;
  opts.policies = split(f.policies, ',');
  opts.tolerance = f.tolerance;
  opts.threads = f.threads;
  std::optional<mapping::LlmConfig> llm;
  if (f.agent_name == "llm") {
    auto c = mapping::LlmConfig::from_env();
    if (!c) return c.error();
    llm = *c;
    opts.threads = 1;  // one HTTP conversation at a time
  }
  auto agent = mapping::make_agent(f.agent_name, llm);
  if (!agent) return agent.error().wrap("--agent");
  opts.agent = *agent;
  return opts;
}

/// Each policy's totals over the rows.
std::map<std::string, Sum> sum_rows(const std::vector<mapping::PlacementRow>& rows) {
  std::map<std::string, Sum> sums;
  for (const auto& r : rows) {
    Sum& s = sums[r.policy];
    s.optimal += r.optimal ? 1 : 0;
    ++s.scenarios;
    s.executions += static_cast<double>(r.executions);
    if (r.corunner_breaches) {
      ++s.next_to_plan;
      s.breaching += r.corunner_breaches->empty() ? 0 : 1;
    }
    if (r.predicted_corunner_breaches && !r.predicted_corunner_breaches->empty()) {
      ++s.predicted_breaching;
    }
  }
  return sums;
}

/// Writes the results document as one HTML page (--html), with the command that reproduces it.
Status write_html(const Flags& f, const std::vector<mapping::PlacementRow>& rows,
                  const std::vector<std::string>& policies, const std::map<std::string, Sum>& sums,
                  const std::string& source) {
  std::string command = "corun eval placement " +
                        (f.random > 0 ? "--random " + std::to_string(f.random) + " --random-seed " +
                                            std::to_string(f.random_seed)
                                      : f.dir) +
                        " --policies " + f.policies + " --agent " + f.agent_name + " --tolerance " +
                        format_number(f.tolerance) + " --html " + f.html;
  const std::string svg_name = "placement-profile.svg";
  const std::string md =
      placement_markdown(rows, policies, sums, command, source, f.tolerance, svg_name);
  const std::string page = html_document(
      "Placement evaluation", markdown_to_html(md, {{svg_name, profile_svg(rows, policies)}}));
  return write_file_atomic(f.html, page);
}

/// Prints the rows and each policy's summary as JSON (--json).
void print_json(const Flags& f, const std::vector<mapping::PlacementRow>& rows,
                const std::vector<std::string>& policies, std::map<std::string, Sum>& sums,
                const std::string& source) {
  nlohmann::json j;
  j["corun_version"] = std::string(version());
  j["git"] = std::string(git_hash());
  j["testbed"] = "mapping-executor";
  j["source"] = source;
  j["agent"] = f.agent_name;
  j["tolerance"] = f.tolerance;
  j["optimal_definition"] =
      "final mapping's noise-free makespan <= (1 + tolerance) x the smallest noise-free "
      "makespan over all valid mappings, and no tool fails; next to a co-running plan, "
      "over the mappings whose burst breaks no co-runner SLA as the testbed measures "
      "it, and the final mapping breaks none";
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& r : rows) arr.push_back(mapping::to_json(r));
  j["rows"] = arr;
  nlohmann::json summary = nlohmann::json::array();
  for (const auto& name : policies) {
    const Sum& s = sums[name];
    summary.push_back({{"policy", name},
                       {"optimal", s.optimal},
                       {"scenarios", s.scenarios},
                       {"mean_executions", s.scenarios ? s.executions / s.scenarios : 0},
                       {"scenarios_next_to_a_plan", s.next_to_plan},
                       {"corunner_breaching_scenarios", s.breaching},
                       {"corunner_breaching_scenarios_predicted", s.predicted_breaching}});
  }
  j["summary"] = summary;
  std::printf("%s\n", j.dump(2).c_str());
}

/// Prints the rows as a table, then one summary line per policy.
void print_table(const std::vector<mapping::PlacementRow>& rows,
                 const std::vector<std::string>& policies, std::map<std::string, Sum>& sums) {
  const auto broken = [](const std::optional<std::vector<mapping::SlaOutcome>>& list) {
    if (!list) return std::string("-");
    std::string out = list->empty() ? "none" : "";
    for (const auto& o : *list) out += (out.empty() ? "" : "; ") + o.describe();
    return out;
  };
  Table t({"scenario", "policy", "optimal", "makespan ms", "oracle ms", "executions",
           "co-runner breaches (measured)", "(predicted)"});
  for (const auto& r : rows) {
    t.add({r.scenario, r.policy, r.optimal ? "yes" : "no",
           !r.error.empty() ? "error" : (r.failed ? "failed" : fixed(r.makespan_ms, 2)),
           fixed(r.oracle_makespan_ms, 2), std::to_string(r.executions),
           broken(r.corunner_breaches), broken(r.predicted_corunner_breaches)});
  }
  std::printf("%s\n", t.render().c_str());
  for (const auto& name : policies) {
    const Sum& s = sums[name];
    std::printf("%-12s optimal %d/%d, mean executions %.1f", name.c_str(), s.optimal, s.scenarios,
                s.scenarios ? s.executions / s.scenarios : 0.0);
    if (s.next_to_plan > 0) {
      std::printf(", co-runner SLA breached (measured) in %d/%d", s.breaching, s.next_to_plan);
    }
    std::printf("\n");
  }
}

/// Runs every policy on every scenario and reports the rows against the oracle.
int run_eval_placement(const Flags& f) {
  auto cat = load_catalog(f.catalog_dir);
  if (!cat) return report_error(cat.error());
  auto tools = mapping::tool_catalog(**cat);
  if (!tools) return report_error(tools.error());
  auto problems = load_problems(f, **cat, *tools);
  if (!problems) return report_error(problems.error());
  auto opts = eval_options(f);
  if (!opts) return report_error(opts.error());
  auto rows = mapping::evaluate(problems->problems, *opts);
  if (!rows) return report_error(rows.error().wrap("--policies"));
  std::map<std::string, Sum> sums = sum_rows(*rows);
  if (!f.html.empty()) {
    if (auto s = write_html(f, *rows, opts->policies, sums, problems->source); !s.ok()) {
      return report_error(s.error());
    }
  }
  if (f.json) {
    print_json(f, *rows, opts->policies, sums, problems->source);
    return kExitOk;
  }
  print_table(*rows, opts->policies, sums);
  return kExitOk;
}

const bool registered = register_command({
    "eval placement",
    "Run every placement policy on every scenario of DIR (or on --random N generated ones) "
    "and compare each final mapping with the brute-force optimum",
    [](CLI::App& sub) {
      auto f = std::make_shared<Flags>();
      sub.add_option("dir", f->dir, "directory of scenario YAML files (workloads/tools)");
      sub.add_option("--policies", f->policies, "comma-separated policies");
      sub.add_option("--agent", f->agent_name, "agent behind the 'agent' policy: builtin | llm");
      sub.add_option("--random", f->random, "evaluate N generated scenarios instead of DIR")
          ->check(CLI::Range(0, 100000));
      sub.add_option("--random-seed", f->random_seed, "first seed of the generated scenarios");
      sub.add_option("--device", f->device, "device of generated scenarios");
      add_threads_flag(sub, f->threads, "the scenarios evaluated in parallel (builtin only)");
      sub.add_option("--tolerance", f->tolerance, "optimal = within this fraction of the oracle")
          ->check(CLI::Range(0.0, 1.0));
      sub.add_option("--html", f->html,
                     "also write the results as one self-contained HTML page (plot inline)");
      sub.add_option("--testbed", f->testbed_name,
                     "testbed that measures the co-running plans of scenarios naming one")
          ->capture_default_str();
      sub.add_option("--catalog", f->catalog_dir, kCatalogFlagHelp);
      sub.add_flag("--json", f->json, "print JSON");
      return std::function<int()>([f] { return run_eval_placement(*f); });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_eval_placement
