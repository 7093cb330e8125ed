#include "corun/runtime/learner.h"

#include <algorithm>
#include <cmath>

#include "corun/core/check.h"
#include "corun/core/stats.h"

namespace corun {

namespace {

// Floor and ceiling of the noise variance estimate (log space): below 1 % a window is never
// that repeatable; above e^1 the measurement says nothing.
constexpr double kMinNoiseVar = 1e-4;
constexpr double kMaxNoiseVar = 1.0;
// The conformal level used for the bound: α ≤ 0 asks for an infinite bound (capped at max_z).
// The level itself is not clamped below: misses that drive it under 0 are a debt that hits must
// repay, which is what keeps the long-run miss rate at the target (Gibbs & Candès, Prop. 4.1).
constexpr double kMinAlpha = 1e-6;
constexpr double kMaxAlpha = 0.5;

}  // namespace

// State layout: x = [a, s, b_1, ..., b_k]; the slot of configuration i's deviation is i + 2.
constexpr std::size_t kShared = 2;

TargetLearner::TargetLearner(const ErrorPrior& prior, const LearningOptions& options)
    : options_(options), prior_(prior) {
  restart(prior);
  noise_var_ = std::clamp(prior.noise_sd * prior.noise_sd, kMinNoiseVar, kMaxNoiseVar);
  set_alpha(options.breach_target);
}

void TargetLearner::restart(const ErrorPrior& prior) {
  prior_ = prior;
  held_.reset();
  x_ = {prior.bias, 0.0};
  p_ = {prior.shared_sd * prior.shared_sd, 0.0, 0.0, prior.load_sd * prior.load_sd};
  configs_.clear();
  last_seen_.clear();
  u0_ = NAN;
}

void TargetLearner::reopen() {
  if (x_.empty()) return;
  held_.reset();
  p_[0] = std::max(p_[0], prior_.shared_sd * prior_.shared_sd);
  noise_var_ = std::max(noise_var_, prior_.noise_sd * prior_.noise_sd);
}

void TargetLearner::set_alpha(double a) {
  alpha_ = std::min(a, kMaxAlpha);
  z_ = std::min(options_.max_z, normal_quantile(1 - std::max(alpha_, kMinAlpha)));
}

std::optional<std::size_t> TargetLearner::slot(std::int32_t l) const {
  for (std::size_t i = 0; i < configs_.size(); ++i) {
    if (configs_[i] == l) return i + kShared;
  }
  return std::nullopt;
}

// The observation row H for configuration slot `slot` (0: not seen) at load offset du.
std::vector<double> TargetLearner::row(std::size_t slot, double du) const {
  std::vector<double> h(dim(), 0.0);
  h[0] = 1;
  h[1] = du;
  if (slot >= kShared) h[slot] = 1;
  return h;
}

LogPrediction TargetLearner::predict(std::int32_t l, double u) const {
  LogPrediction out;
  if (x_.empty()) return out;
  const std::size_t d = dim();
  const double du = std::isfinite(u0_) && std::isfinite(u) ? u - u0_ : 0.0;
  const auto s = slot(l);
  const std::vector<double> h = row(s.value_or(0), du);
  for (std::size_t i = 0; i < d; ++i) {
    out.mean += h[i] * x_[i];
    for (std::size_t j = 0; j < d; ++j) out.var += h[i] * p_[i * d + j] * h[j];
  }
  out.var += noise_var_;
  if (!s) out.var += prior_.config_sd * prior_.config_sd;
  return out;
}

double TargetLearner::margin(std::int32_t l, double u) const {
  if (x_.empty()) return 0;
  return std::expm1(z_ * std::sqrt(predict(l, u).var));
}

void TargetLearner::forget(std::size_t s) {
  // Marginalising a Gaussian over one component: drop its row and column.
  const std::size_t d = dim();
  std::vector<double> p;
  p.reserve((d - 1) * (d - 1));
  for (std::size_t i = 0; i < d; ++i) {
    if (i == s) continue;
    for (std::size_t j = 0; j < d; ++j) {
      if (j != s) p.push_back(p_[i * d + j]);
    }
  }
  p_ = std::move(p);
  x_.erase(x_.begin() + static_cast<std::ptrdiff_t>(s));
  configs_.erase(configs_.begin() + static_cast<std::ptrdiff_t>(s - kShared));
  last_seen_.erase(last_seen_.begin() + static_cast<std::ptrdiff_t>(s - kShared));
}

std::size_t TargetLearner::add_config(std::int32_t l) {
  if (configs_.size() >= std::max<std::size_t>(1, options_.max_configs)) {
    const auto oldest = std::min_element(last_seen_.begin(), last_seen_.end()) - last_seen_.begin();
    forget(static_cast<std::size_t>(oldest) + kShared);
  }
  const std::size_t d = dim();
  std::vector<double> p((d + 1) * (d + 1), 0.0);
  for (std::size_t i = 0; i < d; ++i) {
    for (std::size_t j = 0; j < d; ++j) p[i * (d + 1) + j] = p_[i * d + j];
  }
  p[d * (d + 1) + d] = prior_.config_sd * prior_.config_sd;
  p_ = std::move(p);
  x_.push_back(0.0);
  configs_.push_back(l);
  last_seen_.push_back(observations_);
  return d;
}

bool TargetLearner::is_change(std::int32_t l, double u, double y) const {
  if (x_.empty() || !std::isfinite(y)) return false;
  const LogPrediction p = predict(l, u);
  // The time update adds drift_sd² to the shared variance before the observation.
  const double s = p.var + options_.drift_sd * options_.drift_sd;
  return (y - p.mean) * (y - p.mean) > options_.change_chi2 * s;
}

TargetLearner::Update TargetLearner::observe(std::int32_t l, double u, double y, bool calibrate,
                                             ChangeHint hint) {
  CORUN_CHECK(!x_.empty());
  Update out;
  if (!std::isfinite(y)) return out;
  // Calibration first, against the bound the plan was made with. A window far outside the
  // bound is either a change of the truth (a co-tenant arrived: the bound is not to blame, the
  // change is learned below) or a heavy tail of the noise (the bound is to blame). The next
  // window tells them apart: back near the old prediction, it was the noise, and the held miss
  // counts after all; near the new one, it was a change, and it is dropped.
  const LogPrediction before = predict(l, u);
  out.miss = y > before.mean + z_ * std::sqrt(before.var);
  if (out.miss) ++misses_;
  auto calibrate_with = [&](bool miss) {
    set_alpha(alpha_ + options_.calibration_step * (options_.breach_target - (miss ? 1.0 : 0.0)));
  };
  if (calibrate && held_) {
    if (std::abs(y - held_->old_mean) < std::abs(y - before.mean)) calibrate_with(held_->miss);
    held_.reset();
  }
  const bool jumped = is_change(l, u, y);
  if (calibrate && !jumped) calibrate_with(out.miss);
  if (!std::isfinite(u0_) && std::isfinite(u)) u0_ = u;
  const double du = std::isfinite(u) && std::isfinite(u0_) ? u - u0_ : 0.0;

  // Time update: the shared error walks.
  p_[0] += options_.drift_sd * options_.drift_sd;
  const auto seen = slot(l);
  const std::size_t s = seen ? *seen : add_config(l);
  last_seen_[s - kShared] = observations_;
  const std::size_t d = dim();
  const std::vector<double> h = row(s, du);
  std::vector<double> ph(d, 0.0);  // P Hᵀ
  auto gain = [&] {
    double hph = 0;
    for (std::size_t i = 0; i < d; ++i) {
      ph[i] = 0;
      for (std::size_t j = 0; j < d; ++j) ph[i] += p_[i * d + j] * h[j];
      hph += h[i] * ph[i];
    }
    return hph + noise_var_;
  };
  double innovation_var = gain();
  double fitted = 0;
  for (std::size_t i = 0; i < d; ++i) fitted += h[i] * x_[i];
  out.innovation = y - fitted;
  if (out.innovation * out.innovation > options_.change_chi2 * innovation_var) {
    // A change of the truth: open the variance of what moved, so that this observation moves it
    // most of the way. Unknown: both halves, and the next observation of another configuration
    // settles which one it was.
    out.change = true;
    const double jump = out.innovation * out.innovation;
    const double shared = hint == ChangeHint::kShared ? 1.0 : hint == ChangeHint::kConfig ? 0.0 : 0.5;
    p_[0] += shared * jump;
    p_[s * d + s] += (1 - shared) * jump;
    innovation_var = gain();
  } else {
    // Covariance matching, E[ν²] = HPHᵀ + R, weighted by the share of the innovation that is
    // noise: while the parameters are still uncertain (HPHᵀ ≫ R) an innovation says little
    // about the noise, and the estimate would collapse to its floor.
    const double share = noise_var_ / innovation_var;
    noise_var_ = std::clamp(noise_var_ + options_.noise_weight * share *
                                             (out.innovation * out.innovation - innovation_var),
                            kMinNoiseVar, kMaxNoiseVar);
  }
  for (std::size_t i = 0; i < d; ++i) x_[i] += ph[i] / innovation_var * out.innovation;
  for (std::size_t i = 0; i < d; ++i) {
    for (std::size_t j = 0; j < d; ++j) p_[i * d + j] -= ph[i] * ph[j] / innovation_var;
  }
  if (calibrate && jumped) held_ = Held{out.miss, before.mean};
  ++observations_;
  return out;
}

float& field(Predicted& p, Target t) {
  switch (t) {
    case Target::kLatencyP95:
      return p.latency_ms_p95;
    case Target::kTtftP95:
      return p.ttft_ms_p95;
    case Target::kTpotP95:
      return p.tpot_ms_p95;
    case Target::kThroughput:
      return p.throughput;
  }
  return p.throughput;
}

float field(const Predicted& p, Target t) {
  Predicted copy = p;
  return field(copy, t);
}

double log_ratio(double measured, float predicted) {
  if (!(measured > 0) || !std::isfinite(measured) || !(predicted > 0) ||
      !std::isfinite(predicted) || predicted >= std::numeric_limits<float>::max()) {
    return NAN;
  }
  return std::log(measured) - std::log(static_cast<double>(predicted));
}

bool CorrectionTable::monotone() const {
  for (const auto& per_model : slope) {
    for (Target t : surrogate::kAllTargets) {
      const float v = per_model[static_cast<std::size_t>(t)];
      if (surrogate::is_latency(t) ? v < 0 : v > 0) return false;
    }
  }
  return true;
}

Predicted CorrectionTable::apply(std::size_t m, std::int32_t l, float u, const Predicted& p) const {
  if (m >= at.size() || l < 0 || static_cast<std::size_t>(l) >= at[m].size()) return p;
  Predicted out = p;
  const auto& here = at[m][static_cast<std::size_t>(l)];
  const float du = u - load_now[m];
  for (Target t : surrogate::kAllTargets) {
    const std::size_t k = static_cast<std::size_t>(t);
    float& v = field(out, t);
    if (!usable_prediction(v)) continue;  // the unusable sentinel stays as it is
    const bool latency = surrogate::is_latency(t);
    float log_f = here[k].log_mean + slope[m][k] * du;
    if (latency && du > 0) {
      // Extrapolating to a load never measured: pay the bound's growth now.
      const float grown = here[k].var + du * du * slope_var[m][k];
      log_f += z[m][k] * (std::sqrt(grown) - std::sqrt(here[k].var));
    }
    v *= std::exp(log_f);
  }
  return out;
}

}  // namespace corun
