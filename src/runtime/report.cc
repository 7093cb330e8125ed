#include "corun/runtime/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "corun/core/atomic_file.h"
#include "corun/core/html.h"
#include "corun/core/stats.h"
#include "corun/core/strings.h"
#include "corun/core/svg.h"
#include "corun/core/version.h"
#include "corun/runtime/loaded_predictor.h"
#include "report_sections.h"

namespace corun {

namespace {

constexpr int kSchemaVersion = 2;

nlohmann::json nullable(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

// One plotted SLA metric of a model: its name, limit, and where its values are.
struct Metric {
  std::string name;
  Target target = Target::kLatencyP95;
  double limit = 0;
};

// Every SLA latency metric of a model (LLMs: TTFT and TPOT; others: latency p95).
std::vector<Metric> sla_metrics(const ModelSpec& m) {
  std::vector<Metric> out;
  for (const SlaKey& k : sla_keys(m)) {
    if (k.floor) continue;
    out.push_back(
        {std::string(k.label) + " (ms)", static_cast<Target>(k.index), *(m.sla.*k.limit)});
  }
  return out;
}

double margin_of(const Margin& g, Target t) {
  switch (t) {
    case Target::kTtftP95:
      return g.ttft;
    case Target::kTpotP95:
      return g.tpot;
    default:
      return g.latency;
  }
}

// Events and drift of the run as plot markers.
std::vector<std::pair<double, std::string>> markers(const RunReport& r) {
  std::vector<std::pair<double, std::string>> out;
  for (const auto& iv : r.intervals) {
    for (const auto& e : iv.drift) out.emplace_back(iv.t_s, e);
    for (const auto& e : iv.events) out.emplace_back(iv.t_s, e);
  }
  return out;
}

nlohmann::json margin_json(const Margin& g) {
  return {{"latency", g.latency}, {"ttft", g.ttft}, {"tpot", g.tpot}};
}

// One measured model of an interval: what it measured against what was predicted, and what
// online learning made of it.
nlohmann::json interval_model_json(const IntervalRecord& iv, const ModelMetrics& mm) {
  const Predicted& p = iv.predicted[mm.model];
  nlohmann::json jm = {
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
        {"throughput", p.throughput}}}};
  if (mm.model < iv.margins.size()) jm["margin"] = margin_json(iv.margins[mm.model]);
  if (mm.model < iv.learning.size()) {
    const auto& l = iv.learning[mm.model];
    jm["learning"] = {{"last_error", l.last_error},
                      {"abs_error", l.abs_error},
                      {"z", l.z},
                      {"noise_sd", l.noise_sd},
                      {"shared_error", l.shared_error},
                      {"observations", l.observations},
                      {"misses", l.misses}};
  }
  return jm;
}

// One interval of report.json: its events and conditions, the decision, and what was measured.
nlohmann::json interval_json(const IntervalRecord& iv) {
  nlohmann::json jv;
  jv["t_s"] = iv.t_s;
  jv["events"] = iv.events;
  jv["drift"] = iv.drift;
  jv["conditions"] = {{"interference_sm_util", iv.conditions.interference.sm_util},
                      {"interference_bandwidth_util", iv.conditions.interference.bandwidth_util},
                      {"power_cap_w", iv.conditions.power_cap_w},
                      {"perturb_seed", iv.conditions.perturb_seed}};
  jv["replanned"] = iv.replanned;
  jv["reason"] = iv.reason;
  jv["plan_changed"] = iv.plan_changed;
  jv["refit"] = iv.refit;
  if (!iv.refit_error.empty()) jv["refit_error"] = iv.refit_error;
  jv["replayed"] = iv.replayed;
  jv["decision"] = iv.decision;
  jv["decision_ms"] = iv.decision_ms;
  jv["measure_ms"] = iv.measure_ms;
  jv["candidates_evaluated"] = iv.evaluated;
  jv["feasible"] = iv.feasible;
  jv["infeasible"] = iv.infeasible;
  if (!iv.admitted.empty()) jv["admitted"] = iv.admitted;
  jv["predicted_utility"] = iv.predicted_utility;
  jv["measured_utility"] = iv.measured_utility;
  jv["gpu"] = {{"sm_util", iv.measured.gpu.sm_util},
               {"mem_bw_util", iv.measured.gpu.mem_bw_util},
               {"vram_used_gb", iv.measured.gpu.vram_used_gb},
               {"power_w", iv.measured.gpu.power_w},
               {"clock_mhz", iv.measured.gpu.clock_mhz}};
  if (iv.sm_active_predicted) jv["gpu"]["sm_util_predicted"] = *iv.sm_active_predicted;
  if (any_load(iv.gpu_load)) {
    jv["gpu"]["planned_load"] = {{"sm_util", iv.gpu_load.sm_util},
                                 {"bandwidth_util", iv.gpu_load.bandwidth_util}};
  }
  jv["models"] = nlohmann::json::array();
  for (const auto& mm : iv.measured.models) jv["models"].push_back(interval_model_json(iv, mm));
  if (!iv.transition.empty()) jv["transition"] = to_json(iv.transition);
  return jv;
}

// The run's summary: counts, decision times, each model's transitions, the mean utility.
nlohmann::json summary_json(const RunReport& r, std::size_t infeasible) {
  nlohmann::json per_model = nlohmann::json::object();
  {
    const auto restarts = r.changes(Actuation::kRestart);
    const auto reloads = r.changes(Actuation::kReload);
    const auto outage = r.outage_s();
    for (std::size_t m = 0; m < r.model_names.size(); ++m) {
      per_model[r.model_names[m]] = {
          {"restarts", restarts[m]}, {"reloads", reloads[m]}, {"downtime_s", outage[m]}};
    }
  }
  const auto d = r.decision_ms();
  double measured = 0;
  for (const auto& iv : r.intervals) measured += iv.measured_utility;
  return {{"intervals", r.intervals.size()},
          {"shed_model_intervals", r.shed_model_intervals()},
          {"decisions", d.size()},
          {"sla_violations", r.sla_violations()},
          {"infeasible_intervals", infeasible},
          {"decision_ms_p50", quantile(d, 0.5, 0.0)},
          {"decision_ms_p99", quantile(d, 0.99, 0.0)},
          {"transitions", per_model},
          {"mean_measured_utility",
           r.intervals.empty() ? 0.0 : measured / static_cast<double>(r.intervals.size())}};
}

// The run's settings and headline numbers, from its summary `s` (report_json).
std::string run_summary_html(const RunReport& r, const nlohmann::json& s) {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "<p>testbed <b>%s</b>, device <b>%s</b>, solver <b>%s</b>, predictions from "
                "<b>%s</b>, online learning <b>%s</b> (breach target %.3g), seed %llu, corun %s "
                "(%s).</p><p>%zu intervals, %zu decisions, %zu refits, <span class='%s'>%zu "
                "measured SLA violations</span> (model-intervals), decision time p50 %.1f ms, "
                "p99 %.1f ms.</p>",
                markup_escape(r.testbed).c_str(), markup_escape(r.device).c_str(),
                markup_escape(r.solver).c_str(), markup_escape(r.source).c_str(),
                r.learning ? "on" : "off", r.breach_target,
                static_cast<unsigned long long>(r.context.seed), std::string(version()).c_str(),
                std::string(git_hash()).c_str(), r.intervals.size(), r.decision_ms().size(),
                r.refits, r.sla_violations() ? "bad" : "", r.sla_violations(),
                s["decision_ms_p50"].get<double>(), s["decision_ms_p99"].get<double>());
  return buf;
}

