#include "report_sections.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "corun/core/html.h"
#include "corun/core/strings.h"

namespace corun::report {

double measured_value(const ModelMetrics& mm, std::size_t index) {
  switch (index) {
    case 0:
      return mm.latency_ms_p95;
    case 1:
      return mm.ttft_ms_p95.value_or(NAN);
    case 2:
      return mm.tpot_ms_p95.value_or(NAN);
    case 3:
      return mm.throughput;
    default:
      return NAN;
  }
}

namespace {

// Pale fills, so that dark labels stay readable on every segment (ColorBrewer Set3/Pastel,
// distinguishable by most colour-blind readers through their lightness as well).
constexpr const char* kFills[] = {"#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3",
                                  "#b3de69", "#fccde5", "#ffffb3", "#bc80bd", "#ccebc5"};
constexpr const char* kAbsentFill = "#eeeeee";
constexpr const char* kBreach = "#c00000";
constexpr const char* kMarker = "#9467bd";

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

double interval_of(const Workload& w) {
  return w.timeline.interval_s > 0 ? w.timeline.interval_s : 10;
}

// The local configuration of model m in an interval's plan (kAbsent when it did not run).
std::int32_t planned(const IntervalRecord& iv, std::size_t m) {
  return m < iv.plan.size() ? iv.plan[m] : kAbsent;
}

bool breached(const IntervalRecord& iv, std::size_t m) {
  return m < iv.breach.size() && iv.breach[m];
}

// The searched knobs of a model, by name, in the order its configurations are described.
std::vector<std::string> knob_names_of(const ModelSpec& m) {
  std::vector<std::string> out;
  for (const auto& k : m.knobs) out.push_back(knob_decl(k.id).name);
  return out;
}

// "awq · 4 · 512": a configuration's values without their names (the header has the names).
std::string compact(const ModelSpec& m, std::int32_t local) {
  if (local == kAbsent) return "off";
  if (m.knobs.empty()) return "fixed";
  std::vector<std::string> values;
  for (const auto& part : split(m.describe(static_cast<std::size_t>(local)), ',')) {
    const auto eq = part.find('=');
    values.push_back(eq == std::string::npos ? part : part.substr(eq + 1));
  }
  return join(values, " \xC2\xB7 ");  // middle dot
}

std::string describe(const ModelSpec& m, std::int32_t local) {
  if (local == kAbsent) return "off (not running)";
  return m.knobs.empty() ? "fixed knobs" : m.describe(static_cast<std::size_t>(local));
}

std::string demand_text(const ModelSpec& m) {
  const Demand& d = m.demand;
  std::string s;
  if (d.closed_loop()) {
    s = "closed loop, " + std::to_string(d.concurrency) + " in flight";
  } else if (m.arch.family == ModelFamily::kVision) {
    s = format_number(d.fps) + " frames/s";
  } else {
    s = format_number(d.rps) + " requests/s";
  }
  if (m.arch.family == ModelFamily::kLlm) {
    s += ", " + std::to_string(d.prompt_tokens) + " + " + std::to_string(d.output_tokens) +
         " tokens";
  }
  return s;
}

const char* throughput_unit(ModelFamily f) {
  switch (f) {
    case ModelFamily::kVision:
      return "frames/s";
    case ModelFamily::kLlm:
      return "tokens/s";
    default:
      return "requests/s";
  }
}

// One SLA term of a model: its name as the page shows it, its limit, and the measured value.
struct SlaTerm {
  std::string name;
  double limit = 0;
  bool at_least = false;  // a floor (throughput) rather than a ceiling
  std::size_t index = 0;  // SlaKey::index
};

std::vector<SlaTerm> sla_terms(const ModelSpec& m) {
  std::vector<SlaTerm> out;
  for (const SlaKey& k : sla_keys(m)) {
    out.push_back({std::string(k.label), *(m.sla.*k.limit), k.floor, k.index});
  }
  return out;
}

std::string term_text(const SlaTerm& t, ModelFamily f) {
  return t.name + (t.at_least ? " \xE2\x89\xA5 " : " \xE2\x89\xA4 ") + format_number(t.limit) +
         (t.at_least ? std::string(" ") + throughput_unit(f) : std::string(" ms"));
}

// Ticks at 1, 2 or 5 times a power of ten, at most about eight over [lo, hi].
std::vector<double> time_ticks(double lo, double hi) {
  const double span = std::max(hi - lo, 1e-9);
  double step = std::pow(10, std::floor(std::log10(span / 8)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (span / (m * step) <= 8) {
      step *= m;
      break;
    }
  }
  std::vector<double> out;
  for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9; t += step) out.push_back(t);
  return out;
}

}  // namespace

std::string time_chart(const std::string& title, const std::string& y_label,
                       std::vector<SvgSeries> series,
                       std::vector<std::pair<double, std::string>> markers, int height) {
  const bool any = std::any_of(series.begin(), series.end(), [](const SvgSeries& s) {
    return std::any_of(s.y.begin(), s.y.end(), [](double y) { return std::isfinite(y); });
  });
  if (!any) return "<p class=\"note\">no data for " + markup_escape(title) + "</p>";
  SvgPlot p;
  p.title = title;
  p.x_label = "time (s)";
  p.y_label = y_label;
  p.y_min = 0;
  p.width = 860;
  p.height = height;
  p.series = std::move(series);
  p.markers_x = std::move(markers);
  return p.render();
}

std::string models_section(const RunReport& r, const Workload& w) {
  std::vector<std::vector<std::string>> rows;
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    const ModelSpec& spec = w.models[m];
    const auto terms = sla_terms(spec);
    std::size_t ran = 0, breaches = 0;
    std::vector<double> worst(terms.size(), NAN);
    for (const auto& iv : r.intervals) {
      const ModelMetrics* mm = nullptr;
      for (const auto& x : iv.measured.models) mm = x.model == m ? &x : mm;
      if (mm == nullptr) continue;
      ++ran;
      breaches += breached(iv, m) ? 1 : 0;
      for (std::size_t k = 0; k < terms.size(); ++k) {
        const double v = measured_value(*mm, terms[k].index);
        if (!std::isfinite(v)) continue;
        // Worst: the highest latency, or the lowest throughput.
        if (!std::isfinite(worst[k]) || (terms[k].at_least ? v < worst[k] : v > worst[k])) {
          worst[k] = v;
        }
      }
    }
    std::vector<std::string> sla, worst_text;
    for (std::size_t k = 0; k < terms.size(); ++k) {
      sla.push_back(term_text(terms[k], spec.arch.family));
      if (std::isfinite(worst[k])) {
        const std::string unit = terms[k].at_least ? throughput_unit(spec.arch.family) : "ms";
        worst_text.push_back(terms[k].name + " " + format_quantity(worst[k]) + " " + unit + " (" +
                             format_number(std::round(100 * worst[k] / terms[k].limit)) +
                             " % of SLA)");
      }
    }
    rows.push_back({spec.name, spec.arch.name, std::string(to_string(spec.arch.family)),
                    demand_text(spec), sla.empty() ? "none" : join(sla, "; "), std::to_string(ran),
                    std::to_string(breaches), worst_text.empty() ? "-" : join(worst_text, "; ")});
  }
  return "<h2>Models and their SLAs</h2>" +
         html_table({"model", "catalog", "family", "demand (at start)", "SLA (at start)",
                     "intervals run", "measured breaches", "worst measured"},
                    rows, {false, false, false, false, false, true, true, false});
}

