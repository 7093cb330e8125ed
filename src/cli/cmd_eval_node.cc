// corun eval node FILE: corun's node plan beside the placement baselines (memory bin-packing,
// spread, round-robin, iGniter), every one measured on the testbed, for every partitioning of
// the node; and whether the partitioning corun picks is the one that measured best.
#include <cstdio>

#include "command.h"
#include "common.h"
#include "corun/eval/node_eval.h"
#include "node_report.h"

namespace corun::cli::cmd_eval_node {
namespace {

struct Flags : PlanFlags {
  int repeats = 3;
};

int run(const Flags& f) {
  auto w = load_workload_file(f.file, f.catalog);
  if (!w) return report_error(w.error());
  const Context ctx = f.context();
  auto session = make_node_session(ctx, *w, f);
  if (!session) return report_error(session.error());
  NodePlanner& planner = *(*session)->planner;
  auto testbed = make_testbed(f.testbed);
  if (!testbed) return report_error(testbed.error());

  const NodeEvalOptions options{.repeats = f.repeats, .window_s = f.window_s};
  auto eval = evaluate_node(ctx, *w, planner, **testbed, options);
  if (!eval) return report_error(eval.error());
  const auto& layouts = eval->layouts;
  const auto& rows = eval->rows;
  const std::size_t choice = eval->choice;
  const std::size_t measured = eval->measured;

  if (f.json) {
    nlohmann::json jl = nlohmann::json::array();
    for (std::size_t l = 0; l < layouts.size(); ++l) {
      nlohmann::json strategies = nlohmann::json::array();
      for (const auto& r : rows[l]) {
        nlohmann::json js = node_plan_json(*w, r.plan, &r.first);
        js["measured"] = {{"utility_mean", r.mean_utility},
                          {"sla_violations", r.violations},
                          {"repeats", f.repeats}};
        js["units_used"] = r.units_used;
        strategies.push_back(std::move(js));
      }
      jl.push_back({{"layout", layouts[l].describe()}, {"strategies", strategies}});
    }
    nlohmann::json out = {{"workload", w->file},
                          {"device", w->device.name},
                          {"gpus", w->node.gpus()},
                          {"testbed", f.testbed},
                          {"predictor", (*session)->sources.describe},
                          {"seed", f.seed},
                          {"repeats", f.repeats},
                          {"window_s", f.window_s},
                          {"layouts", jl},
                          {"choice", layouts[choice].describe()},
                          {"best_measured", layouts[measured].describe()},
                          {"choice_is_best_measured", choice == measured}};
    std::printf("%s\n", out.dump().c_str());
    return kExitOk;
  }
  std::printf(
      "corun eval node: %s, %zu x %s, %zu partitioning(s), testbed %s, %d repeat(s) "
      "of %.0f s from seed %llu; predictions: %s\n",
      w->file.c_str(), w->node.gpus(), w->device.display_name.c_str(), layouts.size(),
      f.testbed.c_str(), f.repeats, f.window_s, static_cast<unsigned long long>(f.seed),
      (*session)->sources.describe.c_str());
  for (std::size_t l = 0; l < layouts.size(); ++l) {
    std::printf("\npartitioning %zu: %s\n", l, layouts[l].describe().c_str());
    Table t({"strategy", "placed", "units used", "predicted utility", "measured utility",
             "SLA violations", "unit plans solved"});
    for (const auto& r : rows[l]) {
      t.add({r.plan.strategy, r.plan.placed ? "all" : "NOT ALL", std::to_string(r.units_used),
             fixed(r.plan.utility, 3), fixed(r.mean_utility, 3), std::to_string(r.violations),
             std::to_string(r.plan.subplans)});
    }
    std::printf("%s", t.render().c_str());
  }
  std::printf("\ncorun's plan (partitioning %zu):\n%s", choice,
              node_plan_text(*w, rows[choice][0].plan, &rows[choice][0].first).c_str());
  if (layouts.size() > 1) {
    std::printf("corun chooses partitioning %zu (%s); best measured: %zu (%s): %s\n", choice,
                layouts[choice].describe().c_str(), measured, layouts[measured].describe().c_str(),
                choice == measured ? "same" : "DIFFERENT");
  }
  return kExitOk;
}

const bool registered = register_command({
    "eval node",
    "Compare corun's node plan with placement baselines, every one measured on the testbed",
    [](CLI::App& sub) {
      auto f = std::make_shared<Flags>();
      sub.add_option("file", f->file, "workload YAML with gpus (and mig) set")->required();
      sub.add_option("--surrogate", f->model,
                     "fitted surrogate for whole GPUs (default: the catalog twin)");
      sub.add_option("--solver", f->solver, "per-unit solver for large unit problems")
          ->capture_default_str();
      add_seed_flag(sub, f->seed, "the search and the first measurement");
      add_threads_flag(sub, f->threads, "the solver");
      sub.add_option("--repeats", f->repeats, "measurements per plan (seeds seed, seed+1, ...)")
          ->check(CLI::Range(1, 100))
          ->capture_default_str();
      add_measure_flags(sub, *f);
      add_node_search_flags(sub, *f);
      return std::function<int()>([f] { return run(*f); });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_eval_node
