#include "corun/runtime/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "corun/core/atomic_file.h"
#include "corun/core/stats.h"
#include "corun/core/strings.h"
#include "corun/core/svg.h"
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

// A line chart over the run's intervals (inline SVG), or a note when nothing was measured.
std::string chart(const std::string& title, const std::string& y_label,
                  std::vector<SvgSeries> series) {
  const bool any = std::any_of(series.begin(), series.end(), [](const SvgSeries& s) {
    return std::any_of(s.y.begin(), s.y.end(), [](double y) { return std::isfinite(y); });
  });
  if (!any) return "<p>no data for " + markup_escape(title) + "</p>";
  SvgPlot p;
  p.title = title;
  p.x_label = "time (s)";
  p.y_label = y_label;
  p.y_min = 0;
  p.width = 860;
  p.height = 300;
  p.series = std::move(series);
  return p.render();
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
  SvgSeries pu{"predicted", {}, {}, true, "#1f77b4"};
  SvgSeries mu{"measured", {}, {}, false, "#d62728"};
  for (const auto& iv : r.intervals) {
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
  html += "<h1>corun run: " + markup_escape(r.workload) + "</h1>";
  const auto& s = j["summary"];
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<p>testbed <b>%s</b>, device <b>%s</b>, solver <b>%s</b>, seed %llu, corun %s "
                "(%s).</p><p>%zu intervals, %zu decisions, <span class='%s'>%zu measured SLA "
                "violations</span> (model-intervals), decision time p50 %.1f ms, p99 %.1f ms.</p>",
                markup_escape(r.testbed).c_str(), markup_escape(r.device).c_str(), markup_escape(r.solver).c_str(),
                static_cast<unsigned long long>(r.seed), std::string(version()).c_str(),
                std::string(git_hash()).c_str(), r.intervals.size(), r.decision_ms().size(),
                r.sla_violations() ? "bad" : "", r.sla_violations(),
                s["decision_ms_p50"].get<double>(), s["decision_ms_p99"].get<double>());
  html += buf;
  html += chart("Objective (utility) per interval", "utility", {pu, mu});
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    SvgSeries meas{"measured", {}, {}, false, "#d62728"};
    SvgSeries pred{"predicted", {}, {}, true, "#1f77b4"};
    SvgSeries lim{"SLA", {}, {}, false, "#2ca02c"};
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
    if (any) html += chart(w.models[m].name + ": " + name, name, {meas, pred, lim});
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
                  iv.t_s, markup_escape(ev).c_str(), iv.replanned ? markup_escape(iv.reason).c_str() : "",
                  iv.decision_ms, iv.predicted_utility, iv.measured_utility,
                  markup_escape(breaches).c_str());
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
