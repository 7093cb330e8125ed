#include "corun/runtime/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "corun/core/atomic_file.h"
#include "corun/core/stats.h"
#include "corun/core/version.h"

namespace corun {

namespace {

constexpr int kSchemaVersion = 1;

nlohmann::json nullable(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

// The metric an SLA is mostly about, and its limit: TPOT for LLMs (else TTFT), p95 latency
// otherwise. Returns false when the model has no such SLA.
bool headline(const ModelSpec& m, const ModelMetrics* mm, const Predicted* p, double* measured,
              double* predicted, double* limit, std::string* name) {
  if (m.sla.tpot_ms_p95) {
    *name = "TPOT p95 (ms)";
    *limit = *m.sla.tpot_ms_p95;
    *measured = mm && mm->tpot_ms_p95 ? *mm->tpot_ms_p95 : NAN;
    *predicted = p ? p->tpot_ms_p95 : NAN;
    return true;
  }
  if (m.sla.ttft_ms_p95) {
    *name = "TTFT p95 (ms)";
    *limit = *m.sla.ttft_ms_p95;
    *measured = mm && mm->ttft_ms_p95 ? *mm->ttft_ms_p95 : NAN;
    *predicted = p ? p->ttft_ms_p95 : NAN;
    return true;
  }
  if (m.sla.latency_ms_p95) {
    *name = "latency p95 (ms)";
    *limit = *m.sla.latency_ms_p95;
    *measured = mm ? mm->latency_ms_p95 : NAN;
    *predicted = p ? p->latency_ms_p95 : NAN;
    return true;
  }
  return false;
}

struct Series {
  std::string label;
  std::string color;
  std::vector<double> x, y;
  bool dashed = false;
};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A small line chart as inline SVG.
std::string svg_chart(const std::string& title, const std::string& ylabel,
                      const std::vector<Series>& series) {
  constexpr double kW = 640, kH = 240, kL = 60, kR = 150, kT = 28, kB = 36;
  double xmin = INFINITY, xmax = -INFINITY, ymin = 0, ymax = -INFINITY;
  for (const auto& s : series) {
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      xmin = std::min(xmin, s.x[i]);
      xmax = std::max(xmax, s.x[i]);
      ymax = std::max(ymax, s.y[i]);
    }
  }
  if (!std::isfinite(xmin)) return "<p>no data for " + escape(title) + "</p>";
  if (xmax <= xmin) xmax = xmin + 1;
  if (ymax <= ymin) ymax = ymin + 1;
  ymax *= 1.1;
  auto px = [&](double x) { return kL + (x - xmin) / (xmax - xmin) * (kW - kL - kR); };
  auto py = [&](double y) { return kH - kB - (y - ymin) / (ymax - ymin) * (kH - kT - kB); };
  char buf[256];
  std::string out = "<svg xmlns='http://www.w3.org/2000/svg' width='640' height='240' "
                    "font-family='sans-serif' font-size='11'>";
  out += "<text x='" + std::to_string(static_cast<int>(kL)) + "' y='16' font-size='13'>" +
         escape(title) + "</text>";
  std::snprintf(buf, sizeof buf,
                "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='#999'/>"
                "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='#999'/>",
                kL, kH - kB, kW - kR, kH - kB, kL, kT, kL, kH - kB);
  out += buf;
  for (int i = 0; i <= 4; ++i) {
    const double y = ymin + (ymax - ymin) * i / 4.0;
    std::snprintf(buf, sizeof buf, "<text x='%.0f' y='%.0f' text-anchor='end'>%.3g</text>",
                  kL - 4, py(y) + 4, y);
    out += buf;
    const double x = xmin + (xmax - xmin) * i / 4.0;
    std::snprintf(buf, sizeof buf, "<text x='%.0f' y='%.0f' text-anchor='middle'>%.0f s</text>",
                  px(x), kH - kB + 16, x);
    out += buf;
  }
  std::snprintf(buf, sizeof buf,
                "<text x='12' y='%.0f' transform='rotate(-90 12 %.0f)' text-anchor='middle'>",
                (kH - kB + kT) / 2, (kH - kB + kT) / 2);
  out += buf + escape(ylabel) + "</text>";
  int row = 0;
  for (const auto& s : series) {
    std::string pts;
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", px(s.x[i]), py(s.y[i]));
      pts += buf;
    }
    out += "<polyline fill='none' stroke='" + s.color + "' stroke-width='1.8'" +
           (s.dashed ? " stroke-dasharray='5,4'" : "") + " points='" + pts + "'/>";
    std::snprintf(buf, sizeof buf,
                  "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='%s' stroke-width='2'%s/>"
                  "<text x='%.0f' y='%.0f'>",
                  kW - kR + 10, kT + 14.0 * row, kW - kR + 30, kT + 14.0 * row, s.color.c_str(),
                  s.dashed ? " stroke-dasharray='5,4'" : "", kW - kR + 34, kT + 14.0 * row + 4);
    out += buf + escape(s.label) + "</text>";
    ++row;
  }
  return out + "</svg>";
}

}  // namespace

