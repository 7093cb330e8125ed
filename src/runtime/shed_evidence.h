#pragma once

// Internal to the controller: what a shed model's measured windows say against admitting more
// of its demand (docs/scheduler.md, "When nothing is feasible").

#include <array>
#include <cstdint>
#include <deque>

#include "corun/plan/objective.h"
#include "corun/runtime/learner.h"
#include "corun/spec/workload.h"

namespace corun::detail {

/// @brief One window of a model run at a share of its demand below 1.
struct ShedWindow {
  std::int32_t local = 0;  ///< its configuration
  double share = 1;        ///< the admitted share of its demand
  double others_load = 0;  ///< its co-runners' load (LoadTable)
  Predicted measured;      ///< what was measured, as_predicted()
};

/// @brief Measured values by Target in the form the SLA test reads: unmeasured ones 0 (they
/// exceed nothing), the throughput unbounded (a sheddable model has no throughput floor).
Predicted as_predicted(const std::array<double, kTargetCount>& measured);

/// @brief Whether a window of `windows` refutes admitting `share` of `spec`'s demand in
/// configuration `local` under co-runners' load `u` at `margin`. A model's latency does not
/// fall as its own share of its demand or its co-runners' load rise, so a window that measured
/// in `local` at a share of at most `share`, under a load of at most `u`, what the planner's own
/// test refuses (its measured value times 1 + `margin` above the SLA) refutes the candidate,
/// whatever the prediction says.
bool refuted(const ModelSpec& spec, const std::deque<ShedWindow>& windows, std::int32_t local,
             double share, double u, const Margin& margin);

}  // namespace corun::detail
