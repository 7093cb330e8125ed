#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "corun/spec/node.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief A model's unit in a node assignment that does not run it.
inline constexpr std::int32_t kUnassigned = -1;

/// @brief What a testbed observed on a whole node: each unit measured on its own, and every
/// running model's metrics gathered in workload order.
struct NodeMeasurement {
  std::vector<Measurement> units;     ///< one per unit of the layout (no models: not measured)
  std::vector<ModelMetrics> models;   ///< one per running model, in workload order
  std::vector<std::int32_t> unit_of;  ///< per model of the workload: its unit, or kUnassigned

  /// @brief The metrics of model `m`, or nullptr when it did not run.
  [[nodiscard]] const ModelMetrics* find(std::size_t m) const;
};

/// @brief Measures a node: every unit of `layout` (whole GPU or MIG slice) runs the models
/// assigned to it, on its own device, as one measurement of `testbed`. Co-runners therefore
/// contend only inside their unit: MIG isolates slices (their SMs, memory, L2 and DRAM
/// bandwidth), and separate GPUs share nothing. Each unit draws its noise from its own seed
/// (derived from ctx.seed and the unit's position), so the same command gives the same
/// numbers and a unit's measurement does not depend on what the others run. The conditions of
/// `options` act on every unit. Thread-safe when the testbed's measure() is.
/// @param assignment per model of `w`: its unit index in `layout`, or kUnassigned
/// @param config per model of `w`: its local configuration (ignored where unassigned)
NodeMeasurement measure_node(const Context& ctx, const Testbed& testbed, const Workload& w,
                             const NodeLayout& layout, std::span<const std::int32_t> assignment,
                             std::span<const std::int32_t> config, const MeasureOptions& options);

}  // namespace corun
