// corun plan FILE --surrogate MODEL.json --solver S: one planning decision for a workload as it
// is now — the plan, what the surrogate predicts for it, the margins kept, search statistics,
// and with --measure what the testbed observes when the plan runs.
#include <cstdio>

#include "command.h"
#include "common.h"
#include "node_report.h"
#include "corun/plan/objective.h"
#include "corun/plan/solver.h"
#include "corun/runtime/infeasibility.h"
#include "corun/runtime/node_plan.h"
#include "corun/runtime/testbed_predictor.h"
#include "corun/runtime/surrogate_source.h"

namespace corun::cli {
namespace {

struct Flags : PlanFlags {
  bool measure = false;
};

// A node (several GPUs or MIG slices): where each model runs and its knobs, jointly.
int plan_node(const Flags& f, const Workload& w) {
  auto session = make_node_session(w, f);
  if (!session) return report_error(session.error());
  auto plan = (*session)->planner->plan();
  if (!plan) return report_error(plan.error());
  std::optional<NodeOutcome> measured;
  if (f.measure) {
    auto testbed = make_testbed(f.testbed);
    if (!testbed) return report_error(testbed.error());
    measured = measure_node_plan(w, *plan, **testbed, {f.window_s, f.seed});
  }
  const NodeOutcome* m = measured ? &*measured : nullptr;
  if (f.json) {
    nlohmann::json out = node_plan_json(w, *plan, m);
    out["workload"] = w.file;
    out["device"] = w.device.name;
    out["gpus"] = w.node.gpus();
    out["layouts"] = w.node.layout_count();
    out["predictor"] = (*session)->sources.describe;
    if (measured) out["measured"]["testbed"] = f.testbed;
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("corun plan: %s on %zu x %s (%s), %s, predicted utility %.3f\n",
                w.file.c_str(), w.node.gpus(), w.device.display_name.c_str(),
                plan->layout.describe().c_str(),
                plan->feasible ? "feasible" : "INFEASIBLE (best plan found shown)", plan->utility);
    std::printf("%s", node_plan_text(w, *plan, m).c_str());
    std::printf("search: %llu unit plans solved, %llu reused, %.0f ms; predictions: %s\n",
                static_cast<unsigned long long>(plan->subplans),
                static_cast<unsigned long long>(plan->cache_hits), plan->elapsed_ms,
                (*session)->sources.describe.c_str());
    if (measured) {
      std::printf("measured on %s: utility %.3f, %zu SLA violation(s)\n", f.testbed.c_str(),
                  measured->measured_utility, measured->violations);
    }
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
      sub.add_option("--seed", f->seed, "seed of the solver and of the measurement")
          ->capture_default_str();
      sub.add_option("--threads", f->threads, "solver threads")->capture_default_str();
      sub.add_option("--testbed", f->testbed,
                     "testbed for re-profiling changed demands and for --measure")
          ->capture_default_str();
      sub.add_option("--window", f->window_s, "measurement window in seconds")
          ->capture_default_str();
      sub.add_flag("--measure", f->measure, "also run the plan on the testbed and report it");
      sub.add_option("--catalog", f->catalog, "catalog directory (default: built in)");
      sub.add_flag("--json", f->json, "print JSON");
      return std::function<int()>([f] {
        auto w = load_workload_file(f->file, f->catalog);
        if (!w) return report_error(w.error());
        if (!w->node.single_gpu()) return plan_node(*f, *w);
        if (f->model.empty()) {
          return report_error(Error("--surrogate is required to plan one GPU (corun fit writes one)",
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
        SurrogateSource source(std::move(*s), **testbed, {3, f->window_s, f->seed});
        auto predictor = source.predictor_for(*w);
        if (!predictor) return report_error(predictor.error());
        std::vector<bool> active;
        for (const auto& m : w->models) active.push_back(m.active);
        const std::vector<double> margins = source.margins(*w);
        PlanProblem problem(*w, active, **predictor, margins);
        auto degraded = solve_degrading(problem, **solver, {f->seed, f->threads, std::nullopt});
        if (!degraded) return report_error(degraded.error());
        const PlanResult* r = &degraded->result;
        std::vector<std::string> why;
        for (const auto& i : degraded->why) why.push_back(i.message());

        std::optional<Measurement> measured;
        if (f->measure) measured = (*testbed)->measure(*w, r->config, {f->window_s, f->seed});
        double measured_utility = 0;
        std::size_t breaches = 0;
        nlohmann::json models = nlohmann::json::array();
        Table t({"model", "config", "predicted", "margin", "SLA", measured ? "measured" : "",
                 measured ? "status" : ""});
        for (std::size_t m = 0; m < w->models.size(); ++m) {
          const ModelSpec& spec = w->models[m];
          nlohmann::json jm = {{"name", spec.name}, {"active", spec.active}};
          if (r->config[m] == kAbsent) {
            jm["config"] = nullptr;
            models.push_back(std::move(jm));
            t.add({spec.name, "(not running)", "-", "-", "-", "", ""});
            continue;
          }
          const auto l = r->config[m];
          jm["config"] = spec.describe(static_cast<std::size_t>(l));
          jm["local_index"] = l;
          jm["predicted"] = predicted_json(spec, r->predicted[m]);
          jm["margin"] = margins[m];
          std::string meas = "", status = "";
          if (measured) {
            const ModelMetrics* mm = nullptr;
            for (const auto& x : measured->models) mm = x.model == m ? &x : mm;
            if (mm != nullptr) {
              const bool ok = measured_meets_sla(spec, *mm);
              breaches += ok ? 0 : 1;
              if (mm->ok()) {
                measured_utility += problem.model_utility(m, l, as_predicted(*mm));
                jm["measured"] = predicted_json(spec, as_predicted(*mm));
                meas = predicted_headline(spec, as_predicted(*mm));
              } else {
                jm["measured"] = {{"error", mm->error}};
                meas = mm->error;
              }
              jm["meets_sla"] = ok;
              status = ok ? "ok" : "BREACH";
            }
          }
          models.push_back(std::move(jm));
          t.add({spec.name, spec.describe(static_cast<std::size_t>(l)),
                 predicted_headline(spec, r->predicted[m]), "+" + fixed(100 * margins[m], 0) + "%",
                 sla_text(spec), meas, status});
        }
        nlohmann::json out = {
            {"workload", w->file},
            {"device", w->device.name},
            {"surrogate", f->model},
            {"solver", r->solver},
            {"feasible", r->feasible && why.empty()},
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
        if (measured) {
          out["measured"] = {{"testbed", measured->testbed},
                             {"utility", measured_utility},
                             {"sla_violations", breaches},
                             {"gpu", to_json(*measured)["gpu"]}};
        }
        if (f->json) {
          std::printf("%s\n", out.dump().c_str());
        } else {
          std::printf("corun plan: %s on %s, solver %s: %s, predicted utility %.3f\n",
                      w->file.c_str(), w->device.display_name.c_str(), r->solver.c_str(),
                      r->feasible && why.empty() ? "feasible"
                                                 : "INFEASIBLE (degraded plan shown)",
                      r->utility);
          for (const auto& line : why) std::printf("infeasible: %s\n", line.c_str());
          std::printf("%s", t.render().c_str());
          std::printf("search: %llu of %s candidates evaluated in %.1f ms%s\n",
                      static_cast<unsigned long long>(r->stats.evaluated),
                      problem.candidate_count().to_string().c_str(),
                      r->stats.elapsed_ms, r->stats.proved_optimal ? " (proved optimal)" : "");
          if (measured) {
            std::printf("measured on %s: utility %.3f, %zu SLA violation(s)\n",
                        measured->testbed.c_str(), measured_utility, breaches);
          }
        }
        if (!r->feasible || !why.empty()) return kExitFailure;
        return breaches == 0 ? kExitOk : kExitFailure;
      });
    },
});

}  // namespace
}  // namespace corun::cli
