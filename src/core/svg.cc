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

// The plot area, the data range it shows, and the mapping from data to SVG coordinates.
struct Frame {
  double left = 64, right = 270, top = 36, bottom = 52;
  double pw = 0, ph = 0;
  double x_lo = 0, x_hi = 0, y_lo = 0, y_hi = 0;
  bool log_x = false;

  [[nodiscard]] double fx(double x) const {
    const double t = log_x ? (std::log(x) - std::log(x_lo)) / (std::log(x_hi) - std::log(x_lo))
                           : (x - x_lo) / (x_hi - x_lo);
    return left + t * pw;
  }
  [[nodiscard]] double fy(double y) const {
    const double c = std::clamp(y, y_lo, y_hi);
    return top + ph - (c - y_lo) / (y_hi - y_lo) * ph;
  }
};

/// The frame of plot `p`: the range of its finite points, widened to y_min, y_max and the
/// reference line.
Frame frame_of(const SvgPlot& p) {
  Frame f;
  f.log_x = p.log_x;
  f.pw = p.width - f.left - f.right;
  f.ph = p.height - f.top - f.bottom;
  f.x_lo = std::numeric_limits<double>::infinity();
  f.x_hi = -f.x_lo;
  f.y_lo = f.x_lo;
  f.y_hi = -f.x_lo;
  for (const auto& s : p.series) {
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i]) || !std::isfinite(s.x[i])) continue;
      if (p.log_x && s.x[i] <= 0) continue;
      f.x_lo = std::min(f.x_lo, s.x[i]);
      f.x_hi = std::max(f.x_hi, s.x[i]);
      f.y_lo = std::min(f.y_lo, s.y[i]);
      f.y_hi = std::max(f.y_hi, s.y[i]);
    }
  }
  if (!std::isfinite(f.x_lo)) f.x_lo = 0, f.x_hi = 1, f.y_lo = 0, f.y_hi = 1;
  if (p.y_min) f.y_lo = *p.y_min;
  if (p.y_max) f.y_hi = *p.y_max;
  if (p.reference_y) {
    f.y_lo = std::min(f.y_lo, *p.reference_y);
    f.y_hi = std::max(f.y_hi, *p.reference_y);
  }
  if (f.x_hi <= f.x_lo) f.x_hi = f.x_lo + 1;
  if (f.y_hi <= f.y_lo) f.y_hi = f.y_lo + 1;
  return f;
}

/// The x ticks of frame `f`: 1, 2 and 5 times the powers of ten on a log axis.
std::vector<double> x_ticks(const Frame& f) {
  const double x_lo = f.x_lo, x_hi = f.x_hi;
  std::vector<double> xt;
  if (f.log_x) {
    for (double d = std::pow(10, std::floor(std::log10(x_lo))); d <= x_hi * 1.0001; d *= 10) {
      for (double m : {1.0, 2.0, 5.0}) {
        if (m * d >= x_lo * 0.9999 && m * d <= x_hi * 1.0001) xt.push_back(m * d);
      }
    }
  } else {
    xt = nice_ticks(x_lo, x_hi);
  }
  return xt;
}

