// The node planner on the synthetic mean-field predictor: pins, VRAM, and never worse than the
// baselines it starts from.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>

#include "corun/catalog/catalog.h"
#include "corun/plan/node.h"
#include "corun/space/space.h"
#include "synthetic.h"

namespace corun::node_planner_test {
namespace {

// Per device: the unit's workload and a synthetic predictor over it (co-runners stretch each
// other's latency; the device itself plays no part, which keeps the test about the search).
class SyntheticUnits final : public UnitModels {
 public:
  explicit SyntheticUnits(const Workload& w) : w_(&w) {}
  Result<const UnitModel*> for_unit(const GpuUnit& unit) override {
    auto& e = by_device_[unit.device.name];
    if (!e.workload) {
      e.workload = std::make_unique<Workload>(unit_workload(*w_, unit));
      e.predictor = std::make_unique<testing::SyntheticPredictor>(*e.workload);
      e.model.workload = e.workload.get();
      e.model.predictor = e.predictor.get();
      for (std::size_t m = 0; m < w_->models.size(); ++m) {
        std::vector<float> loads;
        for (std::size_t l = 0; l < w_->models[m].local_config_count(); ++l) {
          float c[2];
          e.predictor->contribution(m, static_cast<std::int32_t>(l), c);
          loads.push_back(c[0]);
        }
        e.model.loads.push_back(std::move(loads));
      }
    }
    return &e.model;
  }

