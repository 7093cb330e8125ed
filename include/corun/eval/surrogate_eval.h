#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/profile/progress.h"
#include "corun/spec/workload.h"
#include "corun/surrogate/surrogate.h"
#include "corun/testbed/testbed.h"

namespace corun::eval {

/// @brief One surrogate configuration under evaluation.
struct SurrogateSpec {
  surrogate::SurrogateKind kind = surrogate::SurrogateKind::kMeanField;
  surrogate::RegressorKind regressor = surrogate::RegressorKind::kMlp;
  bool monotone = false;  ///< FitOptions::monotone; reported as regressor "gbdt-monotone"

  /// @brief The regressor column of the results: "mlp", "gbdt", "gbdt-monotone", ...
  [[nodiscard]] std::string regressor_label() const {
    return std::string(surrogate::to_string(regressor)) + (monotone ? "-monotone" : "");
  }
};

/// @brief The surrogates `corun eval surrogate` compares by default: MeanField with its MLP and
/// its GBDT alternative, the Abacus-style joint MLP and the gpulet-style pairwise linear model.
std::vector<SurrogateSpec> default_surrogates();

/// @brief What to evaluate.
struct SurrogateEvalOptions {
  std::size_t n_min = 2;
  std::size_t n_max = 6;
  int seeds = 3;
  /// Co-run budgets as multiples of N. The table is 5, 10, 20, 40; the smaller ones
  /// resolve the budget needed for R^2 >= 0.95 more finely.
  std::vector<int> budget_multipliers = {1, 2, 3, 5, 10, 20, 40};
  std::size_t heldout = 500;  ///< random joint configurations measured per (N, seed)
  /// Measurements of each held-out configuration; the truth is their geometric mean. Scores
  /// against the first measurement alone are reported too, next to the test-retest ceiling.
  int heldout_repeats = 5;
  /// Passes of the standalone profile, averaged (StandaloneTable). Counted in
  /// standalone_measurements.
  int standalone_repeats = 5;
  /// Window of the standalone measurements (0: window_s). Standalone profiling is linear in N,
  /// so it can afford longer windows than the co-run campaign.
  double standalone_window_s = 0;
  double window_s = 10;
  std::vector<SurrogateSpec> surrogates = default_surrogates();
  surrogate::RegressorOptions regressor_options;
  /// Onboarding: for each N >= 3, the last model of the prefix is only profiled standalone
  /// and predicted by the cross-model MeanField variant. Off when false.
  bool onboarding = true;
  int onboarding_multiplier = 20;  ///< co-run budget of the onboarding fit, times N
  /// Trees handle the heterogeneity of families and targets in one shared model better than
  /// the MLP does (measured: MAPE 6 % vs 14 % on paper-n6 at N = 6).
  surrogate::RegressorKind onboarding_regressor = surrogate::RegressorKind::kGbdt;
};

/// @brief Scores of one (N, surrogate, budget), averaged over seeds. All R^2 are computed on
/// log values of testbed measurements of held-out configurations (targets span orders of
/// magnitude; the surrogates fit in log space); MAPE on the values themselves.
struct SurrogateEvalRow {
  std::size_t n = 0;
  std::string surrogate;
  std::string regressor;
  std::size_t budget = 0;  ///< co-run measurements (joint configurations) trained on
  int budget_multiplier = 0;
  std::size_t standalone_measurements = 0;  ///< 0 for the joint surrogate, which uses none
  double r2_pooled = 0;                     ///< over every (sample, model, latency target) point
  double r2_macro = 0;  ///< mean over models of the model's mean R^2 over its latency targets
  double r2_pooled_single = 0;  ///< the same against one held-out measurement, not the mean
  double r2_macro_single = 0;
  double mape = 0;           ///< latency targets, in %
  double r2_throughput = 0;  ///< pooled R^2 of throughput, reported apart
  double coverage95 = 0;     ///< held-out latencies under the error model's 95 % bound (MeanField)
  std::vector<double> r2_per_model;  ///< per model, in workload order
  int seeds = 0;
  std::size_t heldout_points = 0;  ///< latency points scored per seed (mean)
};

/// @brief Smallest budget (of the evaluated ones) whose mean pooled R^2 reaches 0.95, and the
/// smallest whose macro R^2 reaches 0.90 (the stricter criterion: pooling across models with
/// latencies from milliseconds to seconds makes pooled R^2 high at almost any budget).
struct BudgetNeeded {
  std::size_t n = 0;
  std::string surrogate;
  std::string regressor;
  std::optional<std::size_t> budget;        ///< none when no evaluated budget reached it
  std::optional<std::size_t> budget_macro;  ///< for r2_macro >= 0.90
};

/// @brief How well one testbed measurement predicts another of the same configuration
/// (test-retest R^2, same definitions): the noise ceiling of the `_single` scores.
struct NoiseCeiling {
  std::size_t n = 0;
  double r2_pooled = 0;
  double r2_macro = 0;
};

/// @brief A model only profiled standalone, predicted by the cross-model variant.
struct OnboardingRow {
  std::size_t n = 0;
  std::string model;
  std::size_t budget = 0;
  double r2 = 0;  ///< the new model's latency targets (log R^2), mean over seeds
  double mape = 0;
  double r2_reference = 0;        ///< per-model MeanField MLP trained with the model co-run
  double r2_others = 0;           ///< cross-model R^2 on the other models (macro)
  double r2_standalone_only = 0;  ///< the new model predicted by its standalone profile alone
  double mape_standalone_only = 0;
  int seeds = 0;
};

struct SurrogateEvalReport {
  std::string workload;
  std::string workload_hash;
  std::string device;
  std::string testbed;
  Context context{.seed = 0};  ///< what it ran under (the report states its base seed)
  std::size_t heldout = 0;
  std::vector<std::string> model_names;
  std::vector<SurrogateEvalRow> rows;
  std::vector<BudgetNeeded> needed;
  std::vector<OnboardingRow> onboarding;
  std::vector<NoiseCeiling> ceilings;
  int heldout_repeats = 1;
  int standalone_repeats = 1;
  std::string onboarding_regressor;
};

/// @brief Runs the evaluation: for each N (the first N models), seed, surrogate and budget,
/// profiles on the testbed, fits, and scores on held-out measured configurations.
/// @param ctx the base of each run's seed (reported per row), and the (N, seed) tasks run in
/// parallel on ctx.threads (results do not depend on it)
Result<SurrogateEvalReport> evaluate_surrogates(const Context& ctx, const Workload& w,
                                                const Testbed& testbed,
                                                const SurrogateEvalOptions& options,
                                                profile::Progress* progress);

/// @brief The report as JSON: {"rows": [...], "budget_for_r2_095": [...], "onboarding": [...]}
/// plus provenance.
nlohmann::json to_json(const SurrogateEvalReport& r);

/// @brief R^2 vs budget, one line per (N, surrogate), as a standalone SVG document.
std::string svg_r2_vs_budget(const SurrogateEvalReport& r);
/// @brief Budget needed for R^2 >= 0.95 vs N, one line per surrogate, with y = 20 N for scale.
std::string svg_budget_vs_n(const SurrogateEvalReport& r);

/// @brief The Markdown results document; `svg_prefix` is the file name stem of the two plots
/// written next to it (e.g. "surrogate" for surrogate_r2.svg and surrogate_budget.svg).
std::string to_markdown(const std::vector<SurrogateEvalReport>& reports, const std::string& command,
                        const std::string& svg_prefix);

}  // namespace corun::eval