std::string configuration_section(const RunReport& r, const Workload& w) {
  if (r.intervals.empty() || w.models.empty()) return "";
  const double step = interval_of(w);
  const double t0 = r.intervals.front().t_s;
  const double t1 = r.intervals.back().t_s + step;
  const double left = 120, right = 20, top = 40, lane = 26, gap = 8, bottom = 44;
  const double width = 860, pw = width - left - right;
  const double height = top + static_cast<double>(w.models.size()) * (lane + gap) + bottom;
  const auto fx = [&](double t) { return left + (t - t0) / (t1 - t0) * pw; };
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) +
                    "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(width) + " " +
                    num(height) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + num(left + pw / 2) +
         "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">Configuration of each model "
         "(colour = configuration, red bar = measured SLA breach)</text>\n";
  // Per model, colours in order of first appearance; the legend below repeats them.
  std::vector<std::map<std::int32_t, std::size_t>> colour(w.models.size());
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    const double y = top + static_cast<double>(m) * (lane + gap);
    svg += "<text x=\"" + num(left - 8) + "\" y=\"" + num(y + lane / 2 + 4) +
           "\" text-anchor=\"end\" font-size=\"12\">" + markup_escape(w.models[m].name) +
           "</text>\n";
    for (std::size_t i = 0; i < r.intervals.size();) {
      const std::int32_t c = planned(r.intervals[i], m);
      std::size_t j = i + 1;
      while (j < r.intervals.size() && planned(r.intervals[j], m) == c) ++j;
      const double a = fx(r.intervals[i].t_s);
      const double b = j < r.intervals.size() ? fx(r.intervals[j].t_s) : fx(t1);
      std::string fill = kAbsentFill;
      if (c != kAbsent) {
        auto it = colour[m].emplace(c, colour[m].size()).first;
        fill = kFills[it->second % (sizeof kFills / sizeof kFills[0])];
      }
      svg += "<rect x=\"" + num(a) + "\" y=\"" + num(y) + "\" width=\"" + num(b - a) +
             "\" height=\"" + num(lane) + "\" fill=\"" + fill +
             "\" stroke=\"white\" stroke-width=\"1\"/>";
      // A label only where it fits (about 6 px per character at this size).
      const std::string label = compact(w.models[m], c);
      if (6.2 * static_cast<double>(label.size()) < b - a - 6) {
        svg += "<text x=\"" + num((a + b) / 2) + "\" y=\"" + num(y + lane / 2 + 4) +
               "\" text-anchor=\"middle\" fill=\"" + (c == kAbsent ? "#888" : "#222") + "\">" +
               markup_escape(label) + "</text>";
      }
      svg += "\n";
      i = j;
    }
    for (const auto& iv : r.intervals) {
      if (!breached(iv, m)) continue;
      svg += "<rect x=\"" + num(fx(iv.t_s)) + "\" y=\"" + num(y + lane - 4) + "\" width=\"" +
             num(fx(iv.t_s + step) - fx(iv.t_s)) + "\" height=\"4\" fill=\"" + kBreach + "\"/>\n";
    }
  }
  const double axis = top + static_cast<double>(w.models.size()) * (lane + gap);
  for (const auto& iv : r.intervals) {
    if (iv.events.empty() && iv.drift.empty()) continue;
    svg += "<line x1=\"" + num(fx(iv.t_s)) + "\" y1=\"" + num(top - 4) + "\" x2=\"" +
           num(fx(iv.t_s)) + "\" y2=\"" + num(axis - gap + 4) + "\" stroke=\"" + kMarker +
           "\" stroke-width=\"1.5\" stroke-dasharray=\"2,2\"/>\n";
  }
  svg += "<line x1=\"" + num(left) + "\" y1=\"" + num(axis) + "\" x2=\"" + num(left + pw) +
         "\" y2=\"" + num(axis) + "\" stroke=\"#444\"/>\n";
  for (double t : time_ticks(t0, t1)) {
    svg += "<line x1=\"" + num(fx(t)) + "\" y1=\"" + num(axis) + "\" x2=\"" + num(fx(t)) +
           "\" y2=\"" + num(axis + 5) + "\" stroke=\"#444\"/><text x=\"" + num(fx(t)) + "\" y=\"" +
           num(axis + 18) + "\" text-anchor=\"middle\">" + format_number(t) + "</text>\n";
  }
  svg += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(height - 8) +
         "\" text-anchor=\"middle\">time (s); dotted lines: events and drift</text>\n</svg>\n";

  std::string html = "<h2>Configuration timeline</h2><figure>" + svg + "</figure>";
  // Legend: what each colour is, per model, and for how many intervals it ran.
  html +=
      "<table><tr><th>model</th><th>knobs</th><th>colour</th><th>configuration</th>"
      "<th class=\"n\">intervals</th></tr>\n";
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    std::vector<std::pair<std::size_t, std::int32_t>> order;
    for (const auto& [c, k] : colour[m]) order.emplace_back(k, c);
    std::sort(order.begin(), order.end());
    bool first = true;
    for (const auto& [k, c] : order) {
      std::size_t n = 0;
      for (const auto& iv : r.intervals) n += planned(iv, m) == c ? 1 : 0;
      html += "<tr><td>" + (first ? markup_escape(w.models[m].name) : std::string()) + "</td><td>" +
              (first ? markup_escape(join(knob_names_of(w.models[m]), ", ")) : "") +
              "</td><td style=\"background:" + kFills[k % (sizeof kFills / sizeof kFills[0])] +
              "\"></td><td>" + markup_escape(describe(w.models[m], c)) + "</td><td class=\"n\">" +
              std::to_string(n) + "</td></tr>\n";
      first = false;
    }
  }
  html += "</table>\n";
  // Every interval, every model: the exact values, a change from the interval before marked.
  html +=
      "<details><summary>Knob values per interval (changes highlighted)</summary>"
      "<table><tr><th class=\"n\">t (s)</th>";
  for (const auto& m : w.models) {
    html += "<th>" + markup_escape(m.name) + "<br><span class=\"note\">" +
            markup_escape(join(knob_names_of(m), " \xC2\xB7 ")) + "</span></th>";
  }
  html += "</tr>\n";
  for (std::size_t i = 0; i < r.intervals.size(); ++i) {
    const IntervalRecord& iv = r.intervals[i];
    html += "<tr><td class=\"n\">" + format_number(iv.t_s) + "</td>";
    for (std::size_t m = 0; m < w.models.size(); ++m) {
      const std::int32_t c = planned(iv, m);
      const bool changed = i > 0 && planned(r.intervals[i - 1], m) != c;
      std::string cls = c == kAbsent ? "muted" : "";
      if (changed) cls += cls.empty() ? "changed" : " changed";
      if (breached(iv, m)) cls += cls.empty() ? "bad" : " bad";
      html += (cls.empty() ? std::string("<td>") : "<td class=\"" + cls + "\">") +
              markup_escape(compact(w.models[m], c)) + "</td>";
    }
    html += "</tr>\n";
  }
  html += "</table></details>\n";
  return html;
}

