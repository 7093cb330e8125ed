// A node measured unit by unit: isolation between GPUs and MIG slices is built from
// independent single-GPU measurements, never from a change to the simulator's physics.
#include "corun/testbed/node.h"

#include "corun/core/check.h"
#include "corun/core/rng.h"

namespace corun {

const ModelMetrics* NodeMeasurement::find(std::size_t m) const {
  for (const auto& x : models) {
    if (x.model == m) return &x;
  }
  return nullptr;
}

NodeMeasurement measure_node(const Context& ctx, const Testbed& testbed, const Workload& w,
                             const NodeLayout& layout, std::span<const std::int32_t> assignment,
                             std::span<const std::int32_t> config, const MeasureOptions& options) {
  CORUN_CHECK(assignment.size() == w.models.size());
  CORUN_CHECK(config.size() == w.models.size());
  NodeMeasurement out;
  out.unit_of.assign(assignment.begin(), assignment.end());
  out.units.resize(layout.units.size());
  for (std::size_t u = 0; u < layout.units.size(); ++u) {
    JointConfig c(w.models.size(), kAbsent);
    bool any = false;
    for (std::size_t m = 0; m < w.models.size(); ++m) {
      if (assignment[m] == static_cast<std::int32_t>(u) && config[m] != kAbsent) {
        c[m] = config[m];
        any = true;
      }
    }
    Measurement& mu = out.units[u];
    if (!any) {
      mu.testbed = std::string(testbed.name());
      mu.device = layout.units[u].device.name;
      continue;
    }
    const Workload unit = unit_workload(w, layout.units[u]);
    mu = testbed.measure(ctx.derived({0x6e6f6465ULL, u}), unit, c, options);  // "node", position
  }
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    if (assignment[m] == kUnassigned || config[m] == kAbsent) continue;
    CORUN_CHECK(assignment[m] >= 0 &&
                static_cast<std::size_t>(assignment[m]) < layout.units.size());
    for (const auto& x : out.units[static_cast<std::size_t>(assignment[m])].models) {
      if (x.model == m) out.models.push_back(x);
    }
  }
  return out;
}

}  // namespace corun
