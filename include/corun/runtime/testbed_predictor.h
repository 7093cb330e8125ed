#pragma once

#include <cstdint>

#include "corun/plan/predictor.h"
#include "corun/spec/workload.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief "Predicts" by measuring every candidate on a testbed with one fixed noise seed. It is
/// the oracle of an evaluation (what the best plan would be if measuring were free), never a
/// planner's input in production. Lives in the runtime layer, where testbeds and plans meet.
class TestbedPredictor final : public Predictor {
 public:
  TestbedPredictor(const Workload& w, const Testbed& t, double window_s, std::uint64_t seed)
      : w_(&w), t_(&t), window_s_(window_s), seed_(seed) {}
  [[nodiscard]] std::size_t models() const override { return w_->models.size(); }
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override;

 private:
  const Workload* w_;
  const Testbed* t_;
  double window_s_;
  std::uint64_t seed_;
};

}  // namespace corun
