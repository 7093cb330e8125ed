#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "corun/runtime/predictor_source.h"
#include "corun/runtime/surrogate_source.h"
#include "corun/testbed/sim.h"

namespace corun {

/// @brief Where online learning starts on top of the catalog twin for a model of `family` and a
/// target: how far a GPU strays from its catalog description (see twin_source.cc).
ErrorPrior twin_prior(ModelFamily family, Target t);

/// @brief How the catalog twin predicts.
struct TwinOptions {
  double margin = 0.1;  ///< static latency margin (what it plans with when learning is off)
  double window_s = 10;  ///< the window its expected values are computed for
};

/// @brief The catalog twin: predicts every candidate by evaluating the simulator noise-free on
/// the catalog's description of the device (no perturbation, no co-tenant, no power limit):
/// what corun knows of a GPU before it has measured anything on it. Its priors say how far a
/// real GPU strays from its datasheet (bandwidth, kernel efficiency, launch costs: tens of
/// percent), so online learning starts wide and narrows. A simulator run per candidate: a GA
/// decision over a few models takes tens to hundreds of milliseconds.
class TwinSource final : public PredictorSource {
 public:
  explicit TwinSource(TwinOptions options = {});
  [[nodiscard]] std::string describe() const override { return "twin (catalog simulator)"; }
  Result<std::unique_ptr<Predictor>> predictor_for(const Workload& current) override;
  /// @brief Every candidate measured beside a co-tenant of `load` (the simulator's
  /// Conditions::interference).
  Result<std::unique_ptr<Predictor>> predictor_under(const Workload& current,
                                                      const Interference& load) override;
  std::vector<double> margins(const Workload& current) override;
  ErrorPriors priors(const Workload& current) override;
  /// @brief Each configuration measured alone on the twin (noise-free), cached per model.
  LoadTable loads(const Workload& current) override;

 private:
  TwinOptions options_;
  SimTestbed sim_;
  std::map<std::string, std::vector<float>> alone_;  // model key + demand -> load per local
};

/// @brief A fitted surrogate while the workload's models are exactly those it was fitted on
/// (names, catalog models, knob values, in order; the knob order of a JSON registration may
/// differ — local configurations are renumbered), the catalog twin otherwise: registering a
/// model the surrogate does not know never stops planning. What `corun serve --surrogate`
/// plans with.
class FittedOrTwinSource final : public PredictorSource {
 public:
  /// @param ctx the seed the re-profiling measurements' noise derives from (SurrogateSource)
  /// @param s the fitted surrogate
  /// @param testbed where changed demands are re-profiled alone (kept by reference)
  FittedOrTwinSource(const Context& ctx, surrogate::Surrogate s, const Testbed& testbed,
                     SurrogateSourceOptions fitted, TwinOptions twin);
  /// @brief The same, re-profiling on the testbed the surrogate was fitted on (owned).
  static Result<std::unique_ptr<FittedOrTwinSource>> on_own_testbed(
      const Context& ctx, surrogate::Surrogate s, SurrogateSourceOptions fitted, TwinOptions twin);
  ~FittedOrTwinSource() override;
  [[nodiscard]] std::string describe() const override;
  Result<std::unique_ptr<Predictor>> predictor_for(const Workload& current) override;
  /// @brief The surrogate's predictor through make_loaded(), or the twin's under `load`.
  Result<std::unique_ptr<Predictor>> predictor_under(const Workload& current,
                                                      const Interference& load) override;
  std::vector<double> margins(const Workload& current) override;
  ErrorPriors priors(const Workload& current) override;
  LoadTable loads(const Workload& current) override;
  Status adopt(surrogate::Surrogate refit) override;
  [[nodiscard]] const surrogate::Surrogate* fitted() const override { return fitted_.fitted(); }
  [[nodiscard]] std::size_t measurements_taken() const override {
    return fitted_.measurements_taken();
  }
  /// @brief Whether the last predictor_for() used the surrogate.
  [[nodiscard]] bool using_surrogate() const { return order_ != nullptr; }

  struct KnobOrder;  ///< the workload in the surrogate's knob order (implementation detail)

 private:
  FittedOrTwinSource(const Context& ctx, std::unique_ptr<Testbed> owned, surrogate::Surrogate s,
                     SurrogateSourceOptions fitted, TwinOptions twin);
  std::unique_ptr<Testbed> owned_;  // declared before fitted_, which refers to it
  SurrogateSource fitted_;
  TwinSource twin_;
  std::unique_ptr<KnobOrder> order_;  // set while the surrogate fits the models
  std::string last_reason_;
};

}  // namespace corun
