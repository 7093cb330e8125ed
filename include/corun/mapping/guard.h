#pragma once

// The planner's side of protecting the co-running models: what their SLAs would become while a
// tool burst runs, PREDICTED through the MeanField surrogate of the co-running workload (the
// tools enter the aggregate GPU state as one more co-runner holding the burst's mean SM share
// and bandwidth for the burst's duration). It never measures: the testbed's verdict on a burst
// is CoRunners::during(), used only to score.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "corun/core/result.h"
#include "corun/mapping/burst.h"
#include "corun/mapping/corunners.h"
#include "corun/surrogate/surrogate.h"
#include "corun/testbed/testbed.h"

namespace corun::mapping {

/// @brief How each co-running model's metrics respond to the aggregate load of the others (the
/// MeanField view). Implementations are immutable and thread-safe.
class AggregatePredictor {
 public:
  virtual ~AggregatePredictor() = default;
  /// @brief Model `m` in local configuration `l` when the other workloads on the GPU add up to
  /// `others`: writes surrogate::kTargetCount values in natural units (ms, items/s), indexed by
  /// surrogate::Target, NaN where a target does not apply.
  virtual void predict(std::size_t m, std::size_t l, const surrogate::Totals& others,
                       std::span<double> out) const = 0;
  /// @brief What model `m` in local configuration `l` adds to the others' aggregate.
  [[nodiscard]] virtual surrogate::Totals contribution(std::size_t m, std::size_t l) const = 0;
};

/// @brief A compiled mean-field surrogate (every kind but joint) as an AggregatePredictor; an
/// error for the joint kind, which has no aggregate to add the tools to.
Result<std::shared_ptr<const AggregatePredictor>> surrogate_predictor(
    surrogate::CompiledSurrogate compiled);

/// @brief How CoRunnerGuard::fit obtains its surrogate (defaults: `corun run`'s budgets).
struct GuardFitOptions {
  std::uint64_t standalone_repeats = 3;  ///< passes over every local configuration alone
  std::uint64_t corun_budget = 0;        ///< MeanField co-run samples; 0 = 20 x models
  /// Co-run samples measured next to a synthetic co-tenant (the testbed's
  /// Conditions::interference) of SM share U(0, 1) and bandwidth U(0, max_cotenant_bw_util)
  /// of the achievable; 0 = corun_budget's value.
  std::uint64_t cotenant_budget = 0;
  double max_cotenant_bw_util = 0.5;
  surrogate::RegressorKind regressor = surrogate::RegressorKind::kGbdt;
  surrogate::SurrogateKind kind = surrogate::SurrogateKind::kMeanField;
};

/// @brief Predicts the co-running models' SLAs during a tool burst. Immutable after
/// construction; safe to share between threads.
///
/// Prediction for running model k in configuration l_k, with A = the sum of the other running
/// models' contributions and T = the burst's contribution (burst_contribution()):
///   predicted_k = measured_alone_k x f_k(A + T) / f_k(A)
/// where f_k is the predictor and measured_alone_k what the testbed observed for the plan in
/// force (CoRunners::measured, the state the tools join). Anchoring on the observed value keeps
/// the surrogate's bias on the plan itself out of the verdict, as the online loop's correction
/// does; only the surrogate's slowdown from A to A + T is predicted. A target with no measured
/// value is predicted as f_k(A + T).
class CoRunnerGuard {
 public:
  /// @brief Guards `co` with `predictor`, whose model indices are those of co.plan.workload.
  /// `source` says where the predictor came from (reports print it).
  CoRunnerGuard(const CoRunners& co, std::shared_ptr<const AggregatePredictor> predictor,
                std::string source);

  /// @brief Profiles co.plan.workload on `testbed` (every local configuration alone, then a
  /// MeanField co-run campaign, both seeded by co.seed) and fits a monotone MeanField surrogate
  /// on it, as `corun run` obtains one: deterministic by seed. Errors name the plan file.
  static Result<CoRunnerGuard> fit(const CoRunners& co, const Testbed& testbed,
                                   const GuardFitOptions& options = {});
  /// @brief Guards `co` with a fitted surrogate of its workload (e.g. a stored surrogate.json,
  /// or the one `corun serve` plans with); an error when it does not fit the workload or is of
  /// the joint kind.
  static Result<CoRunnerGuard> from_surrogate(const CoRunners& co, const surrogate::Surrogate& s,
                                              std::string source);

  /// @brief The burst as one more co-runner in the surrogate's aggregate: an unmanaged
  /// co-tenant of its mean SM share and bandwidth over the burst (surrogate::cotenant_totals on
  /// the co-runners' device). Zero for an empty burst.
  [[nodiscard]] surrogate::Totals burst_contribution(const BurstLoad& burst) const;

  /// @brief Every SLA of every running model, predicted with `burst` on the GPU; `alone` is the
  /// plan's measured value, `during` the prediction, `breached` set when the prediction
  /// violates a bound the plan meets alone. An empty burst predicts the plan unchanged.
  [[nodiscard]] std::vector<SlaOutcome> predict(const BurstLoad& burst) const;

  /// @brief Where the predictor came from ("meanfield gbdt fitted on sim, seed 604, ...").
  [[nodiscard]] const std::string& source() const { return source_; }

 private:
  std::shared_ptr<const AggregatePredictor> predictor_;
  Workload workload_;
  std::vector<std::int32_t> config_;
  std::vector<ModelMetrics> alone_;  ///< measured, one per running model
  std::string source_;
};

/// @brief The breached entries of a guard's prediction for `burst`: what would break, by how
/// much, predicted.
std::vector<SlaOutcome> predicted_breaches(const CoRunnerGuard& guard, const BurstLoad& burst);

}  // namespace corun::mapping
