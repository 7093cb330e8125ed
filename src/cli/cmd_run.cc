// corun run FILE: corun's main job. Profile the workload (standalone passes and a MeanField
// co-run campaign, cached in a resumable dataset), fit the surrogate (reused when unchanged),
// then run the workload's timeline online: re-plan on every event and measured SLA breach,
// apply each plan to the testbed, and report predicted against measured, interval by interval.
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <cstdio>

#include "command.h"
#include "common.h"
#include "corun/core/atomic_file.h"
#include "corun/core/strings.h"
#include "corun/export/catalog_record.h"
#include "corun/runtime/online_run.h"
#include "corun/runtime/pipeline.h"
#include "corun/runtime/report.h"
#include "corun/runtime/run_source.h"
#include "corun/space/space.h"
#include "corun/spec/node.h"
#include "node_report.h"
#include "surrogate_flags.h"

namespace corun::cli::cmd_run {
namespace {

// "cam0 640/0.33 -> 480/0.33; chat ..." for the models whose configuration changed.
std::string plan_change(const Workload& w, const JointConfig& before, const JointConfig& after) {
  std::string out;
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    if (m < before.size() && before[m] == after[m]) continue;
    if (!out.empty()) out += "; ";
    out += w.models[m].name + " ";
    out += after[m] == kAbsent ? "off" : w.models[m].describe(static_cast<std::size_t>(after[m]));
  }
  return out.empty() ? "-" : out;
}

std::string sla_status(const Workload& w, const IntervalRecord& r) {
  std::string out;
  for (std::size_t m = 0; m < r.breach.size(); ++m) {
    if (!r.breach[m]) continue;
    out += (out.empty() ? "BREACH " : ",") + w.models[m].name;
  }
  return out.empty() ? "ok" : out;
}

std::string thousands(std::uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

struct Flags {
  std::string file, testbed = "sim", solver = "ga", out, model, catalog;
  std::string transitions = "aware";
  std::uint64_t repeats = 3;
  bool json = false, quiet = false, no_profile = false;
  SurrogateFlags surrogate;
  LearningFlags learning;
  DegradeFlag degrade;
};

Status check_run_flags(const Flags& f) {
  if (auto t = make_testbed(f.testbed); !t) return t.error();
  if (auto s = make_solver(f.solver); !s) return s.error();
  if (auto r = f.surrogate.regressor_kind(); !r) return r.error();
  if (auto m = f.learning.parsed(false); !m) return m.error();
  if (f.transitions != "aware" && f.transitions != "ignore") {
    return Error("--transitions: expected aware or ignore, got '" + f.transitions + "'");
  }
  if (f.no_profile && !f.model.empty()) {
    return Error("--no-profile and --surrogate exclude each other");
  }
  return {};
}

// What one run (of a workload, or of one unit of a node) measured.
struct RunTotals {
  std::size_t violations = 0;  // measured model-intervals breaching an SLA
  std::size_t intervals = 0;
  std::size_t decisions = 0;
  std::size_t shed = 0;  // model-intervals that refused part of their demand
  double mean_measured_utility = 0;
  bool infeasible = false;  // some SLA could not be met (infeasible lines)
};

// What the steps of one run (of a workload, or of one unit of a node) share.
struct RunContext {
  const Flags& f;
  const Context& ctx;  // the verb's: --seed and --threads
  const Catalog& catalog;
  const Workload& w;
  const std::string& text;
  const std::filesystem::path& out;
  const std::string& unit;  // a node's unit ("gpu1"), or empty
  const Testbed* testbed;
  surrogate::RegressorKind regressor;
  double interval;  // seconds per interval of the timeline
  std::FILE* log;   // where the run is told as it goes
  bool terminal;    // stderr is a terminal
};

/// Prints the run's first line: the workload, the device, the testbed and how many joint
/// configurations it has.
void print_run_header(const RunContext& c) {
  const ConfigSpace space(c.w);
  const ConfigCount& joint = space.joint_count();
  const std::string joint_text = joint.exact() ? thousands(joint.value()) : count_text(joint);
  std::fprintf(c.log, "%scorun run: %s on %s (%s testbed), %zu models, %s joint configurations\n",
               c.unit.empty() ? "" : ("[" + c.unit + "] ").c_str(), c.w.file.c_str(),
               c.w.device.display_name.c_str(), c.f.testbed.c_str(), c.w.models.size(),
               joint_text.c_str());
}

/// The run's predictions (make_run_source): the given --surrogate; else the surrogate
/// profiled and fitted into `out` (both cached); else, profiling none, the catalog twin. Says
/// which on the run's log.
Result<RunSource> run_source(const RunContext& c) {
  const Flags& f = c.f;
  RunSourceOptions o;
  o.surrogate = f.model;
  o.profile = !f.no_profile;
  o.confidence = f.surrogate.confidence;
  o.pipeline = f.surrogate.pipeline(c.regressor, f.testbed, c.interval,
                                    f.quiet ? nullptr : stderr, c.terminal);
  o.pipeline.dataset = c.out / "dataset.db";
  o.pipeline.model = c.out / "surrogate.json";
  o.pipeline.standalone_repeats = f.repeats;
  o.pipeline.catalog = &c.catalog;
  auto made = make_run_source(c.ctx, c.w, c.text, *c.testbed, o);
  if (!made) return made.error();
  switch (made->kind) {
    case RunSource::Kind::kGiven:
      std::fprintf(c.log, "surrogate: %s (given)\n", f.model.c_str());
      break;
    case RunSource::Kind::kProfiled: {
      const PipelineStats& p = made->profiled;
      std::fprintf(c.log,
                   "profile: %llu standalone + %llu co-run measurements (%llu + %llu taken "
                   "now, the rest cached in %s)\n",
                   static_cast<unsigned long long>(p.standalone_total),
                   static_cast<unsigned long long>(p.corun_total),
                   static_cast<unsigned long long>(p.standalone_measured),
                   static_cast<unsigned long long>(p.corun_measured),
                   o.pipeline.dataset.string().c_str());
      if (p.model_reused) {
        std::fprintf(c.log, "surrogate: meanfield/%s reused from %s\n",
                     f.surrogate.regressor.c_str(), o.pipeline.model.string().c_str());
      } else {
        std::fprintf(c.log, "surrogate: meanfield/%s fitted in %.1f s -> %s\n",
                     f.surrogate.regressor.c_str(), p.fit_s, o.pipeline.model.string().c_str());
      }
      break;
    }
    case RunSource::Kind::kTwin:
      std::fprintf(c.log, "profile: none: plans start from the catalog twin and learn online\n");
      break;
  }
  return made;
}

/// Prints how a plan's changes are applied, and what they cost (space/transition.h).
void print_transition_steps(std::FILE* log, const IntervalRecord& r) {
  for (const auto& step : r.transition.steps) {
    if (step.change.action < Actuation::kReload || step.from == kAbsent) continue;
    std::string knobs;
    for (KnobId k : step.change.changed) knobs += (knobs.empty() ? "" : ",") + knob_decl(k).name;
    std::fprintf(log, "  transition %d: %s %s on %s (%s), %s, %s s%s\n", step.order,
                 step.name.c_str(), std::string(to_string(step.change.action)).c_str(),
                 std::string(to_string(step.change.stack)).c_str(), knobs.c_str(),
                 step.change.make_before_break ? "make-before-break" : "break first",
                 fixed(step.change.downtime_s, 1).c_str(),
                 step.change.make_before_break ? " with both copies in VRAM" : " down");
  }
}

// Tells a run's intervals as they happen: a row (and, piped, a line) per decision, event or
// breach, the transitions applied, and each SLA that cannot be met, once.
struct IntervalTeller {
  const RunContext& c;
  Table t{{"t (s)", "event", "decision", "plan change", "utility pred/meas", "SLA"}};
  JointConfig last{};
  std::vector<std::string> told{};

  /// Tells interval `r`; a quiet one (no decision, event or breach) is summarised at the end.
  void tell(const IntervalRecord& r) {
    const Flags& f = c.f;
    const Workload& w = c.w;
    std::FILE* log = c.log;
    if (!r.refit_error.empty()) {
      std::fprintf(log, "refit failed (the current fit stays): %s\n", r.refit_error.c_str());
    }
    std::string events = join(r.events, ", ");
    if (!r.drift.empty()) {
      events += (events.empty() ? "" : ", ") + std::string("[unseen: ") + join(r.drift, ", ") + "]";
    }
    if (!r.replanned && events.empty() &&
        std::none_of(r.breach.begin(), r.breach.end(), [](bool b) { return b; })) {
      last = r.plan;
      return;  // a quiet interval: summarised at the end
    }
    if (r.replanned && r.events.empty()) events += (events.empty() ? "" : ", ") + r.reason;
    const std::string decision =
        !r.replanned ? std::string("-")
                     : f.solver + " " + fixed(r.decision_ms, 1) + " ms" +
                           (r.measure_ms >= 100
                                ? " (after " + fixed(r.measure_ms / 1000.0, 1) + " s measuring)"
                                : std::string());
    const std::string change = r.replanned ? plan_change(w, last, r.plan) : "-";
    t.add({fixed(r.t_s, 0), events.empty() ? "-" : events, decision, change,
           fixed(r.predicted_utility, 3) + " / " + fixed(r.measured_utility, 3), sla_status(w, r)});
    if (!f.json && !c.terminal) {
      // Piped output streams one line per decision as it happens.
      std::fprintf(log, "t=%-5s %-24s %-14s %s | utility %s/%s | %s\n", fixed(r.t_s, 0).c_str(),
                   (events.empty() ? "-" : events).c_str(), decision.c_str(), change.c_str(),
                   fixed(r.predicted_utility, 3).c_str(), fixed(r.measured_utility, 3).c_str(),
                   sla_status(w, r).c_str());
    }
    print_transition_steps(log, r);
    // Each (model, SLA key) is told once; the numbers move a little as corun learns.
    for (const auto& why : r.infeasible) {
      const std::string what = why.substr(0, why.find(" cannot be met"));
      if (std::find(told.begin(), told.end(), what) != told.end()) continue;
      told.push_back(what);
      std::fprintf(log, "infeasible: %s\n", why.c_str());
    }
    last = r.plan;
  }
};

/// Prints the restarts, reloads and downtime the run's transitions cost, per model.
void print_transition_totals(const RunContext& c, const RunReport& report) {
  const auto restarts = report.changes(Actuation::kRestart);
  const auto reloads = report.changes(Actuation::kReload);
  const auto outage = report.outage_s();
  std::string per;
  for (std::size_t m = 0; m < c.w.models.size(); ++m) {
    if (restarts[m] + reloads[m] == 0) continue;
    per += (per.empty() ? "" : ", ") + c.w.models[m].name + " " + std::to_string(restarts[m]) +
           " restart(s) " + std::to_string(reloads[m]) + " reload(s) " + fixed(outage[m], 1) +
           " s down";
  }
  std::fprintf(c.log,
               "transitions (%s): %zu restart(s), %zu reload(s)%s%s; the measured utility above "
               "is net of them (the testbed charged every outage and warm-up)\n",
               c.f.transitions.c_str(),
               static_cast<std::size_t>(std::accumulate(restarts.begin(), restarts.end(), 0.0)),
               static_cast<std::size_t>(std::accumulate(reloads.begin(), reloads.end(), 0.0)),
               per.empty() ? "" : ": ", per.c_str());
}

/// Writes report.json and report.html into `out`, prints the run's summary (and, for a whole
/// run with --json, the report), and returns what the run measured.
Result<RunTotals> report_run(const RunContext& c, const RunReport& report,
                             const std::vector<std::string>& told) {
  const std::filesystem::path& out = c.out;
  if (auto st = write_report(report, c.w, out); !st.ok()) return st.error();
  nlohmann::json j = report_json(report, c.w);
  // The report records the catalog overlay it was made with, so that `corun export` of a run
  // with a custom model needs no --catalog. The runtime's report knows no catalog: the record
  // is added here and report.json written again, in the same form (dump(2)) as write_report.
  j["catalog"] = exporting::catalog_record_json(c.catalog);
  if (auto st = write_file_atomic(out / "report.json", j.dump(2) + "\n"); !st.ok()) {
    return st.error();
  }
  const auto& sum = j.at("summary");
  std::fprintf(c.log,
               "\nsummary: %zu intervals of %s s, %zu decisions (p50 %.1f ms, p99 %.1f ms), "
               "%zu refits, %zu standalone re-profiling measurements, %zu intervals read "
               "back from the dataset, mean measured utility %.3f, %zu measured SLA "
               "violation(s) (model-intervals)%s\n",
               report.intervals.size(), fixed(c.interval, 0).c_str(),
               sum.at("decisions").get<std::size_t>(), sum.at("decision_ms_p50").get<double>(),
               sum.at("decision_ms_p99").get<double>(), report.refits, report.source_measurements,
               report.replayed, sum.at("mean_measured_utility").get<double>(),
               report.sla_violations(),
               told.empty() ? "" : "; some SLAs could not be met (infeasible lines above)");
  print_transition_totals(c, report);
  std::fprintf(c.log, "report: %s, %s\n", (out / "report.json").string().c_str(),
               (out / "report.html").string().c_str());
  if (c.f.json && c.unit.empty()) std::printf("%s\n", j.dump().c_str());
  RunTotals totals;
  totals.violations = report.sla_violations();
  totals.intervals = report.intervals.size();
  totals.decisions = sum.at("decisions").get<std::size_t>();
  totals.mean_measured_utility = sum.at("mean_measured_utility").get<double>();
  totals.shed = report.shed_model_intervals();
  totals.infeasible = !told.empty();
  return totals;
}

// Profiles and fits `w` (unless told otherwise), runs its timeline online on the testbed,
// writes dataset.db, surrogate.json, report.json and report.html into `out`, and prints the
// run as it goes; `unit` (a node's unit, e.g. "gpu1") prefixes its lines.
Result<RunTotals> run_workload(const Context& ctx, const Flags& f, const Catalog& catalog,
                               const Workload& w, const std::string& text,
                               const std::filesystem::path& out, const std::string& unit) {
  auto testbed_made = make_testbed(f.testbed);
  if (!testbed_made) return testbed_made.error();
  const Testbed* testbed = testbed_made->get();
  const auto regressor_made = f.surrogate.regressor_kind();
  if (!regressor_made) return regressor_made.error();
  const auto regressor = *regressor_made;
  const auto modes = f.learning.parsed(false);
  if (!modes) return modes.error();
  const bool learning_on = modes->front();
  const double interval = w.timeline.interval_s > 0 ? w.timeline.interval_s : 10;
  std::FILE* log = f.json ? stderr : stdout;
  const bool terminal = ::isatty(::fileno(stderr)) != 0;
  const RunContext c{f,    ctx,     catalog,   w,        text, out,
                     unit, testbed, regressor, interval, log,  terminal};
  print_run_header(c);

  auto made = run_source(c);
  if (!made) return made.error();
  std::unique_ptr<PredictorSource> source = std::move(made->source);

  RunOptions ro;
  ro.controller.solver = f.solver;
  ro.controller.learning = f.learning.options;
  ro.controller.learning.enabled = learning_on;
  ro.controller.admission.enabled = f.degrade.shed();
  ro.controller.transitions.aware = f.transitions == "aware";
  ro.refit_dataset = made->refit_dataset;
  ro.catalog = &catalog;
  auto online = OnlineLog::open_in(out, w, text, f.testbed, interval,
                                  OnlineLog::run_key(ctx, ro.controller, *source));
  if (!online) return online.error();
  ro.log = online->get();
  std::fprintf(
      log, "online: learning %s (breach target %s%s), predictions from %s\n",
      learning_on ? "on" : "off", format_number(ro.controller.learning.breach_target).c_str(),
      ro.controller.learning.explore_sd > 0
          ? (", explore " + format_number(ro.controller.learning.explore_sd) + " sd").c_str()
          : "",
      source->describe().c_str());

  IntervalTeller teller{c};
  ro.on_interval = [&](const IntervalRecord& r, const Workload&) { teller.tell(r); };
  auto report = run_online(ctx, w, *testbed, std::move(source), ro);
  if (!report) return report.error();
  if (!f.json && terminal) std::fprintf(log, "\n%s", teller.t.render().c_str());
  return report_run(c, *report, teller.told);
}

// "gpu0/3g.40gb#1" -> "gpu0-3g.40gb-1": a unit's directory under the run's.
std::string unit_dir(const GpuUnit& unit) {
  std::string out = unit.label();
  std::replace(out.begin(), out.end(), '/', '-');
  std::replace(out.begin(), out.end(), '#', '-');
  return out;
}

/// Runs one unit of a node as one GPU: writes the share of the workload it runs (`models`) to
/// `dir`/workload.yaml, then runs that workload with its dataset and reports under `dir`.
Result<RunTotals> run_unit(const Context& ctx, const Flags& f, const Catalog& catalog,
                           const Workload& w, const std::string& text, const GpuUnit& unit,
                           const std::vector<std::size_t>& models,
                           const std::filesystem::path& dir) {
  std::FILE* log = f.json ? stderr : stdout;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error("cannot create " + dir.string() + ": " + ec.message(), Error::Kind::kIo);
  auto unit_text = unit_workload_text(text, w, unit, models);
  if (!unit_text) return unit_text.error();
  const std::filesystem::path file = dir / "workload.yaml";
  if (auto st = write_file_atomic(file, *unit_text); !st.ok()) return st.error();
  auto uw = parse_workload(*unit_text, file.string(), catalog);
  if (!uw) return uw.error().wrap(unit.label() + "'s workload");
  std::fprintf(log, "\n");
  auto r = run_workload(ctx, f, catalog, *uw, *unit_text, dir, unit.label());
  if (!r) return r.error().wrap(unit.label());
  return *r;
}

/// One unit's row of node.json: where it is, its models, its directory and what it measured.
nlohmann::json unit_json(const Workload& w, const GpuUnit& unit, const std::vector<std::size_t>& on,
                         const std::filesystem::path& dir, const RunTotals& r) {
  nlohmann::json models = nlohmann::json::array();
  for (std::size_t m : on) models.push_back(w.models[m].name);
  return {{"unit", unit.label()},
          {"gpu", unit.gpu},
          {"profile", unit.profile},
          {"models", models},
          {"dir", dir.string()},
          {"sla_violations", r.violations},
          {"decisions", r.decisions},
          {"shed_model_intervals", r.shed},
          {"mean_measured_utility", r.mean_measured_utility}};
}

// A node (several GPUs or MIG slices): the node planner places every model the timeline ever
// runs (and chooses the partitioning) on the catalog twin; then each unit with models runs
// online on its own — profiled, fitted, learned and re-planned as one GPU — since units
// share nothing (separate GPUs, or MIG slices isolated from each other). The placement stays
// for the run; each unit's workload file, dataset and reports go under `out`/UNIT.
int run_node(const Context& ctx, const Flags& f, const Catalog& catalog, const Workload& w,
             const std::string& text, const std::filesystem::path& out) {
  if (!f.model.empty()) {
    return report_error(
        Error("--surrogate: a node run fits one surrogate per GPU or MIG slice "
              "(it profiles each unit's models on that unit); run without it, "
              "or with --no-profile",
              Error::Kind::kInvalidInput));
  }
  std::FILE* log = f.json ? stderr : stdout;
  // Placement covers every model the timeline may run: one that arrives later has its unit.
  Workload all = w;
  for (auto& m : all.models) m.active = true;
  PlanFlags pf;
  pf.file = f.file;
  pf.solver = f.solver;
  pf.testbed = f.testbed;
  pf.catalog = f.catalog;
  pf.window_s = w.timeline.interval_s > 0 ? w.timeline.interval_s : 10;
  auto session = make_node_session(ctx, all, pf);
  if (!session) return report_error(session.error());
  auto plan = (*session)->planner->plan();
  if (!plan) return report_error(plan.error());
  std::fprintf(log, "corun run: %s on %zu x %s, placed on the catalog twin: %s (%s)\n",
               f.file.c_str(), w.node.gpus(), w.device.display_name.c_str(),
               plan->layout.describe().c_str(),
               plan->feasible ? "every SLA holds as predicted" : "some SLA misses as predicted");
  auto [on, unplaced] = models_by_unit(w, *plan);
  for (std::size_t u = 0; u < on.size(); ++u) {
    std::string names;
    for (std::size_t m : on[u]) names += (names.empty() ? "" : ", ") + w.models[m].name;
    std::fprintf(log, "  %s: %s\n", plan->layout.units[u].label().c_str(),
                 names.empty() ? "(idle)" : names.c_str());
  }
  if (!unplaced.empty()) {
    return report_error(Error(f.file + ": models: no GPU of the node can hold " +
                                  join(unplaced, ", ") + " (memory or pins)",
                              Error::Kind::kInvalidInput));
  }
  nlohmann::json units = nlohmann::json::array();
  RunTotals node;
  double utility = 0;
  for (std::size_t u = 0; u < on.size(); ++u) {
    if (on[u].empty()) continue;
    const GpuUnit& unit = plan->layout.units[u];
    const std::filesystem::path dir = out / unit_dir(unit);
    auto r = run_unit(ctx, f, catalog, w, text, unit, on[u], dir);
    if (!r) return report_error(r.error());
    node.violations += r->violations;
    node.decisions += r->decisions;
    node.shed += r->shed;
    node.intervals = std::max(node.intervals, r->intervals);
    node.infeasible = node.infeasible || r->infeasible;
    utility += r->mean_measured_utility;
    units.push_back(unit_json(w, unit, on[u], dir, *r));
  }
  const nlohmann::json j = {{"workload", w.file},
                            {"device", w.device.name},
                            {"gpus", w.node.gpus()},
                            {"layout", plan->layout.describe()},
                            {"placement", "node planner on the catalog twin, fixed for the run"},
                            {"units", units},
                            {"summary",
                             {{"sla_violations", node.violations},
                              {"decisions", node.decisions},
                              {"shed_model_intervals", node.shed},
                              {"mean_measured_utility", utility}}}};
  if (auto st = write_file_atomic(out / "node.json", j.dump(2) + "\n"); !st.ok()) {
    return report_error(st.error());
  }
  std::fprintf(log,
               "\nnode: %zu unit(s) ran, %zu decisions, mean measured utility %.3f (summed over "
               "the units), %zu measured SLA violation(s) (model-intervals)%s\n",
               units.size(), node.decisions, utility, node.violations,
               node.infeasible ? "; some SLAs could not be met (infeasible lines above)" : "");
  std::fprintf(log, "report: %s (each unit's report.json and report.html under it)\n",
               (out / "node.json").string().c_str());
  if (f.json) std::printf("%s\n", j.dump().c_str());
  return node.violations == 0 ? kExitOk : kExitFailure;
}

const bool registered = register_command({
    "run",
    "corun's main job: profile, fit, then schedule the workload's timeline online and learn",
    [](CLI::App& sub) {
      auto f = std::make_shared<Flags>();
      sub.add_option("file", f->file, "workload YAML (its timeline is run; none = one interval)")
          ->required();
      sub.add_option("--testbed", f->testbed, testbed_help())->capture_default_str();
      sub.add_option("--solver", f->solver, "exhaustive, ga, exact, greedy or hillclimb")
          ->capture_default_str();
      f->surrogate.add(sub);
      f->learning.add(sub, false);
      f->degrade.add(sub);
      sub.add_option("--repeats", f->repeats, "standalone profiling passes")->capture_default_str();
      sub.add_option("--surrogate", f->model,
                     "use this fitted surrogate instead of profiling and fitting");
      sub.add_flag("--no-profile", f->no_profile,
                   "measure nothing beforehand: start from the catalog twin and learn online (as "
                   "`profiling: none` in the workload)");
      sub.add_option("--out", f->out,
                     "directory for dataset.db, surrogate.json, report.json and report.html "
                     "(default out/run/NAME on sim, out/run/NAME-TESTBED on the others: a "
                     "dataset holds one testbed's measurements)");
      sub.add_option("--catalog", f->catalog, kCatalogFlagHelp);
      sub.add_option("--transitions", f->transitions,
                     "aware: a change is made only when its gain over the horizon pays for its "
                     "restart or reload (docs/scheduler.md, Transitions); ignore: every change "
                     "is free to the planner (the testbed charges it all the same)")
          ->capture_default_str();
      sub.add_flag("--json", f->json, "print the report JSON instead of the table");
      sub.add_flag("--quiet", f->quiet, "no progress bars");
      return std::function<int()>([f] {
        auto catalog = load_catalog(f->catalog);
        if (!catalog) return report_error(catalog.error());
        auto w = load_workload_file(f->file, f->catalog);
        if (!w) return report_error(w.error());
        if (auto st = require_no_tools(*w, "run"); !st.ok()) return report_error(st.error());
        auto text = read_file(f->file);
        if (!text) return report_error(text.error());
        if (auto st = check_run_flags(*f); !st.ok()) return report_error(st.error());
        const std::string name = std::filesystem::path(f->file).stem().string();
        // One default directory per testbed: a dataset that mixed testbeds could not be fitted.
        const std::string dir = f->testbed == "sim" ? name : name + "-" + f->testbed;
        const std::filesystem::path out = f->out.empty() ? "out/run/" + dir : f->out;
        const Context ctx = f->surrogate.context();
        if (!w->node.single_gpu()) return run_node(ctx, *f, **catalog, *w, *text, out);
        auto run = run_workload(ctx, *f, **catalog, *w, *text, out, {});
        if (!run) return report_error(run.error());
        return run->violations == 0 ? kExitOk : kExitFailure;
      });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_run
