#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "corun/plan/objective.h"
#include "corun/plan/predictor.h"
#include "corun/surrogate/targets.h"

namespace corun {

using surrogate::kTargetCount;
using surrogate::Target;

/// @brief Where the online error model of one (model, target) starts: how far the predictor
/// is expected to be off, in log space (log measured − log predicted), split into the parts
/// the learner tells apart. A source derives it from what it knows (a surrogate from its
/// cross-validated error model, the catalog twin from how far a real GPU strays from its
/// datasheet).
struct ErrorPrior {
  double bias = 0;         ///< expected shared error (the fitted error model's median residual)
  double shared_sd = 0.1;  ///< sd of the error every configuration of the model shares
  /// sd of the error's slope in the co-runners' load (per unit of LoadTable load): how wrong
  /// the predictor's sensitivity to its neighbours may be.
  double load_sd = 0.3;
  double config_sd = 0.1;  ///< sd of one configuration's own deviation from the shared error
  double noise_sd = 0.05;  ///< sd of one window's measurement noise
};

/// @brief What each (model, local configuration) adds to the GPU's load when it runs: its
/// standalone SM plus DRAM-bandwidth utilisation (0..2). A model's "co-runners' load" in a
/// candidate is the sum over the other running models. [model][local].
using LoadTable = std::vector<std::vector<float>>;

/// @brief How corun learns online. Every setting is declared here once; the CLI flags
/// (`--learning`, `--breach-target`) and serve's options bind to these fields.
struct LearningOptions {
  /// false: the fitted predictor and its error-model margins are never updated (a model's
  /// margin only grows after a measured breach of its SLA, corun's rule before online
  /// learning); true: corrections and calibrated margins below.
  bool enabled = true;
  /// Target rate at which a measured latency exceeds its planned bound (check = (0, 0.5)):
  /// the α of adaptive conformal inference, per model and target.
  double breach_target = 0.01;
  /// Step γ of the conformal level update α ← α + γ(target − miss) (check = (0, 1)).
  double calibration_step = 0.005;
  /// Largest bound, in standard deviations (a conformal level that falls to 0 asks for an
  /// infinite bound; this caps it).
  double max_z = 4.5;
  /// sd of the random walk of the shared error per observation: how fast the correction may
  /// follow a truth that moves slowly (log space).
  double drift_sd = 0.02;
  /// A normalised innovation ν²/S above this (χ²₁ at 0.999) is a change of the truth (a
  /// co-tenant, a power cap): the shared error's variance is reset so that one observation
  /// moves it most of the way.
  double change_chi2 = 10.83;
  /// Weight of one squared innovation in the running estimate of the noise variance.
  double noise_weight = 0.1;
  /// Configurations whose own deviation is kept per (model, target); the least recently seen
  /// is forgotten beyond it.
  std::size_t max_configs = 32;
  /// The planner re-plans when the planned upper bound of a running model moved by more than
  /// this fraction since the last decision.
  double replan_bound_change = 0.02;
  /// Refit the surrogate in the background after this many new online samples (0: never).
  std::size_t refit_every = 10;
  /// Optimism of the objective (UCB), check = [0, 4]: a model's throughput is ranked this many
  /// standard deviations of what is not yet known about it (the learner's uncertainty, window
  /// noise aside) above its corrected prediction, so that a configuration the predictor
  /// underrates gets tried and found out. SLA latencies keep their upper bounds, a
  /// min_throughput floor and admission control's shares are decided without it. 0 (the
  /// default): plan on the corrected prediction alone — exploring finds better plans but tries
  /// configurations near their capacity, which breach more often (docs/results/explore-*.md).
  double explore_sd = 0.0;
};

/// @brief What the learner says about one (model, local configuration, target): the log
/// correction to multiply the base prediction by, and the variance of a measured value around
/// the corrected prediction (parameter uncertainty plus window noise).
struct LogPrediction {
  double mean = 0;
  double var = 0;
};

/// @brief The online error model of one (model, target): a linear-Gaussian state of a shared
/// log error `a` (a random walk), its slope `s` in the co-runners' load u (static), and one
/// deviation `b_l` per configuration seen (static, prior N(0, config_sd²)), so that
/// y = log(measured / base) = a + s·(u − u₀) + b_l + noise, u₀ being the load of the first
/// observation. Each observation is a Kalman update (recursive least squares with a prior: shrunk
/// toward the fitted predictor); the noise variance is matched to the innovations (Mehra); a large
/// innovation resets a's variance (change detection). A configuration never observed, or a load
/// never seen, is predicted with the shared part and the prior variances, so the bound widens the
/// further a candidate is from what was measured. On top, adaptive conformal inference (Gibbs &
/// Candès, NeurIPS 2021) moves the level of the bound so that the long-run rate of measured values
/// above it tracks LearningOptions::breach_target whatever the true error distribution.
/// Not thread-safe (the Controller serialises it).
class TargetLearner {
 public:
  TargetLearner() = default;
  TargetLearner(const ErrorPrior& prior, const LearningOptions& options);

