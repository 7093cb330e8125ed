#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "corun/plan/predictor.h"
#include "corun/plan/sla_keys.h"
#include "corun/space/space.h"
#include "corun/spec/workload.h"

namespace corun {

/// @brief Quality of a model in a configuration, relative to the catalog's published score at
/// its reference setting: vision mAP scaled by image size, LLM quality scaled by precision.
/// Returns the model's catalog quality times the factor (or just the factor when the catalog
/// gives no score). Sources for both factors are in objective.cc.
double config_quality(const ModelSpec& m, const Settings& s);

/// @brief Fraction of the offered demand a model serves: (1 - skip_rate) for vision, times
/// min(1, throughput / offered) with offered frames/s or output tokens/s.
double served_fraction(const ModelSpec& m, const Settings& s, double throughput);

/// @brief The throughput a planner judges a configuration at, from its predicted metrics: the
/// predicted throughput, except that an LLM whose predicted requests in the system stay below
/// its request_concurrency (Little's law at its demand: rps × (TTFT + output tokens × TPOT),
/// the p95s, an upper bound on the mean latency) keeps up with its demand and is judged at its
/// offered output tokens/s where the throughput predicted is lower. An LLM's measured
/// throughput is the output tokens completed in a window: below the demand by the requests
/// still in flight at its end and by the window's arrival count (15 ± 4 requests at 1.5 rps in
/// 10 s), and the surrogate learns that count noise as if it were capacity (docs/scheduler.md,
/// "Objective and constraints"). Ground truth never goes through this: measured utility is
/// judged at measured throughput (model_utility()).
double planned_throughput(const ModelSpec& m, const Settings& s, const Predicted& p);

/// @brief Utility of model m of `w` in local configuration l with metrics p: weight × quality ×
/// served fraction (objective "utility"), or weight × served fraction ("throughput").
/// PlanProblem::model_utility is the same, from cached tables.
double model_utility(const Workload& w, std::size_t m, std::int32_t l, const Predicted& p);

/// @brief model_utility() of predicted metrics as the planner judges them: at
/// planned_throughput(). What a plan is predicted to earn; ground truth uses model_utility().
double planned_utility(const Workload& w, std::size_t m, std::int32_t l, const Predicted& p);

/// @brief Margins of every model in every local configuration: [model][local config].
using MarginTable = std::vector<std::vector<Margin>>;

/// @brief Whether metrics meet a model's SLA after inflating latencies by (1 + margin).
bool meets_sla(const ModelSpec& m, const Predicted& p, const Margin& margin);

/// @brief How far metrics are from the SLA: sum over constrained metrics of
/// max(0, value·(1+margin)/limit - 1). 0 means the SLA holds.
double sla_excess(const ModelSpec& m, const Predicted& p, const Margin& margin);

/// Where the fitness of infeasible plans starts (Score::fitness, NodePlan::fitness): below the
/// utility of every feasible plan, which is never negative, going down with the plan's excess.
inline constexpr double kInfeasibleFitness = -1e6;

/// @brief Whether a fitness is that of a feasible plan (Score::fitness, NodePlan::fitness).
[[nodiscard]] constexpr bool is_feasible_fitness(double fitness) {
  return fitness > kInfeasibleFitness / 2;
}

/// @brief A planning problem: which models run, what they may use, how plans are scored.
/// Owns the per-(model, local config) tables the solvers need; cheap to query, thread-safe.
class PlanProblem {
 public:
  /// @param w the workload (outlives the problem)
  /// @param active which models run (size = models; inactive ones are kAbsent in every plan)
  /// @param predictor predictions for candidate plans (outlives the problem)
  /// @param margins per-model latency margin on every metric (0.1 = keep 10 % headroom); empty
  /// = none
  PlanProblem(const Workload& w, std::vector<bool> active, const Predictor& predictor,
              std::vector<double> margins = {});
  /// @param margins per (model, local configuration) margins: a configuration the online loop
  /// has observed may be planned closer to the SLA than one it has not
  PlanProblem(const Workload& w, std::vector<bool> active, const Predictor& predictor,
              MarginTable margins);

