#include "corun/testbed/concurrency_sweep.h"

#include "corun/core/check.h"

namespace corun {

Workload with_concurrency(const Workload& w, std::span<const std::int32_t> config,
                          int concurrency) {
  CORUN_CHECK(concurrency >= 1 && concurrency <= kMaxConcurrency);
  CORUN_CHECK(config.size() == w.models.size());
  Workload out = w;
  for (std::size_t m = 0; m < out.models.size(); ++m) {
    if (config[m] == kAbsent) continue;
    Demand& d = out.models[m].demand;
    d.fps = 0;
    d.rps = 0;
    d.concurrency = concurrency;
  }
  return out;
}

std::vector<ConcurrencyLevel> sweep_concurrency(const Context& ctx, const Testbed& testbed,
                                                const Workload& w,
                                                std::span<const std::int32_t> config,
                                                std::span<const int> levels,
                                                const MeasureOptions& options) {
  std::vector<ConcurrencyLevel> out;
  out.reserve(levels.size());
  for (const int n : levels) {
    const Workload level = with_concurrency(w, config, n);
    out.push_back({n, testbed.measure(ctx, level, config, options)});
  }
  return out;
}

}  // namespace corun
