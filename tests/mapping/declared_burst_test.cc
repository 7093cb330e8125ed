// A workload's declared tool burst: read relative to the workload, run with every call that
// may use the GPU queued for it, alone on the GPU, at each share of the SMs asked; bad
// references name the workload's field.
#include "corun/mapping/declared_burst.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "corun/catalog/catalog.h"
#include "corun/mapping/executor.h"
#include "corun/mapping/problem.h"
#include "corun/mapping/scenario.h"
#include "../core/temp_dir.h"

namespace corun::mapping::declared_burst_test {
namespace {

namespace fs = std::filesystem;

const std::string kBurstDir = std::string(CORUN_SOURCE_DIR) + "/workloads/tools-burst";

ToolCatalog tools() {
  auto t = default_tool_catalog();
  EXPECT_TRUE(t.ok()) << t.error().what();
  return *t;
}

Workload workload(const std::string& path) {
  auto w = load_workload(path, Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << w.error().what();
  return *w;
}

// The process's scratch directory, removed when the process exits.
fs::path temp_dir() {
  static const corun::testing::TempDir dir("corun-burst-test");
  return dir.path();
}

TEST(DeclaredBurst, RunsTheScenarioNamedRelativeToTheWorkloadWithEveryCallOnTheGpu) {
  const Workload w = workload(kBurstDir + "/paper-n2-voice.yaml");
  ASSERT_TRUE(w.tools.has_value());
  const ToolCatalog t = tools();
  const double shares[] = {1.0, 0.25};
  auto both = declared_bursts(w, t, shares);
  ASSERT_TRUE(both.ok()) << both.error().what();
  ASSERT_EQ(both->size(), 2u);
  const DeclaredBurst* b = &(*both)[0];
  EXPECT_EQ(b->calls, 4u);  // transcribe, summarize, translate, speak
  EXPECT_EQ(b->every_s, 20.0);
  EXPECT_EQ(fs::path(b->scenario_file).filename(), "voice.tools.yaml");
  ASSERT_TRUE(b->load.any());
  EXPECT_GT(b->load.sm_util, 0.0);
  EXPECT_LE(b->load.sm_util, 1.0);
  EXPECT_GT(b->makespan_ms, 0.0);
  // duty = burst length / period: the burst lasts (end - start) ms of every 20 s.
  EXPECT_DOUBLE_EQ(b->duty(), (b->load.end_ms - b->load.start_ms) / 1e3 / 20.0);
  EXPECT_EQ(b->interference().sm_util, b->load.sm_util);
  EXPECT_EQ(b->interference().bandwidth_util, b->load.bw_util);

  // The same DAG on the same device with every call that may use the GPU queued for it, run
  // directly.
  auto s = load_scenario(kBurstDir + "/voice.tools.yaml", t);
  ASSERT_TRUE(s.ok());
  auto problem = PlacementProblem::build(*s, t, w.device);
  ASSERT_TRUE(problem.ok());
  std::vector<Placement> all_gpu(problem->size(), Placement::kCpu);
  std::size_t on_gpu = 0;
  for (std::size_t i = 0; i < problem->size(); ++i) {
    if (!problem->gpu_allowed(i)) continue;
    all_gpu[i] = Placement::kGpuQueue;
    ++on_gpu;
  }
  EXPECT_GE(on_gpu, 3u);  // asr, summarize and translate have GPU implementations
  Executor ex(*problem);
  const RunResult run = ex.run(all_gpu);
  EXPECT_EQ(b->makespan_ms, run.makespan_ms);
  EXPECT_EQ(b->load.sm_util, run.burst.sm_util);

  // Deterministic: no noise, no exploration.
  auto again = declared_bursts(w, t, shares);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0].makespan_ms, b->makespan_ms);

  // Confined to a quarter of the SMs (one MPS client at 25 %), the tools hold at most a
  // quarter of them and take longer; the same work moves less data per second.
  const DeclaredBurst* quarter = &(*both)[1];
  EXPECT_EQ(quarter->gpu_share, 0.25);
  EXPECT_LE(quarter->load.sm_util, 0.25 + 1e-12);
  EXPECT_LE(quarter->load.peak_sm_util, 0.25 + 1e-12);
  EXPECT_GT(quarter->makespan_ms, b->makespan_ms);
  EXPECT_LT(quarter->load.bw_util, b->load.bw_util);
}

TEST(DeclaredBurst, AMissingScenarioOrOneWithItsOwnCoRunnersNamesTheWorkloadField) {
  const fs::path dir = temp_dir();
  const ToolCatalog t = tools();
  const std::string models =
      "device: rtx3090\nmodels:\n  - name: cam0\n    model: yolo11n\n    knobs: {imgsz: [320]}\n"
      "    demand: {fps: 30}\n    sla: {latency_ms_p95: 50}\n";
  {
    std::ofstream f(dir / "missing.yaml");
    f << models << "tools: {scenario: nowhere.yaml, every_s: 30}\n";
  }
  const double whole[] = {1.0};
  auto missing = declared_bursts(workload((dir / "missing.yaml").string()), t, whole);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().what().find("tools.scenario"), std::string::npos)
      << missing.error().what();
  EXPECT_NE(missing.error().what().find("missing.yaml"), std::string::npos);
  EXPECT_NE(missing.error().what().find("nowhere.yaml"), std::string::npos);

  // A tools-shared scenario names its own co-running plan: in a workload the co-runners are
  // the workload's models.
  {
    std::ofstream f(dir / "corunning.yaml");
    f << models << "tools: {scenario: " << CORUN_SOURCE_DIR
      << "/workloads/tools-shared/voice-note.yaml, every_s: 30}\n";
  }
  auto own = declared_bursts(workload((dir / "corunning.yaml").string()), t, whole);
  ASSERT_FALSE(own.ok());
  EXPECT_NE(own.error().what().find("co_running"), std::string::npos) << own.error().what();
  EXPECT_EQ(own.error().kind(), Error::Kind::kInvalidInput);
}

}  // namespace
}  // namespace corun::mapping::declared_burst_test
