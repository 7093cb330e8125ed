// Tool placement next to a planned co-running workload: the GPU load and the VRAM the tools
// see come from the testbed's measurement of the plan.
#include "corun/mapping/corunners.h"

#include <gtest/gtest.h>

#include <string>

#include "corun/eval/placement_eval.h"
#include "corun/mapping/executor.h"
#include "corun/mapping/problem.h"
#include "corun/testbed/sim.h"

namespace corun::mapping::corunners_test {
namespace {

const std::string kWorkload = std::string(CORUN_SOURCE_DIR) + "/workloads/paper-n3.yaml";

// paper-n3 (an LLM and two YOLO11 streams on an RTX 3090), light configurations.
const char* const kPlan = R"({"models": [
  {"name": "chat", "config": "precision=awq,request_concurrency=1,prefill_chunk=512"},
  {"name": "cam0", "config": "imgsz=320,skip_rate=0.5"},
  {"name": "cam1", "config": "imgsz=320,skip_rate=0.5"}]})";

const ToolCatalog& tools() {
  static const ToolCatalog c = std::move(default_tool_catalog()).value();
  return c;
}

std::shared_ptr<const CoRunners> measured_plan(const char* text = kPlan) {
  auto plan = exporting::parse_plan_input(text, "plan.json", kWorkload, Catalog::default_catalog());
  EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().what());
  auto c = CoRunners::measure(Context{.seed = 7}, std::move(*plan), SimTestbed());
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().what());
  return std::make_shared<const CoRunners>(std::move(*c));
}

Scenario one_tool(const char* tool, double budget_gb) {
  Scenario s;
  s.name = "next-to-plan";
  s.file = "next-to-plan.yaml";
  s.device = "rtx3090";
  s.vram_budget_gb = budget_gb;
  s.nodes = {ToolNode{"t", tool, {}, 0}};
  return s;
}

TEST(CoRunners, TheToolsSeeTheLoadAndVramTheTestbedMeasuredForThePlan) {
  const auto co = measured_plan();
  ASSERT_EQ(co->running(), 3u);
  const Measurement& m = co->measured;
  ASSERT_TRUE(m.ok());
  auto p =
      PlacementProblem::build(one_tool("summarize", 25), tools(), Catalog::default_catalog(), co);
  ASSERT_TRUE(p.ok()) << p.error().what();
  // The measured aggregate, in the GPU model's units: SMs held (82 on an RTX 3090), demand in
  // units of the achievable bandwidth (90 % of the datasheet), one workload per model.
  const gpu::Load& bg = p->background();
  EXPECT_NEAR(bg.sms, m.gpu.sm_util * 82, 1e-9);
  EXPECT_NEAR(bg.bw, m.gpu.mem_bw_util / 0.9, 1e-9);
  EXPECT_EQ(bg.active, 3);
  // The card's 25.77 GB (catalog/devices.yaml: 24 GiB) minus what the plan holds; the
  // scenario's 25 GB is larger.
  EXPECT_NEAR(p->vram_budget_bytes(), 25.77e9 - m.gpu.vram_used_gb * 1e9, 1);
  // A scenario budget below what the plan leaves wins.
  auto small =
      PlacementProblem::build(one_tool("summarize", 2), tools(), Catalog::default_catalog(), co);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->vram_budget_bytes(), 2e9);
  // Sharing the GPU with the plan, the tool computes longer than on an idle GPU.
  auto idle =
      PlacementProblem::build(one_tool("summarize", 24), tools(), Catalog::default_catalog());
  ASSERT_TRUE(idle.ok());
  const Mapping gpu{Placement::kGpuNow};
  EXPECT_GT(Executor(*p).makespan_s(gpu),
            1.05 * Executor(*idle).makespan_s(gpu));
}

TEST(CoRunners, ConflictingOrForeignDescriptionsAreErrors) {
  const auto co = measured_plan();
  Scenario typed = one_tool("asr", 24);
  typed.background.gpu_sm_util = 0.3;
  auto both = PlacementProblem::build(typed, tools(), Catalog::default_catalog(), co);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.error().what().find("next-to-plan.yaml: background: a typed GPU background and "
                                     "a co-running plan"),
            std::string::npos)
      << both.error().what();
  Scenario elsewhere = one_tool("asr", 24);
  elsewhere.device = "a100-80gb";
  auto foreign = PlacementProblem::build(elsewhere, tools(), Catalog::default_catalog(), co);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.error().what().find("next-to-plan.yaml: device: the tools run on 'a100-80gb'"),
            std::string::npos)
      << foreign.error().what();
}

TEST(CoRunners, BreachesAreMeasuredWhileTheBurstRunsAndBlameOnlyTheBurst) {
  // The chat model in FP16 with 4 sequences holds its 800 ms TTFT alone (about 110 ms on the
  // calibrated LLM path); Stable Diffusion and a Qwen summary on the same GPU hold most of its
  // SMs for seconds. (In AWQ its TTFT stays under 800 ms even during the burst.)
  const auto co = measured_plan(R"({"models": [
    {"name": "chat", "config": "precision=fp16,request_concurrency=4,prefill_chunk=512"},
    {"name": "cam0", "config": "imgsz=320,skip_rate=0.5"},
    {"name": "cam1", "config": "imgsz=320,skip_rate=0.5"}]})");
  Scenario s = one_tool("generate", 20);
  s.nodes.push_back(ToolNode{"u", "summarize", {}, 0});
  auto p = PlacementProblem::build(s, tools(), Catalog::default_catalog(), co);
  ASSERT_TRUE(p.ok()) << p.error().what();
  auto on_gpu = measure_corunners_during(*p, Mapping{Placement::kGpuQueue, Placement::kGpuQueue});
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.error().what();
  ASSERT_TRUE(on_gpu->has_value());
  ASSERT_EQ((*on_gpu)->size(), 1u);
  const SlaOutcome& o = (**on_gpu)[0];
  EXPECT_EQ(o.model, "chat");
  EXPECT_EQ(o.metric, "ttft_ms_p95");
  EXPECT_LE(o.alone, 800);
  EXPECT_GT(o.during, 800);
  EXPECT_NE(o.describe().find("chat ttft_ms_p95"), std::string::npos);
  // On the CPU the tools put nothing on the GPU: nothing breaks.
  auto on_cpu = measure_corunners_during(*p, Mapping{Placement::kCpu, Placement::kCpu});
  ASSERT_TRUE(on_cpu.ok());
  EXPECT_TRUE((*on_cpu)->empty());
  // Without a plan there is nothing to measure.
  auto alone =
      PlacementProblem::build(one_tool("generate", 20), tools(), Catalog::default_catalog());
  ASSERT_TRUE(alone.ok());
  auto none = measure_corunners_during(*alone, Mapping{Placement::kGpuQueue});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

}  // namespace
}  // namespace corun::mapping::corunners_test
