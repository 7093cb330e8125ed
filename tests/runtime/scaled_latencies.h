#pragma once

// A test predictor: another predictor's latencies times a constant.

#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "corun/plan/predictor.h"

namespace corun::testing {

/// @brief What `inner` predicts, with every latency (request, TTFT, TPOT) times `k` and the
/// throughput unchanged: 1 is `inner`, 0.5 predicts everything twice as fast.
class ScaledLatencies final : public Predictor {
 public:
  ScaledLatencies(std::unique_ptr<Predictor> inner, double k) : inner_(std::move(inner)), k_(k) {}
  [[nodiscard]] std::size_t models() const override { return inner_->models(); }
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override {
    inner_->predict(configs, rows, out);
    for (auto& p : out.first(rows * models())) {
      p.latency_ms_p95 *= static_cast<float>(k_);
      p.ttft_ms_p95 *= static_cast<float>(k_);
      p.tpot_ms_p95 *= static_cast<float>(k_);
    }
  }

 private:
  std::unique_ptr<Predictor> inner_;
  double k_;
};

}  // namespace corun::testing
