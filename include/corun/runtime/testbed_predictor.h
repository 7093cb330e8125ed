#pragma once

#include <cstdint>

#include "corun/core/context.h"
#include "corun/plan/predictor.h"
#include "corun/spec/workload.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief "Predicts" by measuring every candidate on a testbed with fixed measurement options
/// (one noise seed, or none). It is the oracle of an evaluation (what the best plan would be if
/// measuring were free) and, noise-free on the catalog's simulator, the catalog twin; the
/// testbed of a real GPU is never a planner's input. Lives in the runtime layer, where testbeds
/// and plans meet.
class TestbedPredictor final : public Predictor {
 public:
  /// Measurements with `options`, their noise (if any) drawn from `ctx.seed`.
  TestbedPredictor(const Context& ctx, const Workload& w, const Testbed& t, MeasureOptions options)
      : ctx_(ctx), w_(&w), t_(&t), options_(std::move(options)) {}
  /// Noisy measurements of `window_s` seconds, their noise drawn from `ctx.seed`.
  TestbedPredictor(const Context& ctx, const Workload& w, const Testbed& t, double window_s)
      : TestbedPredictor(ctx, w, t, MeasureOptions{window_s, {}, true}) {}
  [[nodiscard]] std::size_t models() const override { return w_->models.size(); }
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override;

 private:
  Context ctx_;
  const Workload* w_;
  const Testbed* t_;
  MeasureOptions options_;
};

/// @brief Predicted-shaped view of measured metrics (for utility on ground truth); metrics not
/// observed are 0.
Predicted as_predicted(const ModelMetrics& mm);

/// @brief Whether measured metrics meet a model's SLA (no margin; ground truth). A metric the
/// window did not observe (no LLM request arrived) cannot breach.
bool measured_meets_sla(const ModelSpec& m, const ModelMetrics& mm);

}  // namespace corun
