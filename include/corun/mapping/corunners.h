#pragma once

// The models co-running on the GPU under the plan in force: what a tool placement shares the
// GPU with. Their SM and bandwidth load and their VRAM come from the testbed's measurement of
// the plan, never from a typed guess.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/core/result.h"
#include "corun/export/plan_input.h"
#include "corun/mapping/scenario.h"
#include "corun/testbed/gpu_model.h"
#include "corun/testbed/testbed.h"

namespace corun::mapping {

/// @brief A planned co-running workload and what the testbed measured for it without tools.
/// Immutable after measure(); safe to share between threads.
struct CoRunners {
  exporting::PlanInput plan;         ///< workload and the settings of every model it runs
  std::vector<std::int32_t> config;  ///< the plan's joint configuration (kAbsent: not run)
  Measurement measured;              ///< the plan alone on the testbed
  std::uint64_t seed = 1;            ///< of the measurements
  double window_s = 10;              ///< measurement window, seconds

  /// @brief Measures `plan` on `testbed` (noise seeded by `seed`). A measurement that fails
  /// (out of memory, an error) is an error naming the plan: a plan that cannot run has no
  /// load to share.
  static Result<CoRunners> measure(exporting::PlanInput plan, const Testbed& testbed,
                                   std::uint64_t seed, double window_s = 10);

  /// @brief Models the plan runs.
  [[nodiscard]] std::size_t running() const;
  /// @brief VRAM the plan holds, GB (= 1e9 bytes), as measured.
  [[nodiscard]] double vram_gb() const { return measured.gpu.vram_used_gb; }
  /// @brief The measured load as the GPU model's co-runner load on `dev`: the SMs and DRAM
  /// bandwidth the plan keeps busy, the L2 pressure of a co-tenant of that SM share, its power
  /// activity, and one co-located workload per running model (for the launch delay).
  [[nodiscard]] gpu::Load load(const gpu::DeviceModel& dev) const;
};

/// @brief Reads `plan_file` (any format exporting::parse_plan_input reads; `workload_file`
/// overrides the workload it names) and measures it on `testbed`.
Result<std::shared_ptr<const CoRunners>> load_corunners(const std::filesystem::path& plan_file,
                                                        const std::string& workload_file,
                                                        const Catalog& catalog,
                                                        const Testbed& testbed, std::uint64_t seed);

/// @brief The co-runners `scenario` names (`co_running:`, paths relative to its file), measured
/// on `testbed` with the scenario's seed; nullptr when it names none.
Result<std::shared_ptr<const CoRunners>> scenario_corunners(const Scenario& scenario,
                                                            const Catalog& catalog,
                                                            const Testbed& testbed);

}  // namespace corun::mapping
