// One window of a model's metrics from Prometheus, and what is wrong with it (docs/stack.md).

#include "corun/serve/stack_telemetry.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "corun/core/strings.h"
#include "corun/serve/promql.h"

namespace corun::serve {

std::string_view to_string(DataQuality q) {
  switch (q) {
    case DataQuality::kUnreachable:
      return "unreachable";
    case DataQuality::kQueryError:
      return "query_error";
    case DataQuality::kMissing:
      return "missing";
    case DataQuality::kAmbiguous:
      return "ambiguous";
    case DataQuality::kNotFinite:
      return "not_finite";
    case DataQuality::kCounterReset:
      return "counter_reset";
    case DataQuality::kStale:
      return "stale";
    case DataQuality::kTooFewRequests:
      return "too_few_requests";
    case DataQuality::kOutlier:
      return "outlier";
    case DataQuality::kDemandMoved:
      return "demand_moved";
  }
  return "?";
}

Status check(const StackReadOptions& o) {
  auto bad = [](const char* f, const char* why) {
    return Error(std::string("telemetry.") + f + ": " + why, Error::Kind::kInvalidInput);
  };
  if (!(o.window_s >= 1 && o.window_s <= 3600)) return bad("window_s", "must be in [1, 3600]");
  if (!(o.min_requests >= 0 && o.min_requests <= 1e6)) {
    return bad("min_requests", "must be in [0, 1e6]");
  }
  if (!(o.stale_after_s >= 0 && o.stale_after_s <= 1e6)) {
    return bad("stale_after_s", "must be in [0, 1e6]");
  }
  return Status();
}

Status check(const OutlierOptions& o) {
  auto bad = [](const char* f, const char* why) {
    return Error(std::string("outliers.") + f + ": " + why, Error::Kind::kInvalidInput);
  };
  if (o.history < 3 || o.history > 1000) return bad("history", "must be in [3, 1000]");
  if (o.min_history < 2 || o.min_history > o.history) {
    return bad("min_history", "must be in [2, history]");
  }
  if (!(o.mads > 0 && o.mads <= 100)) return bad("mads", "must be in (0, 100]");
  if (!(o.min_ratio >= 1 && o.min_ratio <= 100)) return bad("min_ratio", "must be in [1, 100]");
  return Status();
}

bool WindowReading::has(DataQuality q) const {
  return std::any_of(issues.begin(), issues.end(),
                     [&](const WindowIssue& i) { return i.quality == q; });
}

namespace {

// The single value of an aggregated query, or what is wrong with it. `unreachable` is set when
// Prometheus did not answer (the caller stops reading the window).
std::optional<double> single(const PromResult& r, const std::string& metric,
                             const std::string& promql, WindowReading& out, bool& unreachable,
                             bool missing_is_issue) {
  if (const auto* e = std::get_if<PromError>(&r)) {
    if (e->kind == PromError::Kind::kUnreachable) {
      unreachable = true;
      out.issues.push_back({DataQuality::kUnreachable, "", e->message});
    } else {
      out.issues.push_back({DataQuality::kQueryError, metric, e->message + " (query: " +
                                                                  promql + ")"});
    }
    return std::nullopt;
  }
  const auto& v = std::get<std::vector<PromSample>>(r);
  if (v.empty()) {
    if (missing_is_issue) {
      out.issues.push_back({DataQuality::kMissing, metric, "no series answers " + promql});
    }
    return std::nullopt;
  }
  if (v.size() > 1) {
    out.issues.push_back({DataQuality::kAmbiguous, metric,
                          std::to_string(v.size()) +
                              " series answer the query; aggregate them or add labels that "
                              "select one (query: " +
                              promql + ")"});
    return std::nullopt;
  }
  if (!std::isfinite(v.front().value)) {
    out.issues.push_back({DataQuality::kNotFinite, metric,
                          format_number(v.front().value) +
                              (metric.find("_p95") != std::string::npos
                                   ? " (a quantile of a window without requests is NaN)"
                                   : "")});
    return std::nullopt;
  }
  return v.front().value;
}

// The checks on a built-in source's request counter; false when the window cannot be read.
bool check_counter(const ModelSpec& m, const StackReadOptions& o, const PromQuery& query,
                   WindowReading& out) {
  const std::string counter = promql_request_counter(m);
  if (counter.empty()) return true;
  const PromResult series = query(counter);
  if (const auto* e = std::get_if<PromError>(&series)) {
    out.issues.push_back({e->kind == PromError::Kind::kUnreachable ? DataQuality::kUnreachable
                                                                   : DataQuality::kQueryError,
                          "", e->message});
    return false;
  }
  const auto& v = std::get<std::vector<PromSample>>(series);
  if (v.empty()) {
    out.issues.push_back(
        {DataQuality::kMissing, "",
         "no series " + counter + ": is the " + std::string(to_string(m.telemetry.kind)) +
             " server scraped by this Prometheus, and do the labels match (telemetry.labels)?"});
    return false;
  }
  std::set<std::string> instances;
  for (const auto& s : v) {
    const auto it = s.labels.find("instance");
    instances.insert(it == s.labels.end() ? "" : it->second);
  }
  if (instances.size() > 1) {
    out.issues.push_back({DataQuality::kAmbiguous, "",
                          std::to_string(instances.size()) + " instances export " + counter +
                              " (" + join(std::vector<std::string>(instances.begin(),
                                                                   instances.end()),
                                          ", ") +
                              "); add an 'instance' label to telemetry.labels"});
    return false;
  }
  const std::string window = promql_duration(o.window_s);
  bool unreachable = false;
  const std::string age_q = "time() - max(timestamp(" + counter + "))";
  const auto age = single(query(age_q), "", age_q, out, unreachable, false);
  if (unreachable) return false;
  const double stale_after = o.stale_after_s > 0 ? o.stale_after_s : o.window_s;
  if (age && *age > stale_after) {
    out.issues.push_back({DataQuality::kStale, "",
                          "the newest sample of " + counter + " is " + format_number(*age) +
                              " s old (stale after " + format_number(stale_after) +
                              " s): is its target still scraped?"});
    return false;
  }
  const std::string resets_q = "sum(resets(" + counter + "[" + window + "]))";
  const auto resets = single(query(resets_q), "", resets_q, out, unreachable, false);
  if (unreachable) return false;
  if (resets && *resets > 0) {
    out.issues.push_back({DataQuality::kCounterReset, "",
                          counter + " was reset in the window: the server restarted, and a "
                                    "window with a restart is not learned from"});
    out.learnable = false;
  }
  return true;
}

}  // namespace

WindowReading read_window(const ModelSpec& m, const StackReadOptions& o, const PromQuery& query) {
  WindowReading out;
  out.sample.model = m.name;
  if (!m.telemetry.enabled()) return out;
  if (!check_counter(m, o, query, out)) {
    out.learnable = false;
    return out;
  }
  const auto queries = promql_queries(m, o.window_s);
  // Triton's p95 is there only with summaries on; its mean stands in, reported only.
  const bool p95_optional = m.telemetry.kind == TelemetrySource::Kind::kTriton;
  for (const MetricQuery& q : queries) {
    bool unreachable = false;
    const bool optional = (p95_optional && q.metric == "latency_ms_p95") ||
                          q.metric == "latency_ms_mean" ||
                          (m.telemetry.kind != TelemetrySource::Kind::kCustom &&
                           (q.metric == "prompt_tokens" || q.metric == "output_tokens"));
    const auto v = single(query(q.promql), q.metric, q.promql, out, unreachable, !optional);
    if (unreachable) {
      out.learnable = false;
      return out;
    }
    if (!v) continue;
    const double x = *v;
    if (q.metric == "latency_ms_p95") out.sample.latency_ms_p95 = x;
    if (q.metric == "ttft_ms_p95") out.sample.ttft_ms_p95 = x;
    if (q.metric == "tpot_ms_p95") out.sample.tpot_ms_p95 = x;
    if (q.metric == "throughput") out.sample.throughput = std::max(0.0, x);
    if (q.metric == "latency_ms_mean") out.latency_ms_mean = x;
    if (q.metric == "requests") out.requests = std::max(0.0, x);
    if (q.metric == "rps") out.rps = std::max(0.0, x);
    if (q.metric == "fps") out.fps = std::max(0.0, x);
    if (q.metric == "prompt_tokens") out.prompt_tokens = std::max(0.0, x);
    if (q.metric == "output_tokens") out.output_tokens = std::max(0.0, x);
  }
  // With the p95 there, the mean is not needed; without it, it is reported, never learned.
  if (out.sample.latency_ms_p95) out.latency_ms_mean.reset();
  if (out.requests && *out.requests < o.min_requests) {
    out.issues.push_back({DataQuality::kTooFewRequests, "",
                          format_number(*out.requests) + " requests completed in the window (a " +
                              "p95 is learned from at least " + format_number(o.min_requests) +
                              ")"});
    out.learnable = false;
  }
  return out;
}

GpuReading read_gpu_window(const std::vector<std::pair<std::string, std::string>>& labels,
                           const StackReadOptions& o, const PromQuery& query) {
  GpuReading g;
  // dcgm-exporter's metric names and labels: github.com/NVIDIA/dcgm-exporter (etc/
  // default-counters.csv); the fields: DCGM's field identifiers (dcgm_fields.h).
  const std::string l = promql_matchers(labels);
  auto selector = [&](const std::string& name) { return l.empty() ? name : name + "{" + l + "}"; };
  WindowReading scratch;  // single() reports into a WindowReading
  const std::string probe = selector("DCGM_FI_DEV_FB_USED");
  const PromResult series = query(probe);
  if (const auto* e = std::get_if<PromError>(&series)) {
    g.issues.push_back({e->kind == PromError::Kind::kUnreachable ? DataQuality::kUnreachable
                                                                 : DataQuality::kQueryError,
                        "", e->message});
    return g;
  }
  const auto& v = std::get<std::vector<PromSample>>(series);
  if (v.empty()) {
    g.issues.push_back({DataQuality::kMissing, "",
                        "no series " + probe + ": is dcgm-exporter scraped, and do the labels "
                                               "(--dcgm) select this GPU?"});
    return g;
  }
  std::set<std::string> gpus;
  for (const auto& s : v) {
    std::string id;
    for (const char* k : {"Hostname", "hostname", "gpu", "UUID", "GPU_I_ID"}) {
      const auto it = s.labels.find(k);
      if (it != s.labels.end()) id += std::string(k) + "=" + it->second + " ";
    }
    gpus.insert(id);
  }
  if (gpus.size() > 1) {
    g.issues.push_back({DataQuality::kAmbiguous, "",
                        std::to_string(gpus.size()) + " GPUs match " + probe +
                            "; select one with --dcgm gpu=N (and Hostname=..., GPU_I_ID=...)"});
    return g;
  }
  const std::string w = promql_duration(o.window_s);
  auto mean = [&](const std::string& field, double scale) -> std::optional<double> {
    const std::string q = "avg(avg_over_time(" + selector(field) + "[" + w + "]))";
    bool unreachable = false;
    const auto x = single(query(q), field, q, scratch, unreachable, false);
    if (!x) return std::nullopt;
    return *x * scale;
  };
  g.sm_active = mean(kDcgmSmActive, 1);
  g.sm_active_field = kDcgmSmActive;
  if (!g.sm_active) {
    g.sm_active = mean("DCGM_FI_DEV_GPU_UTIL", 0.01);
    g.sm_active_field = g.sm_active ? "DCGM_FI_DEV_GPU_UTIL" : "";
  }
  g.dram_active = mean("DCGM_FI_PROF_DRAM_ACTIVE", 1);
  g.fb_used_mib = mean("DCGM_FI_DEV_FB_USED", 1);
  g.power_w = mean("DCGM_FI_DEV_POWER_USAGE", 1);
  g.sm_clock_mhz = mean("DCGM_FI_DEV_SM_CLOCK", 1);
  g.issues.insert(g.issues.end(), scratch.issues.begin(), scratch.issues.end());
  return g;
}

// ---------------------------------------------------------------------------------------------
// Outliers

namespace {

double median(std::vector<double> v) {
  const std::size_t k = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  const double hi = v[k];
  if (v.size() % 2 == 1) return hi;
  return 0.5 * (hi + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k)));
}

}  // namespace

