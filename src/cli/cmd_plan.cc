// corun plan FILE --surrogate MODEL.json --solver S: one planning decision for a workload as it
// is now — the plan, what the surrogate predicts for it, the margins kept, search statistics,
// and with --measure what the testbed observes when the plan runs. A workload that declares a
// recurring tool burst (`tools:`) is planned to hold every SLA during the burst too, and
// --measure runs the plan a second time with the burst on the GPU.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>

#include "command.h"
#include "common.h"
#include "corun/core/strings.h"
#include "corun/export/catalog_record.h"
#include "corun/mapping/declared_burst.h"
#include "corun/plan/objective.h"
#include "corun/plan/solver.h"
#include "corun/runtime/burst_ladder.h"
#include "corun/runtime/infeasibility.h"
#include "corun/runtime/node_plan.h"
#include "corun/runtime/surrogate_source.h"
#include "corun/runtime/testbed_predictor.h"
#include "corun/runtime/twin_source.h"
#include "node_report.h"

namespace corun::cli::cmd_plan {
namespace {

struct Flags : PlanFlags {
  bool measure = false;
  bool ignore_tools = false;
  std::vector<double> tool_shares{std::begin(mapping::kToolGpuShares),
                                  std::end(mapping::kToolGpuShares)};
};

nlohmann::json burst_json(const mapping::DeclaredBurst& b, bool planned_for,
                          const std::vector<double>& tried, bool room) {
  return {{"scenario", b.scenario_file},
          {"calls", b.calls},
          {"room", room},
          {"every_s", b.every_s},
          {"gpu_share", b.gpu_share},
          {"shares_tried", tried},
          {"makespan_ms", b.makespan_ms},
          {"sm_util", b.load.sm_util},
          {"bw_util", b.load.bw_util},
          {"duty", b.duty()},
          {"planned_for", planned_for}};
}

// The most GPUs a capacity answer tries.
constexpr std::size_t kCapacityMaxGpus = 8;

// When the workload does not fit the GPUs it names: how many whole GPUs of its device would
// hold every SLA as predicted (the node planner on the catalog twin, from `from` GPUs up), as
// JSON, and a line for people.
Result<std::pair<nlohmann::json, std::string>> capacity(const Context& ctx, const Workload& w,
                                                        const Flags& f, std::size_t from) {
  TwinSource twin;
  auto solver = make_solver(f.solver);
  if (!solver) return solver.error();
  NodePlanOptions options;
  options.screen = f.screen == "none" ? std::string() : f.screen;
  auto a = gpus_needed(ctx, w, twin, **solver, options, from, kCapacityMaxGpus);
  if (!a) return a.error().wrap("capacity");
  nlohmann::json j = {
      {"device", w.device.name},
      {"gpus_needed", a->gpus == 0 ? nlohmann::json(nullptr) : nlohmann::json(a->gpus)},
      {"tried_up_to", a->tried_up_to},
      {"predictor", twin.describe()}};
  std::string line;
  if (a->gpus == 0) {
    line = "capacity: no node of up to " + std::to_string(a->tried_up_to) + " x " +
           w.device.display_name +
           " holds every SLA as predicted (an SLA no GPU of this device can hold: see the "
           "infeasible lines)";
  } else {
    const ModelsByUnit by = models_by_unit(a->node, a->plan);
    nlohmann::json placement = nlohmann::json::object();
    std::string where;
    for (std::size_t u = 0; u < by.on.size(); ++u) {
      std::vector<std::string> names;
      for (std::size_t m : by.on[u]) {
        names.push_back(w.models[m].name);
        placement[w.models[m].name] = a->plan.layout.units[u].label();
      }
      where += (where.empty() ? "" : "; ") + a->plan.layout.units[u].label() + ": " +
               (names.empty() ? "-" : join(names, ", "));
    }
    j["placement"] = std::move(placement);
    j["predicted_utility"] = a->plan.utility;
    line = "capacity: " + std::to_string(a->gpus) + " x " + w.device.display_name +
           " hold every SLA as predicted (" + where + "; node planner on the " + twin.describe() +
           ": corun plan with gpus: " + std::to_string(a->gpus) + " plans it)";
  }
  return std::make_pair(std::move(j), std::move(line));
}

// A node (several GPUs or MIG slices): where each model runs and its knobs, jointly.
// A model of a node plan whose SLA misses as predicted: its unit's margin, and the excess.
struct NodeBreak {
  std::size_t model = 0;
  std::string unit;
  double margin = 0;  // the unit's latency margin for the model (0.1 = 10 % headroom kept)
  double excess = 0;  // sla_excess with that margin (> 0)
};

// The models of an infeasible node plan that miss an SLA as predicted (with their unit's
// margins): what makes the plan infeasible, besides models left unplaced or memory.
Result<std::vector<NodeBreak>> node_breaks(const Workload& w, const NodePlan& plan,
                                           UnitModels& models) {
  std::vector<NodeBreak> out;
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    const auto u = plan.assignment[m];
    if (u == kNotPlaced || plan.config[m] == kAbsent) continue;
    const GpuUnit& unit = plan.layout.units[static_cast<std::size_t>(u)];
    auto um = models.for_unit(unit);
    if (!um) return um.error();
    const double margin = m < (*um)->margins.size() ? (*um)->margins[m] : 0.0;
    const double excess = sla_excess(w.models[m], plan.predicted[m], Margin::uniform(margin));
    if (excess > 0) out.push_back({m, unit.label(), margin, excess});
  }
  return out;
}

int plan_node(const Context& ctx, const Flags& f, const Workload& w) {
  auto session = make_node_session(ctx, w, f);
  if (!session) return report_error(session.error());
  auto plan = (*session)->planner->plan();
  if (!plan) return report_error(plan.error());
  auto breaks = node_breaks(w, *plan, *(*session)->models);
  if (!breaks) return report_error(breaks.error());
  std::optional<NodeOutcome> measured;
  if (f.measure) {
    auto testbed = make_testbed(f.testbed);
    if (!testbed) return report_error(testbed.error());
    measured =
        measure_node_plan(Context{.seed = f.seed}, w, *plan, **testbed, MeasureOptions(f.window_s));
  }
  const NodeOutcome* m = measured ? &*measured : nullptr;
  std::optional<std::pair<nlohmann::json, std::string>> more;
  if (!plan->feasible && w.node.gpus() < kCapacityMaxGpus) {
    auto c = capacity(ctx, w, f, w.node.gpus() + 1);
    if (!c) return report_error(c.error());
    more = std::move(*c);
  }
  if (f.json) {
    nlohmann::json out = node_plan_json(w, *plan, m);
    if (more) out["capacity"] = more->first;
    out["workload"] = w.file;
    out["device"] = w.device.name;
    out["gpus"] = w.node.gpus();
    out["layouts"] = w.node.layout_count();
    out["predictor"] = (*session)->sources.describe;
    // Already loaded for the workload (load_catalog caches it): the record lets `corun export`
    // read this plan against the same catalog overlay.
    auto catalog = load_catalog(f.catalog);
    if (!catalog) return report_error(catalog.error());
    out["catalog"] = exporting::catalog_record_json(**catalog);
    nlohmann::json jb = nlohmann::json::array();
    for (const auto& b : *breaks) {
      jb.push_back({{"model", w.models[b.model].name},
                    {"unit", b.unit},
                    {"margin", b.margin},
                    {"excess", b.excess}});
    }
    out["breaks"] = std::move(jb);
    if (measured) out["measured"]["testbed"] = f.testbed;
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("corun plan: %s on %zu x %s (%s), %s, predicted utility %.3f\n", w.file.c_str(),
                w.node.gpus(), w.device.display_name.c_str(), plan->layout.describe().c_str(),
                plan->feasible ? "feasible" : "INFEASIBLE (best plan found shown)", plan->utility);
    std::printf("%s", node_plan_text(w, *plan, m).c_str());
    for (const auto& b : *breaks) {
      std::printf(
          "breaks: %s on %s misses an SLA as predicted with its margin of %.0f %% (excess "
          "%.3f)\n",
          w.models[b.model].name.c_str(), b.unit.c_str(), 100 * b.margin, b.excess);
    }
    std::printf(
        "search: %llu unit plans solved (%llu more screened), %llu reused, %.0f ms; "
        "predictions: %s\n",
        static_cast<unsigned long long>(plan->subplans),
        static_cast<unsigned long long>(plan->screened),
        static_cast<unsigned long long>(plan->cache_hits), plan->elapsed_ms,
        (*session)->sources.describe.c_str());
    if (measured) {
      std::printf("measured on %s: utility %.3f, %zu SLA violation(s)\n", f.testbed.c_str(),
                  measured->measured_utility, measured->violations);
    }
    if (more) std::printf("%s\n", more->second.c_str());
  }
  if (!plan->feasible) return kExitFailure;
  return measured && measured->violations > 0 ? kExitFailure : kExitOk;
}

/// Checks --tool-shares: each a share of the SMs in (0, 1], and at least one.
Status check_tool_shares(const Flags& f) {
  for (double share : f.tool_shares) {
    if (!(share > 0 && share <= 1)) {
      return Error(
          "--tool-shares: " + format_number(share) + " is not a share of the SMs in (0, 1]",
          Error::Kind::kInvalidInput);
    }
  }
  if (f.tool_shares.empty()) {
    return Error("--tool-shares: needs at least one share", Error::Kind::kInvalidInput);
  }
  return {};
}

/// The tools' SM shares the ladder tries, largest first; {1} without a burst to plan for.
std::vector<double> ladder_shares(const Flags& f, const Workload& w) {
  std::vector<double> shares = f.tool_shares;
  std::sort(shares.begin(), shares.end(), std::greater<>());
  if (!w.tools || f.ignore_tools) shares = {1.0};
  return shares;
}

/// The burst at every share the ladder may try (shares[i] <-> bursts[i]); none when the
/// workload declares no tools.
Result<std::vector<mapping::DeclaredBurst>> load_bursts(const Flags& f, const Workload& w,
                                                        const std::vector<double>& shares) {
  std::vector<mapping::DeclaredBurst> bursts;
  if (w.tools) {
    auto catalog = load_catalog(f.catalog);
    if (!catalog) return catalog.error();
    auto tools = mapping::tool_catalog(**catalog);
    if (!tools) return tools.error();
    auto b = mapping::declared_bursts(w, *tools, shares);
    if (!b) return b.error();
    bursts = std::move(*b);
  }
  return bursts;
}

// What plans one GPU: the fitted surrogate, the solver, and the testbed that re-profiles
// changed demands and measures the plan.
struct GpuPlanner {
  surrogate::Surrogate s;
  std::unique_ptr<Solver> solver;
  std::unique_ptr<Testbed> testbed;
};

/// Loads --surrogate (required to plan one GPU), the solver and the testbed; the surrogate
/// must fit the workload.
Result<GpuPlanner> load_gpu_planner(const Flags& f, const Workload& w) {
  if (f.model.empty()) {
    return Error("--surrogate is required to plan one GPU (corun fit writes one)",
                 Error::Kind::kInvalidInput);
  }
  auto s = surrogate::Surrogate::load(f.model);
  if (!s) return s.error();
  auto solver = make_solver(f.solver);
  if (!solver) return solver.error();
  auto testbed = make_testbed(f.testbed);
  if (!testbed) return testbed.error();
  if (auto st = s->check_workload(w); !st.ok()) {
    return st.error().wrap(f.model + " does not fit " + f.file);
  }
  return GpuPlanner{std::move(*s), std::move(*solver), std::move(*testbed)};
}

// What the testbed measured of the plan (--measure): alone, and during the tool burst.
struct PlanMeasurements {
  std::optional<Measurement> measured, during;
};

/// Runs the chosen plan on the testbed with --measure: once, and with a declared burst once
/// more while it runs.
PlanMeasurements measure_plan(const Flags& f, const Workload& w, const Testbed& testbed,
                              const std::vector<mapping::DeclaredBurst>& bursts,
                              const BurstAttempt& chosen) {
  PlanMeasurements out;
  const PlanResult* r = &chosen.degraded.result;
  if (f.measure) {
    out.measured =
        testbed.measure(Context{.seed = f.seed}, w, r->config, MeasureOptions(f.window_s));
    if (chosen.burst) {
      // Same seed: only the tools' load differs from the steady measurement.
      Conditions c;
      c.interference = bursts[*chosen.burst].interference();
      out.during =
          testbed.measure(Context{.seed = f.seed}, w, r->config, MeasureOptions(f.window_s, c));
    }
  }
  return out;
}

// Each model's part of the plan: its JSON, its table row, and what the measurements scored.
struct ModelRows {
  nlohmann::json models = nlohmann::json::array();
  Table t;
  double measured_utility = 0, during_utility = 0;
  std::size_t breaches = 0, during_breaches = 0;
};

/// Each model's configuration, prediction, margin and SLA, with what each measurement saw.
ModelRows model_rows(const Workload& w, const BurstAttempt& chosen, const PlanMeasurements& pm) {
  const PlanProblem& problem = *chosen.problem;
  const std::vector<double>& margins = chosen.margins;
  const PlanResult* r = &chosen.degraded.result;
  const std::optional<Measurement>& measured = pm.measured;
  const std::optional<Measurement>& during = pm.during;
  std::vector<std::string> header = {"model", "config", "predicted", "margin", "SLA"};
  if (measured) header.insert(header.end(), {"measured", "status"});
  if (during) header.insert(header.end(), {"during tools", "status"});
  ModelRows out{nlohmann::json::array(), Table(header)};
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    const ModelSpec& spec = w.models[m];
    nlohmann::json jm = {{"name", spec.name}, {"active", spec.active}};
    if (r->config[m] == kAbsent) {
      jm["config"] = nullptr;
      out.models.push_back(std::move(jm));
      std::vector<std::string> row = {spec.name, "(not running)", "-", "-", "-"};
      row.resize(header.size());
      out.t.add(row);
      continue;
    }
    const auto l = r->config[m];
    jm["config"] = spec.describe(static_cast<std::size_t>(l));
    jm["local_index"] = l;
    jm["predicted"] = predicted_json(spec, r->predicted[m]);
    jm["margin"] = margins[m];
    std::vector<std::string> row = {spec.name, spec.describe(static_cast<std::size_t>(l)),
                                    predicted_headline(spec, r->predicted[m]),
                                    "+" + fixed(100 * margins[m], 0) + "%", sla_text(spec)};
    // One measurement of model m: its JSON under `key`, its table cells, its verdict.
    auto judge = [&](const Measurement& x, const std::string& key, double& utility,
                     std::size_t& count) {
      const ModelMetrics* mm = nullptr;
      for (const auto& y : x.models) mm = y.model == m ? &y : mm;
      if (mm == nullptr) {
        row.insert(row.end(), {"", ""});
        return;
      }
      const bool ok = measured_meets_sla(spec, *mm);
      count += ok ? 0 : 1;
      if (mm->ok()) {
        utility += problem.model_utility(m, l, as_predicted(*mm));
        jm[key] = predicted_json(spec, as_predicted(*mm));
        row.push_back(predicted_headline(spec, as_predicted(*mm)));
      } else {
        jm[key] = {{"error", mm->error}};
        row.push_back(mm->error);
      }
      jm[key == "measured" ? "meets_sla" : "meets_sla_during_tools"] = ok;
      row.push_back(ok ? "ok" : "BREACH");
    };
    if (measured) judge(*measured, "measured", out.measured_utility, out.breaches);
    if (during) {
      judge(*during, "measured_during_tools", out.during_utility, out.during_breaches);
    }
    out.models.push_back(std::move(jm));
    out.t.add(row);
  }
  return out;
}

