#include "shed_evidence.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace corun::detail {

Predicted as_predicted(const std::array<double, kTargetCount>& measured) {
  Predicted p;
  for (Target t : surrogate::kAllTargets) {
    const double v = measured[static_cast<std::size_t>(t)];
    field(p, t) = std::isfinite(v) ? static_cast<float>(v) : 0.0f;
  }
  p.throughput = std::numeric_limits<float>::max();
  return p;
}

bool refuted(const ModelSpec& spec, const std::deque<ShedWindow>& windows, std::int32_t local,
             double share, double u, const Margin& margin) {
  constexpr double kSame = 1e-6;  // shares and loads computed the same way twice
  return std::any_of(windows.begin(), windows.end(), [&](const ShedWindow& w) {
    return w.local == local && w.share <= share + kSame && w.others_load <= u + kSame &&
           sla_excess(spec, w.measured, margin) > 0;
  });
}

}  // namespace corun::detail
