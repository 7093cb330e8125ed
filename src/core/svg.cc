#include "corun/core/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>

#include "corun/core/strings.h"

namespace corun {

namespace {

// A colour-blind-safe qualitative palette (Okabe-Ito), cycled.
constexpr const char* kColours[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                    "#CC79A7", "#56B4E9", "#F0E442", "#000000"};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string tick_label(double v) {
  char buf[32];
  if (std::abs(v) >= 100 || std::abs(v - std::round(v)) < 1e-9) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.2g", v);
  }
  return buf;
}

// About five "nice" ticks (1, 2, 5 x 10^k steps) covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi) {
  const double span = hi - lo;
  if (!(span > 0)) return {lo};
  const double raw = span / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (raw <= step) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  }
  return ticks;
}

}  // namespace

std::string SvgPlot::render() const {
  const double left = 64, right = 270, top = 36, bottom = 52;
  const double pw = width - left - right, ph = height - top - bottom;
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo;
  double y_lo = x_lo, y_hi = -x_lo;
  for (const auto& s : series) {
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i]) || !std::isfinite(s.x[i])) continue;
      if (log_x && s.x[i] <= 0) continue;
      x_lo = std::min(x_lo, s.x[i]);
      x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]);
      y_hi = std::max(y_hi, s.y[i]);
    }
  }
  if (!std::isfinite(x_lo)) x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  if (y_min) y_lo = *y_min;
  if (y_max) y_hi = *y_max;
  if (reference_y) {
    y_lo = std::min(y_lo, *reference_y);
    y_hi = std::max(y_hi, *reference_y);
  }
  if (x_hi <= x_lo) x_hi = x_lo + 1;
  if (y_hi <= y_lo) y_hi = y_lo + 1;
  const auto fx = [&](double x) {
    const double t = log_x ? (std::log(x) - std::log(x_lo)) / (std::log(x_hi) - std::log(x_lo))
                           : (x - x_lo) / (x_hi - x_lo);
    return left + t * pw;
  };
  const auto fy = [&](double y) {
    const double c = std::clamp(y, y_lo, y_hi);
    return top + ph - (c - y_lo) / (y_hi - y_lo) * ph;
  };

  std::string o;
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
       "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " +
       std::to_string(height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o += "<text x=\"" + num(left + pw / 2) + "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">" +
       markup_escape(title) + "</text>\n";
  // Axes and ticks.
  o += "<g stroke=\"#444\" fill=\"none\"><rect x=\"" + num(left) + "\" y=\"" + num(top) +
       "\" width=\"" + num(pw) + "\" height=\"" + num(ph) + "\"/></g>\n";
  std::vector<double> xt;
  if (log_x) {
    for (double d = std::pow(10, std::floor(std::log10(x_lo))); d <= x_hi * 1.0001; d *= 10) {
      for (double m : {1.0, 2.0, 5.0}) {
        if (m * d >= x_lo * 0.9999 && m * d <= x_hi * 1.0001) xt.push_back(m * d);
      }
    }
  } else {
    xt = nice_ticks(x_lo, x_hi);
  }
  for (double t : xt) {
    o += "<line x1=\"" + num(fx(t)) + "\" y1=\"" + num(top + ph) + "\" x2=\"" + num(fx(t)) +
         "\" y2=\"" + num(top + ph + 5) + "\" stroke=\"#444\"/>";
    o += "<text x=\"" + num(fx(t)) + "\" y=\"" + num(top + ph + 18) + "\" text-anchor=\"middle\">" +
         tick_label(t) + "</text>\n";
  }
  for (double t : nice_ticks(y_lo, y_hi)) {
    o += "<line x1=\"" + num(left - 5) + "\" y1=\"" + num(fy(t)) + "\" x2=\"" + num(left + pw) +
         "\" y2=\"" + num(fy(t)) + "\" stroke=\"#ddd\"/>";
    o += "<text x=\"" + num(left - 8) + "\" y=\"" + num(fy(t) + 4) + "\" text-anchor=\"end\">" +
         tick_label(t) + "</text>\n";
  }
  o += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(height - 12.0) +
       "\" text-anchor=\"middle\">" + markup_escape(x_label) + "</text>\n";
  o += "<text transform=\"translate(16," + num(top + ph / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">" + markup_escape(y_label) + "</text>\n";
  if (reference_y) {
    o += "<line x1=\"" + num(left) + "\" y1=\"" + num(fy(*reference_y)) + "\" x2=\"" +
         num(left + pw) + "\" y2=\"" + num(fy(*reference_y)) +
         "\" stroke=\"#888\" stroke-dasharray=\"2,3\"/>\n";
  }
  // Marker labels go on the first of a few rows where they do not run into the label before
  // them (events close in time, or at the same time, would otherwise print over each other).
  constexpr int kLabelRows = 4;
  constexpr double kCharWidth = 5.6;  // at font-size 10
  double row_end[kLabelRows];
  std::fill(std::begin(row_end), std::end(row_end), -1e300);
  for (const auto& [x, label] : markers_x) {
    if (!std::isfinite(x) || x < x_lo || x > x_hi || (log_x && x <= 0)) continue;
    // Near the right edge a label reads leftwards from its line, clear of the legend.
    const double label_w = kCharWidth * static_cast<double>(label.size());
    const bool leftwards = fx(x) + 3 + label_w > left + pw;
    const double lx = leftwards ? fx(x) - 3 - label_w : fx(x) + 3;
    int row = 0;
    for (int r = 0; r < kLabelRows; ++r) {
      if (row_end[r] < lx) {
        row = r;
        break;
      }
      if (row_end[r] < row_end[row]) row = r;
    }
    row_end[row] = lx + label_w + 4;
    o += "<line x1=\"" + num(fx(x)) + "\" y1=\"" + num(top) + "\" x2=\"" + num(fx(x)) + "\" y2=\"" +
         num(top + ph) + "\" stroke=\"#9467bd\" stroke-dasharray=\"1,3\"/>";
    o += "<text x=\"" + num(lx) + "\" y=\"" + num(top + 12 + 11.0 * row) +
         "\" font-size=\"10\" fill=\"#9467bd\">" + markup_escape(label) + "</text>\n";
  }
  // Series and legend.
  for (std::size_t k = 0; k < series.size(); ++k) {
    const SvgSeries& s = series[k];
    const std::string colour = s.colour.empty()
                                   ? kColours[k % (sizeof kColours / sizeof kColours[0])]
                                   : markup_escape(s.colour);
    std::string path;
    bool pen = false;
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i]) || (log_x && s.x[i] <= 0)) {
        pen = false;
        continue;
      }
      path += (pen ? " L" : " M") + num(fx(s.x[i])) + " " + num(fy(s.y[i]));
      pen = true;
      o += "<circle cx=\"" + num(fx(s.x[i])) + "\" cy=\"" + num(fy(s.y[i])) +
           "\" r=\"2.5\" fill=\"" + colour + "\"/>";
    }
    if (!path.empty()) {
      o += "<path d=\"" + path.substr(1) + "\" fill=\"none\" stroke=\"" + colour +
           "\" stroke-width=\"1.8\"" + (s.dashed ? " stroke-dasharray=\"6,4\"" : "") + "/>\n";
    }
    const double ly = top + 8 + 16.0 * static_cast<double>(k);
    o += "<line x1=\"" + num(left + pw + 12) + "\" y1=\"" + num(ly) + "\" x2=\"" +
         num(left + pw + 34) + "\" y2=\"" + num(ly) + "\" stroke=\"" + colour +
         "\" stroke-width=\"1.8\"" + (s.dashed ? " stroke-dasharray=\"6,4\"" : "") + "/>";
    o += "<text x=\"" + num(left + pw + 40) + "\" y=\"" + num(ly + 4) + "\">" +
         markup_escape(s.label) + "</text>\n";
  }
  o += "</svg>\n";
  return o;
}

}  // namespace corun