 private:
  struct Entry {
    std::unique_ptr<Workload> workload;
    std::unique_ptr<testing::SyntheticPredictor> predictor;
    UnitModel model;
  };
  const Workload* w_;
  std::map<std::string, Entry> by_device_;
};

Workload parse(const std::string& text) {
  auto w = parse_workload(text, "node.yaml", Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().what());
  return std::move(w).value();
}

// The node plan of `w` under the synthetic predictor, with the default options.
Result<NodePlan> plan_synthetic(const Workload& w) {
  SyntheticUnits units(w);
  auto solver = make_solver("ga");
  EXPECT_TRUE(solver.ok());
  NodePlanner planner(Context{}, w, units, **solver, NodePlanOptions{});
  return planner.plan();
}

const std::string kCams =
    "models:\n"
    "  - {name: c0, model: yolo11s, knobs: {imgsz: [320, 640], skip_rate: [0, 0.5]},"
    " demand: {fps: 60}, sla: {latency_ms_p95: 30}}\n"
    "  - {name: c1, model: yolo11s, knobs: {imgsz: [320, 640], skip_rate: [0, 0.5]},"
    " demand: {fps: 60}, sla: {latency_ms_p95: 30}}\n"
    "  - {name: c2, model: yolo11m, knobs: {imgsz: [320, 640], skip_rate: [0, 0.5]},"
    " demand: {fps: 60}, sla: {latency_ms_p95: 30}, gpu: 2}\n"
    "  - {name: c3, model: yolo11m, knobs: {imgsz: [320, 640], skip_rate: [0, 0.5]},"
    " demand: {fps: 60}, sla: {latency_ms_p95: 30}}\n";

TEST(NodePlanner, RespectsPinsAndIsNeverWorseThanABaseline) {
  const Workload w = parse("device: a100-80gb\ngpus: 3\n" + kCams);
  SyntheticUnits units(w);
  auto solver = make_solver("ga");
  ASSERT_TRUE(solver.ok());
  NodePlanner planner(Context{}, w, units, **solver, NodePlanOptions{});
  auto plan = planner.plan();
  ASSERT_TRUE(plan.ok()) << plan.error().what();
  EXPECT_TRUE(plan->placed);
  EXPECT_TRUE(plan->feasible);
  EXPECT_EQ(plan->assignment[2], 2);  // c2 is pinned to GPU 2, its only unit
  for (std::size_t m = 0; m < w.models.size(); ++m) EXPECT_NE(plan->config[m], kAbsent);
  const NodeLayout layout = node_layouts(w)[0];
  for (const auto& rule : placement_rule_names()) {
    SCOPED_TRACE(rule);
    auto b = planner.plan_baseline(layout, rule);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->assignment[2], 2);
    EXPECT_GE(plan->fitness(), b->fitness() - 1e-9);
  }
  // Co-runners stretch each other: four streams on three GPUs are best spread, so at most
  // two share a GPU.
  std::vector<int> per_unit(3, 0);
  for (auto u : plan->assignment) ++per_unit[static_cast<std::size_t>(u)];
  EXPECT_LE(*std::max_element(per_unit.begin(), per_unit.end()), 2);
}

TEST(NodePlanner, SameSeedSamePlan) {
  const Workload w = parse("device: a100-80gb\ngpus: 3\n" + kCams);
  auto pa = plan_synthetic(w);
  auto pb = plan_synthetic(w);
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_EQ(pa->assignment, pb->assignment);
  EXPECT_EQ(pa->config, pb->config);
}

// A shared cache plans a set of models on a unit once, whatever the models are called and
// wherever they stand in their workload: a second planner over the same cameras, renamed and
// listed in reverse, prices the first plan's placement without solving anything, at the
// utility a planner without the cache computes for it.
TEST(NodePlanner, ASharedCachePlansEachSetOfModelsOnce) {
  const Workload w = parse("device: a100-80gb\ngpus: 3\n" + kCams);
  Workload reversed = w;
  std::reverse(reversed.models.begin(), reversed.models.end());
  for (std::size_t m = 0; m < reversed.models.size(); ++m) {
    reversed.models[m].name = "renamed-" + std::to_string(m);
  }
  auto solver = make_solver("ga");
  ASSERT_TRUE(solver.ok());
  UnitPlanCache shared;
  SyntheticUnits units(w);
  NodePlanner first(Context{}, w, units, **solver, NodePlanOptions{}, &shared);
  auto plan = first.plan();
  ASSERT_TRUE(plan.ok()) << plan.error().what();
  EXPECT_GT(plan->subplans, 0u);
  EXPECT_GT(shared.size(), 0u);

  const std::vector<std::int32_t> same(plan->assignment.rbegin(), plan->assignment.rend());
  const NodeLayout layout = node_layouts(reversed)[0];
  SyntheticUnits reversed_units(reversed);
  NodePlanner second(Context{}, reversed, reversed_units, **solver, NodePlanOptions{}, &shared);
  auto again = second.plan_assignment(layout, same, "same");
  ASSERT_TRUE(again.ok()) << again.error().what();
  EXPECT_EQ(again->subplans, 0u);
  EXPECT_GT(again->cache_hits, 0u);
  SyntheticUnits alone_units(reversed);
  NodePlanner alone(Context{}, reversed, alone_units, **solver, NodePlanOptions{});
  auto fresh = alone.plan_assignment(layout, same, "same");
  ASSERT_TRUE(fresh.ok()) << fresh.error().what();
  EXPECT_GT(fresh->subplans, 0u);
  EXPECT_NEAR(again->utility, plan->utility, 1e-9);
  EXPECT_NEAR(again->utility, fresh->utility, 1e-9);
  EXPECT_EQ(again->feasible, fresh->feasible);
}

TEST(NodePlanner, KeepsEachSlicesModelsWithinItsMemory) {
  // Three 2g.20gb slices of 85.9 / 4 = 21.5 GB each. Qwen2.5-7B holds about 15 GB of FP16
  // weights and 5 GB in AWQ, so two of them in FP16 cannot share a slice; binpack (by each
  // model's largest configuration) would stack the small models.
  const Workload w = parse(
      "device: a100-80gb\n"
      "gpus: [{mig: [2g.20gb, 2g.20gb, 2g.20gb]}]\n"
      "models:\n"
      "  - {name: a, model: qwen2.5-7b, knobs: {precision: [fp16, awq]},"
      " demand: {rps: 1, prompt_tokens: 256, output_tokens: 64}}\n"
      "  - {name: b, model: qwen2.5-7b, knobs: {precision: [fp16, awq]},"
      " demand: {rps: 1, prompt_tokens: 256, output_tokens: 64}}\n"
      "  - {name: c, model: qwen2.5-7b, knobs: {precision: [fp16, awq]},"
      " demand: {rps: 1, prompt_tokens: 256, output_tokens: 64}}\n");
  auto plan = plan_synthetic(w);
  ASSERT_TRUE(plan.ok()) << plan.error().what();
  ASSERT_TRUE(plan->feasible);
  const NodeLayout& layout = plan->layout;
  std::vector<double> used(layout.units.size(), 0);
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    const auto u = static_cast<std::size_t>(plan->assignment[m]);
    used[u] += model_vram_bytes(w.models[m],
                                w.models[m].settings(static_cast<std::size_t>(plan->config[m])),
                                layout.units[u].device.vram_bytes());
  }
  for (std::size_t u = 0; u < used.size(); ++u) {
    EXPECT_LE(used[u], layout.units[u].device.vram_bytes()) << layout.units[u].label();
  }
}

