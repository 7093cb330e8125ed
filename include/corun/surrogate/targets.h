#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "corun/catalog/model.h"
#include "corun/testbed/testbed.h"

namespace corun::surrogate {

/// @brief A metric a surrogate predicts. LLM prefill (TTFT) and decode (TPOT) are predicted
/// separately: co-runners hurt compute-bound prefill and memory-bound decode differently.
enum class Target { kLatencyP95 = 0, kTtftP95 = 1, kTpotP95 = 2, kThroughput = 3 };
inline constexpr std::size_t kTargetCount = 4;
inline constexpr std::array<Target, kTargetCount> kAllTargets = {
    Target::kLatencyP95, Target::kTtftP95, Target::kTpotP95, Target::kThroughput};

std::string_view to_string(Target t);
std::optional<Target> parse_target(std::string_view s);

/// @brief Targets of a model family: latency p95 and throughput for vision, encoder and speech
/// models; TTFT p95, TPOT p95 and throughput for LLMs.
std::vector<Target> family_targets(ModelFamily f);

/// @brief Whether a target is a latency (an SLA metric, lower is better): all but throughput.
constexpr bool is_latency(Target t) { return t != Target::kThroughput; }

/// @brief The measured value of `t`, or NaN when the model failed, the metric does not apply,
/// or the value is not a positive finite number (targets are fitted in log space).
double metric_value(const ModelMetrics& m, Target t);

}  // namespace corun::surrogate