  [[nodiscard]] const Workload& workload() const { return *workload_; }
  [[nodiscard]] const Predictor& predictor() const { return *predictor_; }
  [[nodiscard]] const ConfigSpace& space() const { return space_; }
  [[nodiscard]] std::size_t models() const { return workload_->models.size(); }
  [[nodiscard]] bool active(std::size_t m) const { return active_[m]; }
  [[nodiscard]] const std::vector<std::size_t>& active_models() const { return active_list_; }
  [[nodiscard]] std::size_t local_count(std::size_t m) const { return space_.local_counts()[m]; }
  [[nodiscard]] const MarginTable& margins() const { return margins_; }
  [[nodiscard]] const Margin& margin(std::size_t m, std::int32_t l) const {
    return margins_[m][static_cast<std::size_t>(l)];
  }
  /// @brief sla_excess of model m in local configuration l with predictions p, at its margin;
  /// a configuration a pin excludes counts as one full SLA excess.
  [[nodiscard]] double excess(std::size_t m, std::int32_t l, const Predicted& p) const {
    const bool out = (pinned_[m] != kAbsent && pinned_[m] != l) ||
                     (!allowed_.empty() && !allowed_[m][static_cast<std::size_t>(l)]);
    return (out ? 1.0 : 0.0) + sla_excess(workload_->models[m], p, margin(m, l));
  }
  /// @brief Restricts model m to local configuration l: every other configuration of it scores
  /// as infeasible, so every solver keeps it there. Call before the problem is given to a
  /// solver (not thread-safe against solving).
  void pin(std::size_t m, std::int32_t l) { pinned_[m] = l; }
  /// @brief The configuration model m is pinned to, or kAbsent.
  [[nodiscard]] std::int32_t pinned(std::size_t m) const { return pinned_[m]; }
  /// @brief What moving each model to each of its local configurations costs, in utility
  /// (per model: one value per local configuration, >= 0; the plan in force's own is 0):
  /// model_utility() subtracts it, so every solver maximises utility net of transitions. The
  /// cost depends on the model's own configuration only, so the problem stays separable: an
  /// upper bound on a model's utility minus its cost (a constant per configuration) is still
  /// an upper bound, and the exact solver's bounds, computed through model_utility(), hold.
  /// `allowed` (empty, or one flag per local configuration per model): a configuration not
  /// allowed (a model within its minimum dwell) counts as one full SLA excess, as a pin does.
  /// Call before solving (not thread-safe against solving).
  /// `throughput_scale` (empty, or one factor in (0, 1] per local configuration per model):
  /// the utility of configuration l is judged at its predicted throughput times the factor (a
  /// pessimistic view of a change, TransitionOptions::hysteresis_sd); a constant per
  /// (model, configuration) and monotone, so the bounds above still hold.
  void set_transitions(std::vector<std::vector<double>> cost,
                       std::vector<std::vector<bool>> allowed = {},
                       std::vector<std::vector<double>> throughput_scale = {});
  /// @brief The transition cost of model m to configuration l (0 without set_transitions()).
  [[nodiscard]] double transition_cost(std::size_t m, std::int32_t l) const {
    return cost_.empty() ? 0.0 : cost_[m][static_cast<std::size_t>(l)];
  }
  [[nodiscard]] const std::vector<std::vector<double>>& transition_costs() const { return cost_; }
  [[nodiscard]] const std::vector<std::vector<bool>>& allowed_configs() const { return allowed_; }
  [[nodiscard]] const std::vector<std::vector<double>>& throughput_scales() const {
    return throughput_scale_;
  }
  /// @brief Utility of model m in l with p before its transition cost.
  [[nodiscard]] double gross_utility(std::size_t m, std::int32_t l, const Predicted& p) const;
  [[nodiscard]] double quality(std::size_t m, std::int32_t l) const { return quality_[m][l]; }

  /// @brief Number of joint configurations over the active models (0 when none is active; not
  /// exact beyond 2^64).
  [[nodiscard]] ConfigCount candidate_count() const;

  /// @brief Score of one configuration given its predictions: utility (sum of weight ×
  /// quality × served fraction over active models), and whether every SLA and VRAM holds.
  /// Its fitness() is the utility of a feasible plan (never negative) and, for an infeasible
  /// one, kInfeasibleFitness minus its excess: is_feasible_fitness() tells them apart.
  struct Score {
    double utility = 0;
    double excess = 0;  ///< summed SLA excess (0 when every SLA holds)
    bool fits_vram = true;
    [[nodiscard]] bool feasible() const { return fits_vram && excess == 0; }
    /// @brief Feasible plans rank by utility; infeasible ones below all of them, by excess.
    [[nodiscard]] double fitness() const {
      return feasible() ? utility : kInfeasibleFitness - excess - (fits_vram ? 0 : 1e3);
    }
  };
  [[nodiscard]] Score score(std::span<const std::int32_t> config,
                            std::span<const Predicted> predicted) const;
  /// @brief Utility contributed by model m in configuration l with predictions p.
  [[nodiscard]] double model_utility(std::size_t m, std::int32_t l, const Predicted& p) const;

 private:
  const Workload* workload_;
  const Predictor* predictor_;
  ConfigSpace space_;
  std::vector<bool> active_;
  std::vector<std::size_t> active_list_;
  MarginTable margins_;
  std::vector<std::int32_t> pinned_;
  std::vector<std::vector<double>> cost_;              ///< [model][local]: see set_transitions()
  std::vector<std::vector<bool>> allowed_;             ///< [model][local]; empty: all allowed
  std::vector<std::vector<double>> throughput_scale_;  ///< [model][local]; empty: all 1
  std::vector<std::vector<double>> quality_;
  std::vector<std::vector<Settings>> settings_;
};

}  // namespace corun
