#include "corun/serve/telemetry.h"

#include <cmath>

#include "corun/core/json_number.h"
#include "corun/core/strings.h"

namespace corun::serve {

namespace {

using nlohmann::json;

// Metric values beyond this are no measurement of a GPU model (1e9 ms is 11 days).
constexpr double kMaxMetric = 1e9;

}  // namespace

ModelObservation TelemetrySample::observation(std::size_t model_index, std::int32_t local) const {
  ModelObservation o;
  o.model = model_index;
  o.local = local;
  auto put = [&](Target target, const std::optional<double>& v) {
    if (v) o.measured[static_cast<std::size_t>(target)] = *v;
  };
  put(Target::kLatencyP95, latency_ms_p95);
  put(Target::kTtftP95, ttft_ms_p95);
  put(Target::kTpotP95, tpot_ms_p95);
  put(Target::kThroughput, throughput);
  return o;
}

json TelemetrySample::to_json() const {
  json last = json::object();
  if (latency_ms_p50) last["latency_ms_p50"] = *latency_ms_p50;
  if (latency_ms_p95) last["latency_ms_p95"] = *latency_ms_p95;
  if (ttft_ms_p95) last["ttft_ms_p95"] = *ttft_ms_p95;
  if (tpot_ms_p95) last["tpot_ms_p95"] = *tpot_ms_p95;
  if (throughput) last["throughput"] = *throughput;
  if (plan_id) last["plan_id"] = *plan_id;
  return last;
}

std::variant<std::vector<TelemetrySample>, ApiError> parse_telemetry(const json& body) {
  std::vector<TelemetrySample> samples;
  const bool batch = body.is_array();
  if (!batch && !body.is_object()) {
    return ApiError{400, "bad_type", "telemetry must be a sample object or an array of samples",
                    ""};
  }
  if (batch && body.size() > kMaxSamplesPerPost) {
    return ApiError{413, "too_many_samples",
                    "at most " + std::to_string(kMaxSamplesPerPost) + " samples per request", ""};
  }
  if (batch && body.empty()) return ApiError{400, "empty_batch", "no samples", ""};
  const std::size_t count = batch ? body.size() : 1;
  samples.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const json& s = batch ? body[i] : body;
    const std::string prefix = batch ? "[" + std::to_string(i) + "]." : "";
    if (!s.is_object()) {
      return ApiError{400, "bad_type", "a sample must be a JSON object",
                      batch ? "[" + std::to_string(i) + "]" : ""};
    }
    TelemetrySample out;
    bool any_metric = false;
    for (const auto& [key, v] : s.items()) {
      if (key == "model") {
        if (!v.is_string()) {
          return ApiError{400, "bad_type", "model must be a string", prefix + "model"};
        }
        out.model = v.get<std::string>();
        continue;
      }
      if (key == "plan_id") {
        if (!v.is_number_integer()) {
          return ApiError{400, "bad_type", "plan_id must be an integer", prefix + "plan_id"};
        }
        out.plan_id = v.get<std::int64_t>();
        continue;
      }
      std::optional<double>* slot = nullptr;
      if (key == "latency_ms_p50") slot = &out.latency_ms_p50;
      if (key == "latency_ms_p95") slot = &out.latency_ms_p95;
      if (key == "ttft_ms_p95") slot = &out.ttft_ms_p95;
      if (key == "tpot_ms_p95") slot = &out.tpot_ms_p95;
      if (key == "throughput") slot = &out.throughput;
      if (slot == nullptr) {
        static const std::vector<std::string> kKeys = {
            "model",       "plan_id",     "latency_ms_p50", "latency_ms_p95",
            "ttft_ms_p95", "tpot_ms_p95", "throughput"};
        return ApiError{400, "unknown_field",
                        "unknown telemetry field '" + key.substr(0, 64) + "'" +
                            did_you_mean(key.substr(0, 64), kKeys),
                        prefix + key.substr(0, 64)};
      }
      if (!v.is_number()) return ApiError{400, "bad_type", key + " must be a number", prefix + key};
      const double d = v.get<double>();
      if (!std::isfinite(d) || d < 0 || d > kMaxMetric) {
        return ApiError{400, "out_of_range", key + " must be in [0, 1e9]", prefix + key};
      }
      *slot = d;
      any_metric = true;
    }
    if (out.model.empty()) {
      return ApiError{400, "missing_field", "model is required", prefix + "model"};
    }
    if (!any_metric) {
      return ApiError{400, "missing_field", "a sample needs at least one metric",
                      prefix + "latency_ms_p95"};
    }
    samples.push_back(std::move(out));
  }
  return samples;
}

void TelemetryLedger::restore(const std::string& model, const std::string& summary) {
  auto it = counts_.find(model);
  if (it == counts_.end()) return;
  const json j = json::parse(summary, nullptr, false);
  if (!j.is_object()) return;
  Counts& c = it->second;
  c.samples = json_number_or(j, "samples", std::uint64_t{0});
  c.breaches = json_number_or(j, "breaches", std::uint64_t{0});
  c.stale = json_number_or(j, "stale", std::uint64_t{0});
  if (j.contains("last")) c.last = j["last"];
}

void TelemetryLedger::record(const TelemetrySample& sample, bool stale, bool breach) {
  Counts& c = counts_.at(sample.model);
  ++c.samples;
  c.last = sample.to_json();
  if (stale) ++c.stale;
  if (breach) ++c.breaches;
  dirty_ = true;
}

json TelemetryLedger::to_json(const std::string& model) const {
  const Counts& c = counts_.at(model);
  return {{"samples", c.samples}, {"breaches", c.breaches}, {"stale", c.stale}, {"last", c.last}};
}

std::vector<std::pair<std::string, std::string>> TelemetryLedger::take_dirty() {
  std::vector<std::pair<std::string, std::string>> rows;
  if (!dirty_) return rows;
  dirty_ = false;
  for (const auto& [name, c] : counts_) {
    (void)c;
    rows.emplace_back(name, to_json(name).dump());
  }
  return rows;
}

}  // namespace corun::serve
