#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace corun {

/// @brief What a plan needs to know about one model in one joint configuration. Units as in
/// ModelMetrics; fields that do not apply to a model's family are 0.
struct Predicted {
  float latency_ms_p95 = 0;
  float ttft_ms_p95 = 0;
  float tpot_ms_p95 = 0;
  float throughput = 0;
};

/// @brief The latency a predictor gives a configuration no plan may choose (it never ran
/// alone, e.g. out of memory): it breaks any SLA and stays finite in sums.
inline constexpr float kUnusableLatencyMs = 1e9f;

/// @brief Whether `v` is a prediction to learn from or correct: positive, and below a tenth of
/// kUnusableLatencyMs, so that no correction or margin applied to the sentinel makes it pass.
[[nodiscard]] constexpr bool usable_prediction(float v) {
  return v > 0 && v < kUnusableLatencyMs / 10;
}

/// @brief Batched prediction of every model's metrics for many joint configurations. The plan
/// layer only sees this interface: a surrogate, or (in an evaluation) a testbed adapter.
/// Implementations must be safe to call from several threads at once.
class Predictor {
 public:
  virtual ~Predictor() = default;
  /// @brief Number of models (the width of a configuration row).
  [[nodiscard]] virtual std::size_t models() const = 0;
  /// @brief `configs` holds `rows` joint configurations of models() local indices each
  /// (kAbsent = not running); writes rows × models() predictions (absent models: zeros).
  virtual void predict(std::span<const std::int32_t> configs, std::size_t rows,
                       std::span<Predicted> out) const = 0;
};

/// @brief A predictor with mean-field structure: model m in local configuration l adds a
/// fixed vector to an aggregate GPU state, and each model's metrics depend only on its own
/// configuration and the sum of the *other* models' contributions — monotonically: a larger
/// aggregate never lowers a latency nor raises a throughput. The exact solver relies on this.
class AggregatePredictor : public Predictor {
 public:
  /// @brief Whether the monotonicity above is guaranteed (by construction or by a constrained
  /// fit). When it is not, the exact solver's answer is a heuristic, not a proof.
  [[nodiscard]] virtual bool monotone() const { return true; }
  /// @brief Dimensions of the aggregate state.
  [[nodiscard]] virtual std::size_t aggregate_dims() const = 0;
  /// @brief The additive contribution of model `m` in local configuration `l`.
  virtual void contribution(std::size_t m, std::int32_t l, std::span<float> out) const = 0;
  /// @brief Metrics of model `m` in configuration `l` when the others add up to `others`.
  [[nodiscard]] virtual Predicted predict_given(std::size_t m, std::int32_t l,
                                                std::span<const float> others) const = 0;
  /// @brief The contribution of a load outside the plan that keeps `sm` of the SMs and `bw` of
  /// the achievable DRAM bandwidth busy (a new copy's start-up kernels during a
  /// make-before-break swap), in the units of contribution(); false when this predictor's
  /// aggregate cannot express one (then `out` is untouched).
  virtual bool cotenant(double sm, double bw, std::span<float> out) const {
    (void)sm;
    (void)bw;
    (void)out;
    return false;
  }

  /// @brief Default batched prediction through contribution() and predict_given():
  /// predict_beside() with nothing outside the plan.
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override;
  /// @brief The same through contribution() and predict_given(), with `outside` (aggregate_dims()
  /// values: a load outside the plan, in the units of contribution()) added to every model's
  /// co-runners.
  void predict_beside(std::span<const std::int32_t> configs, std::size_t rows,
                      std::span<const float> outside, std::span<Predicted> out) const;
};

}  // namespace corun
