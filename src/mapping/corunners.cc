#include "corun/mapping/corunners.h"

#include <algorithm>

namespace corun::mapping {

Result<CoRunners> CoRunners::measure(exporting::PlanInput plan, const Testbed& testbed,
                                     std::uint64_t seed, double window_s) {
  CoRunners c;
  c.config.assign(plan.workload.models.size(), kAbsent);
  for (const exporting::PlannedModel& p : plan.models) {
    c.config[p.model] = static_cast<std::int32_t>(p.local_index);
  }
  c.seed = seed;
  c.window_s = window_s;
  c.measured = testbed.measure(plan.workload, c.config, MeasureOptions(window_s, seed));
  if (!c.measured.error.empty()) {
    return Error(plan.plan_file + ": the co-running plan did not run on " +
                     std::string(testbed.name()) + ": " + c.measured.error,
                 Error::Kind::kInvalidInput);
  }
  c.plan = std::move(plan);
  return c;
}

std::size_t CoRunners::running() const {
  return static_cast<std::size_t>(
      std::count_if(config.begin(), config.end(), [](std::int32_t l) { return l != kAbsent; }));
}

gpu::Load CoRunners::load(const gpu::DeviceModel& dev) const {
  // The measurement reports bandwidth as a fraction of the datasheet value; the GPU model
  // counts demand in units of the achievable bandwidth.
  const double bw = measured.gpu.mem_bw_util * dev.peak_dram_bytes_s / dev.dram_bytes_s;
  gpu::Load l = gpu::cotenant_load(dev, measured.gpu.sm_util, bw);
  if (l.active > 0) l.active = static_cast<double>(running());
  return l;
}

Result<std::shared_ptr<const CoRunners>> load_corunners(const std::filesystem::path& plan_file,
                                                        const std::string& workload_file,
                                                        const Catalog& catalog,
                                                        const Testbed& testbed,
                                                        std::uint64_t seed) {
  auto plan = exporting::load_plan_input(plan_file, workload_file, catalog);
  if (!plan) return plan.error();
  auto c = CoRunners::measure(std::move(*plan), testbed, seed);
  if (!c) return c.error();
  return std::make_shared<const CoRunners>(std::move(*c));
}

Result<std::shared_ptr<const CoRunners>> scenario_corunners(const Scenario& scenario,
                                                            const Catalog& catalog,
                                                            const Testbed& testbed) {
  if (scenario.co_running.plan.empty()) return std::shared_ptr<const CoRunners>();
  const std::filesystem::path dir = std::filesystem::path(scenario.file).parent_path();
  const auto resolve = [&](const std::string& f) {
    return f.empty() || std::filesystem::path(f).is_absolute() ? f : (dir / f).string();
  };
  auto c = load_corunners(resolve(scenario.co_running.plan), resolve(scenario.co_running.workload),
                          catalog, testbed, scenario.seed);
  if (!c) return c.error().wrap(scenario.file + ": co_running");
  return c;
}

}  // namespace corun::mapping
