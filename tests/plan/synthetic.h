#pragma once

// A synthetic mean-field predictor for solver tests: closed-form, monotone in the aggregate,
// independent of every surrogate and testbed, so solver behaviour is tested in isolation.

#include <cmath>

#include "corun/plan/predictor.h"
#include "corun/spec/workload.h"

namespace corun::testing {

/// Each model adds [compute load, bandwidth load] proportional to its work; its latency is its
/// standalone latency stretched by 1 + 0.8·others_compute + 0.5·others_bw².
class SyntheticPredictor final : public AggregatePredictor {
 public:
  explicit SyntheticPredictor(const Workload& w) : w_(&w) {}
  [[nodiscard]] std::size_t models() const override { return w_->models.size(); }
  [[nodiscard]] std::size_t aggregate_dims() const override { return 2; }

  void contribution(std::size_t m, std::int32_t l, std::span<float> out) const override {
    const double work = base_ms(m, l) * rate(m, l) / 1000.0;  // busy fraction
    out[0] = static_cast<float>(work);
    out[1] = static_cast<float>(work * (is_llm(m) ? 1.5 : 0.6));
  }

  [[nodiscard]] Predicted predict_given(std::size_t m, std::int32_t l,
                                        std::span<const float> o) const override {
    const double stretch = 1 + 0.8 * o[0] + 0.5 * o[1] * o[1];
    const double t = base_ms(m, l) * stretch;
    Predicted p;
    const ModelSpec& spec = w_->models[m];
    if (is_llm(m)) {
      p.tpot_ms_p95 = static_cast<float>(t);
      p.ttft_ms_p95 = static_cast<float>(t * 20);
      const double cap = 1000.0 / t * spec.settings(static_cast<std::size_t>(l)).request_concurrency;
      p.throughput = static_cast<float>(std::min(cap, spec.demand.rps * spec.demand.output_tokens));
    } else {
      p.latency_ms_p95 = static_cast<float>(t);
      p.throughput = static_cast<float>(rate(m, l));
    }
    return p;
  }

 private:
  [[nodiscard]] bool is_llm(std::size_t m) const {
    return w_->models[m].arch.family == ModelFamily::kLlm;
  }
  [[nodiscard]] double base_ms(std::size_t m, std::int32_t l) const {
    const Settings s = w_->models[m].settings(static_cast<std::size_t>(l));
    if (is_llm(m)) {
      return (s.precision == Precision::kAwq ? 6.0 : 9.0) * (1 + 0.15 * s.request_concurrency);
    }
    const double px = static_cast<double>(s.imgsz) / 640.0;
    return 4.0 + 10.0 * px * px * (1 + 0.3 * static_cast<double>(m % 3));
  }
  [[nodiscard]] double rate(std::size_t m, std::int32_t l) const {
    const ModelSpec& spec = w_->models[m];
    const Settings s = spec.settings(static_cast<std::size_t>(l));
    if (is_llm(m)) return spec.demand.rps * spec.demand.output_tokens / 4.0;
    return spec.demand.fps * (1 - s.skip_rate);
  }

  const Workload* w_;
};

}  // namespace corun::testing
