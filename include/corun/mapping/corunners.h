#pragma once

// The models co-running on the GPU under the plan in force: what a tool placement shares the
// GPU with. Their SM and bandwidth load and their VRAM come from the testbed's measurement of
// the plan, never from a typed guess.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "corun/core/context.h"
#include "corun/catalog/catalog.h"
#include "corun/core/result.h"
#include "corun/export/plan_input.h"
#include "corun/mapping/burst.h"
#include "corun/mapping/scenario.h"
#include "corun/testbed/gpu_model.h"
#include "corun/testbed/testbed.h"

namespace corun::mapping {

/// @brief One SLA of one co-running model, measured while the tools' burst runs.
struct SlaOutcome {
  std::string model;   ///< workload model name
  std::string metric;  ///< "latency_ms_p95", "ttft_ms_p95", "tpot_ms_p95", "min_throughput"
  double sla = 0;      ///< the bound
  double alone = 0;    ///< measured without the tools
  double during = 0;   ///< measured with the tools' burst on the GPU
  bool breached_alone = false;  ///< the plan violates it without tools (not the tools' doing)
  /// `during` violates the bound (a throughput below, the rest above) and `alone` did not: the
  /// burst broke it.
  bool breached = false;

  /// @brief How far `during` is past the bound, as a fraction of it (0.14: 14 % above a
  /// latency bound or below a throughput floor); 0 or less when it holds.
  [[nodiscard]] double excess() const;
  /// @brief "chat ttft_ms_p95 912.3 > 800 (+14.0 %)".
  [[nodiscard]] std::string describe() const;
};

/// @brief {model, metric, sla, alone, during, excess, breached, breached_alone, describe}.
nlohmann::json to_json(const SlaOutcome& outcome);

/// @brief Every SLA of every model in `during` against its value in `alone` (same models, same
/// order): one outcome per bound the workload sets.
std::vector<SlaOutcome> compare_slas(const Workload& workload, std::span<const ModelMetrics> alone,
                                     std::span<const ModelMetrics> during);

class CoRunnerGuard;

/// @brief A planned co-running workload and what the testbed measured for it without tools.
/// Immutable after measure(); safe to share between threads.
struct CoRunners {
  exporting::PlanInput plan;         ///< workload and the settings of every model it runs
  std::vector<std::int32_t> config;  ///< the plan's joint configuration (kAbsent: not run)
  Measurement measured;              ///< the plan alone on the testbed
  Context context;                   ///< what it was measured under (the noise's seed)
  double window_s = 10;              ///< measurement window, seconds
  std::string testbed;               ///< name of the testbed that measured it
  /// The planner's prediction of the co-runners' SLAs during a tool burst (nullptr: none was
  /// fitted); never consulted to score.
  std::shared_ptr<const CoRunnerGuard> guard;

  /// @brief Measures `plan` on `testbed` (noise seeded by `ctx.seed`). A measurement that fails
  /// (out of memory, an error) is an error naming the plan: a plan that cannot run has no
  /// load to share.
  static Result<CoRunners> measure(const Context& ctx, exporting::PlanInput plan,
                                   const Testbed& testbed, double window_s = 10);

  /// @brief Models the plan runs.
  [[nodiscard]] std::size_t running() const;
  /// @brief VRAM the plan holds, GB (= 1e9 bytes), as measured.
  [[nodiscard]] double vram_gb() const { return measured.gpu.vram_used_gb; }
  /// @brief The measured load as the GPU model's co-runner load on `dev`: the SMs and DRAM
  /// bandwidth the plan keeps busy, the L2 pressure of a co-tenant of that SM share, its power
  /// activity, and one co-located workload per running model (for the launch delay).
  [[nodiscard]] gpu::Load load(const gpu::DeviceModel& dev) const;

  /// @brief Every SLA of every running model, measured on `testbed` with the tools' `burst`
  /// on the GPU as a co-tenant holding its mean SM share and bandwidth for the whole window
  /// (ground truth; same seed as the plan's own measurement, so only the burst differs). An
  /// empty burst measures nothing new: every SLA is as the plan alone. A failed measurement
  /// is an error.
  [[nodiscard]] Result<std::vector<SlaOutcome>> during(const BurstLoad& burst,
                                                       const Testbed& testbed) const;
};

/// @brief The breached entries of `outcomes`.
std::vector<SlaOutcome> breaches(const std::vector<SlaOutcome>& outcomes);

/// @brief The largest excess() among the breached entries of `outcomes`; 0 when none is.
double worst_excess(const std::vector<SlaOutcome>& outcomes);

/// @brief Reads `plan_file` (any format exporting::parse_plan_input reads; `workload_file`
/// overrides the workload it names), measures it on `testbed`, and guards it with a MeanField
/// surrogate profiled on `testbed` (CoRunnerGuard::fit, seeded by `ctx.seed`).
Result<std::shared_ptr<const CoRunners>> load_corunners(const Context& ctx,
                                                        const std::filesystem::path& plan_file,
                                                        const std::string& workload_file,
                                                        const Catalog& catalog,
                                                        const Testbed& testbed);

/// @brief Measures `plan` on `testbed` (noise seeded by `ctx.seed`) and guards it with a MeanField
/// surrogate profiled on `testbed` (CoRunnerGuard::fit): what load_corunners() does once the
/// plan is read, for a plan obtained otherwise (the service's plan in force). Deterministic by
/// seed; costs a surrogate fit (about a second for five models on the simulator).
/// Thread-safety: reentrant when `testbed` is.
Result<std::shared_ptr<const CoRunners>> guarded_corunners(const Context& ctx,
                                                           exporting::PlanInput plan,
                                                           const Testbed& testbed);

/// @brief The co-runners `scenario` names (`co_running:`, paths relative to its file), measured
/// and guarded as load_corunners() does with the scenario's seed; nullptr when it names none.
Result<std::shared_ptr<const CoRunners>> scenario_corunners(const Scenario& scenario,
                                                            const Catalog& catalog,
                                                            const Testbed& testbed);

}  // namespace corun::mapping
