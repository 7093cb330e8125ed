#include "corun/serve/prometheus.h"

#include <algorithm>
#include <cstdio>

namespace corun::serve {

namespace {

// Appends "# HELP" and "# TYPE" of one metric family.
void family(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void render_counters(std::string& out, const Metrics::Snapshot& s) {
  char line[256];
  family(out, "corun_serve_requests_total", "counter", "HTTP requests answered, by route and status.");
  for (std::size_t r = 0; r < s.routes.size(); ++r) {
    for (std::size_t c = 0; c < Metrics::kCodes.size(); ++c) {
      const auto n = s.requests[r][c];
      if (n == 0) continue;
      const std::string code =
          Metrics::kCodes[c] == 0 ? "other" : std::to_string(Metrics::kCodes[c]);
      std::snprintf(line, sizeof line,
                    "corun_serve_requests_total{route=\"%s\",code=\"%s\"} %llu\n",
                    s.routes[r].c_str(), code.c_str(), static_cast<unsigned long long>(n));
      out += line;
    }
  }
  family(out, "corun_serve_decision_latency_seconds", "histogram",
         "Wall time of one planning decision.");
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b < s.buckets.size(); ++b) {
    cumulative += s.buckets[b];
    if (b < Metrics::kDecisionBuckets.size()) {
      std::snprintf(line, sizeof line,
                    "corun_serve_decision_latency_seconds_bucket{le=\"%g\"} %llu\n",
                    Metrics::kDecisionBuckets[b], static_cast<unsigned long long>(cumulative));
    } else {
      std::snprintf(line, sizeof line,
                    "corun_serve_decision_latency_seconds_bucket{le=\"+Inf\"} %llu\n",
                    static_cast<unsigned long long>(cumulative));
    }
    out += line;
  }
  std::snprintf(line, sizeof line, "corun_serve_decision_latency_seconds_sum %.6f\n",
                s.decision_sum_s);
  out += line;
  std::snprintf(line, sizeof line, "corun_serve_decision_latency_seconds_count %llu\n",
                static_cast<unsigned long long>(s.decisions));
  out += line;
  family(out, "corun_serve_telemetry_samples_total", "counter", "Telemetry samples accepted.");
  out += "corun_serve_telemetry_samples_total " + std::to_string(s.samples) + "\n";
  family(out, "corun_serve_replans_total", "counter", "Plans computed and stored.");
  out += "corun_serve_replans_total " + std::to_string(s.replans) + "\n";
  family(out, "corun_serve_on_plan_hooks_total", "counter",
         "Runs of the --on-plan hook, by outcome (failed: the previous plan stayed in force).");
  out += "corun_serve_on_plan_hooks_total{outcome=\"applied\"} " +
         std::to_string(s.hooks_applied) + "\n";
  out += "corun_serve_on_plan_hooks_total{outcome=\"failed\"} " +
         std::to_string(s.hooks_failed) + "\n";
}

void render_gauges(std::string& out, const ServeGauges& g) {
  char line[256];
  family(out, "corun_serve_models", "gauge", "Registered models.");
  out += "corun_serve_models " + std::to_string(g.models) + "\n";
  family(out, "corun_serve_plan_id", "gauge", "Id of the plan in force.");
  out += "corun_serve_plan_id " + std::to_string(g.plan_id) + "\n";
  family(out, "corun_serve_sla_breaches_total", "counter", "Observed SLA breaches, by model.");
  for (const auto& [name, n] : g.breaches) {
    std::snprintf(line, sizeof line, "corun_serve_sla_breaches_total{model=\"%s\"} %llu\n",
                  name.c_str(), static_cast<unsigned long long>(n));
    out += line;
  }
  // Learning gauges, one per model (GET /v1/plan's "learning").
  auto gauge = [&](const char* name, const char* help, double ModelLearningState::*field) {
    family(out, name, "gauge", help);
    for (const auto& [model, state] : g.learning) {
      std::snprintf(line, sizeof line, "%s{model=\"%s\"} %.6f\n", name, model.c_str(),
                    state.*field);
      out += line;
    }
  };
  gauge("corun_serve_prediction_error_ratio",
        "Last (observed - predicted) / predicted of the SLA latency, by model.",
        &ModelLearningState::last_error);
  gauge("corun_serve_prediction_abs_error_ratio",
        "Moving average of |observed - predicted| / predicted of the SLA latency, by model.",
        &ModelLearningState::abs_error);
  gauge("corun_serve_margin_ratio", "Margin of the plan in force, by model (0.1 = 10 %).",
        &ModelLearningState::margin);
  gauge("corun_serve_bound_z",
        "Calibrated bound level of the SLA latency in standard deviations, by model.",
        &ModelLearningState::z);
  // Capacity: what the plan in force gives each model.
  auto plan_gauge = [&](const char* name, const char* help, auto value) {
    family(out, name, "gauge", help);
    for (const auto& m : g.plan_models) {
      std::snprintf(line, sizeof line, "%s{model=\"%s\"} %.6g\n", name, m.model.c_str(),
                    static_cast<double>(value(m)));
      out += line;
    }
  };
  using PM = ServeGauges::PlanModel;
  plan_gauge("corun_serve_model_feasible",
             "1 when the plan in force holds the model's SLA with all of its demand, by model.",
             [](const PM& m) { return m.feasible ? 1 : 0; });
  plan_gauge("corun_serve_model_best_effort",
             "1 when the plan in force runs the model without its SLA held, by model.",
             [](const PM& m) { return m.best_effort ? 1 : 0; });
  plan_gauge("corun_serve_model_admitted_share",
             "Share of the model's demand the plan in force admits (0 to 1), by model.",
             [](const PM& m) { return m.admitted; });
  // Stack telemetry (--prometheus).
  if (g.prometheus_up) {
    family(out, "corun_serve_telemetry_up", "gauge",
           "1 when Prometheus answered the last telemetry window.");
    out += std::string("corun_serve_telemetry_up ") + (*g.prometheus_up ? "1" : "0") + "\n";
    family(out, "corun_serve_telemetry_learned", "gauge",
           "1 when the model's last telemetry window taught the controller, by model.");
    for (const auto& m : g.stack) {
      out += "corun_serve_telemetry_learned{model=\"" + m.model + "\"} " +
             (m.learned ? "1" : "0") + "\n";
    }
    family(out, "corun_serve_telemetry_issue", "gauge",
           "1 when the model's last telemetry window had this data-quality issue, by model and "
           "status.");
    for (const auto& m : g.stack) {
      for (std::size_t q = 0; q < kDataQualityCount; ++q) {
        const auto quality = static_cast<DataQuality>(q);
        const bool on = std::find(m.issues.begin(), m.issues.end(), quality) != m.issues.end();
        out += "corun_serve_telemetry_issue{model=\"" + m.model + "\",status=\"" +
               std::string(to_string(quality)) + "\"} " + (on ? "1" : "0") + "\n";
      }
    }
  }
  const auto gpu_gauge = [&out](const char* name, const char* help, double v) {
    family(out, name, "gauge", help);
    char text[160];
    std::snprintf(text, sizeof text, "%s %.6g\n", name, v);
    out += text;
  };
  if (g.gpu_sm_active) {
    gpu_gauge("corun_serve_gpu_sm_active",
          "Share of the SMs busy in the last window, as dcgm-exporter measured it (0 to 1).",
          *g.gpu_sm_active);
  }
  if (g.gpu_sm_active_predicted) {
    gpu_gauge("corun_serve_gpu_sm_active_predicted",
          "Share of the SMs the plan in force keeps busy, by the catalog twin (0 to 1).",
          *g.gpu_sm_active_predicted);
  }
  if (g.gpu_unexplained_load) {
    gpu_gauge("corun_serve_gpu_unexplained_load",
          "1 while the GPU is busier than the plan in force explains (a process corun does not "
          "plan).",
          *g.gpu_unexplained_load ? 1 : 0);
  }
  if (g.gpu_planned_load_sm) {
    gpu_gauge("corun_serve_gpu_planned_load_sm",
              "Share of the SMs the planner predicts the unexplained load keeps busy beside the "
              "models (0: none).",
              *g.gpu_planned_load_sm);
  }
}

}  // namespace

std::string render_prometheus(const Metrics::Snapshot& counters, const ServeGauges& gauges) {
  std::string out;
  out.reserve(4096);
  render_counters(out, counters);
  render_gauges(out, gauges);
  return out;
}

}  // namespace corun::serve
