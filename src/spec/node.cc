// A node's layouts: its GPUs and MIG slices under each choice of partitioning.
#include "corun/spec/node.h"

#include "corun/core/check.h"

namespace corun {

std::string GpuUnit::label() const {
  std::string out = "gpu" + std::to_string(gpu);
  if (!profile.empty()) out += "/" + profile + "#" + std::to_string(slice);
  return out;
}

std::string NodeLayout::describe() const {
  std::string out;
  for (std::size_t i = 0; i < units.size(); ++i) {
    const GpuUnit& u = units[i];
    const bool first_of_gpu = i == 0 || units[i - 1].gpu != u.gpu;
    const bool last_of_gpu = i + 1 == units.size() || units[i + 1].gpu != u.gpu;
    if (first_of_gpu) {
      if (!out.empty()) out += ", ";
      out += "gpu" + std::to_string(u.gpu) + (u.profile.empty() ? " whole" : " [");
    }
    if (!u.profile.empty()) out += (first_of_gpu ? "" : " ") + u.profile;
    if (!u.profile.empty() && last_of_gpu) out += "]";
  }
  return out;
}

NodeLayout node_layout(const Workload& w, std::span<const std::size_t> choice) {
  const auto& options = w.node.options;
  CORUN_CHECK(choice.size() == options.size());
  NodeLayout out;
  out.choice.assign(choice.begin(), choice.end());
  for (std::size_t g = 0; g < options.size(); ++g) {
    CORUN_CHECK(choice[g] < options[g].size());
    const MigPartition& partition = options[g][choice[g]];
    if (partition.empty()) {
      out.units.push_back(GpuUnit{g, "", 0, w.device});
      continue;
    }
    for (std::size_t s = 0; s < partition.size(); ++s) {
      out.units.push_back(
          GpuUnit{g, partition[s].name, s, mig_slice_device(w.device, partition[s])});
    }
  }
  return out;
}

std::vector<NodeLayout> node_layouts(const Workload& w) {
  const auto& options = w.node.options;
  std::vector<std::size_t> choice(options.size(), 0);
  std::vector<NodeLayout> out;
  const std::size_t total = w.node.layout_count();
  for (std::size_t i = 0; i < total; ++i) {
    out.push_back(node_layout(w, choice));
    for (std::size_t g = options.size(); g-- > 0;) {  // mixed-radix increment, last GPU fastest
      if (++choice[g] < options[g].size()) break;
      choice[g] = 0;
    }
  }
  return out;
}

Workload unit_workload(const Workload& w, const GpuUnit& unit) {
  Workload out = w;
  out.device = unit.device;
  out.node = NodeSpec{};
  return out;
}

bool pin_allows(const Workload& w, std::size_t m, const GpuUnit& unit) {
  const auto& pin = w.models[m].gpu;
  return !pin || *pin == unit.gpu;
}

}  // namespace corun
