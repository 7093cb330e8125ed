// corun eval surrogate FILE...: how accurate MeanField, joint and pairwise surrogates are on
// held-out measured configurations, per N and co-run budget (docs/results/surrogate.md).
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "command.h"
#include "common.h"
#include "corun/core/atomic_file.h"
#include "corun/core/html.h"
#include "corun/core/strings.h"
#include "corun/eval/surrogate_eval.h"

namespace corun::cli::cmd_eval_surrogate {
namespace {

Result<std::pair<std::size_t, std::size_t>> parse_range(const std::string& s) {
  const auto dots = s.find("..");
  const std::string a = dots == std::string::npos ? s : s.substr(0, dots);
  const std::string b = dots == std::string::npos ? s : s.substr(dots + 2);
  std::size_t lo = 0, hi = 0;
  const auto ra = std::from_chars(a.data(), a.data() + a.size(), lo);
  const auto rb = std::from_chars(b.data(), b.data() + b.size(), hi);
  if (ra.ec != std::errc() || ra.ptr != a.data() + a.size() || rb.ec != std::errc() ||
      rb.ptr != b.data() + b.size() || lo < 1 || hi < lo) {
    return Error("--n: expected N or LO..HI with 1 <= LO <= HI, got '" + s + "'");
  }
  return std::make_pair(lo, hi);
}

Result<std::vector<int>> parse_budgets(const std::string& s) {
  std::vector<int> out;
  for (const auto& part : split(s, ',')) {
    int v = 0;
    const auto r = std::from_chars(part.data(), part.data() + part.size(), v);
    if (r.ec != std::errc() || r.ptr != part.data() + part.size() || v < 1) {
      return Error("--budgets: expected positive multiples of N such as 5,10,20,40, got '" + s +
                   "'");
    }
    out.push_back(v);
  }
  return out;
}

Result<std::vector<eval::SurrogateSpec>> parse_surrogates(const std::string& s) {
  std::vector<eval::SurrogateSpec> out;
  for (const auto& part : split(s, ',')) {
    const auto colon = part.find(':');
    const std::string kind = part.substr(0, colon);
    std::string reg = colon == std::string::npos ? "mlp" : part.substr(colon + 1);
    const std::string kMonotone = "-monotone";
    const bool monotone = reg.size() > kMonotone.size() && reg.ends_with(kMonotone);
    if (monotone) reg.resize(reg.size() - kMonotone.size());
    const auto k = surrogate::parse_surrogate(kind);
    if (!k) {
      return Error("--surrogates: unknown surrogate '" + kind + "'" +
                   did_you_mean(kind, surrogate::surrogate_names()));
    }
    const auto r = surrogate::parse_regressor(reg);
    if (!r) {
      return Error("--surrogates: unknown regressor '" + reg + "'" +
                   did_you_mean(reg, surrogate::regressor_names()));
    }
    if (*k == surrogate::SurrogateKind::kCrossModel) {
      return Error("--surrogates: crossmodel is evaluated by the onboarding section");
    }
    if (monotone &&
        (*r == surrogate::RegressorKind::kMlp || (*k != surrogate::SurrogateKind::kMeanField &&
                                                  *k != surrogate::SurrogateKind::kPairwise))) {
      return Error("--surrogates: '" + part +
                   "': only gbdt or linear with meanfield or pairwise can be fitted monotone");
    }
    out.push_back({*k, *r, monotone});
  }
  return out;
}

// The flags of corun eval surrogate.
struct Flags {
  std::vector<std::string> files;
  std::string catalog, n = "2..6", budgets = "1,2,3,5,10,20,40", markdown, html,
                       surrogates = "meanfield:mlp,meanfield:gbdt,joint:mlp,pairwise:linear",
                       testbed = "sim";
  int seeds = 3, threads = 0, heldout_repeats = 5, standalone_repeats = 5;
  std::size_t heldout = 500;
  std::uint64_t seed = kDefaultSeed;
  double window_s = 10;
  bool json = false, no_onboarding = false, quiet = false;
};

/// Loads the workload files; each must have at least `n_max` models (the largest N of --n).
Result<std::vector<Workload>> load_workloads(const Flags& f, std::size_t n_max) {
  std::vector<Workload> workloads;
  for (const auto& file : f.files) {
    auto w = load_workload_file(file, f.catalog);
    if (!w) return w.error();
    if (w->models.size() < n_max) {
      return Error("--n: " + file + " has " + std::to_string(w->models.size()) +
                   " models, fewer than " + std::to_string(n_max));
    }
    workloads.push_back(std::move(*w));
  }
  return workloads;
}

/// The evaluation's settings from the flags and their parsed values.
eval::SurrogateEvalOptions eval_options(const Flags& f,
                                        const std::pair<std::size_t, std::size_t>& range,
                                        const std::vector<int>& budgets,
                                        const std::vector<eval::SurrogateSpec>& surrogates) {
  eval::SurrogateEvalOptions o;
  o.n_min = range.first;
  o.n_max = range.second;
  o.seeds = f.seeds;
  o.budget_multipliers = budgets;
  o.heldout = f.heldout;
  o.heldout_repeats = f.heldout_repeats;
  o.standalone_repeats = f.standalone_repeats;
  o.window_s = f.window_s;
  o.surrogates = surrogates;
  o.onboarding = !f.no_onboarding;
  return o;
}

/// The evaluation's context: --seed, and --threads (0: every core).
Context eval_context(const Flags& f) {
  return {.seed = f.seed,
          .threads = f.threads > 0
                         ? f.threads
                         : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
}

/// Evaluates the surrogates on each workload in turn, with a progress line on stderr unless
/// --quiet.
Result<std::vector<eval::SurrogateEvalReport>> evaluate_workloads(
    const Context& ctx, const Flags& f, const std::vector<Workload>& workloads,
    const Testbed& testbed, const eval::SurrogateEvalOptions& o) {
  std::vector<eval::SurrogateEvalReport> reports;
  for (const auto& w : workloads) {
    const std::size_t tasks = (o.n_max - o.n_min + 1) * static_cast<std::size_t>(o.seeds);
    profile::Progress progress(f.quiet ? nullptr : stderr, ::isatty(::fileno(stderr)) != 0,
                               "eval surrogate " + w.file, tasks, 0);
    auto rep = eval::evaluate_surrogates(ctx, w, testbed, o, &progress);
    if (!rep) return rep.error();
    reports.push_back(std::move(*rep));
  }
  return reports;
}

/// The command line that reproduces the document: everything that changes a number, so that
/// the document says how to reproduce it.
std::string reproduce_command(const Flags& f) {
  std::string command = "corun eval surrogate";
  for (const auto& file : f.files) command += " " + file;
  command += " --n " + f.n + " --seeds " + std::to_string(f.seeds) + " --budgets " + f.budgets +
             " --heldout " + std::to_string(f.heldout) + " --heldout-repeats " +
             std::to_string(f.heldout_repeats) + " --standalone-repeats " +
             std::to_string(f.standalone_repeats) + " --seed " + std::to_string(f.seed) +
             " --window " + format_number(f.window_s) + " --surrogates " + f.surrogates +
             (f.no_onboarding ? " --no-onboarding" : "");
  if (!f.markdown.empty()) command += " --markdown " + f.markdown;
  if (!f.html.empty()) command += " --html " + f.html;
  return command;
}

/// Writes the results document as Markdown (+ its SVG files, --markdown) and/or as an HTML
/// page (--html), creating their directories.
Status write_documents(const Flags& f, const std::vector<eval::SurrogateEvalReport>& reports) {
  // One document, written as Markdown (+ its SVG files) and/or as an HTML page.
  const std::filesystem::path md(f.markdown.empty() ? f.html : f.markdown);
  const std::string stem = md.stem().string();
  const std::string command = reproduce_command(f);
  std::map<std::string, std::string> svgs;  // file name as the document cites it
  for (const auto& r : reports) {
    svgs[stem + "-" + r.workload + "-r2.svg"] = eval::svg_r2_vs_budget(r);
    svgs[stem + "-" + r.workload + "-budget.svg"] = eval::svg_budget_vs_n(r);
  }
  const std::string text = eval::to_markdown(reports, command, stem);
  std::vector<std::pair<std::filesystem::path, std::string>> outputs;
  if (!f.markdown.empty()) {
    for (const auto& [name, svg] : svgs) outputs.emplace_back(md.parent_path() / name, svg);
    outputs.emplace_back(md, text);
  }
  if (!f.html.empty()) {
    outputs.emplace_back(f.html, html_document("Surrogate accuracy", markdown_to_html(text, svgs)));
  }
  for (const auto& [path, content] : outputs) {
    std::error_code ec;
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      return Error("cannot create " + path.parent_path().string() + ": " + ec.message(),
                   Error::Kind::kIo);
    }
    if (auto s = write_file_atomic(path, content); !s.ok()) return s.error();
  }
  return {};
}

/// Prints the reports as JSON (--json): one object, or an array of several.
void print_json(const std::vector<eval::SurrogateEvalReport>& reports) {
  if (reports.size() == 1) {
    std::printf("%s\n", eval::to_json(reports.front()).dump().c_str());
  } else {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& r : reports) all.push_back(eval::to_json(r));
    std::printf("%s\n", all.dump().c_str());
  }
}

/// Prints each report for people: its table, the budgets needed, the noise ceilings and the
/// onboarding scores.
void print_text(const std::vector<eval::SurrogateEvalReport>& reports) {
  for (const auto& r : reports) {
    std::printf("%s (%s)\n", r.workload.c_str(), r.device.c_str());
    Table t({"N", "surrogate", "regressor", "budget", "standalone", "r2_pooled", "r2_macro",
             "r2_pooled_1", "r2_macro_1", "mape %", "r2_thr", "cov95"});
    for (const auto& row : r.rows) {
      t.add({std::to_string(row.n), row.surrogate, row.regressor, std::to_string(row.budget),
             std::to_string(row.standalone_measurements), fixed(row.r2_pooled, 3),
             fixed(row.r2_macro, 3), fixed(row.r2_pooled_single, 3), fixed(row.r2_macro_single, 3),
             fixed(row.mape, 1), fixed(row.r2_throughput, 3), fixed(row.coverage95, 3)});
    }
    std::printf("%s", t.render().c_str());
    for (const auto& b : r.needed) {
      std::printf("budget_for_r2_095 N=%zu %s/%s: %s\n", b.n, b.surrogate.c_str(),
                  b.regressor.c_str(),
                  b.budget ? std::to_string(*b.budget).c_str() : "not reached");
    }
    for (const auto& c : r.ceilings) {
      std::printf("noise ceiling N=%zu: test-retest R2 pooled %.3f macro %.3f\n", c.n, c.r2_pooled,
                  c.r2_macro);
    }
    for (const auto& ob : r.onboarding) {
      std::printf(
          "onboarding N=%zu %s: R2 %.3f MAPE %.1f%% (standalone only: R2 %.3f MAPE "
          "%.1f%%; co-run-trained MeanField R2 %.3f)\n",
          ob.n, ob.model.c_str(), ob.r2, ob.mape, ob.r2_standalone_only, ob.mape_standalone_only,
          ob.r2_reference);
    }
  }
}

/// Evaluates the surrogates on every workload and reports the results.
int run_eval_surrogate(const Flags& f) {
  auto range = parse_range(f.n);
  if (!range) return report_error(range.error());
  auto budgets = parse_budgets(f.budgets);
  if (!budgets) return report_error(budgets.error());
  auto surrogates = parse_surrogates(f.surrogates);
  if (!surrogates) return report_error(surrogates.error());
  auto testbed = make_testbed(f.testbed);
  if (!testbed) return report_error(testbed.error());
  auto workloads = load_workloads(f, range->second);
  if (!workloads) return report_error(workloads.error());
  const eval::SurrogateEvalOptions o = eval_options(f, *range, *budgets, *surrogates);
  auto reports = evaluate_workloads(eval_context(f), f, *workloads, **testbed, o);
  if (!reports) return report_error(reports.error());
  if (!f.markdown.empty() || !f.html.empty()) {
    if (auto st = write_documents(f, *reports); !st.ok()) return report_error(st.error());
  }
  if (f.json) {
    print_json(*reports);
    return kExitOk;
  }
  print_text(*reports);
  return kExitOk;
}

const bool registered = register_command({
    "eval surrogate",
    "Evaluate MeanField, joint and pairwise surrogates on held-out measured configurations",
    [](CLI::App& sub) {
      auto f = std::make_shared<Flags>();
      sub.add_option("files", f->files, "workload YAML file(s)")->required();
      sub.add_option("--n", f->n, "N or LO..HI: evaluate the first N models")
          ->capture_default_str();
      sub.add_option("--seeds", f->seeds, "independent repetitions (profiles, fits, held-out)")
          ->check(CLI::Range(1, 100))
          ->capture_default_str();
      sub.add_option("--budgets", f->budgets, "co-run budgets as multiples of N")
          ->capture_default_str();
      sub.add_option("--heldout", f->heldout, "held-out joint configurations per (N, seed)")
          ->capture_default_str();
      sub.add_option("--heldout-repeats", f->heldout_repeats,
                     "measurements of each held-out configuration (truth: geometric mean)")
          ->check(CLI::Range(1, 20))
          ->capture_default_str();
      sub.add_option("--standalone-repeats", f->standalone_repeats,
                     "passes of the standalone profile, averaged")
          ->check(CLI::Range(1, 20))
          ->capture_default_str();
      sub.add_option(
             "--surrogates", f->surrogates,
             "comma list of KIND:REGRESSOR (gbdt-monotone, linear-monotone: constrained to be "
             "monotone in the co-runners' aggregate)")
          ->capture_default_str();
      add_seed_flag(sub, f->seed, "the campaigns (the base of each run's seed)");
      sub.add_option("--window", f->window_s, "measurement window, seconds")
          ->check(CLI::Range(0.1, 3600.0))
          ->capture_default_str();
      sub.add_option("--testbed", f->testbed, testbed_help())->capture_default_str();
      add_threads_flag(sub, f->threads, "the campaigns' workers (0: every core)", 0);
      sub.add_flag("--no-onboarding", f->no_onboarding, "skip the onboarding evaluation");
      sub.add_option("--markdown", f->markdown,
                     "write the results document (and its SVG plots next to it)");
      sub.add_option("--html", f->html,
                     "write the results as one self-contained HTML page (plots inline)");
      sub.add_option("--catalog", f->catalog, kCatalogFlagHelp);
      sub.add_flag("--json", f->json, "print JSON");
      sub.add_flag("--quiet", f->quiet, "no progress output");
      return std::function<int()>([f] { return run_eval_surrogate(*f); });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_eval_surrogate
