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

Result<std::vector<DeclaredBurst>> declared_bursts(const Workload& w, const ToolCatalog& tools,
                                                   std::span<const double> gpu_shares) {
  CORUN_CHECK(w.tools.has_value());
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
  DeclaredBurst shape;
  shape.scenario_file = path.string();
  shape.calls = scenario->nodes.size();
  shape.every_s = spec.every_s;
  auto problem = PlacementProblem::build(std::move(*scenario), tools, w.device);
  if (!problem) return problem.error().wrap(where);
  // Every call that may use the GPU queues for it; one without a GPU implementation, or too
  // large for the budget, runs on the CPU whatever the placement.
  std::vector<Placement> all_gpu(problem->size(), Placement::kCpu);
  for (std::size_t i = 0; i < problem->size(); ++i) {
    if (problem->gpu_allowed(i)) all_gpu[i] = Placement::kGpuQueue;
  }
  std::vector<DeclaredBurst> out;
  for (double share : gpu_shares) {
    CORUN_CHECK(share > 0 && share <= 1);
    problem->set_tool_gpu_share(share);
    Executor executor(*problem);
    const RunResult run = executor.run(all_gpu);
    if (run.failed) {
      const std::string why = run.failures.empty() ? "a call failed" : run.failures.front();
      return Error(where + ": the tools cannot run on " + w.device.display_name + " (" + why + ")",
                   Error::Kind::kInvalidInput);
    }
    DeclaredBurst b = shape;
    b.gpu_share = share;
    b.makespan_ms = run.makespan_ms;
    b.load = run.burst;
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace corun::mapping
