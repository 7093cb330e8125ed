#include "corun/spec/telemetry_source.h"

#include <algorithm>

#include "corun/core/enum_names.h"

namespace corun {

namespace {

using Kind = TelemetrySource::Kind;

constexpr EnumNames<Kind, 4> kKindNames{{{{Kind::kNone, "none"},
                                          {Kind::kVllm, "vllm"},
                                          {Kind::kTriton, "triton"},
                                          {Kind::kCustom, "custom"}}}};
// to_string answers "?" for a value outside the table, told apart by the table's "unknown".
static_assert(!kKindNames.parse("unknown"));

}  // namespace

std::string_view to_string(TelemetrySource::Kind k) {
  const std::string_view name = kKindNames.name(k);
  return name == "unknown" ? "?" : name;
}

std::optional<TelemetrySource::Kind> telemetry_source_kind(std::string_view name) {
  // "none" names no source: only the other kinds may be written.
  const auto k = kKindNames.parse(name);
  if (!k || *k == Kind::kNone) return std::nullopt;
  return k;
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