// What the reports of a one-GPU plan read.
struct GpuPlanView {
  const Context& ctx;  // the verb's: --seed and --threads
  const Flags& f;
  const Workload& w;
  const BurstLadder& ladder;
  const std::vector<mapping::DeclaredBurst>& bursts;  // bursts[i]: the burst at shares[i]
  const PlanMeasurements& pm;
  const ModelRows& rows;
  const std::vector<std::string>& why;  // why the plan is infeasible, one line each
};

// The plan as JSON and, when it is infeasible, the capacity answer (JSON and a line).
struct PlanReport {
  nlohmann::json out;
  std::optional<std::pair<nlohmann::json, std::string>> more;
};

/// The plan's JSON: the plan, its search, the catalog it was made with, the tool burst, the
/// capacity answer when infeasible, and the measurements.
Result<PlanReport> plan_report(const GpuPlanView& v) {
  const BurstAttempt& chosen = *v.ladder.chosen;
  const PlanProblem& problem = *chosen.problem;
  const PlanResult* r = &chosen.degraded.result;
  const std::optional<Measurement>& measured = v.pm.measured;
  PlanReport rep;
  nlohmann::json& out = rep.out;
  out = {{"workload", v.w.file},
         {"device", v.w.device.name},
         {"surrogate", v.f.model},
         {"solver", r->solver},
         {"feasible", chosen.feasible()},
         {"infeasible", v.why},
         {"predicted_utility", r->utility},
         {"models", v.rows.models},
         {"search",
          {{"evaluated", r->stats.evaluated},
           {"nodes", r->stats.nodes},
           {"elapsed_ms", r->stats.elapsed_ms},
           {"proved_optimal", r->stats.proved_optimal},
           {"candidates", count_json(problem.candidate_count())},
           {"candidates_exact", problem.candidate_count().exact()}}},
         {"standalone_remeasured", chosen.source->measurements_taken()}};
  {
    auto catalog = load_catalog(v.f.catalog);  // cached: the workload's catalog
    if (!catalog) return catalog.error();
    out["catalog"] = exporting::catalog_record_json(**catalog);
  }
  if (chosen.burst) {
    out["tools"] =
        burst_json(v.bursts[*chosen.burst], !v.f.ignore_tools, v.ladder.tried, v.ladder.room);
  }
  if (!chosen.feasible()) {
    auto c = capacity(v.ctx, v.w, v.f, 2);
    if (!c) return c.error();
    out["capacity"] = c->first;
    rep.more = std::move(*c);
  }
  if (measured) {
    out["measured"] = {{"testbed", measured->testbed},
                       {"utility", v.rows.measured_utility},
                       {"sla_violations", v.rows.breaches},
                       {"gpu", to_json(*measured)["gpu"]}};
  }
  if (v.pm.during) {
    out["measured"]["during_tools"] = {{"utility", v.rows.during_utility},
                                       {"sla_violations", v.rows.during_breaches}};
  }
  return rep;
}

