#pragma once

#include "corun/testbed/testbed.h"

namespace corun {

/// @brief The simulated shared GPU: corun's embedded default testbed and CI's ground truth.
/// An analytic contention model solved to a fixed point, plus queueing and seeded noise; see
/// docs/testbed.md for every effect and the published magnitudes it reproduces. Stateless and
/// thread-safe.
class SimTestbed final : public Testbed {
 public:
  [[nodiscard]] std::string_view name() const override { return "sim"; }
  Measurement measure(const Workload& w, std::span<const std::int32_t> config,
                      const MeasureOptions& options) const override;
};

}  // namespace corun
