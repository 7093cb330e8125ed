#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace corun {

/// @brief One polyline of a plot; points with a NaN y are gaps.
struct SvgSeries {
  std::string label;
  std::vector<double> x;
  std::vector<double> y;
  bool dashed = false;
  std::string colour;  ///< CSS colour; empty: the palette's next (Okabe-Ito, colour-blind safe)
};

/// @brief A minimal line plot: axes with ticks, optional log x axis, a legend, one colour per
/// series. Deterministic text output (same data, same bytes), no external dependencies.
struct SvgPlot {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;
  std::optional<double> y_min, y_max;  ///< default: the data's range
  std::optional<double> reference_y;   ///< a dotted horizontal line (e.g. R^2 = 0.95)
  /// Vertical dotted lines at x with a short label at their top (e.g. events over time).
  std::vector<std::pair<double, std::string>> markers_x;
  std::vector<SvgSeries> series;
  int width = 860;
  int height = 420;

  /// @brief The complete SVG document.
  [[nodiscard]] std::string render() const;
};

}  // namespace corun
