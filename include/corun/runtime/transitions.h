#pragma once

#include "corun/core/result.h"

namespace corun {

/// @brief How the planner prices a change of the plan in force (docs/scheduler.md,
/// "Transitions"). A change of model m from configuration a to b costs the utility
///   after a break:         (outage_s + warm-up seconds) × m's utility per second in a
///   make-before-break:     ModelTransition::swap_gpu_seconds() × the utility per second of
///                          every model in the plan in force (the new copy's start runs
///                          kernels beside them all)
/// (utility per second: weight × quality of the configuration in force), spread over the
/// horizon H: the solver maximises utility − cost / H. H is `horizon_s` when set, else the mean gap
/// between the workload events seen so far, with `default_horizon_s` counted as one gap before the
/// first (the expected time until the next event makes the plan stale anyway), and never
/// below `min_horizon_s`. Within `min_dwell_s` of its last reload or restart, a model may
/// change only live knobs, unless the plan in force no longer holds every SLA as predicted
/// or a measured breach asked for the decision: a needed change is always allowed.
struct TransitionOptions {
  /// false ("ignore"): every change is free to the planner, as before transitions were
  /// priced; the testbeds charge them all the same.
  bool aware = true;
  /// Horizon in seconds (check = [0, 1e6]); 0: estimated from the events seen.
  double horizon_s = 0;
  /// The estimate's prior gap before any event is seen (check = (0, 1e6]).
  double default_horizon_s = 300;
  /// The estimate's floor (check = (0, 1e6]).
  double min_horizon_s = 60;
  /// Minimum time between two reload- or restart-class changes of one model (check = [0,
  /// 1e6]).
  double min_dwell_s = 60;
  /// Hysteresis, in sds of one window's noise of the model's SLA metric (check = [0, 10]):
  /// while a model's configuration in force holds its SLA as predicted, a configuration that
  /// would reload or restart it must hold its SLA with its margin widened by
  /// expm1(hysteresis_sd × noise sd), so that a bound moving within the noise of the windows
  /// that taught it does not flip a plan back and forth.
  double hysteresis_sd = 1;
  /// The length of the windows SLAs are judged over, in seconds (check = (0, 3600]): a
  /// make-before-break swap whose new copy's start-up kernels would, as predicted, push a model
  /// of the plan in force past its SLA costs every model's utility over each window the kernels
  /// touch, instead of their GPU-seconds. corun run sets it to the workload's interval.
  double window_s = 10;
};

/// @brief Checks every field of `o` against its declared range; the error names the field
/// ("transitions.window_s: ...").
Status check(const TransitionOptions& o);

}  // namespace corun
