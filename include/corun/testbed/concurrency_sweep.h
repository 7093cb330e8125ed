#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "corun/space/space.h"
#include "corun/spec/workload.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief One level of a concurrency sweep: what the testbed observed with every measured
/// model kept at `concurrency` requests in flight.
struct ConcurrencyLevel {
  int concurrency = 0;
  Measurement measurement;
};

/// @brief `w` with the demand of every model that runs in `config` replaced by a closed loop
/// of `concurrency` requests in flight (prompt and output lengths kept, rates cleared); absent
/// models keep their demand. The timeline is left as it is (a sweep measures one instant).
/// @param concurrency requests in flight, 1..kMaxConcurrency (checked)
[[nodiscard]] Workload with_concurrency(const Workload& w, std::span<const std::int32_t> config,
                                        int concurrency);

/// @brief Measures `config` once per level, in the order given, like perf_analyzer's
/// --concurrency-range: each level overrides the measured models' demand (with_concurrency)
/// and is measured with the same options, so levels differ only by their load.
/// @return one entry per level; a level that fails carries the failure in its measurement
/// Thread-safety: as `testbed.measure`.
[[nodiscard]] std::vector<ConcurrencyLevel> sweep_concurrency(const Context& ctx,
                                                              const Testbed& testbed,
                                                              const Workload& w,
                                                              std::span<const std::int32_t> config,
                                                              std::span<const int> levels,
                                                              const MeasureOptions& options);

}  // namespace corun
