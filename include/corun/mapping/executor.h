#pragma once

// The discrete-event executor: runs one mapping of a tool DAG on one GPU and the host CPU.
//
// Model (docs/placement.md has the derivation):
// - A tool is ready when all its predecessors are done. `cpu` runs at once on its threads;
//   `gpu_now` takes VRAM at once or fails; `gpu_queue` waits in one FIFO until its footprint
//   fits (the head blocks those behind it). VRAM is held from upload start to download end.
// - GPU path: upload (PCIe, shared by concurrent uploads), compute, download (PCIe).
//   Compute is the call's GPU segments in order (a decode step repeated counts as one). Between
//   two events every computing segment runs at the speed the shared GPU model
//   (testbed/gpu_model.h, the simulator's physics) gives it with the other computing segments
//   and the background as co-runners: SM oversubscription, DRAM bandwidth saturation and
//   loaded latency, L2 interference, launch delay growing with co-located workloads, and the
//   power-capped clock of everything computing.
// - CPU: tools share the host's cores and DRAM bandwidth by processor sharing.
// - Observed times carry log-normal noise, keyed by (seed, node, CPU or GPU), so two mappings
//   run with the same seed see the same per-tool luck: common random numbers.

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "corun/core/context.h"
#include "corun/mapping/burst.h"
#include "corun/mapping/problem.h"

namespace corun::mapping {

/// @brief What happened to one tool call in a run.
struct ToolRun {
  enum class Status : std::uint8_t { kDone, kFailed, kSkipped };
  Placement placement = Placement::kCpu;
  Status status = Status::kSkipped;
  double ready_ms = 0;         ///< inputs available
  double start_ms = 0;         ///< began (VRAM taken, or CPU work started)
  double end_ms = 0;           ///< outputs available (download included)
  double queue_wait_ms = 0;    ///< time spent waiting for VRAM (gpu_queue)
  int gpu_corunners = 0;       ///< most other tools on the GPU at once during its run
  bool vram_pressure = false;  ///< it waited for VRAM, or started with < 10 % of it free
  std::string failure;         ///< why it failed or was skipped

  [[nodiscard]] double duration_ms() const { return end_ms - start_ms; }
};

/// @brief The outcome of one DAG run.
struct RunResult {
  double makespan_ms = 0;  ///< end of the last tool that ran
  bool failed = false;     ///< some gpu_now tool found VRAM short (its successors skipped)
  std::vector<ToolRun> tools;
  std::vector<std::string> failures;
  double peak_vram_gb = 0;
  BurstLoad burst;  ///< the tools' GPU load while they computed
};

/// @brief Runs mappings of one problem. Holds scratch buffers so that the hot path
/// (makespan_s) allocates nothing: not thread-safe, use one Executor per thread.
class Executor {
 public:
  explicit Executor(const PlacementProblem& problem);

  [[nodiscard]] const PlacementProblem& problem() const { return *problem_; }

  /// @brief Runs a valid mapping (CHECKed: validate first) exactly, without observation noise
  /// (the true times evaluations judge against), and records every tool's trace.
  RunResult run(std::span<const Placement> mapping);
  /// @brief The same run observed with the scenario's noise, drawn from `ctx.seed`.
  RunResult run(const Context& ctx, std::span<const Placement> mapping);

  /// @brief Makespan in seconds of a valid mapping, exact; +infinity when a tool fails.
  double makespan_s(std::span<const Placement> mapping);
  /// @brief The same makespan observed with the scenario's noise, drawn from `ctx.seed`.
  double makespan_s(const Context& ctx, std::span<const Placement> mapping);

  static constexpr double kFailed = std::numeric_limits<double>::infinity();

  /// @brief The burst of the last run or makespan_s call.
  [[nodiscard]] const BurstLoad& last_burst() const { return burst_; }

 private:
  enum Phase : std::uint8_t {
    kWaiting,
    kQueued,
    kUpload,
    kCompute,
    kDownload,
    kCpuRun,
    kDone,
    kFailedPhase
  };

  /// One run of the event loop (executor.cc).
  template <bool kTrace>
  class Simulation;

  /// `noise`: the stream of the observation noise, or nullptr for an exact run.
  RunResult traced(std::span<const Placement> mapping, const Context* noise);
  template <bool kTrace>
  double simulate(std::span<const Placement> mapping, const Context* noise, RunResult* out);

  const PlacementProblem* problem_;
  // Scratch, sized once.
  std::vector<std::uint8_t> phase_;
  std::vector<std::size_t> segment_;  // GPU segment of the compute phase in progress
  std::vector<int> pending_;
  std::vector<double> remaining_;
  std::vector<double> rate_;
  std::vector<double> gpu_factor_;
  std::vector<double> cpu_factor_;
  std::vector<std::size_t> active_;
  std::vector<std::size_t> queue_;
  std::vector<std::size_t> ready_;
  BurstLoad burst_;
};

}  // namespace corun::mapping
