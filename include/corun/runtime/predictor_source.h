#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "corun/core/result.h"
#include "corun/plan/predictor.h"
#include "corun/runtime/learner.h"
#include "corun/spec/workload.h"
#include "corun/surrogate/surrogate.h"

namespace corun {

/// @brief Error priors of every model of a workload, by target.
using ErrorPriors = std::vector<std::array<ErrorPrior, kTargetCount>>;

/// @brief Where the controller gets its base predictions for the workload as it is now, before
/// the online corrections: a fitted surrogate (SurrogateSource), the catalog twin
/// (TwinSource), or the surrogate while it fits the models and the twin otherwise
/// (FittedOrTwinSource). Called by one thread at a time (the Controller's planner).
class PredictorSource {
 public:
  virtual ~PredictorSource() = default;
  /// @brief What predicts, for logs and reports ("surrogate meanfield/gbdt", "twin sim").
  [[nodiscard]] virtual std::string describe() const = 0;
  /// @brief A predictor for `current` (same models, current demands). Called before each
  /// decision; may re-measure models alone when their demand changed.
  virtual Result<std::unique_ptr<Predictor>> predictor_for(const Workload& current) = 0;
  /// @brief A predictor for `current` with every model under `load`, a load outside the plan
  /// on the GPU (serve's unexplained load, docs/stack.md): by default predictor_for(current)
  /// through make_loaded() (runtime/loaded_predictor.h); the catalog twin measures under it.
  /// Where the source's predictor cannot express a load, the predictor without it.
  virtual Result<std::unique_ptr<Predictor>> predictor_under(const Workload& current,
                                                              const Interference& load);
  /// @brief Static latency margin per model (0.1 = plan with 10 % headroom), from the
  /// source's own error model: what the planner uses when online learning is off. Valid after
  /// predictor_for(current).
  virtual std::vector<double> margins(const Workload& current) = 0;
  /// @brief Where the online error model of each (model, target) starts. Valid after
  /// predictor_for(current).
  virtual ErrorPriors priors(const Workload& current) = 0;
  /// @brief What each (model, local configuration) adds to its co-runners' load (standalone SM
  /// plus bandwidth utilisation), in the workload's numbering. Valid after predictor_for().
  virtual LoadTable loads(const Workload& current) = 0;
  /// @brief Replaces the fitted surrogate with a refit on more data (same models). Sources
  /// without one refuse.
  virtual Status adopt(surrogate::Surrogate refit) {
    (void)refit;
    return Error(describe() + " has no surrogate to refit");
  }
  /// @brief The surrogate the source predicts with now, if any (a refit starts from its
  /// settings).
  [[nodiscard]] virtual const surrogate::Surrogate* fitted() const { return nullptr; }
  /// @brief Testbed measurements the source took itself (models re-profiled alone).
  [[nodiscard]] virtual std::size_t measurements_taken() const { return 0; }
};

/// @brief Priors from a surrogate's cross-validated error model: the residual spread is split
/// into window noise (half its variance when nothing better is known), the model's shared
/// error and one configuration's own deviation.
std::array<ErrorPrior, kTargetCount> priors_from_error_model(
    const std::vector<surrogate::ErrorQuantiles>& error, const std::vector<Target>& targets);

}  // namespace corun