  /// @brief Correction and variance for local configuration l at co-runners' load u.
  [[nodiscard]] LogPrediction predict(std::int32_t l, double u) const;
  /// @brief The planned upper bound's multiplier over the corrected prediction:
  /// exp(z·sd) − 1, z from the conformal level.
  [[nodiscard]] double margin(std::int32_t l, double u) const;
  /// @brief The learned slope of the log error per unit of co-runners' load, and its variance.
  [[nodiscard]] double slope() const { return x_.size() > 1 ? x_[1] : 0; }
  [[nodiscard]] double slope_var() const { return p_.size() > 3 ? p_[dim() + 1] : 0; }

  /// @brief What one observation did.
  struct Update {
    double innovation = 0;  ///< y − predicted mean
    bool miss = false;      ///< the measured value was above the bound planned for it
    bool change = false;    ///< change detected (shared variance reset)
  };
  /// @brief Where a change of the truth is, when one is detected: the learner alone cannot tell
  /// a change of the whole GPU (a co-tenant, a power cap: every configuration moves) from one
  /// of this configuration (its queue saturates); the Controller can, from how many models
  /// changed in the same window.
  enum class ChangeHint { kUnknown, kShared, kConfig };
  /// @brief Is y a change of the truth rather than noise (normalised innovation above
  /// LearningOptions::change_chi2)?
  [[nodiscard]] bool is_change(std::int32_t l, double u, double y) const;
  /// @brief Learns from y = log(measured / base prediction) in configuration l at co-runners'
  /// load u. With `calibrate` false the conformal level is left alone (a replay of windows it
  /// already saw).
  Update observe(std::int32_t l, double u, double y, bool calibrate = true,
                 ChangeHint hint = ChangeHint::kUnknown);
  /// @brief Starts the shared error and the configurations' deviations again from `prior` (a
  /// new base predictor), keeping the estimated noise and the conformal level.
  void restart(const ErrorPrior& prior);
  /// @brief The model's operating point moved (its demand or context changed, as the planner
  /// was told): what was learned stays the starting point, but the shared error's variance
  /// opens back to at least its prior's and the noise estimate to at least the prior's noise
  /// (a queue nearer saturation is noisier), so the bound is as wide as at the start until
  /// windows at the new point narrow it again. Idempotent until the next observation.
  void reopen();

  [[nodiscard]] double z() const { return z_; }
  [[nodiscard]] double alpha() const { return alpha_; }
  [[nodiscard]] double noise_var() const { return noise_var_; }
  [[nodiscard]] double shared() const { return x_.empty() ? 0 : x_[0]; }
  [[nodiscard]] std::uint64_t observations() const { return observations_; }
  [[nodiscard]] std::uint64_t misses() const { return misses_; }

 private:
  [[nodiscard]] std::size_t dim() const { return x_.size(); }
  [[nodiscard]] std::optional<std::size_t> slot(std::int32_t l) const;
  std::size_t add_config(std::int32_t l);
  void forget(std::size_t slot);
  void set_alpha(double a);

