// PromQL templates for the metrics each serving stack exports (docs/stack.md).

#include "corun/serve/promql.h"

#include <algorithm>
#include <cmath>

namespace corun::serve {

namespace {

// `name{matchers}`, or the bare name when there are none.
std::string selector(const std::string& name, const std::string& matchers) {
  return matchers.empty() ? name : name + "{" + matchers + "}";
}

// The window's p95 of a Prometheus histogram, summed over its series (a model's engines or
// replicas), in ms: https://prometheus.io/docs/practices/histograms/#quantiles
std::string histogram_p95_ms(const std::string& base, const std::string& matchers,
                             const std::string& window) {
  return "1000 * histogram_quantile(0.95, sum by (le) (rate(" +
         selector(base + "_bucket", matchers) + "[" + window + "])))";
}

std::string sum_rate(const std::string& counter, const std::string& matchers,
                     const std::string& window) {
  return "sum(rate(" + selector(counter, matchers) + "[" + window + "]))";
}

// The growth per second of a gauge over the window, 0 when the gauge is not exported.
std::string growth(const std::string& gauge, const std::string& matchers,
                   const std::string& window) {
  return "(sum(deriv(" + selector(gauge, matchers) + "[" + window + "])) or vector(0))";
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

}  // namespace

std::string promql_duration(double window_s) {
  const double s = std::isfinite(window_s) ? std::max(1.0, std::round(window_s)) : 1.0;
  return std::to_string(static_cast<long long>(s)) + "s";
}

std::string promql_matchers(const std::vector<std::pair<std::string, std::string>>& labels) {
  std::string out;
  for (const auto& [name, value] : labels) {
    if (!out.empty()) out += ",";
    out += name + "=\"";
    for (const char c : value) {
      if (c == '\\' || c == '"') {
        out += '\\';
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
    }
    out += "\"";
  }
  return out;
}

std::vector<MetricQuery> promql_queries(const ModelSpec& m, double window_s) {
  const std::string w = promql_duration(window_s);
  const std::string l = promql_matchers(m.telemetry.labels);
  std::vector<MetricQuery> q;
  switch (m.telemetry.kind) {
    case TelemetrySource::Kind::kNone:
      break;
    case TelemetrySource::Kind::kVllm: {
      // https://docs.vllm.ai/en/latest/design/metrics.html (v1 metrics; the TPOT histogram was
      // renamed vllm:inter_token_latency_seconds, the old name is kept by older servers).
      const std::string done = sum_rate("vllm:request_success_total", l, w);
      q.push_back({"ttft_ms_p95", histogram_p95_ms("vllm:time_to_first_token_seconds", l, w)});
      q.push_back({"tpot_ms_p95", "(" + histogram_p95_ms("vllm:inter_token_latency_seconds", l, w) +
                                      " or " +
                                      histogram_p95_ms("vllm:time_per_output_token_seconds", l, w) +
                                      ")"});
      q.push_back(
          {"latency_ms_p95", histogram_p95_ms("vllm:e2e_request_latency_seconds", l, w)});
      // An LLM's throughput is its output tokens per second (as the testbeds measure it).
      q.push_back({"throughput", sum_rate("vllm:generation_tokens_total", l, w)});
      q.push_back({"requests", "sum(increase(" +
                                   selector("vllm:request_success_total", l) + "[" + w + "]))"});
      q.push_back({"rps", done + " + " + growth("vllm:num_requests_running", l, w) + " + " +
                              growth("vllm:num_requests_waiting", l, w)});
      q.push_back({"prompt_tokens", sum_rate("vllm:prompt_tokens_total", l, w) + " / " + done});
      q.push_back(
          {"output_tokens", sum_rate("vllm:generation_tokens_total", l, w) + " / " + done});
      break;
    }
    case TelemetrySource::Kind::kTriton: {
      // https://github.com/triton-inference-server/server/blob/main/docs/user_guide/metrics.md
      // (counters in µs without a _total suffix; summaries with summary_latencies=true).
      std::vector<std::pair<std::string, std::string>> p95 = m.telemetry.labels;
      p95.emplace_back("quantile", "0.95");
      const std::string served = sum_rate("nv_inference_count", l, w);
      q.push_back({"latency_ms_p95",
                   "sum(" + selector("nv_inference_request_summary_us", promql_matchers(p95)) +
                       ") / 1000"});
      q.push_back({"latency_ms_mean",
                   sum_rate("nv_inference_request_duration_us", l, w) + " / " +
                       sum_rate("nv_inference_request_success", l, w) + " / 1000"});
      q.push_back({"throughput", served});
      q.push_back({"requests", "sum(increase(" +
                                   selector("nv_inference_request_success", l) + "[" + w + "]))"});
      const bool frames = m.demand.fps > 0;
      q.push_back({frames ? "fps" : "rps",
                   served + " + " + growth("nv_inference_pending_request_count", l, w)});
      break;
    }
    case TelemetrySource::Kind::kCustom:
      for (const auto& [metric, text] : m.telemetry.queries) {
        std::string e = text;
        replace_all(e, "{window}", w);
        replace_all(e, "{labels}", l);
        q.push_back({metric, e});
      }
      break;
  }
  return q;
}

std::string promql_request_counter(const ModelSpec& m) {
  const std::string l = promql_matchers(m.telemetry.labels);
  switch (m.telemetry.kind) {
    case TelemetrySource::Kind::kVllm:
      return selector("vllm:request_success_total", l);
    case TelemetrySource::Kind::kTriton:
      return selector("nv_inference_request_success", l);
    default:
      return "";
  }
}

}  // namespace corun::serve