std::string gpu_section(const RunReport& r, const Workload& w) {
  // One chart, every quantity as a share of the device's own limit, so that what runs out
  // first is where the lines meet the top; the table below keeps the absolute values.
  struct Quantity {
    SvgSeries series;
    std::string name, unit;
    double limit = 0;  // the device's value (100 %); 0: plotted as measured (already a share)
    double GpuState::*field;
    double scale = 1;  // measured value x scale = value in `unit`
  };
  const bool host = r.testbed.rfind("torch", 0) == 0;  // CPU proxies, not GPU counters
  std::vector<Quantity> qs = {
      {{"SM busy", {}, {}, false, "#0072B2"}, "SM busy", "%", 0, &GpuState::sm_util, 100},
      {{"DRAM bandwidth", {}, {}, false, "#E69F00"},
       "DRAM bandwidth",
       "%",
       0,
       &GpuState::mem_bw_util,
       100},
      {{"VRAM (of device)", {}, {}, false, "#009E73"},
       "VRAM used",
       "GB",
       w.device.vram_gb,
       &GpuState::vram_used_gb,
       1}};
  if (!host) {
    qs.push_back({{"power (of TDP)", {}, {}, false, "#D55E00"},
                  "board power",
                  "W",
                  w.device.tdp_w,
                  &GpuState::power_w,
                  1});
    qs.push_back({{"SM clock (of boost)", {}, {}, true, "#56B4E9"},
                  "SM clock",
                  "MHz",
                  w.device.boost_clock_mhz,
                  &GpuState::clock_mhz,
                  1});
  }
  SvgSeries cap{"power cap (drift, of TDP)", {}, {}, true, "#CC79A7"};
  bool capped = false;
  for (const auto& iv : r.intervals) {
    for (auto& q : qs) {
      const double v = iv.measured.gpu.*q.field * q.scale;
      q.series.x.push_back(iv.t_s);
      q.series.y.push_back(q.limit > 0 ? 100 * v / q.limit : v);
    }
    cap.x.push_back(iv.t_s);
    const bool on = iv.conditions.power_cap_w > 0 && w.device.tdp_w > 0;
    cap.y.push_back(on ? 100 * iv.conditions.power_cap_w / w.device.tdp_w : NAN);
    capped = capped || on;
  }
  std::vector<std::pair<double, std::string>> marks;
  for (const auto& iv : r.intervals) {
    for (const auto& e : iv.drift) marks.emplace_back(iv.t_s, e);
  }
  std::string html = "<h2>GPU state over time (measured)</h2>";
  if (host) {
    html += "<p class=\"note\">On " + markup_escape(r.testbed) +
            " these are host proxies: SM = CPU-seconds per core-second, bandwidth = estimated "
            "DRAM bytes over host bandwidth, VRAM = resident memory of the workers; power is not "
            "measured and the clock field counts runnable worker threads (docs/testbed.md).</p>";
  }
  std::vector<SvgSeries> series;
  for (const auto& q : qs) series.push_back(q.series);
  if (capped && !host) series.push_back(cap);
  SvgPlot p;
  p.title = "GPU state, % of the device's limit (drift events marked)";
  p.x_label = "time (s)";
  p.y_label = "% of device limit";
  p.y_min = 0;
  p.y_max = 100;
  p.width = 860;
  p.height = 280;
  p.series = std::move(series);
  p.markers_x = std::move(marks);
  html += "<figure>" + p.render() + "</figure>";
  // Absolute values over the run.
  std::vector<std::vector<std::string>> rows;
  for (const auto& q : qs) {
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    std::size_t n = 0;
    for (const auto& iv : r.intervals) {
      const double v = iv.measured.gpu.*q.field * q.scale;
      if (!std::isfinite(v)) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
      ++n;
    }
    if (n == 0) continue;
    rows.push_back({q.name + " (" + q.unit + ")", format_quantity(lo),
                    format_quantity(sum / static_cast<double>(n)), format_quantity(hi),
                    q.limit > 0 ? format_quantity(q.limit) : "100"});
  }
  html += html_table({"quantity", "min", "mean", "max", "device"}, rows,
                     {false, true, true, true, true});
  return html;
}

