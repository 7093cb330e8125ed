#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "corun/catalog/device.h"
#include "corun/core/result.h"
#include "corun/spec/workload.h"

namespace corun {

/// @brief One place a model runs on a node: a whole GPU or one MIG slice of it. Co-runners
/// contend only inside their unit (MIG isolates slices; whole GPUs share nothing).
struct GpuUnit {
  std::size_t gpu = 0;  ///< GPU index on the node
  std::string profile;  ///< MIG profile of the slice; empty = the whole GPU
  std::size_t slice = 0;  ///< the slice's position in its GPU's partition
  Device device;          ///< what the unit behaves as (mig_slice_device for a slice)

  /// @brief "gpu1" for a whole GPU, "gpu0/3g.40gb#1" for the second slice of GPU 0.
  [[nodiscard]] std::string label() const;
};

/// @brief The node under one choice of partitioning per GPU: its units, GPU by GPU.
struct NodeLayout {
  std::vector<std::size_t> choice;  ///< per GPU: index into NodeSpec::options[gpu]
  std::vector<GpuUnit> units;       ///< GPU-major, slices in the order written

  /// @brief "gpu0 [3g.40gb 2g.20gb 2g.20gb], gpu1 whole".
  [[nodiscard]] std::string describe() const;
};

/// @brief The layout of `w`'s node for one choice per GPU (`choice[g]` < options[g].size()).
NodeLayout node_layout(const Workload& w, std::span<const std::size_t> choice);
/// @brief Every layout of `w`'s node (NodeSpec::layout_count() of them), GPU 0's choice
/// varying slowest.
std::vector<NodeLayout> node_layouts(const Workload& w);

/// @brief `w` as seen by one unit: the same models (so indices and local configurations carry
/// over), the unit's device, a single whole GPU.
Workload unit_workload(const Workload& w, const GpuUnit& unit);

/// @brief The workload file of one unit of a node workload, as YAML text that parses to a
/// single-GPU workload: `text` (the node workload's file, which parsed to `w`) with the unit's
/// device (a MIG slice's as a device mapping), no `gpus` or `mig`, only the models named by
/// `models` (indices into `w.models`, without their `gpu` pins) and only the timeline events that
/// concern them or the GPU itself (drift events). Comments are not kept; a header names the node
/// workload and the unit.
Result<std::string> unit_workload_text(std::string_view text, const Workload& w,
                                       const GpuUnit& unit, std::span<const std::size_t> models);

/// @brief Whether model `m` of `w` may run on `unit`: its pin, if any, names the unit's GPU.
bool pin_allows(const Workload& w, std::size_t m, const GpuUnit& unit);

}  // namespace corun