/// Writes the axes of plot `p`: the frame, the ticks and their labels, the axis labels and the
/// reference line.
void render_axes(const SvgPlot& p, const Frame& f, std::string& o) {
  const double left = f.left, top = f.top, pw = f.pw, ph = f.ph;
  o += "<g stroke=\"#444\" fill=\"none\"><rect x=\"" + num(left) + "\" y=\"" + num(top) +
       "\" width=\"" + num(pw) + "\" height=\"" + num(ph) + "\"/></g>\n";
  const std::vector<double> xt = x_ticks(f);
  for (double t : xt) {
    o += "<line x1=\"" + num(f.fx(t)) + "\" y1=\"" + num(top + ph) + "\" x2=\"" + num(f.fx(t)) +
         "\" y2=\"" + num(top + ph + 5) + "\" stroke=\"#444\"/>";
    o += "<text x=\"" + num(f.fx(t)) + "\" y=\"" + num(top + ph + 18) +
         "\" text-anchor=\"middle\">" + tick_label(t) + "</text>\n";
  }
  for (double t : nice_ticks(f.y_lo, f.y_hi)) {
    o += "<line x1=\"" + num(left - 5) + "\" y1=\"" + num(f.fy(t)) + "\" x2=\"" + num(left + pw) +
         "\" y2=\"" + num(f.fy(t)) + "\" stroke=\"#ddd\"/>";
    o += "<text x=\"" + num(left - 8) + "\" y=\"" + num(f.fy(t) + 4) + "\" text-anchor=\"end\">" +
         tick_label(t) + "</text>\n";
  }
  o += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(p.height - 12.0) +
       "\" text-anchor=\"middle\">" + markup_escape(p.x_label) + "</text>\n";
  o += "<text transform=\"translate(16," + num(top + ph / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">" + markup_escape(p.y_label) + "</text>\n";
  if (p.reference_y) {
    o += "<line x1=\"" + num(left) + "\" y1=\"" + num(f.fy(*p.reference_y)) + "\" x2=\"" +
         num(left + pw) + "\" y2=\"" + num(f.fy(*p.reference_y)) +
         "\" stroke=\"#888\" stroke-dasharray=\"2,3\"/>\n";
  }
}

/// Writes the vertical markers of plot `p` and their labels.
void render_markers(const SvgPlot& p, const Frame& f, std::string& o) {
  const double left = f.left, top = f.top, pw = f.pw, ph = f.ph;
  const double x_lo = f.x_lo, x_hi = f.x_hi;
  // Marker labels go on the first of a few rows where they do not run into the label before
  // them (events close in time, or at the same time, would otherwise print over each other).
  constexpr int kLabelRows = 4;
  constexpr double kCharWidth = 5.6;  // at font-size 10
  double row_end[kLabelRows];
  std::fill(std::begin(row_end), std::end(row_end), -1e300);
  for (const auto& [x, label] : p.markers_x) {
    if (!std::isfinite(x) || x < x_lo || x > x_hi || (p.log_x && x <= 0)) continue;
    // Near the right edge a label reads leftwards from its line, clear of the legend.
    const double label_w = kCharWidth * static_cast<double>(label.size());
    const bool leftwards = f.fx(x) + 3 + label_w > left + pw;
    const double lx = leftwards ? f.fx(x) - 3 - label_w : f.fx(x) + 3;
    int row = 0;
    for (int r = 0; r < kLabelRows; ++r) {
      if (row_end[r] < lx) {
        row = r;
        break;
      }
      if (row_end[r] < row_end[row]) row = r;
    }
    row_end[row] = lx + label_w + 4;
    o += "<line x1=\"" + num(f.fx(x)) + "\" y1=\"" + num(top) + "\" x2=\"" + num(f.fx(x)) +
         "\" y2=\"" + num(top + ph) + "\" stroke=\"#9467bd\" stroke-dasharray=\"1,3\"/>";
    o += "<text x=\"" + num(lx) + "\" y=\"" + num(top + 12 + 11.0 * row) +
         "\" font-size=\"10\" fill=\"#9467bd\">" + markup_escape(label) + "</text>\n";
  }
}

/// Writes each series of plot `p` (its points and line) and its legend entry.
void render_series(const SvgPlot& p, const Frame& f, std::string& o) {
  const double left = f.left, top = f.top, pw = f.pw;
  for (std::size_t k = 0; k < p.series.size(); ++k) {
    const SvgSeries& s = p.series[k];
    const std::string colour = s.colour.empty()
                                   ? kColours[k % (sizeof kColours / sizeof kColours[0])]
                                   : markup_escape(s.colour);
    std::string path;
    bool pen = false;
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i]) || (p.log_x && s.x[i] <= 0)) {
        pen = false;
        continue;
      }
      path += (pen ? " L" : " M") + num(f.fx(s.x[i])) + " " + num(f.fy(s.y[i]));
      pen = true;
      o += "<circle cx=\"" + num(f.fx(s.x[i])) + "\" cy=\"" + num(f.fy(s.y[i])) +
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
}

}  // namespace

std::string SvgPlot::render() const {
  const Frame f = frame_of(*this);
  const double left = f.left, pw = f.pw;
  std::string o;
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
       "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " +
       std::to_string(height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o += "<text x=\"" + num(left + pw / 2) + "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">" +
       markup_escape(title) + "</text>\n";
  // Axes and ticks.
  render_axes(*this, f, o);
  render_markers(*this, f, o);
  // Series and legend.
  render_series(*this, f, o);
  o += "</svg>\n";
  return o;
}

}  // namespace corun