  LearningOptions options_;
  ErrorPrior prior_;
  [[nodiscard]] std::vector<double> row(std::size_t slot, double du) const;
  std::vector<double> x_;   // [a, s, b_1, ..., b_k]
  std::vector<double> p_;   // dim x dim covariance, row-major
  std::vector<std::int32_t> configs_;    // local configuration of b_i (slot i + 2)
  double u0_ = 0;           // load of the first observation (the slope's origin)
  struct Held {             // a window that jumped: its miss waits for the next window's verdict
    bool miss = false;
    double old_mean = 0;    // the prediction before the jump
  };
  std::optional<Held> held_;
  std::vector<std::uint64_t> last_seen_;  // observation count when b_i was last observed
  double noise_var_ = 0;
  double alpha_ = 0.01;
  double z_ = 0;
  std::uint64_t observations_ = 0;
  std::uint64_t misses_ = 0;
};

/// @brief One model's observation in one window, as the learner and the SLA ledger need it.
struct ModelObservation {
  double others_load = NAN;  ///< co-runners' load (LoadTable); NaN: the controller computes it
  std::size_t model = 0;  ///< index into the controller's workload
  std::int32_t local = 0;  ///< the configuration it ran in
  bool failed = false;     ///< it could not run (out of memory, crashed): a breach
  /// Measured values by Target (NaN: not observed in this window).
  std::array<double, kTargetCount> measured{NAN, NAN, NAN, NAN};
};

/// @brief The online corrections and margins of one decision: an immutable snapshot of the
/// learners (safe to share with solver threads). A model's correction depends on its own
/// configuration and on its co-runners' load u: at the load of the plan in force (`load_now`)
/// it is the learned mean; at other loads the slope moves it, and for latencies a load above
/// what was measured adds z·(sd at that load − sd now) — the planner pays for extrapolating, so
/// the margin table can stay per (model, configuration). A learned slope may be negative (the
/// base predictor overrates how much co-runners hurt); monotone() says whether every slope keeps
/// the corrected predictor monotone, as the exact solver's proof needs.
struct CorrectionTable {
  struct PerTarget {
    float log_mean = 0;  ///< log correction at load_now
    float var = 0;       ///< predictive variance at load_now
  };
  /// [model][local][target]
  std::vector<std::vector<std::array<PerTarget, kTargetCount>>> at;
  /// [model][target]: slope of the log correction per unit of load, its variance, the z level.
  std::vector<std::array<float, kTargetCount>> slope, slope_var, z;
  std::vector<float> load_now;  ///< [model]: co-runners' load in the plan in force
  LoadTable loads;              ///< [model][local]
  MarginTable margins;          ///< [model][local]: margins of the latency metrics at load_now

  /// @brief Corrected copy of a base prediction of model m in configuration l when its
  /// co-runners' load is u.
  [[nodiscard]] Predicted apply(std::size_t m, std::int32_t l, float u, const Predicted& p) const;
  /// @brief Whether no correction lowers a latency or raises a throughput as the load grows.
  [[nodiscard]] bool monotone() const;
  /// @brief Model m's contribution to the co-runners' load of the others.
  [[nodiscard]] float load(std::size_t m, std::int32_t l) const {
    return m < loads.size() && l >= 0 && static_cast<std::size_t>(l) < loads[m].size()
               ? loads[m][static_cast<std::size_t>(l)]
               : 0.0f;
  }
};

/// @brief The learners of every model of a workload, by target: what the Controller keeps
/// per model. Serialisable for inspection (GET /v1/plan, report.json).
struct ModelLearners {
  std::array<TargetLearner, kTargetCount> target;
  double abs_error_ewma = 0;  ///< |measured/predicted − 1| of the SLA latency, moving average
  double last_error = 0;      ///< measured/predicted − 1 of the last observation
  std::uint64_t observations = 0;
};

/// @brief The Predicted field of a target (latency p95, TTFT p95, TPOT p95, throughput).
float& field(Predicted& p, Target t);
float field(const Predicted& p, Target t);

/// @brief log(measured) − log(predicted) for target t, or NaN when either is unusable.
double log_ratio(double measured, float predicted);

}  // namespace corun
