#include "corun/mapping/problem.h"

#include <algorithm>

#include "corun/core/strings.h"

namespace corun::mapping {

Result<PlacementProblem> PlacementProblem::build(Scenario scenario, const ToolCatalog& tools,
                                                 const Device& device,
                                                 std::shared_ptr<const CoRunners> corunners) {
  PlacementProblem p;
  p.device_ = device;
  p.model_ = tools.model;
  p.gpu_ = gpu::device_model(device);
  p.background_ =
      gpu::cotenant_load(p.gpu_, scenario.background.gpu_sm_util, scenario.background.gpu_bw_util);
  double budget = scenario.vram_budget_gb * 1e9;
  if (corunners) {
    const std::string where = scenario.file.empty() ? scenario.name : scenario.file;
    if (scenario.background.gpu_sm_util > 0 || scenario.background.gpu_bw_util > 0) {
      return Error(where +
                       ": background: a typed GPU background and a co-running plan both "
                       "describe the GPU's other load; give one",
                   Error::Kind::kInvalidInput);
    }
    const std::string& plan_device = corunners->plan.workload.device.name;
    if (plan_device != device.name) {
      return Error(where + ": device: the tools run on '" + device.name +
                       "', the co-running plan (" + corunners->plan.plan_file + ") on '" +
                       plan_device + "'",
                   Error::Kind::kInvalidInput);
    }
    p.background_ = corunners->load(p.gpu_);
    budget = std::min(budget, device.vram_bytes() - corunners->vram_gb() * 1e9);
    if (budget <= 0) {
      return Error(where + ": the co-running plan holds " + format_number(corunners->vram_gb()) +
                       " GB of the device's " + format_number(device.vram_bytes() / 1e9) +
                       " GB: no VRAM is left for tools",
                   Error::Kind::kInvalidInput);
    }
  }
  p.vram_budget_bytes_ = budget;
  p.corunners_ = std::move(corunners);
  for (std::size_t i = 0; i < scenario.nodes.size(); ++i) {
    const ToolNode& n = scenario.nodes[i];
    const Tool* t = tools.find(n.tool);
    if (!t) {
      return Error(scenario.name + ": tool '" + n.tool + "' of node '" + n.id +
                   "' is not in the tool catalog" + did_you_mean(n.tool, tools.names()));
    }
    Node node;
    node.tool = *t;
    node.cost = derive_cost(*t, device, tools.model);
    if (t->has_gpu && t->vram_bytes() <= budget) {
      node.options = {Placement::kGpuNow, Placement::kGpuQueue, Placement::kCpu};
    } else {
      node.options = {Placement::kCpu};
    }
    node.preds = n.after;
    p.nodes_.push_back(std::move(node));
  }
  for (std::size_t i = 0; i < p.nodes_.size(); ++i) {
    for (auto j : p.nodes_[i].preds) {
      if (j >= p.nodes_.size() || j == i) {
        return Error(scenario.name + ": node '" + scenario.nodes[i].id + "' has a bad edge");
      }
      p.nodes_[j].succs.push_back(i);
    }
  }
  // Kahn's algorithm, smallest ready index first, so that the order is deterministic.
  std::vector<int> indeg(p.nodes_.size(), 0);
  for (std::size_t i = 0; i < p.nodes_.size(); ++i) {
    indeg[i] = static_cast<int>(p.nodes_[i].preds.size());
  }
  std::vector<std::size_t> ready;
  for (std::size_t i = 0; i < p.nodes_.size(); ++i) {
    if (indeg[i] == 0) ready.push_back(i);
  }
  while (!ready.empty()) {
    const auto it = std::min_element(ready.begin(), ready.end());
    const std::size_t i = *it;
    ready.erase(it);
    p.topo_.push_back(i);
    for (auto j : p.nodes_[i].succs) {
      if (--indeg[j] == 0) ready.push_back(j);
    }
  }
  if (p.topo_.size() != p.nodes_.size()) {
    return Error(scenario.name + ": the tool DAG has a cycle");
  }
  p.scenario_ = std::move(scenario);
  return p;
}

Result<PlacementProblem> PlacementProblem::build(Scenario scenario, const ToolCatalog& tools,
                                                 const Catalog& catalog,
                                                 std::shared_ptr<const CoRunners> corunners) {
  const Device* d = catalog.find_device(scenario.device);
  if (!d) {
    const std::string where = scenario.file.empty() ? scenario.name : scenario.file;
    return Error(where + ": device: unknown device '" + scenario.device + "'" +
                 did_you_mean(scenario.device, catalog.device_names()));
  }
  return build(std::move(scenario), tools, *d, std::move(corunners));
}

std::vector<std::string> PlacementProblem::ids() const {
  std::vector<std::string> out;
  for (const auto& n : scenario_.nodes) out.push_back(n.id);
  return out;
}

void PlacementProblem::set_tool_gpu_share(double share) {
  CORUN_CHECK(share > 0 && share <= 1);
  tool_gpu_share_ = share;
}

Status PlacementProblem::validate(std::span<const Placement> mapping) const {
  if (mapping.size() != nodes_.size()) {
    return Error("mapping has " + std::to_string(mapping.size()) + " placements for " +
                 std::to_string(nodes_.size()) + " tools");
  }
  for (std::size_t i = 0; i < mapping.size(); ++i) {
    const auto p = static_cast<int>(mapping[i]);
    if (p < 0 || p >= kPlacementCount) {
      return Error("tool '" + id(i) + "': unknown placement");
    }
    const auto& opts = nodes_[i].options;
    if (std::find(opts.begin(), opts.end(), mapping[i]) != opts.end()) continue;
    if (!nodes_[i].tool.has_gpu) {
      return Error("tool '" + id(i) + "' (" + nodes_[i].tool.name +
                   ") has no GPU implementation: it must run on cpu");
    }
    return Error("tool '" + id(i) + "' needs " + format_number(nodes_[i].cost.vram_bytes / 1e9) +
                 " GB of VRAM, above the budget of " + format_number(vram_budget_bytes_ / 1e9) +
                 " GB: it must run on cpu");
  }
  return {};
}

std::uint64_t PlacementProblem::mapping_count() const {
  std::uint64_t n = 1;
  for (const auto& node : nodes_) n *= node.options.size();
  return n;
}

Mapping PlacementProblem::mapping_at(std::uint64_t index) const {
  Mapping m(nodes_.size(), Placement::kCpu);
  for (std::size_t k = nodes_.size(); k-- > 0;) {
    const auto& opts = nodes_[k].options;
    m[k] = opts[index % opts.size()];
    index /= opts.size();
  }
  return m;
}

std::string PlacementProblem::describe(std::span<const Placement> mapping) const {
  std::string out;
  for (std::size_t i = 0; i < mapping.size() && i < nodes_.size(); ++i) {
    if (i) out += " ";
    out += id(i) + "=" + std::string(to_string(mapping[i]));
  }
  return out;
}

}  // namespace corun::mapping
