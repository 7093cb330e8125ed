#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/plan/solver.h"

namespace corun {

/// @brief Why one model's SLA cannot be held, and what limits it.
struct Infeasibility {
  std::size_t model = 0;
  std::string name;
  std::string sla_key;  ///< "ttft_ms_p95", "latency_ms_p95", ...
  double limit = 0;     ///< the SLA value
  /// The predicted value of that metric in the configuration that comes closest to its limit
  /// at the planned margin, that margin, and the configuration.
  double best = 0;
  double best_margin = 0;
  std::string best_config;
  /// true: not even alone on the GPU; false: not next to the other models (it was the least
  /// weighted one that could not fit).
  bool alone = true;
  /// What limits it: the demand against the capacity of its fastest configuration, or "the
  /// other models" ("demand 1.5 requests/s exceeds the ≈ 0.9 requests/s the largest
  /// request_concurrency serves").
  std::string cause;
  /// The share of its demand the plan admits instead (ControllerOptions::admission): 1 = all of it,
  /// best effort; 0 = paused.
  double admitted = 1;
  /// Above 0: the SLA holds as predicted, but a share this large of the model's demand measured
  /// above its limit at the planned margin (Controller's share ceiling), so the prediction is
  /// not trusted for all of it; `best` is that prediction.
  double measured_share = 0;

  /// @brief "chat: ttft_ms_p95 1500 cannot be met: best 9,900 ms (11,880 ms at its planned
  /// margin of 20 %) at precision=awq,...; CAUSE".
  [[nodiscard]] std::string message() const;
  /// @brief "; corun admits 62 % of its demand and refuses the rest", "; paused: ...", or ""
  /// when it admits all of its demand.
  [[nodiscard]] std::string admission() const;
};

/// @brief Why model `m` of `spec`, held as predicted in configuration `config`, still admits
/// only part of its demand: a share `measured_share` of it measured above its limit at the
/// planned margin. The key is the one closest to its limit under `predicted` and `margin`.
Infeasibility measured_ceiling(const ModelSpec& spec, std::size_t m, std::int32_t config,
                               const Predicted& predicted, const Margin& margin,
                               double measured_share);

/// @brief A plan under the degradation rule, and why it was needed.
struct DegradedPlan {
  PlanResult result;
  std::vector<Infeasibility> why;  ///< empty when every SLA holds
  std::vector<bool> best_effort;   ///< per model: SLA given up
};

/// @brief Solves `problem`; when no plan meets every SLA, applies corun's degradation rule:
/// 1. a model whose SLA no configuration meets even alone on the GPU is run best effort — its
///    SLA stops constraining the plan and it is pinned to the configuration closest to its SLA
///    alone — and every other model is planned as usual;
/// 2. while the rest still cannot all be held, one more model gives up its SLA: the one with the
///    lowest objective weight whose giving up lets every remaining SLA hold, or, when no single
///    one does, the lowest-weighted one the least-violating plan breaches (ties: the larger
///    breach). It is not pinned, so the search may move it to whatever configuration lets the
///    others hold.
/// Each given-up SLA is explained (Infeasibility). The answer's `feasible` says whether every
/// remaining SLA holds. A model the problem pins (PlanProblem::pin) stays in its configuration
/// through every step.
Result<DegradedPlan> solve_degrading(const Context& ctx, const PlanProblem& problem,
                                     const Solver& solver, const SolverOptions& options);

}  // namespace corun