// A plan no other can beat ends the search: four light cameras with loose SLAs on four GPUs,
// where spreading them (a baseline start) runs each alone at its best configuration (640 px,
// no frame skipped, its 5 fps served): utility 4 x 39.5, YOLO11n's COCO mAP50-95 at 640 px in
// Ultralytics' YOLO11 detection table, the bound no plan can exceed.
// The planner then solves no GPU set beyond the starts' (a local search would try pairs); the
// same workload with one more model than GPUs cannot reach that bound and searches on.
TEST(NodePlanner, APlanAtTheUtilityBoundEndsTheSearch) {
  std::string cams = "device: a100-80gb\ngpus: 4\nmodels:\n";
  for (int c = 0; c < 5; ++c) {
    cams += "  - {name: c" + std::to_string(c) +
            ", model: yolo11n, knobs: {imgsz: [320, 640], skip_rate: [0, 0.5]},"
            " demand: {fps: 5}, sla: {latency_ms_p95: 1000}}\n";
  }
  Workload w = parse(cams);
  Workload four = w;
  four.models.pop_back();
  auto plan = plan_synthetic(four);
  ASSERT_TRUE(plan.ok()) << plan.error().what();
  ASSERT_TRUE(plan->feasible);
  EXPECT_NEAR(plan->utility, 4 * 39.5, 1e-9);
  SyntheticUnits units(four);
  auto solver = make_solver("ga");
  ASSERT_TRUE(solver.ok());
  NodePlanner starts(Context{}, four, units, **solver, NodePlanOptions{});
  std::uint64_t start_sets = 0;
  for (const auto& rule : placement_rule_names()) {
    auto b = starts.plan_baseline(node_layouts(four)[0], rule);
    ASSERT_TRUE(b.ok());
    start_sets += b->subplans;
  }
  EXPECT_EQ(plan->subplans, start_sets);
  auto five = plan_synthetic(w);
  ASSERT_TRUE(five.ok());
  EXPECT_GT(five->subplans, start_sets);
}

// The search prices candidates with the greedy per-GPU plan and gives the GA only the baseline
// starts and its best few: far fewer GA plans than a search that plans every candidate with the
// GA, and still never worse than a baseline start. Eight cameras on four GPUs, four of them at
// 60 fps within 25 ms: no plan reaches the utility bound, so both searches run to the end.
TEST(NodePlanner, AScreenedSearchPlansFewSetsWithTheFullSolver) {
  std::string text = "device: a100-80gb\ngpus: 4\n" + kCams;
  for (int c = 4; c < 8; ++c) {
    text += "  - {name: c" + std::to_string(c) +
            ", model: yolo11s, knobs: {imgsz: [320, 640], skip_rate: [0, 0.5]},"
            " demand: {fps: 60}, sla: {latency_ms_p95: 25}}\n";
  }
  const Workload w = parse(text);
  auto solver = make_solver("ga");
  ASSERT_TRUE(solver.ok());
  auto plan_with = [&](const std::string& screen) {
    SyntheticUnits units(w);
    NodePlanOptions options;
    options.screen = screen;
    NodePlanner planner(Context{}, w, units, **solver, options);
    auto p = planner.plan();
    EXPECT_TRUE(p.ok()) << p.error().what();
    std::vector<NodePlan> baselines;
    for (const auto& rule : placement_rule_names()) {
      auto b = planner.plan_baseline(node_layouts(w)[0], rule);
      EXPECT_TRUE(b.ok());
      baselines.push_back(*b);
    }
    return std::make_pair(*p, baselines);
  };
  const auto [screened, baselines] = plan_with("greedy");
  const auto [full, unused] = plan_with("");
  EXPECT_GT(screened.screened, 0u);
  EXPECT_EQ(full.screened, 0u);
  EXPECT_LT(screened.subplans, full.subplans);
  for (const auto& b : baselines) EXPECT_GE(screened.fitness(), b.fitness() - 1e-9) << b.strategy;
  EXPECT_TRUE(screened.placed);
}

TEST(NodePlanner, AModelThatFitsNowhereLeavesThePlanUnplaced) {
  const Workload w = parse(
      "device: a100-80gb\n"
      "gpus: [{mig: [1g.10gb]}, {mig: [1g.10gb]}]\n"
      "models:\n"
      "  - {name: big, model: qwen2.5-7b, knobs: {precision: [fp16]},"
      " demand: {rps: 1, prompt_tokens: 256, output_tokens: 64}}\n");
  auto plan = plan_synthetic(w);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->feasible);
  EXPECT_FALSE(plan->placed);
  EXPECT_EQ(plan->assignment[0], kNotPlaced);
}

}  // namespace
}  // namespace corun::node_planner_test