std::string events_section(const RunReport& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& iv : r.intervals) {
    std::vector<std::string> breaches;
    for (const auto& mm : iv.measured.models) {
      if (breached(iv, mm.model)) breaches.push_back(mm.name);
    }
    // Re-plans that keep the plan (online learning re-plans whenever a bound moves) are
    // routine: the table of every interval below has them.
    const bool notable_plan = iv.replanned && (iv.plan_changed || iv.reason == "start");
    if (iv.events.empty() && iv.drift.empty() && !notable_plan && !iv.refit && breaches.empty()) {
      continue;
    }
    std::string response;
    if (iv.replanned) {
      response = "re-plan (" + iv.reason + ")" + (iv.plan_changed ? ", plan changed" : "") +
                 (iv.feasible ? "" : ", infeasible");
    }
    if (iv.refit) response += std::string(response.empty() ? "" : "; ") + "refit adopted";
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f", iv.decision_ms);
    rows.push_back({format_number(iv.t_s), join(iv.events, ", "), join(iv.drift, ", "), response,
                    iv.replanned ? ms : "", join(breaches, ", ")});
  }
  if (rows.empty()) return "<h2>Events</h2><p>No event, drift, re-plan or breach.</p>";
  return "<h2>Events</h2><p class=\"note\">Workload events are told to the planner; drift "
         "(co-tenant, power cap, a GPU unlike its description) is not, and shows only in what "
         "the testbed measures.</p>" +
         html_table({"t (s)", "workload events", "drift (planner not told)", "response",
                     "decision ms", "measured breaches"},
                    rows, {true, false, false, false, true, false});
}

}  // namespace corun::report