nlohmann::json report_json(const RunReport& r, const Workload& w) {
  nlohmann::json j;
  j["schema_version"] = kSchemaVersion;
  j["corun_version"] = std::string(version());
  j["git_hash"] = std::string(git_hash());
  j["workload"] = r.workload;
  j["workload_hash"] = w.hash;
  j["testbed"] = r.testbed;
  j["device"] = r.device;
  j["solver"] = r.solver;
  j["seed"] = r.seed;
  j["intervals"] = nlohmann::json::array();
  for (const auto& iv : r.intervals) {
    nlohmann::json jv;
    jv["t_s"] = iv.t_s;
    jv["events"] = iv.events;
    jv["replanned"] = iv.replanned;
    jv["reason"] = iv.reason;
    jv["plan_changed"] = iv.plan_changed;
    jv["decision_ms"] = iv.decision_ms;
    jv["candidates_evaluated"] = iv.evaluated;
    jv["predicted_utility"] = iv.predicted_utility;
    jv["measured_utility"] = iv.measured_utility;
    jv["models"] = nlohmann::json::array();
    for (const auto& mm : iv.measured.models) {
      const Predicted& p = iv.predicted[mm.model];
      jv["models"].push_back({
          {"name", mm.name},
          {"config", mm.config},
          {"sla_breach", static_cast<bool>(iv.breach[mm.model])},
          {"error", mm.ok() ? nlohmann::json() : nlohmann::json(mm.error)},
          {"measured",
           {{"latency_ms_p95", nullable(mm.latency_ms_p95)},
            {"ttft_ms_p95", mm.ttft_ms_p95 ? nlohmann::json(*mm.ttft_ms_p95) : nlohmann::json()},
            {"tpot_ms_p95", mm.tpot_ms_p95 ? nlohmann::json(*mm.tpot_ms_p95) : nlohmann::json()},
            {"throughput", nullable(mm.throughput)}}},
          {"predicted",
           {{"latency_ms_p95", p.latency_ms_p95},
            {"ttft_ms_p95", p.ttft_ms_p95},
            {"tpot_ms_p95", p.tpot_ms_p95},
            {"throughput", p.throughput}}},
      });
    }
    j["intervals"].push_back(std::move(jv));
  }
  const auto d = r.decision_ms();
  double measured = 0;
  for (const auto& iv : r.intervals) measured += iv.measured_utility;
  j["summary"] = {{"intervals", r.intervals.size()},
                  {"decisions", d.size()},
                  {"sla_violations", r.sla_violations()},
                  {"decision_ms_p50", quantile(d, 0.5, 0.0)},
                  {"decision_ms_p99", quantile(d, 0.99, 0.0)},
                  {"mean_measured_utility",
                   r.intervals.empty() ? 0.0 : measured / static_cast<double>(r.intervals.size())}};
  return j;
}

