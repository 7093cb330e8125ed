#pragma once

// A workload's declared recurring tool burst (`tools: {scenario: ..., every_s: ...}`) as the
// configuration planner sees it: the load the tools put on the GPU when every call runs there.

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "corun/core/result.h"
#include "corun/mapping/burst.h"
#include "corun/mapping/tools.h"
#include "corun/spec/workload.h"

namespace corun::mapping {

/// @brief What a workload's tools do to its GPU each time they arrive.
struct DeclaredBurst {
  std::string scenario_file;  ///< the scenario as resolved (relative to the workload's directory)
  std::size_t calls = 0;      ///< tool calls in the DAG
  double every_s = 0;         ///< seconds from one burst's start to the next
  double gpu_share = 1;       ///< the tools' share of the SMs (their MPS partition; 1: all)
  double makespan_ms = 0;     ///< the DAG's makespan with every call on the GPU, alone on it
  BurstLoad load;             ///< the GPU load meanwhile (mean SM share and bandwidth)

  /// @brief The burst as the testbed's synthetic co-tenant (Conditions::interference): its
  /// mean SM share and bandwidth share of the achievable.
  [[nodiscard]] Interference interference() const { return {load.sm_util, load.bw_util}; }
  /// @brief Fraction of the time the tools compute on the GPU: burst length / every_s (1 when
  /// the bursts overlap: the GPU is never free of them).
  [[nodiscard]] double duty() const;
};

/// @brief Reads the scenario `w.tools` names (an error naming `tools.scenario` and the workload
/// file when it cannot be read or names its own `co_running` plan: in a workload the
/// co-runners are the workload's models) and runs its DAG on the workload's device with every
/// call that may use the GPU queued for it (gpu_queue), alone on the GPU, without noise: the
/// heaviest load the tools can put there, whatever placement they later get: once per entry
/// of `gpu_shares`, in that order, the tools confined to that share of the SMs
/// (PlacementProblem::set_tool_gpu_share; below 1, a longer burst that leaves the rest to the
/// co-runners). The scenario is read once. Deterministic; about a millisecond per share.
/// @pre w.tools is set; every share in (0, 1].
Result<std::vector<DeclaredBurst>> declared_bursts(const Workload& w, const ToolCatalog& tools,
                                                   std::span<const double> gpu_shares);

/// @brief The tools' SM shares a plan tries, largest first, when the burst at a larger one
/// leaves no plan that holds every SLA: 1, 3/4, 1/2, 1/4, 1/8.
inline constexpr double kToolGpuShares[] = {1.0, 0.75, 0.5, 0.25, 0.125};

}  // namespace corun::mapping
