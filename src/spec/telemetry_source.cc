#include "corun/spec/telemetry_source.h"

#include <algorithm>

namespace corun {

std::string_view to_string(TelemetrySource::Kind k) {
  switch (k) {
    case TelemetrySource::Kind::kNone:
      return "none";
    case TelemetrySource::Kind::kVllm:
      return "vllm";
    case TelemetrySource::Kind::kTriton:
      return "triton";
    case TelemetrySource::Kind::kCustom:
      return "custom";
  }
  return "?";
}

std::optional<TelemetrySource::Kind> telemetry_source_kind(std::string_view name) {
  for (auto k : {TelemetrySource::Kind::kVllm, TelemetrySource::Kind::kTriton,
                 TelemetrySource::Kind::kCustom}) {
    if (to_string(k) == name) return k;
  }
  return std::nullopt;
}

bool is_stack_metric(std::string_view name) {
  return std::any_of(kStackMetrics.begin(), kStackMetrics.end(),
                     [&](const StackMetric& m) { return m.name == name; });
}

bool is_prometheus_label_name(std::string_view name) {
  // https://prometheus.io/docs/concepts/data_model/#metric-names-and-labels
  if (name.empty() || name.starts_with("__")) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(name.front())) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

}  // namespace corun
