#pragma once

#include <cstdint>
#include <string>

#include "corun/testbed/testbed.h"

namespace corun {

/// @brief Hidden multipliers of the simulator's physical parameters: how a real GPU differs
/// from its datasheet and from corun's calibration. 1 everywhere is the catalog's twin.
/// perturbed() draws each one 1 +- U(0.1, 0.4) with a random sign, so that every parameter is
/// off by 10-40 %, as achieved bandwidth, kernel efficiency and launch overheads of real boards
/// and software stacks differ from nominal ones.
struct SimTruth {
  double bandwidth = 1;       ///< achievable DRAM bandwidth
  double compute = 1;         ///< sustained math throughput (kernel efficiency)
  double l2_sensitivity = 1;  ///< how much co-runners' L2 pressure slows a phase
  double launch = 1;          ///< per-kernel launch and fixed costs
  double power = 1;           ///< dynamic power (how soon the power limiter throttles)
  Context context{.seed = 0};  ///< what perturbed() drew them from (seed 0: unperturbed)

  /// @brief Multipliers drawn from `ctx.seed` (deterministic).
  static SimTruth perturbed(const Context& ctx);
  /// @brief "bandwidth x0.83, compute x1.21, ..." for logs and reports.
  [[nodiscard]] std::string describe() const;
};

/// @brief The simulated shared GPU: corun's embedded default testbed and CI's ground truth.
/// An analytic contention model solved to a fixed point, plus queueing and seeded noise; see
/// docs/testbed.md for every effect and the published magnitudes it reproduces. Stateless and
/// thread-safe.
class SimTestbed final : public Testbed {
 public:
  /// @param truth hidden parameter multipliers (default: the catalog's twin)
  explicit SimTestbed(SimTruth truth = {});
  /// @brief "sim", or "sim:perturb=SEED" for a perturbed truth.
  [[nodiscard]] std::string_view name() const override { return name_; }
  [[nodiscard]] const SimTruth& truth() const { return truth_; }
  Measurement measure(const Context& ctx, const Workload& w, std::span<const std::int32_t> config,
                      const MeasureOptions& options) const override;

 private:
  SimTruth truth_;
  std::string name_;
};

}  // namespace corun
