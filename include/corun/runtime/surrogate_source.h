#pragma once

#include <optional>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/plan/predictor.h"
#include "corun/profile/dataset.h"
#include "corun/runtime/predictor_source.h"
#include "corun/surrogate/surrogate.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief A compiled surrogate seen through the plan layer's Predictor interface: batched,
/// allocation-free per candidate (workspaces are pooled per concurrent caller). A model whose
/// local configuration never ran alone is predicted as unusable (latencies kUnusableLatencyMs,
/// throughput 0), so no plan picks it. For MeanField surrogates it is also an AggregatePredictor (the
/// aggregate state is the others' standalone count, SM, bandwidth, VRAM, power and occupancy),
/// which the exact solver needs; its optimality proof holds when the regressor is monotone in
/// those inputs (Surrogate::monotone()); otherwise exact search is a heuristic.
///
/// A non-zero `extra` is a load outside the workload (a declared tool burst,
/// surrogate::cotenant_totals) added to every model's aggregate: each model is then predicted
/// as it runs while that load shares the GPU. Contributions are unchanged, so the predictor
/// stays an AggregatePredictor with the same monotonicity (a constant shift of every input).
class SurrogatePredictor final : public AggregatePredictor {
 public:
  /// @param device the GPU the workload runs on: with it, cotenant() expresses a load outside
  /// the plan (surrogate::cotenant_totals); without, it cannot.
  explicit SurrogatePredictor(surrogate::CompiledSurrogate compiled,
                              const surrogate::Totals& extra = {},
                              std::optional<Device> device = std::nullopt);
  ~SurrogatePredictor() override;

  [[nodiscard]] std::size_t models() const override { return compiled_.models(); }
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override;

  [[nodiscard]] bool monotone() const override { return compiled_.monotone(); }
  [[nodiscard]] std::size_t aggregate_dims() const override;
  void contribution(std::size_t m, std::int32_t l, std::span<float> out) const override;
  [[nodiscard]] Predicted predict_given(std::size_t m, std::int32_t l,
                                        std::span<const float> others) const override;
  bool cotenant(double sm, double bw, std::span<float> out) const override;

  [[nodiscard]] const surrogate::CompiledSurrogate& compiled() const { return compiled_; }

  struct Pool;  ///< workspaces of concurrent callers (implementation detail)

 private:
  surrogate::CompiledSurrogate compiled_;
  surrogate::Totals extra_;
  bool has_extra_ = false;
  std::optional<Device> device_;
  std::unique_ptr<Pool> pool_;
};

/// @brief How a SurrogateSource keeps its standalone profiles current.
struct SurrogateSourceOptions {
  /// Repeats averaged per configuration when a model is re-profiled alone (as `corun profile
  /// --plan standalone --repeats`).
  int standalone_repeats = 3;
  double window_s = 10;
  /// One-sided confidence of the SLA margins: each constrained latency is planned at the
  /// error model's upper bound at this level (CompiledSurrogate::upper_factor). Eight
  /// timelines of 30 intervals x 5 models are 1,200 chances to breach: expecting none needs a
  /// per-interval breach probability well below 1/1,200, hence 99.99 %.
  double confidence = 0.9999;
  /// Load of a declared recurring tool burst (Workload::tools) in aggregate units, added to
  /// every model's aggregate (SurrogatePredictor's `extra`): plans are then predicted, and
  /// their SLAs checked at the same margins, as they run during the burst (for a monotone fit
  /// the burst is the binding case). Zero: no burst.
  surrogate::Totals burst{};
};

/// @brief The production predictor source: a fitted surrogate plus standalone profiles. When a
/// model's demand (rate, prompt or output length) differs from the one its standalone profile
/// was measured at, the source re-profiles that model alone on the testbed — local-count x
/// repeats measurements, linear in N — and recompiles; the regressors are not refitted.
/// Margins are the error model's upper bounds (at SurrogateSourceOptions::confidence) on the
/// latencies each SLA constrains.
class SurrogateSource final : public PredictorSource {
 public:
  /// @param s fitted surrogate for the workload's models (checked against each workload)
  /// @param testbed where standalone profiles are re-measured (kept by reference)
  /// @param ctx the seed the re-profiling measurements' noise derives from
  SurrogateSource(const Context& ctx, surrogate::Surrogate s, const Testbed& testbed,
                  SurrogateSourceOptions options);

  [[nodiscard]] std::string describe() const override;
  Result<std::unique_ptr<Predictor>> predictor_for(const Workload& current) override;
  std::vector<double> margins(const Workload& current) override;
  ErrorPriors priors(const Workload& current) override;
  LoadTable loads(const Workload& current) override;
  /// @brief Takes a refit of the same models; the re-profiled standalone table is kept.
  Status adopt(surrogate::Surrogate refit) override;
  [[nodiscard]] const surrogate::Surrogate* fitted() const override { return &surrogate_; }

  /// @brief Standalone measurements taken since construction (re-profiling cost).
  [[nodiscard]] std::size_t measurements_taken() const override { return measurements_; }
  /// @brief How many times a model was re-profiled alone.
  [[nodiscard]] std::size_t refreshes() const { return refreshes_; }

 private:
  surrogate::Surrogate surrogate_;
  const Testbed& testbed_;
  Context ctx_;
  SurrogateSourceOptions options_;
  surrogate::StandaloneTable table_;
  std::vector<Demand> profiled_;  ///< per model: the demand table_ was measured at
  /// Standalone samples already measured, per (model, demand): a demand seen before (the
  /// controller's admission search visits the same shares again) is not measured twice.
  std::map<std::pair<std::size_t, std::string>, std::vector<profile::SampleRecord>> alone_;
  std::vector<float> upper_;      ///< per model x target bound factors, from the last compile
  std::size_t measurements_ = 0;
  std::size_t refreshes_ = 0;
};

}  // namespace corun
