#include "corun/eval/node_eval.h"

#include <utility>

#include "corun/plan/node_placement.h"

namespace corun {
namespace {

NodeEvalRow measure_row(const Context& ctx, const Workload& w, NodePlan plan,
                        const Testbed& testbed, const NodeEvalOptions& f) {
  NodeEvalRow r;
  std::vector<bool> used(plan.layout.units.size(), false);
  for (const auto u : plan.assignment) {
    if (u != kNotPlaced) used[static_cast<std::size_t>(u)] = true;
  }
  for (bool b : used) r.units_used += b ? 1 : 0;
  for (int k = 0; k < f.repeats; ++k) {
    NodeOutcome o = measure_node_plan(Context{.seed = ctx.seed + static_cast<std::uint64_t>(k)}, w,
                                      plan, testbed, MeasureOptions(f.window_s));
    r.mean_utility += o.measured_utility / f.repeats;
    r.violations += o.violations;
    if (k == 0) r.first = std::move(o);
  }
  r.plan = std::move(plan);
  return r;
}

// Measured ranking: no violations first, then utility.
bool measured_better(const NodeEvalRow& a, const NodeEvalRow& b) {
  if ((a.violations == 0) != (b.violations == 0)) return a.violations == 0;
  return a.mean_utility > b.mean_utility;
}

}  // namespace

Result<NodeEval> evaluate_node(const Context& ctx, const Workload& w, NodePlanner& planner,
                               const Testbed& testbed, const NodeEvalOptions& options) {
  const NodeEvalOptions& f = options;
  auto layouts = node_layouts(w);
  std::vector<std::vector<NodeEvalRow>> rows(layouts.size());
  std::size_t choice = 0;    // the layout corun's plan predicts best
  std::size_t measured = 0;  // the layout whose corun plan measured best
  for (std::size_t l = 0; l < layouts.size(); ++l) {
    auto corun_plan = planner.plan(layouts[l]);
    if (!corun_plan) return corun_plan.error();
    rows[l].push_back(measure_row(ctx, w, std::move(*corun_plan), testbed, f));
    for (const auto& rule : placement_rule_names()) {
      auto p = planner.plan_baseline(layouts[l], rule);
      if (!p) return p.error();
      rows[l].push_back(measure_row(ctx, w, std::move(*p), testbed, f));
    }
    if (rows[l][0].plan.fitness() > rows[choice][0].plan.fitness() + 1e-9) choice = l;
    if (measured_better(rows[l][0], rows[measured][0])) measured = l;
  }
  return NodeEval{std::move(layouts), std::move(rows), choice, measured};
}

}  // namespace corun
