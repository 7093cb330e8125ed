#pragma once

#include <optional>
#include <vector>

#include "corun/core/result.h"
#include "corun/spec/workload.h"

namespace corun {

/// @brief How GPU activity the plan in force does not explain is told and planned with
/// (docs/stack.md, "GPU activity"): the GPU's measured SM and DRAM activity (DCGM's in
/// `corun serve`, the testbed's in `corun run`) against what the catalog twin predicts for
/// the plan's configurations. An excess of at least `min_share` in
/// `windows` windows in a row is an unexplained load (a process corun does not plan: another
/// tenant, a training job, a profiler); it is gone after as many windows below. While it is
/// there, the planner predicts every model beside it (Controller::set_gpu_load): the mean
/// excess of the windows that confirmed it, re-estimated when `windows` windows in a row
/// differ from it by `min_share` or more.
struct UnexplainedLoadOptions {
  /// Of the SMs (or of the DRAM bandwidth); check = (0, 1]. Above the twin's own error: a GPU
  /// 10-40 % off its catalog description moves the predicted SM activity by up to 0.20 and
  /// DRAM activity by up to 0.16 (SimTruth::perturbed seeds 1, 2, 3, 7, 11 against the twin on
  /// workloads/paper-n3, paper-n5, mix-l4 and mix-a100; docs/stack.md).
  double min_share = 0.25;
  int windows = 3;  ///< check = [1, 100]
  /// Whether the planner is told the load (false: it is reported only).
  bool plan_with = true;
};

/// @brief Checks the fields; the error names the one out of range.
Status check(const UnexplainedLoadOptions& o);

/// @brief The unexplained-load rule over successive windows. Not thread-safe.
class UnexplainedLoad {
 public:
  explicit UnexplainedLoad(UnexplainedLoadOptions o = {}) : options_(o) {}
  /// @brief One window's measured and predicted activity (0..1); DRAM only when both are
  /// known. True when the verdict (present()) changed with this window.
  bool observe(double sm_measured, double sm_predicted, std::optional<double> dram_measured,
               std::optional<double> dram_predicted);
  /// @brief Whether an unexplained load is reported.
  [[nodiscard]] bool present() const { return present_; }
  /// @brief The load to plan with: none while no load is present; else the mean excess of
  /// the windows that confirmed it (or last re-estimated it), clamped to [0, 1]. Without a DRAM
  /// measurement the load is taken to keep as much of the bandwidth busy as of the SMs.
  [[nodiscard]] const Interference& planned() const { return planned_; }
  /// @brief The last window's excess (measured minus predicted; negative when the plan's
  /// models were predicted busier than measured).
  [[nodiscard]] double sm_excess() const { return sm_excess_; }
  [[nodiscard]] std::optional<double> dram_excess() const { return dram_excess_; }

 private:
  UnexplainedLoadOptions options_;
  bool present_ = false;
  std::vector<Interference> streak_;  ///< windows in a row that disagree with present_
  std::vector<Interference> moved_;   ///< while present: windows in a row off planned_
  Interference planned_;
  double sm_excess_ = 0;
  std::optional<double> dram_excess_;
};

}  // namespace corun
