#include "corun/surrogate/targets.h"

#include <cmath>

namespace corun::surrogate {

std::string_view to_string(Target t) {
  switch (t) {
    case Target::kLatencyP95:
      return "latency_ms_p95";
    case Target::kTtftP95:
      return "ttft_ms_p95";
    case Target::kTpotP95:
      return "tpot_ms_p95";
    case Target::kThroughput:
      return "throughput";
  }
  return "unknown";
}

std::optional<Target> parse_target(std::string_view s) {
  for (Target t : kAllTargets) {
    if (to_string(t) == s) return t;
  }
  return std::nullopt;
}

std::vector<Target> family_targets(ModelFamily f) {
  if (f == ModelFamily::kLlm) return {Target::kTtftP95, Target::kTpotP95, Target::kThroughput};
  return {Target::kLatencyP95, Target::kThroughput};
}

double metric_value(const ModelMetrics& m, Target t) {
  if (!m.ok()) return NAN;
  double v = NAN;
  switch (t) {
    case Target::kLatencyP95:
      v = m.latency_ms_p95;
      break;
    case Target::kTtftP95:
      v = m.ttft_ms_p95.value_or(NAN);
      break;
    case Target::kTpotP95:
      v = m.tpot_ms_p95.value_or(NAN);
      break;
    case Target::kThroughput:
      v = m.throughput;
      break;
  }
  return std::isfinite(v) && v > 0 ? v : NAN;
}

}  // namespace corun::surrogate