/// Prints the declared tool burst and whether the plan leaves it room.
void print_burst(const GpuPlanView& v) {
  const mapping::DeclaredBurst* burst = &v.bursts[*v.ladder.chosen->burst];
  std::printf(
      "tools: %s, %zu calls every %s s: %.0f ms on the GPU at SM %.2f, "
      "bandwidth %.2f (%.1f %% of the time), %s\n",
      burst->scenario_file.c_str(), burst->calls, format_number(burst->every_s).c_str(),
      burst->makespan_ms, burst->load.sm_util, burst->load.bw_util, 100 * burst->duty(),
      v.f.ignore_tools ? "NOT planned for (--ignore-tools)"
                       : "planned for (the predictions above include it)");
  if (!v.f.ignore_tools) {
    std::string list;
    for (double x : v.ladder.tried) list += (list.empty() ? "" : ", ") + format_number(x);
    std::printf(
        "tools' SM share: %s (MPS active-thread percentage %.0f for the tool "
        "server; shares tried: %s): %s\n",
        format_number(burst->gpu_share).c_str(), 100 * burst->gpu_share, list.c_str(),
        v.ladder.room ? "room left: the burst gives up no SLA the steady plan holds"
                      : "NO ROOM: at every share tried the burst breaks an SLA the "
                        "steady plan holds");
  }
}

