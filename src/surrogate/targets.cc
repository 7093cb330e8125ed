#include "corun/surrogate/targets.h"

#include <cmath>

#include "corun/core/enum_names.h"

namespace corun::surrogate {

namespace {

constexpr EnumNames<Target, kTargetCount> kTargetNames{{{{Target::kLatencyP95, "latency_ms_p95"},
                                                         {Target::kTtftP95, "ttft_ms_p95"},
                                                         {Target::kTpotP95, "tpot_ms_p95"},
                                                         {Target::kThroughput, "throughput"}}}};
static_assert(kTargetNames.values() == kAllTargets);

}  // namespace

std::string_view to_string(Target t) { return kTargetNames.name(t); }

std::optional<Target> parse_target(std::string_view s) { return kTargetNames.parse(s); }

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
