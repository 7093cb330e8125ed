// Node plans on predictor sources, and node plans measured.
#include "corun/runtime/node_plan.h"

#include "corun/plan/objective.h"
#include "corun/runtime/testbed_predictor.h"

namespace corun {

SourceUnitModels::SourceUnitModels(const Workload& w, PredictorSource& whole,
                                   PredictorSource& other)
    : w_(&w), whole_(&whole), other_(&other) {}

Result<const UnitModel*> SourceUnitModels::for_unit(const GpuUnit& unit) {
  auto it = by_device_.find(unit.device.name);
  if (it != by_device_.end()) return &it->second.model;
  Entry e;
  e.workload = std::make_unique<Workload>(unit_workload(*w_, unit));
  PredictorSource& source = unit.profile.empty() ? *whole_ : *other_;
  auto p = source.predictor_for(*e.workload);
  if (!p) return p.error().wrap("predictions for " + unit.device.name);
  e.predictor = std::move(*p);
  e.model.workload = e.workload.get();
  e.model.predictor = e.predictor.get();
  e.model.margins = source.margins(*e.workload);
  e.model.loads = source.loads(*e.workload);
  it = by_device_.emplace(unit.device.name, std::move(e)).first;
  return &it->second.model;
}

NodeOutcome measure_node_plan(const Context& ctx, const Workload& w, NodePlan plan,
                              const Testbed& testbed, const MeasureOptions& options) {
  NodeOutcome out;
  out.measured = measure_node(ctx, testbed, w, plan.layout, plan.assignment, plan.config, options);
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    if (!w.models[m].active) continue;
    const ModelMetrics* mm = out.measured.find(m);
    if (mm == nullptr) {
      ++out.violations;  // not placed, or its unit could not run
      continue;
    }
    if (!measured_meets_sla(w.models[m], *mm)) ++out.violations;
    if (mm->ok()) out.measured_utility += model_utility(w, m, plan.config[m], as_predicted(*mm));
  }
  out.plan = std::move(plan);
  return out;
}

Result<CapacityAnswer> gpus_needed(const Context& ctx, const Workload& w, PredictorSource& whole,
                                   const Solver& solver, const NodePlanOptions& options,
                                   std::size_t from_gpus, std::size_t max_gpus) {
  CapacityAnswer out;
  for (std::size_t k = std::max<std::size_t>(1, from_gpus); k <= max_gpus; ++k) {
    Workload node = w;
    node.node.options.assign(k, std::vector<MigPartition>{MigPartition{}});
    for (auto& m : node.models) m.gpu.reset();  // pins name GPUs of another node
    SourceUnitModels models(node, whole, whole);
    NodePlanner planner(ctx, node, models, solver, options);
    auto plan = planner.plan();
    if (!plan) return plan.error().wrap("planning " + std::to_string(k) + " GPU(s)");
    out.tried_up_to = k;
    out.plan = std::move(*plan);
    out.node = std::move(node);
    if (out.plan.feasible) {
      out.gpus = k;
      break;
    }
  }
  return out;
}

}  // namespace corun
