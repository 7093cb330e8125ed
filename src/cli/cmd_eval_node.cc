// corun eval node FILE: corun's node plan beside the placement baselines (memory bin-packing,
// spread, round-robin, iGniter), every one measured on the testbed, for every partitioning of
// the node; and whether the partitioning corun picks is the one that measured best.
#include <cstdio>

#include "command.h"
#include "common.h"
#include "corun/plan/node.h"
#include "corun/runtime/node_plan.h"
#include "node_report.h"

namespace corun::cli {
namespace {

struct Flags : PlanFlags {
  int repeats = 3;
};

// One strategy's plan on one layout, measured `repeats` times (seeds seed, seed+1, ...).
struct Row {
  NodePlan plan;
  NodeOutcome first;           // the first measurement (shown per model)
  double mean_utility = 0;     // measured utility, mean over repeats
  std::size_t violations = 0;  // summed over repeats
  std::size_t units_used = 0;
};

Row measure_row(const Workload& w, NodePlan plan, const Testbed& testbed, const Flags& f) {
  Row r;
  std::vector<bool> used(plan.layout.units.size(), false);
  for (const auto u : plan.assignment) {
    if (u != kNotPlaced) used[static_cast<std::size_t>(u)] = true;
  }
  for (bool b : used) r.units_used += b ? 1 : 0;
  for (int k = 0; k < f.repeats; ++k) {
    NodeOutcome o =
        measure_node_plan(w, plan, testbed, {f.window_s, f.seed + static_cast<std::uint64_t>(k)});
    r.mean_utility += o.measured_utility / f.repeats;
    r.violations += o.violations;
    if (k == 0) r.first = std::move(o);
  }
  r.plan = std::move(plan);
  return r;
}

// Measured ranking: no violations first, then utility.
bool measured_better(const Row& a, const Row& b) {
  if ((a.violations == 0) != (b.violations == 0)) return a.violations == 0;
  return a.mean_utility > b.mean_utility;
}

int run(const Flags& f) {
  auto w = load_workload_file(f.file, f.catalog);
  if (!w) return report_error(w.error());
  const Context ctx = f.context();
  auto session = make_node_session(ctx, *w, f);
  if (!session) return report_error(session.error());
  NodePlanner& planner = *(*session)->planner;
  auto testbed = make_testbed(f.testbed);
  if (!testbed) return report_error(testbed.error());

  const auto layouts = node_layouts(*w);
  std::vector<std::vector<Row>> rows(layouts.size());
  std::size_t choice = 0;    // the layout corun's plan predicts best
  std::size_t measured = 0;  // the layout whose corun plan measured best
  for (std::size_t l = 0; l < layouts.size(); ++l) {
    auto corun_plan = planner.plan(layouts[l]);
    if (!corun_plan) return report_error(corun_plan.error());
    rows[l].push_back(measure_row(*w, std::move(*corun_plan), **testbed, f));
    for (const auto& rule : placement_rule_names()) {
      auto p = planner.plan_baseline(layouts[l], rule);
      if (!p) return report_error(p.error());
      rows[l].push_back(measure_row(*w, std::move(*p), **testbed, f));
    }
    if (rows[l][0].plan.fitness() > rows[choice][0].plan.fitness() + 1e-9) choice = l;
    if (measured_better(rows[l][0], rows[measured][0])) measured = l;
  }

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
}  // namespace corun::cli