/// Prints the plan for people: its verdict, why it is infeasible, the capacity answer, the
/// tool burst, the models' table, the search and the measurements.
void print_plan_text(const GpuPlanView& v, const PlanReport& rep) {
  const BurstAttempt& chosen = *v.ladder.chosen;
  const PlanProblem& problem = *chosen.problem;
  const PlanResult* r = &chosen.degraded.result;
  const std::optional<Measurement>& measured = v.pm.measured;
  std::printf("corun plan: %s on %s, solver %s: %s, predicted utility %.3f\n", v.w.file.c_str(),
              v.w.device.display_name.c_str(), r->solver.c_str(),
              chosen.feasible() ? "feasible" : "INFEASIBLE (degraded plan shown)", r->utility);
  for (const auto& line : v.why) std::printf("infeasible: %s\n", line.c_str());
  if (rep.more) std::printf("%s\n", rep.more->second.c_str());
  if (chosen.burst) print_burst(v);
  std::printf("%s", v.rows.t.render().c_str());
  std::printf("search: %llu of %s candidates evaluated in %.1f ms%s\n",
              static_cast<unsigned long long>(r->stats.evaluated),
              problem.candidate_count().to_string().c_str(), r->stats.elapsed_ms,
              r->stats.proved_optimal ? " (proved optimal)" : "");
  if (measured) {
    std::printf("measured on %s: utility %.3f, %zu SLA violation(s)\n", measured->testbed.c_str(),
                v.rows.measured_utility, v.rows.breaches);
  }
  if (v.pm.during) {
    std::printf("measured during the tool burst: utility %.3f, %zu SLA violation(s)\n",
                v.rows.during_utility, v.rows.during_breaches);
  }
}

