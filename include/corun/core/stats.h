#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace corun {

/// @brief The q-quantile (0 <= q <= 1) of `v` by linear interpolation between the order
/// statistics at q·(n−1) (Hyndman and Fan's type 7, numpy's default): the median of an even
/// count is the mean of the middle two. `empty` when `v` is empty.
inline double quantile(std::vector<double> v, double q, double empty = NAN) {
  if (v.empty()) return empty;
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

/// @brief z such that a standard normal stays below it with probability `p` (0 < p < 1).
inline double normal_quantile(double p) {
  // Bisection on the normal CDF: 60 halvings of [-10, 10] are exact to double precision.
  double lo = -10, hi = 10;
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace corun