// Infeasible plans: explanations that differ only in their numbers (the best latency
// reached moves with the load) are one explanation, shown once with where it held.
std::string infeasible_section(const RunReport& r) {
  struct Why {
    std::string first;  // the first message of its kind
    std::vector<double> at_s;
  };
  std::vector<std::pair<std::string, Why>> why;
  for (const auto& iv : r.intervals) {
    for (const auto& m : iv.infeasible) {
      std::string shape = m;
      std::replace_if(
          shape.begin(), shape.end(), [](char c) { return c >= '0' && c <= '9'; }, '#');
      auto it =
          std::find_if(why.begin(), why.end(), [&](const auto& x) { return x.first == shape; });
      if (it == why.end()) it = why.insert(why.end(), {shape, Why{m, {}}});
      if (it->second.at_s.empty() || it->second.at_s.back() != iv.t_s) {
        it->second.at_s.push_back(iv.t_s);
      }
    }
  }
  std::string html;
  if (!why.empty()) {
    char buf[1024];
    html += "<h2 class='bad'>Infeasible: not every SLA can be held</h2><ul>";
    for (const auto& entry : why) {
      const Why& g = entry.second;
      std::snprintf(buf, sizeof buf,
                    " <span class='note'>(%zu interval%s, t = %.0f to %.0f s)</span>",
                    g.at_s.size(), g.at_s.size() == 1 ? "" : "s", g.at_s.front(), g.at_s.back());
      html += "<li>" + markup_escape(g.first) + buf + "</li>";
    }
    html += "</ul><p>What runs instead follows the degradation rule (docs/scheduler.md).</p>";
  }
  return html;
}