std::string report_html(const RunReport& r, const Workload& w) {
  std::vector<double> t;
  Series pu{"predicted", "#1f77b4", {}, {}, true};
  Series mu{"measured", "#d62728", {}, {}, false};
  for (const auto& iv : r.intervals) {
    t.push_back(iv.t_s);
    pu.x.push_back(iv.t_s);
    pu.y.push_back(iv.predicted_utility);
    mu.x.push_back(iv.t_s);
    mu.y.push_back(iv.measured_utility);
  }
  const auto j = report_json(r, w);
  std::string html =
      "<!DOCTYPE html><html><head><meta charset='utf-8'><title>corun run report</title>"
      "<style>body{font-family:sans-serif;max-width:980px;margin:2em auto;color:#222}"
      "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;"
      "text-align:right}th{background:#f4f4f4}.bad{color:#c00;font-weight:bold}</style>"
      "</head><body>";
  html += "<h1>corun run: " + escape(r.workload) + "</h1>";
  const auto& s = j["summary"];
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<p>testbed <b>%s</b>, device <b>%s</b>, solver <b>%s</b>, seed %llu, corun %s "
                "(%s).</p><p>%zu intervals, %zu decisions, <span class='%s'>%zu measured SLA "
                "violations</span> (model-intervals), decision time p50 %.1f ms, p99 %.1f ms.</p>",
                escape(r.testbed).c_str(), escape(r.device).c_str(), escape(r.solver).c_str(),
                static_cast<unsigned long long>(r.seed), std::string(version()).c_str(),
                std::string(git_hash()).c_str(), r.intervals.size(), r.decision_ms().size(),
                r.sla_violations() ? "bad" : "", r.sla_violations(),
                s["decision_ms_p50"].get<double>(), s["decision_ms_p99"].get<double>());
  html += buf;
  html += svg_chart("Objective (utility) per interval", "utility", {pu, mu});
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    Series meas{"measured", "#d62728", {}, {}, false};
    Series pred{"predicted", "#1f77b4", {}, {}, true};
    Series lim{"SLA", "#2ca02c", {}, {}, false};
    std::string name = "latency p95 (ms)";
    bool any = false;
    for (const auto& iv : r.intervals) {
      const ModelMetrics* mm = nullptr;
      for (const auto& x : iv.measured.models) mm = x.model == m ? &x : mm;
      double mv = NAN, pv = NAN, limit = NAN;
      if (!headline(w.models[m], mm, mm ? &iv.predicted[m] : nullptr, &mv, &pv, &limit, &name)) {
        break;
      }
      any = true;
      meas.x.push_back(iv.t_s);
      meas.y.push_back(mv);
      pred.x.push_back(iv.t_s);
      pred.y.push_back(pv);
      lim.x.push_back(iv.t_s);
      lim.y.push_back(limit);
    }
    if (any) html += svg_chart(w.models[m].name + ": " + name, name, {meas, pred, lim});
  }
  html += "<h2>Decisions</h2><table><tr><th>t (s)</th><th>events</th><th>re-plan</th>"
          "<th>decision ms</th><th>predicted utility</th><th>measured utility</th>"
          "<th>breaches</th></tr>";
  for (const auto& iv : r.intervals) {
    std::string ev;
    for (const auto& e : iv.events) ev += (ev.empty() ? "" : ", ") + e;
    std::string breaches;
    for (const auto& mm : iv.measured.models) {
      if (iv.breach[mm.model]) breaches += (breaches.empty() ? "" : ", ") + mm.name;
    }
    std::snprintf(buf, sizeof buf,
                  "<tr><td>%.0f</td><td>%s</td><td>%s</td><td>%.1f</td><td>%.2f</td><td>%.2f</td>"
                  "<td class='bad'>%s</td></tr>",
                  iv.t_s, escape(ev).c_str(), iv.replanned ? escape(iv.reason).c_str() : "",
                  iv.decision_ms, iv.predicted_utility, iv.measured_utility,
                  escape(breaches).c_str());
    html += buf;
  }
  html += "</table></body></html>\n";
  return html;
}

Status write_report(const RunReport& r, const Workload& w, const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error("cannot create " + dir.string() + ": " + ec.message(), Error::Kind::kIo);
  if (auto s = write_file_atomic(dir / "report.json", report_json(r, w).dump(2) + "\n"); !s) {
    return s;
  }
  return write_file_atomic(dir / "report.html", report_html(r, w));
}

}  // namespace corun
