#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "corun/plan/predictor.h"
#include "corun/spec/workload.h"

namespace corun {

/// @brief Headroom kept on each latency metric a plan constrains: a prediction v is planned as
/// v·(1 + margin). Metrics differ in how well they are predicted (an LLM's TTFT p95 over a few
/// requests is far noisier than a camera's latency p95 over hundreds of frames), so each has
/// its own. Min-throughput SLAs use the latency margin (throughput / (1 + margin)).
struct Margin {
  double latency = 0;
  double ttft = 0;
  double tpot = 0;

  /// @brief The same margin on every metric.
  static constexpr Margin uniform(double m) { return {m, m, m}; }
  /// @brief The largest of the three.
  [[nodiscard]] double max() const;
};

/// @brief One key of a model's SLA: the one table the objective, the online controller, the
/// infeasibility explanations, the reports and serve's telemetry read, so that a breach has one
/// definition.
struct SlaKey {
  std::string_view name;   ///< as workloads, plans and telemetry spell it
  std::string_view label;  ///< as reports print it
  /// Its slot in a measured or learned array by target (surrogate::Target: latency p95 0,
  /// TTFT p95 1, TPOT p95 2, throughput 3).
  std::size_t index;
  bool floor;     ///< at least the limit (a throughput); else at most (a latency, ms)
  bool llm_only;  ///< TTFT and TPOT: an LLM's only
  std::optional<double> Sla::*limit;
  float Predicted::*predicted;
  /// The margin a plan holds it to (a throughput floor: the latency margin, as
  /// throughput / (1 + margin)).
  double Margin::*margin;
};

/// @brief Every SLA key, most binding first by convention (TTFT, TPOT, request latency, then
/// the throughput floor); sla_excess() sums them in this order.
inline constexpr std::array<SlaKey, 4> kSlaKeys{{
    {"ttft_ms_p95", "TTFT p95", 1, false, true, &Sla::ttft_ms_p95, &Predicted::ttft_ms_p95,
     &Margin::ttft},
    {"tpot_ms_p95", "TPOT p95", 2, false, true, &Sla::tpot_ms_p95, &Predicted::tpot_ms_p95,
     &Margin::tpot},
    {"latency_ms_p95", "latency p95", 0, false, false, &Sla::latency_ms_p95,
     &Predicted::latency_ms_p95, &Margin::latency},
    {"min_throughput", "throughput", 3, true, false, &Sla::min_throughput, &Predicted::throughput,
     &Margin::latency},
}};

/// @brief The keys `m`'s SLA sets, in kSlaKeys order (TTFT and TPOT of an LLM only).
std::vector<SlaKey> sla_keys(const ModelSpec& m);

/// @brief Whether measured value `v` breaks key `k` at `limit` (a value that is not finite
/// measured nothing).
inline bool breaks(const SlaKey& k, double limit, double v) {
  if (!std::isfinite(v)) return false;
  return k.floor ? v < limit : v > limit;
}

}  // namespace corun