// Model `m`'s chart of one SLA metric: measured, predicted, the bound planned with its margin,
// and the SLA.
std::string sla_metric_chart(const RunReport& r, const Workload& w, std::size_t m,
                             const Metric& metric,
                             const std::vector<std::pair<double, std::string>>& marks) {
  SvgSeries meas{"measured", {}, {}, false, "#d62728"};
  SvgSeries pred{"predicted", {}, {}, true, "#1f77b4"};
  SvgSeries bound{"planned bound (pred. \xC3\x97 (1+margin))", {}, {}, true, "#ff7f0e"};
  SvgSeries lim{"SLA", {}, {}, false, "#2ca02c"};
  for (const auto& iv : r.intervals) {
    const ModelMetrics* mm = nullptr;
    for (const auto& x : iv.measured.models) mm = x.model == m ? &x : mm;
    const bool runs = mm != nullptr && m < iv.predicted.size();
    const double pv = runs ? field(iv.predicted[m], metric.target) : NAN;
    const double g = runs && m < iv.margins.size() ? margin_of(iv.margins[m], metric.target) : NAN;
    meas.x.push_back(iv.t_s);
    meas.y.push_back(runs ? report::measured_value(*mm, static_cast<std::size_t>(metric.target))
                          : NAN);
    pred.x.push_back(iv.t_s);
    pred.y.push_back(pv);
    bound.x.push_back(iv.t_s);
    bound.y.push_back(pv * (1 + g));
    lim.x.push_back(iv.t_s);
    lim.y.push_back(metric.limit);
  }
  return report::time_chart(w.models[m].name + ": " + metric.name, metric.name,
                            {meas, pred, bound, lim}, marks, 250);
}

// Each model's SLA metrics, measured against predicted, then every model's prediction error.
std::string sla_section(const RunReport& r, const Workload& w,
                        const std::vector<std::pair<double, std::string>>& marks) {
  std::string html = "<h2>SLA metrics: measured against predicted</h2>";
  std::vector<SvgSeries> errors;
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    for (const Metric& metric : sla_metrics(w.models[m])) {
      html += sla_metric_chart(r, w, m, metric, marks);
    }
    SvgSeries e{w.models[m].name, {}, {}, false, ""};
    for (const auto& iv : r.intervals) {
      e.x.push_back(iv.t_s);
      e.y.push_back(m < iv.learning.size() && iv.learning[m].observations > 0
                        ? 100 * iv.learning[m].abs_error
                        : NAN);
    }
    errors.push_back(std::move(e));
  }
  html += report::time_chart(
      "Prediction error of each model's SLA latency (moving average of |measured / predicted - 1|)",
      "%", std::move(errors), marks);
  return html;
}

// The table of every interval: its events, drift, re-plan, utilities and breaches.
std::string intervals_table(const RunReport& r) {
  std::string html =
      "<h2>Every interval</h2><table><tr><th class='n'>t (s)</th><th>events</th>"
      "<th>drift (unseen)</th><th>re-plan</th><th class='n'>decision ms</th>"
      "<th class='n'>predicted utility</th><th class='n'>measured utility</th>"
      "<th>breaches</th></tr>";
  char buf[1024];
  for (const auto& iv : r.intervals) {
    std::string ev, drift, breaches;
    for (const auto& e : iv.events) ev += (ev.empty() ? "" : ", ") + e;
    for (const auto& e : iv.drift) drift += (drift.empty() ? "" : ", ") + e;
    for (const auto& mm : iv.measured.models) {
      if (iv.breach[mm.model]) breaches += (breaches.empty() ? "" : ", ") + mm.name;
    }
    const std::string reason = iv.replanned ? iv.reason + (iv.feasible ? "" : " (infeasible)") : "";
    std::snprintf(buf, sizeof buf,
                  "<tr><td class='n'>%.0f</td><td>%s</td><td>%s</td><td>%s</td>"
                  "<td class='n'>%.1f</td><td class='n'>%.2f</td><td class='n'>%.2f</td>"
                  "<td class='bad'>%s</td></tr>",
                  iv.t_s, markup_escape(ev).c_str(), markup_escape(drift).c_str(),
                  markup_escape(reason).c_str(), iv.decision_ms, iv.predicted_utility,
                  iv.measured_utility, markup_escape(breaches).c_str());
    html += buf;
  }
  html += "</table>";
  return html;
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
  j["seed"] = r.context.seed;
  j["source"] = r.source;
  j["learning"] = r.learning;
  j["breach_target"] = r.breach_target;
  j["refits"] = r.refits;
  j["refit_failures"] = r.refit_failures;
  j["replayed_intervals"] = r.replayed;
  j["intervals"] = nlohmann::json::array();
  std::size_t infeasible = 0;
  for (const auto& iv : r.intervals) {
    if (!iv.feasible) ++infeasible;
    j["intervals"].push_back(interval_json(iv));
  }
  j["summary"] = summary_json(r, infeasible);
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
  const auto marks = markers(r);
  const auto j = report_json(r, w);
  std::string html = "<h1>corun run: " + markup_escape(r.workload) + "</h1>";
  html += run_summary_html(r, j["summary"]);
  html += infeasible_section(r);
  html += report::models_section(r, w);
  html += "<h2>Objective and configuration</h2>";
  html += report::time_chart("Objective (utility) per interval", "utility", {pu, mu}, marks);
  html += report::configuration_section(r, w);
  html += report::gpu_section(r, w);
  html += sla_section(r, w, marks);
  html += report::events_section(r);
  html += intervals_table(r);
  return html_document("corun run: " + r.workload, html);
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
