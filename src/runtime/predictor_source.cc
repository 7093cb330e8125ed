#include "corun/runtime/predictor_source.h"

#include <algorithm>
#include <cmath>

#include "corun/runtime/loaded_predictor.h"

namespace corun {

namespace {

// Floors of the split below: even a perfect cross-validation score leaves some doubt about a
// configuration never measured online, and some window noise.
constexpr double kMinSd = 0.02;
constexpr double kMinLoadSd = 0.2;

}  // namespace

Result<std::unique_ptr<Predictor>> PredictorSource::predictor_under(const Workload& current,
                                                                     const Interference& load) {
  auto base = predictor_for(current);
  if (!base || !any_load(load)) return base;
  return make_loaded(std::move(*base), load);
}

std::array<ErrorPrior, kTargetCount> priors_from_error_model(
    const std::vector<surrogate::ErrorQuantiles>& error, const std::vector<Target>& targets) {
  std::array<ErrorPrior, kTargetCount> out{};
  for (std::size_t k = 0; k < targets.size() && k < error.size(); ++k) {
    const auto& e = error[k];
    // Out-of-fold residuals mix window noise with the regressor's error. Without repeats to
    // tell them apart, half the variance is taken as noise and the rest split between the
    // model's shared error and a configuration's own: the online learner re-estimates the noise
    // and the shared error from its first observations.
    const double var = std::max(e.rmse * e.rmse, 4 * kMinSd * kMinSd);
    ErrorPrior p;
    p.bias = std::isfinite(e.q50) ? e.q50 : 0;
    p.noise_sd = std::max(kMinSd, std::sqrt(0.5 * var));
    p.shared_sd = std::max(kMinSd, std::sqrt(0.25 * var));
    p.config_sd = std::max(kMinSd, std::sqrt(0.25 * var));
    // The fit saw co-runs at many loads, but a slope learned from 20·N of them can be off by
    // about the residual spread per unit of load, more where contention is steep (queueing).
    p.load_sd = std::max(kMinLoadSd, 2 * std::sqrt(var));
    out[static_cast<std::size_t>(targets[k])] = p;
  }
  return out;
}

}  // namespace corun