/// One GPU: the plan the surrogate predicts best, leaving a declared tool burst room when it
/// can, with what the testbed measures of it under --measure.
int plan_gpu(const Context& ctx, const Flags& f, const Workload& w) {
  if (auto st = check_tool_shares(f); !st.ok()) return report_error(st.error());
  // Without a burst to plan for, one decision. With one, the tools' SM share goes down
  // the ladder until a plan holds every SLA during the burst (the largest such share
  // leaves the tools the most GPU); the last attempt stands when none does.
  const std::vector<double> shares = ladder_shares(f, w);
  // The burst at every share the ladder may try, read before anything else is loaded: a bad
  // scenario reference is bad input.
  auto bursts = load_bursts(f, w, shares);
  if (!bursts) return report_error(bursts.error());
  auto planner = load_gpu_planner(f, w);
  if (!planner) return report_error(planner.error());
  std::vector<bool> active;
  for (const auto& m : w.models) active.push_back(m.active);
  std::vector<Interference> loads;
  for (const auto& b : *bursts) loads.push_back(b.interference());
  const BurstLadderInputs in{ctx,     w, planner->s, *planner->solver, *planner->testbed,
                             active, loads, f.window_s};
  const bool plan_burst = w.tools && !f.ignore_tools;
  auto ladder = climb_burst_ladder(in, shares, plan_burst);
  if (!ladder) return report_error(ladder.error());
  const BurstAttempt& chosen = *ladder->chosen;
  std::vector<std::string> why;
  for (const auto& i : chosen.degraded.why) why.push_back(i.message());

  const PlanMeasurements pm = measure_plan(f, w, *planner->testbed, *bursts, chosen);
  const ModelRows rows = model_rows(w, chosen, pm);
  const GpuPlanView view{ctx, f, w, *ladder, *bursts, pm, rows, why};
  auto rep = plan_report(view);
  if (!rep) return report_error(rep.error());
  if (f.json) {
    std::printf("%s\n", rep->out.dump().c_str());
  } else {
    print_plan_text(view, *rep);
  }
  if (!chosen.feasible()) return kExitFailure;
  return rows.breaches == 0 && rows.during_breaches == 0 ? kExitOk : kExitFailure;
}

