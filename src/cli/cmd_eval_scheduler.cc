// corun eval scheduler [FILE...] --scenarios DIR: every scenario run online with every solver in
// one process — gap to the exhaustive plan under the same surrogate, gap to the testbed's own
// optimum, measured SLA violations and decision times — with a Markdown report and plots.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "command.h"
#include "common.h"
#include "corun/core/atomic_file.h"
#include "corun/core/html.h"
#include "corun/core/stats.h"
#include "corun/core/strings.h"
#include "corun/core/svg.h"
#include "corun/eval/scheduler_eval.h"
#include "corun/runtime/pipeline.h"
#include "corun/runtime/run_source.h"
#include "corun/space/space.h"
#include "surrogate_flags.h"

namespace corun::cli::cmd_eval_scheduler {
namespace {

double median_of(std::vector<double> v) { return quantile(std::move(v), 0.5); }

// Independent measurement windows behind the robust oracle, unless --windows says otherwise.
constexpr int kOracleWindows = 1000;


std::string stem(const std::string& file) { return std::filesystem::path(file).stem().string(); }

std::string num(double v, int digits) { return std::isfinite(v) ? fixed(v, digits) : "-"; }

// Acceptance-style summary computed from the rows of one run, per solver and learning mode.
nlohmann::json summary(const std::vector<SchedulerEvalRow>& rows) {
  std::map<std::string, std::vector<double>> gap, gap_or, gap_or1, gap_hs, p50;
  std::map<std::string, std::size_t> violations, after3, drift_late;
  std::map<std::string, std::vector<double>> drift_gap, utility;
  std::map<std::string, std::size_t> restarts;
  std::map<std::string, double> downtime;
  for (const auto& r : rows) {
    const std::string k = r.solver + (r.learning ? "/learning" : "/static") +
                          (r.transitions_aware ? "" : "/ignore-transitions");
    utility[k].push_back(r.mean_measured_utility);
    restarts[k] += r.restarts;
    downtime[k] += r.downtime_s;
    gap[k].push_back(r.gap_to_exhaustive_pct);
    if (std::isfinite(r.gap_to_oracle_pct)) gap_or[k].push_back(r.gap_to_oracle_pct);
    if (std::isfinite(r.gap_to_oracle_1_pct)) gap_or1[k].push_back(r.gap_to_oracle_1_pct);
    if (std::isfinite(r.gap_to_hindsight_pct)) gap_hs[k].push_back(r.gap_to_hindsight_pct);
    p50[k].push_back(r.decision_ms_p50);
    violations[k] += r.sla_violations;
    after3[k] += r.violations_after_3;
    for (const auto& d : r.drift) {
      drift_late[k] += d.breaches_after_2;
      if (std::isfinite(d.max_gap_from_10th_pct)) drift_gap[k].push_back(d.max_gap_from_10th_pct);
    }
  }
  nlohmann::json j = nlohmann::json::object();
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  for (const auto& [k, g] : gap) {
    j[k] = {{"median_gap_to_exhaustive_pct", num(median_of(g))},
            {"median_gap_to_oracle_pct", num(median_of(gap_or[k]))},
            {"median_gap_to_oracle_1_pct", num(median_of(gap_or1[k]))},
            {"median_gap_to_hindsight_pct", num(median_of(gap_hs[k]))},
            {"median_decision_ms_p50", num(median_of(p50[k]))},
            {"sla_violations", violations[k]},
            {"violations_after_3", after3[k]},
            {"median_net_utility", num(median_of(utility[k]))},
            {"restarts", restarts[k]},
            {"downtime_s", downtime[k]},
            {"drift_breaches_after_2", drift_late[k]},
            {"drift_max_gap_from_10th_pct",
             drift_gap[k].empty() ? nlohmann::json()
                                  : nlohmann::json(*std::max_element(drift_gap[k].begin(),
                                                                     drift_gap[k].end()))}};
  }
  if (p50.count("ga/learning") && p50.count("exhaustive/learning")) {
    j["exhaustive_over_ga_decision_p50"] =
        median_of(p50["exhaustive/learning"]) / std::max(1e-9, median_of(p50["ga/learning"]));
  }
  return j;
}

std::string svg_by_scenario(const std::vector<SchedulerEvalRow>& rows,
                            const std::string& title, const std::string& y_label,
                            double SchedulerEvalRow::*field) {
  SvgPlot plot;
  plot.title = title;
  plot.x_label = "scenario (1 = first row of the table)";
  plot.y_label = y_label;
  plot.y_min = 0;
  std::map<std::string, SvgSeries> by;
  std::vector<std::string> order;
  for (const auto& r : rows) {
    const std::string k = r.solver + (r.learning ? " (learning" : " (static") +
                          (r.transitions_aware ? ")" : ", transitions ignored)");
    if (!by.count(k)) {
      order.push_back(k);
      by[k].label = k;
    }
    SvgSeries& s = by[k];
    s.x.push_back(static_cast<double>(s.x.size() + 1));
    s.y.push_back(r.*field);
  }
  for (const auto& k : order) plot.series.push_back(by[k]);
  return plot.render();
}

std::string drift_text(const SchedulerEvalRow& r) {
  std::string out;
  for (const auto& d : r.drift) {
    if (!out.empty()) out += "; ";
    out += "t=" + fixed(d.t_s, 0) + " " + d.event + ": " + std::to_string(d.breaches_within_2) +
           "+" + std::to_string(d.breaches_after_2) + " breaches, back in " +
           (d.recovery_intervals < 0 ? std::string("-") : std::to_string(d.recovery_intervals)) +
           ", max gap " + num(d.max_gap_from_10th_pct, 1) + " %";
  }
  return out.empty() ? "-" : out;
}

std::string markdown(const std::vector<SchedulerEvalRow>& rows, const nlohmann::json& sum,
                     const std::string& title, const std::string& command,
                     const std::string& svg_stem, const std::string& setup) {
  std::string md;
  md += "# " + title + "\n\n";
  md += "Produced by\n\n```sh\n" + command + "\n```\n\n";
  md += setup + "\n\n";
  md +=
      "Columns: `learning` = online corrections and calibrated margins (on) or the fitted "
      "surrogate with its static error-model margins (off); `gap_ex` = median over decisions of "
      "the gap between the chosen plan and the exhaustive plan under the same predictions, "
      "margins and constraints (%); `gap_oracle` = median over intervals of the gap between the "
      "plan in force and the robust oracle (the best plan whose SLAs hold in at least 99 % of the "
      "independent measurement windows on the testbed), the plan earning its mean utility over "
      "those windows with a breaching window earning nothing (%; `-` when no plan holds in any "
      "interval); `gap_oracle_1` = the same against the single-window oracle; `viol` = measured "
      "model-intervals breaching their SLA (`after 3`: after the first 3 intervals; `feasible`: "
      "in intervals where the robust oracle holds every SLA); `no plan` = intervals where no "
      "plan holds every SLA on the testbed itself, so that no scheduler that serves all of the "
      "demand avoids a breach; `shed` = model-intervals that refused part or all of their "
      "demand (the degradation rule, docs/scheduler.md); "
      "`p50`/`p99` = decision time (ms, wall clock, this machine); `transitions` = whether the "
      "planner priced restarts and reloads (`aware`) or planned as if changes were free "
      "(`ignore`), the testbed charging both the same; `restarts`, `reloads`, `downtime s` = "
      "what the testbed charged over the run, all models; `gap_hindsight` = the gap between the "
      "run's plans and the hindsight oracle (the best schedule over the whole run, known in "
      "advance, that pays the same transition costs; both scored on the testbed by one function, "
      "eval/hindsight_oracle.h) (%); "
      "`utility` = mean measured utility per interval, net of what transitions cost; `drift` = per unseen drift event, breaches "
      "in the 2 intervals from it + after them, intervals until the plan is within 3 % of the "
      "robust oracle, and the largest gap from the 10th interval after it.\n\n";
  md +=
      "| scenario | solver | learning | transitions | decisions | gap_ex % | gap_oracle % | "
      "gap_oracle_1 % | gap_hindsight % | viol | "
      "after 3 | feasible | no plan | shed | restarts | reloads | downtime s | p50 ms | p99 ms | "
      "utility | drift |\n"
      "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
      "---:|---|\n";
  for (const auto& r : rows) {
    md += "| " + stem(r.scenario) + " | " + r.solver + " | " + (r.learning ? "on" : "off") +
          " | " + (r.transitions_aware ? "aware" : "ignore") + " | " +
          std::to_string(r.decisions) + " | " + num(r.gap_to_exhaustive_pct, 3) + " | " +
          num(r.gap_to_oracle_pct, 2) + " | " + num(r.gap_to_oracle_1_pct, 2) + " | " +
          num(r.gap_to_hindsight_pct, 2) + " | " +
          std::to_string(r.sla_violations) + " | " + std::to_string(r.violations_after_3) + " | " +
          std::to_string(r.violations_where_feasible) + " | " +
          std::to_string(r.infeasible_truth_intervals) + " | " +
          std::to_string(r.shed_model_intervals) + " | " + std::to_string(r.restarts) + " | " +
          std::to_string(r.reloads) + " | " + num(r.downtime_s, 1) + " | " +
          num(r.decision_ms_p50, 1) + " | " +
          num(r.decision_ms_p99, 1) + " | " + num(r.mean_measured_utility, 3) + " | " +
          drift_text(r) + " |\n";
  }
  md +=
      "\n## Summary over the scenarios\n\n| solver / learning | median gap_ex % | median "
      "gap_oracle % | median gap_oracle_1 % | median gap_hindsight % | median p50 ms | "
      "violations | after 3 | restarts | downtime s | median utility | drift "
      "breaches after 2 | drift max gap from 10th % |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& item : sum.items()) {
    const auto& k = item.key();
    const auto& j = item.value();
    if (!j.is_object()) continue;
    auto val = [&](const char* key, int digits) {
      return j.at(key).is_null() ? std::string("-") : num(j.at(key).get<double>(), digits);
    };
    md += "| " + k + " | " + val("median_gap_to_exhaustive_pct", 3) + " | " +
          val("median_gap_to_oracle_pct", 2) + " | " + val("median_gap_to_oracle_1_pct", 2) +
          " | " + val("median_gap_to_hindsight_pct", 2) + " | " +
          val("median_decision_ms_p50", 1) + " | " +
          std::to_string(j.at("sla_violations").get<std::size_t>()) + " | " +
          std::to_string(j.at("violations_after_3").get<std::size_t>()) + " | " +
          std::to_string(j.at("restarts").get<std::size_t>()) + " | " +
          val("downtime_s", 1) + " | " + val("median_net_utility", 3) + " | " +
          std::to_string(j.at("drift_breaches_after_2").get<std::size_t>()) + " | " +
          val("drift_max_gap_from_10th_pct", 2) + " |\n";
  }
  if (sum.contains("exhaustive_over_ga_decision_p50")) {
    md += "\nExhaustive's median decision time is " +
          fixed(sum.at("exhaustive_over_ga_decision_p50").get<double>(), 1) +
          "x the GA's (same run, same machine).\n";
  }
  md += "\n![decision time](" + svg_stem + "-decision.svg)\n\n![gap to oracle](" + svg_stem +
        "-oracle.svg)\n";
  return md;
}

// The flags of corun eval scheduler.
struct Flags {
  std::vector<std::string> files;
  std::string scenarios, solvers = "ga,exhaustive,greedy,hillclimb", testbed = "sim",
                         out = "out/eval/scheduler", markdown, html, catalog,
                         title = "Online scheduler evaluation";
  bool json = false, no_oracle = false, no_exhaustive = false, quiet = false;
  int windows = kOracleWindows;
  SurrogateFlags surrogate;
  LearningFlags learning;
  DegradeFlag degrade;
  std::string transitions = "aware";
};

// The scenario files to run and the set each came from (a --scenarios entry; "" for files
// given alone): with several sets the JSON summarises each too.
struct ScenarioFiles {
  std::vector<std::string> files;
  std::vector<std::string> file_sets;  // per file: its set
  std::vector<std::string> sets;       // the --scenarios entries, in order
};

/// The files given, then each --scenarios entry's: a workload file, or a directory's *.yaml
/// workloads in name order.
Result<ScenarioFiles> collect_scenario_files(const Flags& f) {
  ScenarioFiles out;
  std::vector<std::string>& files = out.files;
  files = f.files;
  std::vector<std::string>& file_sets = out.file_sets;
  file_sets.resize(files.size());
  std::vector<std::string>& sets = out.sets;
  if (!f.scenarios.empty()) {
    for (const auto& entry : split(f.scenarios, ',')) {
      std::error_code ec;
      if (std::filesystem::is_regular_file(entry, ec)) {
        files.push_back(entry);
        file_sets.push_back(entry);
        sets.push_back(entry);
        continue;
      }
      if (!std::filesystem::is_directory(entry, ec)) {
        return Error("--scenarios: " + entry +
                         " is neither a directory of scenario workloads nor "
                         "a workload file",
                     Error::Kind::kInvalidInput);
      }
      std::vector<std::string> found;
      for (const auto& e : std::filesystem::directory_iterator(entry, ec)) {
        if (e.path().extension() == ".yaml") found.push_back(e.path().string());
      }
      if (found.empty()) {
        return Error("--scenarios: " + entry + " holds no *.yaml workload",
                     Error::Kind::kInvalidInput);
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
      file_sets.insert(file_sets.end(), found.size(), entry);
      sets.push_back(entry);
    }
  }
  if (files.empty()) {
    return Error("no scenarios: give workload files or --scenarios DIR[,DIR]");
  }
  return out;
}

// The scenarios, loaded and checked, with their text and their set.
struct Scenarios {
  std::vector<Workload> scenarios;
  std::map<std::string, std::string> texts;
  std::map<std::string, std::string> set_of;  // scenario file -> its set
};

/// Loads every scenario file; each must run on one GPU and declare no tool burst.
Result<Scenarios> load_scenarios(const Flags& f, const ScenarioFiles& in) {
  Scenarios out;
  for (std::size_t i = 0; i < in.files.size(); ++i) {
    const std::string& file = in.files[i];
    auto w = load_workload_file(file, f.catalog);
    if (!w) return w.error();
    out.set_of[w->file] = in.file_sets[i];
    if (auto st = require_one_gpu(*w, "eval scheduler"); !st.ok()) return st.error();
    if (auto st = require_no_tools(*w, "eval scheduler"); !st.ok()) return st.error();
    auto text = read_file(file);
    if (!text) return text.error();
    out.texts[w->file] = *text;
    out.scenarios.push_back(std::move(*w));
  }
  return out;
}

/// Sets the options of the runs from the flags (their seed and threads are the Context's):
/// oracle windows, learning modes, transition modes (an error names a bad one), degradation
/// and progress lines.
Status set_run_options(const Flags& f, const std::vector<bool>& modes, std::FILE* log,
                       SchedulerEvalOptions& opt) {
  opt.oracle_windows = f.windows;
  opt.learning = modes;
  opt.transitions.clear();
  for (const auto& t : split(f.transitions, ',')) {
    if (t != "aware" && t != "ignore") {
      return Error("--transitions: expected aware and/or ignore, got '" + t + "'");
    }
    opt.transitions.push_back(t == "aware");
  }
  if (opt.transitions.empty()) {
    return Error("--transitions: expected aware and/or ignore");
  }
  opt.learning_options = f.learning.options;
  opt.shed = f.degrade.shed();
  if (log) {
    opt.progress = [log](const std::string& what) {
      std::fprintf(log, "eval scheduler: %s\n", what.c_str());
    };
  }
  return {};
}

/// The command the document shows: every flag that changes its rows or its references.
std::string report_command(const Flags& f) {
  std::string command = "corun eval scheduler" +
                        (f.scenarios.empty() ? "" : " --scenarios " + f.scenarios) + " --solvers " +
                        f.solvers + " --learning " + f.learning.modes +
                        (f.degrade.shed() ? "" : " --degrade best-effort") + " --testbed " +
                        f.testbed + " --regressor " + f.surrogate.regressor +
                        (f.surrogate.unconstrained ? " --unconstrained" : "") + " --seed " +
                        std::to_string(f.surrogate.seed) + " --json";
  // Flags that change the rows, when not at their defaults.
  if (f.transitions != "aware") command += " --transitions " + f.transitions;
  if (f.learning.options.explore_sd > 0) {
    command += " --explore " + format_number(f.learning.options.explore_sd);
  }
  // The references a run skips change the document: say so in its command.
  if (f.no_oracle) command += " --no-oracle";
  if (f.no_exhaustive) command += " --no-exhaustive";
  if (f.windows != kOracleWindows) command += " --windows " + std::to_string(f.windows);
  for (const auto& file : f.files) command += " " + file;
  if (!f.markdown.empty()) command += " --markdown " + f.markdown;
  if (!f.html.empty()) command += " --html " + f.html;
  return command;
}

/// The document's setup paragraph: the testbed, the surrogate, both learning modes, when the
/// runs re-plan, the oracle and the degradation rule; `first` is the first scenario.
std::string report_setup(const Flags& f, surrogate::RegressorKind regressor,
                         const Workload& first) {
  const double confidence = f.surrogate.confidence;
  const ConfigSpace space(first);
  return "Testbed `" + f.testbed + "`; surrogate: MeanField/" + f.surrogate.regressor +
         (regressor != surrogate::RegressorKind::kMlp && !f.surrogate.unconstrained
              ? " (monotone in the co-runners' aggregate)"
              : "") +
         " fitted per scenario on 20·N co-run and 3 standalone passes (cached in " + f.out +
         "); scenarios with `profiling: none` start from the catalog twin instead. Learning "
         "off: margins at the error model's " +
         format_number(100 * confidence) +
         " % bound, raised after a measured breach. Learning on: breach target " +
         format_number(f.learning.options.breach_target) +
         (f.learning.options.explore_sd > 0
              ? ", throughput ranked " + format_number(f.learning.options.explore_sd) +
                    " sd of its uncertainty above its prediction (`--explore`)"
              : std::string()) +
         ", refits every " + std::to_string(f.learning.options.refit_every) +
         " intervals. Re-plans at the start, after every timeline event, after a measured "
         "breach and (learning on) when a planned bound moved by more than " +
         format_number(100 * f.learning.options.replan_bound_change) +
         " %; GA warm-started from the plan in force. Robust oracle: " + std::to_string(f.windows) +
         " windows per candidate. " +
         (f.degrade.shed()
              ? "A model whose SLA no plan holds as predicted admits the largest share of its "
                "demand that holds it and refuses the rest (`--degrade shed`, "
                "docs/scheduler.md); the testbed measures what was admitted, and a refused "
                "share earns nothing. "
              : "A model whose SLA no plan holds as predicted runs best effort with all of "
                "its demand (`--degrade best-effort`). ") +
         "The first scenario has " + space.joint_count().to_string() + " joint configurations.";
}

/// Writes one document, as Markdown (+ two SVG files, --markdown) and/or as an HTML page
/// (--html).
Status write_documents(const Flags& f, const std::vector<SchedulerEvalRow>& rows,
                       const nlohmann::json& sum, const std::string& setup) {
  // One document, written as Markdown (+ two SVG files) and/or as an HTML page.
  const std::filesystem::path md(f.markdown.empty() ? f.html : f.markdown);
  const std::string svg_stem = md.stem().string();
  const std::string command = report_command(f);
  const std::string decision_svg = svg_by_scenario(rows, "Decision time (median per scenario)",
                                                   "ms", &SchedulerEvalRow::decision_ms_p50);
  const std::string oracle_svg =
      svg_by_scenario(rows, "Gap to the robust oracle (median over intervals)", "%",
                      &SchedulerEvalRow::gap_to_oracle_pct);
  const std::string text = markdown(rows, sum, f.title, command, svg_stem, setup);
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!f.markdown.empty()) {
    const auto dir = md.has_parent_path() ? md.parent_path() : std::filesystem::path(".");
    outputs = {{(dir / (svg_stem + "-decision.svg")).string(), decision_svg},
               {(dir / (svg_stem + "-oracle.svg")).string(), oracle_svg},
               {md.string(), text}};
  }
  if (!f.html.empty()) {
    outputs.emplace_back(
        f.html,
        html_document(f.title, markdown_to_html(text, {{svg_stem + "-decision.svg", decision_svg},
                                                       {svg_stem + "-oracle.svg", oracle_svg}})));
  }
  for (const auto& [path, content] : outputs) {
    if (auto s = write_file_atomic(path, content); !s.ok()) return s.error();
  }
  return {};
}

/// Prints the rows and the summary: as JSON (with each set's summary when there are several
/// sets), or as a table followed by the summary.
void print_results(const Flags& f, const std::vector<SchedulerEvalRow>& rows,
                   const nlohmann::json& sum, const std::vector<std::string>& sets,
                   const std::map<std::string, std::string>& set_of) {
  nlohmann::json jrows = nlohmann::json::array();
  for (const auto& r : rows) jrows.push_back(to_json(r));
  if (f.json) {
    nlohmann::json out = {{"rows", jrows}, {"summary", sum}};
    if (sets.size() > 1) {
      // The acceptance-style summary of each set on its own.
      nlohmann::json by_set = nlohmann::json::object();
      for (const auto& set : sets) {
        std::vector<SchedulerEvalRow> in;
        for (const auto& r : rows) {
          const auto it = set_of.find(r.scenario);
          if (it != set_of.end() && it->second == set) in.push_back(r);
        }
        by_set[set] = summary(in);
      }
      out["sets"] = std::move(by_set);
    }
    std::printf("%s\n", out.dump().c_str());
  } else {
    Table t({"scenario", "solver", "learning", "transitions", "decisions", "gap_ex %",
             "gap_oracle %", "gap_oracle_1 %", "gap_hindsight %", "viol", "after 3", "restarts",
             "reloads", "downtime s", "p50 ms", "net utility"});
    for (const auto& r : rows) {
      t.add({stem(r.scenario), r.solver, r.learning ? "on" : "off",
             r.transitions_aware ? "aware" : "ignore", std::to_string(r.decisions),
             num(r.gap_to_exhaustive_pct, 3), num(r.gap_to_oracle_pct, 2),
             num(r.gap_to_oracle_1_pct, 2), num(r.gap_to_hindsight_pct, 2),
             std::to_string(r.sla_violations), std::to_string(r.violations_after_3),
             std::to_string(r.restarts), std::to_string(r.reloads), num(r.downtime_s, 1),
             num(r.decision_ms_p50, 1), num(r.mean_measured_utility, 3)});
    }
    std::printf("%s\n%s\n", t.render().c_str(), sum.dump(2).c_str());
  }
}

/// Runs every scenario with every solver online, scores the runs, and reports them.
int run_eval_scheduler(const Flags& f) {
  auto files = collect_scenario_files(f);
  if (!files) return report_error(files.error());
  auto catalog = load_catalog(f.catalog);
  if (!catalog) return report_error(catalog.error());
  SchedulerEvalOptions opt;
  opt.solvers = split(f.solvers, ',');
  for (const auto& s : opt.solvers) {
    if (auto r = make_solver(s); !r) return report_error(r.error().wrap("--solvers"));
  }
  const auto regressor = f.surrogate.regressor_kind();
  if (!regressor) return report_error(regressor.error());
  const auto modes = f.learning.parsed(true);
  if (!modes) return report_error(modes.error());
  auto testbed = make_testbed(f.testbed);
  if (!testbed) return report_error(testbed.error());
  auto loaded = load_scenarios(f, *files);
  if (!loaded) return report_error(loaded.error());
  const std::vector<Workload>& scenarios = loaded->scenarios;
  opt.oracle = !f.no_oracle;
  opt.exhaustive_gap = !f.no_exhaustive;
  for (const auto& w : scenarios) {  // before profiling any: it may take minutes
    if (auto st = check_enumerable(w, opt); !st.ok()) return report_error(st.error());
  }
  const Context ctx = f.surrogate.context();
  const bool terminal = ::isatty(::fileno(stderr)) != 0;
  std::FILE* log = f.quiet ? nullptr : stderr;
  // One surrogate per profiled scenario (their model sets differ), profiled and fitted
  // once and cached; every solver of the scenario plans with the same one. Scenarios with
  // `profiling: none` start from the catalog twin.
  std::map<std::string, surrogate::Surrogate> fitted;
  for (const auto& w : scenarios) {
    if (w.profiling == Profiling::kNone) continue;
    PipelineOptions po =
        f.surrogate.pipeline(*regressor, f.testbed,
                             w.timeline.interval_s > 0 ? w.timeline.interval_s : 10, log, terminal);
    po.dataset = std::filesystem::path(f.out) / (stem(w.file) + ".db");
    po.model = std::filesystem::path(f.out) / (stem(w.file) + "-surrogate.json");
    po.catalog = *catalog;
    if (log) std::fprintf(log, "eval scheduler: surrogate for %s\n", w.file.c_str());
    auto p = profile_and_fit(ctx, w, loaded->texts[w.file], **testbed, po);
    if (!p) return report_error(p.error().wrap(w.file));
    fitted.emplace(w.file, std::move(p->surrogate));
    opt.refit_datasets[w.file] = po.dataset;
  }
  const Testbed& tb = **testbed;
  const double confidence = f.surrogate.confidence;
  SourceFactory factory = [&](const Workload& w) -> Result<std::unique_ptr<PredictorSource>> {
    const double window = w.timeline.interval_s > 0 ? w.timeline.interval_s : 10;
    const auto it = fitted.find(w.file);
    return source_for(ctx,
                      it == fitted.end() ? std::nullopt : std::make_optional(it->second), tb,
                      window, confidence);
  };
  if (auto st = set_run_options(f, *modes, log, opt); !st.ok()) return report_error(st.error());
  auto rows = evaluate_scheduler(ctx, scenarios, tb, factory, opt);
  if (!rows) return report_error(rows.error());
  const nlohmann::json sum = summary(*rows);
  if (!f.markdown.empty() || !f.html.empty()) {
    const std::string setup = report_setup(f, *regressor, scenarios.front());
    if (auto st = write_documents(f, *rows, sum, setup); !st.ok()) return report_error(st.error());
  }
  print_results(f, *rows, sum, files->sets, loaded->set_of);
  return kExitOk;
}

const bool registered = register_command({
    "eval scheduler",
    "Run every scenario with every solver online, learning off and/or on, and score the runs",
    [](CLI::App& sub) {
      auto f = std::make_shared<Flags>();
      sub.add_option("files", f->files, "scenario workload files (with a timeline)");
      sub.add_option("--scenarios", f->scenarios,
                     "comma list of directories of scenario workloads (*.yaml) or workload files; "
                     "with several, --json also summarises each set");
      sub.add_option("--solvers", f->solvers, "comma list of solvers")->capture_default_str();
      sub.add_option("--transitions", f->transitions,
                     "comma list of transition modes, each a row: aware (changes priced, "
                     "docs/scheduler.md Transitions), ignore (every change free to the "
                     "planner); the testbed charges both")
          ->capture_default_str();
      sub.add_option("--testbed", f->testbed, testbed_help())->capture_default_str();
      f->surrogate.add(sub);
      f->learning.add(sub, true);
      f->degrade.add(sub);
      sub.add_option("--out", f->out, "cache directory for datasets and surrogates")
          ->capture_default_str();
      sub.add_flag("--no-oracle", f->no_oracle, "skip the references measured on the testbed");
      sub.add_flag("--no-exhaustive", f->no_exhaustive,
                   "skip solving every decision exhaustively (gap_ex)");
      sub.add_option("--windows", f->windows,
                     "independent measurement windows behind the robust oracle")
          ->check(CLI::Range(1, 1000))
          ->capture_default_str();
      sub.add_option("--markdown", f->markdown, "also write this Markdown report (+ two SVGs)");
      sub.add_option("--html", f->html,
                     "also write the report as one self-contained HTML page (plots inline)");
      sub.add_option("--title", f->title, "title of the Markdown report and HTML page")
          ->capture_default_str();
      sub.add_option("--catalog", f->catalog, kCatalogFlagHelp);
      sub.add_flag("--json", f->json, "print JSON");
      sub.add_flag("--quiet", f->quiet, "no progress lines");
      return std::function<int()>([f] { return run_eval_scheduler(*f); });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_eval_scheduler