bool OutlierGate::hold(const std::string& metric, double value, const OutlierOptions& o) {
  if (!(value > 0) || !std::isfinite(value)) return false;
  Series& s = series_[metric];
  const double x = std::log(value);
  auto accept = [&](double v) {
    s.logs.push_back(v);
    while (s.logs.size() > o.history) s.logs.pop_front();
  };
  if (s.logs.size() < o.min_history) {
    s.pending = 0;
    accept(x);
    return false;
  }
  const std::vector<double> logs(s.logs.begin(), s.logs.end());
  const double med = median(logs);
  std::vector<double> dev(logs.size());
  for (std::size_t i = 0; i < logs.size(); ++i) dev[i] = std::abs(logs[i] - med);
  // 1.4826 × MAD estimates the sd of normal noise (Rousseeuw & Croux 1993).
  const double bound = std::max(o.mads * 1.4826 * median(dev), std::log(o.min_ratio));
  const int side = x > med + bound ? 1 : (x < med - bound ? -1 : 0);
  if (side == 0) {
    s.pending = 0;
    accept(x);
    return false;
  }
  if (s.pending == side) {
    // Confirmed: the model's level moved. Both windows join the history.
    accept(s.pending_log);
    accept(x);
    s.pending = 0;
    return false;
  }
  s.pending = side;
  s.pending_log = x;
  return true;
}

std::vector<WindowIssue> hold_outliers(TelemetrySample& sample, OutlierGate& gate,
                                       const OutlierOptions& o) {
  std::vector<WindowIssue> issues;
  auto judge = [&](const char* metric, std::optional<double>& v) {
    if (!v || !gate.hold(metric, *v, o)) return;
    issues.push_back({DataQuality::kOutlier, metric,
                      format_number(*v) + " lies far outside the model's recent windows: held "
                                          "until the next window confirms it"});
    v.reset();
  };
  judge("latency_ms_p95", sample.latency_ms_p95);
  judge("ttft_ms_p95", sample.ttft_ms_p95);
  judge("tpot_ms_p95", sample.tpot_ms_p95);
  return issues;
}

}  // namespace corun::serve
