#include "corun/mapping/declared_burst.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "corun/core/check.h"
#include "corun/mapping/executor.h"
#include "corun/mapping/problem.h"
#include "corun/mapping/scenario.h"

namespace corun::mapping {

double DeclaredBurst::duty() const {
  if (every_s <= 0) return 1;
  const double length_s = (load.end_ms - load.start_ms) / 1e3;
  return std::clamp(length_s / every_s, 0.0, 1.0);
}

Result<DeclaredBurst> declared_burst(const Workload& w, const ToolCatalog& tools,
                                     double gpu_share) {
  CORUN_CHECK(w.tools.has_value());
  CORUN_CHECK(gpu_share > 0 && gpu_share <= 1);
  const ToolBurstSpec& spec = *w.tools;
  const std::string where = w.file + ":" + std::to_string(spec.line) + ": tools.scenario";
  std::filesystem::path path(spec.scenario);
  if (path.is_relative()) path = std::filesystem::path(w.file).parent_path() / path;
  auto scenario = load_scenario(path, tools);
  if (!scenario) return scenario.error().wrap(where);
  if (!scenario->co_running.plan.empty()) {
    return Error(where + ": " + path.string() +
                     " names its own co_running plan; in a workload the co-runners are the "
                     "workload's models: remove co_running from the scenario",
                 Error::Kind::kInvalidInput);
  }
  DeclaredBurst out;
  out.scenario_file = path.string();
  out.calls = scenario->nodes.size();
  out.every_s = spec.every_s;
  auto problem = PlacementProblem::build(std::move(*scenario), tools, w.device);
  if (!problem) return problem.error().wrap(where);
  problem->set_tool_gpu_share(gpu_share);
  out.gpu_share = gpu_share;
  // Every call that may use the GPU queues for it; one without a GPU implementation, or too
  // large for the budget, runs on the CPU whatever the placement.
  std::vector<Placement> all_gpu(problem->size(), Placement::kCpu);
  for (std::size_t i = 0; i < problem->size(); ++i) {
    if (problem->gpu_allowed(i)) all_gpu[i] = Placement::kGpuQueue;
  }
  Executor executor(*problem);
  const RunResult run = executor.run(all_gpu, {problem->scenario().seed, false});
  if (run.failed) {
    std::string why = run.failures.empty() ? "a call failed" : run.failures.front();
    return Error(where + ": the tools cannot run on " + w.device.display_name + " (" + why + ")",
                 Error::Kind::kInvalidInput);
  }
  out.makespan_ms = run.makespan_ms;
  out.load = run.burst;
  return out;
}

}  // namespace corun::mapping
