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
#include "corun/runtime/infeasibility.h"
#include "corun/runtime/node_plan.h"
#include "corun/runtime/surrogate_source.h"
#include "corun/runtime/testbed_predictor.h"
#include "corun/runtime/twin_source.h"
#include "corun/surrogate/cotenant.h"
#include "node_report.h"

namespace corun::cli {
namespace {

struct Flags : PlanFlags {
  bool measure = false;
  bool ignore_tools = false;
  std::vector<double> tool_shares{std::begin(mapping::kToolGpuShares),
                                  std::end(mapping::kToolGpuShares)};
};

// One planning decision and everything it refers to (the problem holds references).
struct Attempt {
  std::optional<mapping::DeclaredBurst> burst;
  std::unique_ptr<SurrogateSource> source;
  std::unique_ptr<Predictor> predictor;
  std::vector<double> margins;
  std::unique_ptr<PlanProblem> problem;
  DegradedPlan degraded;

  [[nodiscard]] bool feasible() const { return degraded.result.feasible && degraded.why.empty(); }
};

// Whether a plan made with the burst in the predictions leaves the burst room: every SLA holds
// at its margin; or, when some cannot even without the burst (the steady plan gives them up,
// `steady`), the burst gives up no other, and each given-up SLA still holds at the point
// prediction (no margin) during the burst: the burst costs nothing the steady plan had.
bool leaves_room(const Workload& w, const Attempt& a, const Attempt& steady) {
  if (a.feasible()) return true;
  if (!a.degraded.result.feasible) return false;
  const PlanResult& r = a.degraded.result;
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    const bool given_up = m < a.degraded.best_effort.size() && a.degraded.best_effort[m];
    if (!given_up || r.config[m] == kAbsent) continue;
    const bool steady_gave_up =
        m < steady.degraded.best_effort.size() && steady.degraded.best_effort[m];
    if (!steady_gave_up || !meets_sla(w.models[m], r.predicted[m], Margin{})) return false;
  }
  return true;
}

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
Result<std::pair<nlohmann::json, std::string>> capacity(const Workload& w, const Flags& f,
                                                        std::size_t from) {
  TwinSource twin;
  auto solver = make_solver(f.solver);
  if (!solver) return solver.error();
  NodePlanOptions options{{f.seed, f.threads, std::nullopt}};
  options.screen = f.screen == "none" ? std::string() : f.screen;
  auto a = gpus_needed(w, twin, **solver, options, from, kCapacityMaxGpus);
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

int plan_node(const Flags& f, const Workload& w) {
  auto session = make_node_session(w, f);
  if (!session) return report_error(session.error());
  auto plan = (*session)->planner->plan();
  if (!plan) return report_error(plan.error());
  auto breaks = node_breaks(w, *plan, *(*session)->models);
  if (!breaks) return report_error(breaks.error());
  std::optional<NodeOutcome> measured;
  if (f.measure) {
    auto testbed = make_testbed(f.testbed);
    if (!testbed) return report_error(testbed.error());
    measured = measure_node_plan(w, *plan, **testbed, {f.window_s, f.seed});
  }
  const NodeOutcome* m = measured ? &*measured : nullptr;
  std::optional<std::pair<nlohmann::json, std::string>> more;
  if (!plan->feasible && w.node.gpus() < kCapacityMaxGpus) {
    auto c = capacity(w, f, w.node.gpus() + 1);
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
        if (!w->node.single_gpu()) return plan_node(*f, *w);
        for (double share : f->tool_shares) {
          if (!(share > 0 && share <= 1)) {
            return report_error(Error(
                "--tool-shares: " + format_number(share) + " is not a share of the SMs in (0, 1]",
                Error::Kind::kInvalidInput));
          }
        }
        if (f->tool_shares.empty()) {
          return report_error(
              Error("--tool-shares: needs at least one share", Error::Kind::kInvalidInput));
        }
        // Without a burst to plan for, one decision. With one, the tools' SM share goes down
        // the ladder until a plan holds every SLA during the burst (the largest such share
        // leaves the tools the most GPU); the last attempt stands when none does.
        std::vector<double> shares = f->tool_shares;
        std::sort(shares.begin(), shares.end(), std::greater<>());
        if (!w->tools || f->ignore_tools) shares = {1.0};
        // The burst at every share the ladder may try (shares[i] <-> bursts[i]), read before
        // anything else is loaded: a bad scenario reference is bad input.
        std::vector<mapping::DeclaredBurst> bursts;
        if (w->tools) {
          auto catalog = load_catalog(f->catalog);
          if (!catalog) return report_error(catalog.error());
          auto tools = mapping::tool_catalog(**catalog);
          if (!tools) return report_error(tools.error());
          auto b = mapping::declared_bursts(*w, *tools, shares);
          if (!b) return report_error(b.error());
          bursts = std::move(*b);
        }
        if (f->model.empty()) {
          return report_error(
              Error("--surrogate is required to plan one GPU (corun fit writes one)",
                    Error::Kind::kInvalidInput));
        }
        auto s = surrogate::Surrogate::load(f->model);
        if (!s) return report_error(s.error());
        auto solver = make_solver(f->solver);
        if (!solver) return report_error(solver.error());
        auto testbed = make_testbed(f->testbed);
        if (!testbed) return report_error(testbed.error());
        if (auto st = s->check_workload(*w); !st.ok()) {
          return report_error(st.error().wrap(f->model + " does not fit " + f->file));
        }
        std::vector<bool> active;
        for (const auto& m : w->models) active.push_back(m.active);
        // One decision: with the burst at shares[i] of the SMs in the predictions (`planned`),
        // or without it.
        auto attempt = [&](std::size_t i, bool planned) -> Result<std::unique_ptr<Attempt>> {
          auto a = std::make_unique<Attempt>();
          SurrogateSourceOptions so{3, f->window_s, f->seed};
          if (w->tools) {
            a->burst = bursts[i];
            if (planned) {
              so.burst = surrogate::cotenant_totals(w->device, bursts[i].interference());
            }
          }
          a->source = std::make_unique<SurrogateSource>(*s, **testbed, so);
          auto predictor = a->source->predictor_for(*w);
          if (!predictor) return predictor.error();
          a->predictor = std::move(*predictor);
          a->margins = a->source->margins(*w);
          a->problem = std::make_unique<PlanProblem>(*w, active, *a->predictor, a->margins);
          auto degraded =
              solve_degrading(*a->problem, **solver, {f->seed, f->threads, std::nullopt});
          if (!degraded) return degraded.error();
          a->degraded = std::move(*degraded);
          return a;
        };
        const bool plan_burst = w->tools && !f->ignore_tools;
        std::unique_ptr<Attempt> steady;  // solved only when a burst plan misses an SLA
        std::vector<double> tried;
        std::unique_ptr<Attempt> chosen;
        bool room = false;
        for (std::size_t i = 0; i < shares.size(); ++i) {
          auto a = attempt(i, plan_burst);
          if (!a) return report_error(a.error());
          tried.push_back(shares[i]);
          chosen = std::move(*a);
          if (!plan_burst) break;
          if (!chosen->feasible() && !steady) {
            auto s0 = attempt(0, false);
            if (!s0) return report_error(s0.error());
            steady = std::move(*s0);
          }
          room = chosen->feasible() || leaves_room(*w, *chosen, *steady);
          if (room) break;
        }
        const std::optional<mapping::DeclaredBurst>& burst = chosen->burst;
        const SurrogateSource& source = *chosen->source;
        const PlanProblem& problem = *chosen->problem;
        const std::vector<double>& margins = chosen->margins;
        const PlanResult* r = &chosen->degraded.result;
        std::vector<std::string> why;
        for (const auto& i : chosen->degraded.why) why.push_back(i.message());

        std::optional<Measurement> measured, during;
        if (f->measure) {
          measured = (*testbed)->measure(*w, r->config, {f->window_s, f->seed});
          if (burst) {
            // Same seed: only the tools' load differs from the steady measurement.
            Conditions c;
            c.interference = burst->interference();
            during = (*testbed)->measure(*w, r->config, MeasureOptions(f->window_s, f->seed, c));
          }
        }
        double measured_utility = 0, during_utility = 0;
        std::size_t breaches = 0, during_breaches = 0;
        nlohmann::json models = nlohmann::json::array();
        std::vector<std::string> header = {"model", "config", "predicted", "margin", "SLA"};
        if (measured) header.insert(header.end(), {"measured", "status"});
        if (during) header.insert(header.end(), {"during tools", "status"});
        Table t(header);
        for (std::size_t m = 0; m < w->models.size(); ++m) {
          const ModelSpec& spec = w->models[m];
          nlohmann::json jm = {{"name", spec.name}, {"active", spec.active}};
          if (r->config[m] == kAbsent) {
            jm["config"] = nullptr;
            models.push_back(std::move(jm));
            std::vector<std::string> row = {spec.name, "(not running)", "-", "-", "-"};
            row.resize(header.size());
            t.add(row);
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
          if (measured) judge(*measured, "measured", measured_utility, breaches);
          if (during) judge(*during, "measured_during_tools", during_utility, during_breaches);
          models.push_back(std::move(jm));
          t.add(row);
        }
        nlohmann::json out = {{"workload", w->file},
                              {"device", w->device.name},
                              {"surrogate", f->model},
                              {"solver", r->solver},
                              {"feasible", chosen->feasible()},
                              {"infeasible", why},
                              {"predicted_utility", r->utility},
                              {"models", models},
                              {"search",
                               {{"evaluated", r->stats.evaluated},
                                {"nodes", r->stats.nodes},
                                {"elapsed_ms", r->stats.elapsed_ms},
                                {"proved_optimal", r->stats.proved_optimal},
                                {"candidates", count_json(problem.candidate_count())},
                                {"candidates_exact", problem.candidate_count().exact()}}},
                              {"standalone_remeasured", source.measurements_taken()}};
        {
          auto catalog = load_catalog(f->catalog);  // cached: the workload's catalog
          if (!catalog) return report_error(catalog.error());
          out["catalog"] = exporting::catalog_record_json(**catalog);
        }
        if (burst) out["tools"] = burst_json(*burst, !f->ignore_tools, tried, room);
        std::optional<std::pair<nlohmann::json, std::string>> more;
        if (!chosen->feasible()) {
          auto c = capacity(*w, *f, 2);
          if (!c) return report_error(c.error());
          out["capacity"] = c->first;
          more = std::move(*c);
        }
        if (measured) {
          out["measured"] = {{"testbed", measured->testbed},
                             {"utility", measured_utility},
                             {"sla_violations", breaches},
                             {"gpu", to_json(*measured)["gpu"]}};
        }
        if (during) {
          out["measured"]["during_tools"] = {{"utility", during_utility},
                                             {"sla_violations", during_breaches}};
        }
        if (f->json) {
          std::printf("%s\n", out.dump().c_str());
        } else {
          std::printf("corun plan: %s on %s, solver %s: %s, predicted utility %.3f\n",
                      w->file.c_str(), w->device.display_name.c_str(), r->solver.c_str(),
                      chosen->feasible() ? "feasible" : "INFEASIBLE (degraded plan shown)",
                      r->utility);
          for (const auto& line : why) std::printf("infeasible: %s\n", line.c_str());
          if (more) std::printf("%s\n", more->second.c_str());
          if (burst) {
            std::printf(
                "tools: %s, %zu calls every %s s: %.0f ms on the GPU at SM %.2f, "
                "bandwidth %.2f (%.1f %% of the time), %s\n",
                burst->scenario_file.c_str(), burst->calls, format_number(burst->every_s).c_str(),
                burst->makespan_ms, burst->load.sm_util, burst->load.bw_util, 100 * burst->duty(),
                f->ignore_tools ? "NOT planned for (--ignore-tools)"
                                : "planned for (the predictions above include it)");
            if (!f->ignore_tools) {
              std::string list;
              for (double x : tried) list += (list.empty() ? "" : ", ") + format_number(x);
              std::printf(
                  "tools' SM share: %s (MPS active-thread percentage %.0f for the tool "
                  "server; shares tried: %s): %s\n",
                  format_number(burst->gpu_share).c_str(), 100 * burst->gpu_share, list.c_str(),
                  room ? "room left: the burst gives up no SLA the steady plan holds"
                       : "NO ROOM: at every share tried the burst breaks an SLA the "
                         "steady plan holds");
            }
          }
          std::printf("%s", t.render().c_str());
          std::printf("search: %llu of %s candidates evaluated in %.1f ms%s\n",
                      static_cast<unsigned long long>(r->stats.evaluated),
                      problem.candidate_count().to_string().c_str(), r->stats.elapsed_ms,
                      r->stats.proved_optimal ? " (proved optimal)" : "");
          if (measured) {
            std::printf("measured on %s: utility %.3f, %zu SLA violation(s)\n",
                        measured->testbed.c_str(), measured_utility, breaches);
          }
          if (during) {
            std::printf("measured during the tool burst: utility %.3f, %zu SLA violation(s)\n",
                        during_utility, during_breaches);
          }
        }
        if (!chosen->feasible()) return kExitFailure;
        return breaches == 0 && during_breaches == 0 ? kExitOk : kExitFailure;
      });
    },
});

}  // namespace
}  // namespace corun::cli
