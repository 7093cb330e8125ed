// corun eval scheduler [FILE...] --scenarios DIR: every scenario run online with every solver in
// one process — gap to the exhaustive plan under the same surrogate, gap to the testbed's own
// optimum, measured SLA violations and decision times — with a Markdown report and plots.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "command.h"
#include "common.h"
#include "corun/core/atomic_file.h"
#include "corun/core/stats.h"
#include "corun/core/strings.h"
#include "corun/core/svg.h"
#include "corun/runtime/pipeline.h"
#include "corun/runtime/scheduler_eval.h"
#include "corun/runtime/surrogate_source.h"
#include "corun/space/space.h"
#include "surrogate_flags.h"

namespace corun::cli {
namespace {

double median_of(std::vector<double> v) { return quantile(std::move(v), 0.5); }

std::string stem(const std::string& file) { return std::filesystem::path(file).stem().string(); }

std::string num(double v, int digits) { return std::isfinite(v) ? fixed(v, digits) : "-"; }

// Acceptance-style summary computed from the rows of one run.
nlohmann::json summary(const std::vector<SchedulerEvalRow>& rows) {
  std::map<std::string, std::vector<double>> gap, p50;
  std::map<std::string, std::size_t> violations;
  for (const auto& r : rows) {
    gap[r.solver].push_back(r.gap_to_exhaustive_pct);
    p50[r.solver].push_back(r.decision_ms_p50);
    violations[r.solver] += r.sla_violations;
  }
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [solver, g] : gap) {
    j[solver] = {{"median_gap_to_exhaustive_pct", median_of(g)},
                 {"median_decision_ms_p50", median_of(p50[solver])},
                 {"sla_violations", violations[solver]}};
  }
  if (p50.count("ga") && p50.count("exhaustive")) {
    j["exhaustive_over_ga_decision_p50"] =
        median_of(p50["exhaustive"]) / std::max(1e-9, median_of(p50["ga"]));
  }
  return j;
}

std::string svg_by_scenario(const std::vector<SchedulerEvalRow>& rows,
                            const std::vector<std::string>& solvers, const std::string& title,
                            const std::string& y_label, double SchedulerEvalRow::*field) {
  SvgPlot plot;
  plot.title = title;
  plot.x_label = "scenario (1 = first row of the table)";
  plot.y_label = y_label;
  plot.y_min = 0;
  for (const auto& s : solvers) {
    SvgSeries series;
    series.label = s;
    double x = 0;
    for (const auto& r : rows) {
      if (r.solver != s) continue;
      series.x.push_back(++x);
      series.y.push_back(r.*field);
    }
    plot.series.push_back(std::move(series));
  }
  return plot.render();
}

std::string markdown(const std::vector<SchedulerEvalRow>& rows, const nlohmann::json& sum,
                     const std::vector<std::string>& solvers, const std::string& command,
                     const std::string& svg_stem, const std::string& setup) {
  std::string md;
  md += "# Online scheduler: solvers on eight dynamic scenarios\n\n";
  md += "Produced by `make eval`, i.e.\n\n```sh\n" + command + "\n```\n\n";
  md += setup + "\n\n";
  md +=
      "Columns: `gap_ex` = median over decisions of the gap between the chosen plan and the "
      "exhaustive plan under the same surrogate, margins and constraints (%); `gap_oracle` = "
      "median gap to the best plan found by exhaustive search on the testbed itself, both "
      "scored on measurements (%); `viol` = measured model-intervals breaching their SLA; "
      "`p50`/`p99` = decision time (ms, wall clock of the solver call, this machine, "
      "2 threads); `utility` = mean measured utility per interval.\n\n";
  md +=
      "| scenario | solver | decisions | gap_ex % | gap_oracle % | viol | p50 ms | p99 ms | "
      "utility |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : rows) {
    md += "| " + stem(r.scenario) + " | " + r.solver + " | " + std::to_string(r.decisions) + " | " +
          num(r.gap_to_exhaustive_pct, 3) + " | " + num(r.gap_to_oracle_pct, 2) + " | " +
          std::to_string(r.sla_violations) + " | " + num(r.decision_ms_p50, 1) + " | " +
          num(r.decision_ms_p99, 1) + " | " + num(r.mean_measured_utility, 3) + " |\n";
  }
  md +=
      "\n## Summary over the scenarios\n\n| solver | median gap_ex % | median p50 ms | "
      "violations |\n|---|---:|---:|---:|\n";
  for (const auto& s : solvers) {
    if (!sum.contains(s)) continue;
    const auto& j = sum.at(s);
    md += "| " + s + " | " + num(j.at("median_gap_to_exhaustive_pct").get<double>(), 3) + " | " +
          num(j.at("median_decision_ms_p50").get<double>(), 1) + " | " +
          std::to_string(j.at("sla_violations").get<std::size_t>()) + " |\n";
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

const bool registered = register_command({
    "eval scheduler",
    "Run every scenario with every solver online and score the decisions",
    [](CLI::App& sub) {
      struct Flags {
        std::vector<std::string> files;
        std::string scenarios, solvers = "ga,exhaustive,greedy,hillclimb", testbed = "sim",
                               out = "out/eval/scheduler", markdown, catalog;
        bool json = false, no_oracle = false, quiet = false;
        SurrogateFlags surrogate;
      };
      auto f = std::make_shared<Flags>();
      sub.add_option("files", f->files, "scenario workload files (with a timeline)");
      sub.add_option("--scenarios", f->scenarios, "directory of scenario workloads (*.yaml)");
      sub.add_option("--solvers", f->solvers, "comma list of solvers")->capture_default_str();
      sub.add_option("--testbed", f->testbed, testbed_help())->capture_default_str();
      f->surrogate.add(sub);
      sub.add_option("--out", f->out, "cache directory for datasets and surrogates")
          ->capture_default_str();
      sub.add_flag("--no-oracle", f->no_oracle, "skip the exhaustive sweep on the testbed");
      sub.add_option("--markdown", f->markdown, "also write this Markdown report (+ two SVGs)");
      sub.add_option("--catalog", f->catalog, "catalog directory (default: built in)");
      sub.add_flag("--json", f->json, "print JSON");
      sub.add_flag("--quiet", f->quiet, "no progress lines");
      return std::function<int()>([f] {
        std::vector<std::string> files = f->files;
        if (!f->scenarios.empty()) {
          std::error_code ec;
          if (!std::filesystem::is_directory(f->scenarios, ec)) {
            return report_error(Error("--scenarios: " + f->scenarios + " is not a directory"));
          }
          std::vector<std::string> found;
          for (const auto& e : std::filesystem::directory_iterator(f->scenarios, ec)) {
            if (e.path().extension() == ".yaml") found.push_back(e.path().string());
          }
          std::sort(found.begin(), found.end());
          files.insert(files.end(), found.begin(), found.end());
        }
        if (files.empty()) {
          return report_error(Error("no scenarios: give workload files or --scenarios DIR"));
        }
        auto catalog = load_catalog(f->catalog);
        if (!catalog) return report_error(catalog.error());
        SchedulerEvalOptions opt;
        opt.solvers = split(f->solvers, ',');
        for (const auto& s : opt.solvers) {
          if (auto r = make_solver(s); !r) return report_error(r.error().wrap("--solvers"));
        }
        const auto regressor = f->surrogate.regressor_kind();
        if (!regressor) return report_error(regressor.error());
        auto testbed = make_testbed(f->testbed);
        if (!testbed) return report_error(testbed.error());
        std::vector<Workload> scenarios;
        std::map<std::string, std::string> texts;
        for (const auto& file : files) {
          auto w = load_workload_file(file, f->catalog);
          if (!w) return report_error(w.error());
          auto text = read_file(file);
          if (!text) return report_error(text.error());
          texts[w->file] = *text;
          scenarios.push_back(std::move(*w));
        }
        const bool terminal = ::isatty(::fileno(stderr)) != 0;
        std::FILE* log = f->quiet ? nullptr : stderr;
        // One surrogate per scenario (their model sets differ), profiled and fitted once and
        // cached; every solver of the scenario plans with the same one.
        std::map<std::string, surrogate::Surrogate> fitted;
        for (const auto& w : scenarios) {
          PipelineOptions po = f->surrogate.pipeline(
              *regressor, f->testbed, w.timeline.interval_s > 0 ? w.timeline.interval_s : 10, log,
              terminal);
          po.dataset = std::filesystem::path(f->out) / (stem(w.file) + ".db");
          po.model = std::filesystem::path(f->out) / (stem(w.file) + "-surrogate.json");
          po.catalog = *catalog;
          if (log) std::fprintf(log, "eval scheduler: surrogate for %s\n", w.file.c_str());
          auto p = profile_and_fit(w, texts[w.file], **testbed, po);
          if (!p) return report_error(p.error().wrap(w.file));
          fitted.emplace(w.file, std::move(p->surrogate));
        }
        const Testbed& tb = **testbed;
        const std::uint64_t seed = f->surrogate.seed;
        const double confidence = f->surrogate.confidence;
        SourceFactory factory = [&](const Workload& w) -> Result<std::unique_ptr<PredictorSource>> {
          const double window = w.timeline.interval_s > 0 ? w.timeline.interval_s : 10;
          return std::unique_ptr<PredictorSource>(std::make_unique<SurrogateSource>(
              fitted.at(w.file), tb, SurrogateSourceOptions{3, window, seed, confidence}));
        };
        opt.seed = f->surrogate.seed;
        opt.threads = f->surrogate.threads;
        opt.oracle = !f->no_oracle;
        if (log) {
          opt.progress = [log](const std::string& what) {
            std::fprintf(log, "eval scheduler: %s\n", what.c_str());
          };
        }
        auto rows = evaluate_scheduler(scenarios, tb, factory, opt);
        if (!rows) return report_error(rows.error());
        const nlohmann::json sum = summary(*rows);
        nlohmann::json jrows = nlohmann::json::array();
        for (const auto& r : *rows) jrows.push_back(to_json(r));
        if (!f->markdown.empty()) {
          const std::filesystem::path md(f->markdown);
          const std::string svg_stem = md.stem().string();
          std::string command = "corun eval scheduler --scenarios " + f->scenarios + " --solvers " +
                                f->solvers + " --regressor " + f->surrogate.regressor +
                                (f->surrogate.unconstrained ? " --unconstrained" : "") +
                                " --seed " + std::to_string(f->surrogate.seed) + " --confidence " +
                                format_number(f->surrogate.confidence) + " --json";
          for (const auto& file : f->files) command += " " + file;
          command += " --markdown " + f->markdown;
          const ConfigSpace space(scenarios.front());
          const std::string setup =
              "Testbed `" + f->testbed + "` (" + scenarios.front().device.display_name + "); " +
              "surrogate: MeanField/" + f->surrogate.regressor +
              (*regressor != surrogate::RegressorKind::kMlp && !f->surrogate.unconstrained
                   ? " (monotone in the co-runners' aggregate)"
                   : "") +
              " fitted per scenario on 20·N co-run and " + "3 standalone passes (cached in " +
              f->out +
              "); re-plans at the start, after every "
              "timeline event and after a measured breach; GA warm-started from the plan in "
              "force. The first scenario has " +
              std::to_string(space.joint_count()) + " joint configurations.";
          const auto dir = md.has_parent_path() ? md.parent_path() : std::filesystem::path(".");
          const std::vector<std::pair<std::string, std::string>> outputs = {
              {(dir / (svg_stem + "-decision.svg")).string(),
               svg_by_scenario(*rows, opt.solvers, "Decision time (median per scenario)", "ms",
                               &SchedulerEvalRow::decision_ms_p50)},
              {(dir / (svg_stem + "-oracle.svg")).string(),
               svg_by_scenario(*rows, opt.solvers, "Gap to the testbed optimum (median)", "%",
                               &SchedulerEvalRow::gap_to_oracle_pct)},
              {md.string(), markdown(*rows, sum, opt.solvers, command, svg_stem, setup)}};
          for (const auto& [path, content] : outputs) {
            if (auto s = write_file_atomic(path, content); !s.ok()) return report_error(s.error());
          }
        }
        if (f->json) {
          std::printf("%s\n", nlohmann::json({{"rows", jrows}, {"summary", sum}}).dump().c_str());
        } else {
          Table t({"scenario", "solver", "decisions", "gap_ex %", "gap_oracle %", "viol", "p50 ms",
                   "p99 ms", "utility"});
          for (const auto& r : *rows) {
            t.add({stem(r.scenario), r.solver, std::to_string(r.decisions),
                   num(r.gap_to_exhaustive_pct, 3), num(r.gap_to_oracle_pct, 2),
                   std::to_string(r.sla_violations), num(r.decision_ms_p50, 1),
                   num(r.decision_ms_p99, 1), num(r.mean_measured_utility, 3)});
          }
          std::printf("%s\n%s\n", t.render().c_str(), sum.dump(2).c_str());
        }
        return kExitOk;
      });
    },
});

}  // namespace
}  // namespace corun::cli