const bool registered = register_command({
    "plan",
    "Choose every model's configuration (and on a node its GPU or MIG slice) with a solver",
    [](CLI::App& sub) {
      auto f = std::make_shared<Flags>();
      sub.add_option("file", f->file, "workload YAML")->required();
      sub.add_option("--surrogate", f->model,
                     "surrogate model file written by corun fit (required for one GPU; a node "
                     "of several GPUs or MIG slices plans with the catalog twin without one)");
      sub.add_option("--solver", f->solver, "exhaustive, ga, exact, greedy or hillclimb")
          ->capture_default_str();
      add_seed_flag(sub, f->seed, "the solver and the measurement");
      add_node_search_flags(sub, *f);
      add_threads_flag(sub, f->threads, "the solver");
      sub.add_option("--testbed", f->testbed,
                     "testbed for re-profiling changed demands and for --measure")
          ->capture_default_str();
      sub.add_option("--window", f->window_s, "measurement window in seconds")
          ->capture_default_str();
      sub.add_flag("--measure", f->measure,
                   "also run the plan on the testbed and report it (with a declared tool burst: "
                   "also while the burst runs)");
      sub.add_option("--tool-shares", f->tool_shares,
                     "SM shares the declared tool burst may be confined to (MPS), tried largest "
                     "first until a plan holds every SLA during the burst")
          ->delimiter(',')
          ->capture_default_str();
      sub.add_flag("--ignore-tools", f->ignore_tools,
                   "plan as if the workload declared no tool burst (--measure still measures "
                   "the plan during it): what leaving room for the burst costs and buys");
      sub.add_option("--catalog", f->catalog, kCatalogFlagHelp);
      sub.add_flag("--json", f->json, "print JSON");
      return std::function<int()>([f] {
        auto w = load_workload_file(f->file, f->catalog);
        if (!w) return report_error(w.error());
        const Context ctx = f->context();
        if (!w->node.single_gpu()) return plan_node(ctx, *f, *w);
        return plan_gpu(ctx, *f, *w);
      });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_plan
