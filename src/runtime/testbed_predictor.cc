#include "corun/runtime/testbed_predictor.h"

#include <limits>

#include "corun/plan/objective.h"

namespace corun {

Predicted as_predicted(const ModelMetrics& mm) {
  Predicted p;
  p.latency_ms_p95 = static_cast<float>(mm.latency_ms_p95);
  p.ttft_ms_p95 = static_cast<float>(mm.ttft_ms_p95.value_or(0));
  p.tpot_ms_p95 = static_cast<float>(mm.tpot_ms_p95.value_or(0));
  p.throughput = static_cast<float>(mm.throughput);
  return p;
}

bool measured_meets_sla(const ModelSpec& m, const ModelMetrics& mm) {
  if (!mm.ok()) return false;
  return sla_excess(m, as_predicted(mm), Margin{}) == 0;
}

void TestbedPredictor::predict(std::span<const std::int32_t> configs, std::size_t rows,
                               std::span<Predicted> out) const {
  const std::size_t n = w_->models.size();
  for (std::size_t r = 0; r < rows; ++r) {
    const auto row = configs.subspan(r * n, n);
    const Measurement m = t_->measure(ctx_, *w_, row, options_);
    for (std::size_t k = 0; k < n; ++k) out[r * n + k] = Predicted{};
    for (const auto& mm : m.models) {
      if (mm.ok()) {
        out[r * n + mm.model] = as_predicted(mm);
      } else {
        // A configuration that cannot run (out of VRAM) breaks every SLA it has.
        constexpr float kInf = std::numeric_limits<float>::max();
        out[r * n + mm.model] = Predicted{kInf, kInf, kInf, 0};
      }
    }
  }
}

}  // namespace corun
