#pragma once

// A scenario bound to a device: per-node costs, allowed placements, DAG adjacency, and the
// validation every proposed mapping goes through before it runs.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/catalog/device.h"
#include "corun/core/result.h"
#include "corun/mapping/corunners.h"
#include "corun/mapping/scenario.h"
#include "corun/mapping/tools.h"

namespace corun::mapping {

/// @brief Everything a policy or the executor needs about one scenario on one device.
/// Immutable after build(); safe to share between threads.
class PlacementProblem {
 public:
  /// @brief Binds `scenario` to `device`; fails if a node's tool is missing from `tools`.
  /// With `corunners` (the plan in force on that GPU) the tools share the GPU with the load the
  /// testbed measured for the plan, and their VRAM budget is what the plan leaves free (at most
  /// the scenario's); the scenario may then type no GPU background, and the plan must run on
  /// `device`.
  static Result<PlacementProblem> build(Scenario scenario, const ToolCatalog& tools,
                                        const Device& device,
                                        std::shared_ptr<const CoRunners> corunners = nullptr);
  /// @brief Binds `scenario` to its own device, looked up in `catalog` (an unknown device is
  /// an error naming the scenario file and its `device` field).
  static Result<PlacementProblem> build(Scenario scenario, const ToolCatalog& tools,
                                        const Catalog& catalog,
                                        std::shared_ptr<const CoRunners> corunners = nullptr);

  [[nodiscard]] const Scenario& scenario() const { return scenario_; }
  [[nodiscard]] const Device& device() const { return device_; }
  [[nodiscard]] const ExecModel& model() const { return model_; }
  /// @brief The device as the shared GPU model sees it.
  [[nodiscard]] const gpu::DeviceModel& gpu() const { return gpu_; }
  /// @brief Load the co-running workload puts on the GPU during the whole run.
  [[nodiscard]] const gpu::Load& background() const { return background_; }
  [[nodiscard]] std::size_t size() const { return nodes_.size(); }
  [[nodiscard]] const Tool& tool(std::size_t i) const { return nodes_[i].tool; }
  [[nodiscard]] const ToolCost& cost(std::size_t i) const { return nodes_[i].cost; }
  [[nodiscard]] const std::string& id(std::size_t i) const { return scenario_.nodes[i].id; }
  [[nodiscard]] std::vector<std::string> ids() const;
  [[nodiscard]] const std::vector<std::size_t>& preds(std::size_t i) const {
    return nodes_[i].preds;
  }
  [[nodiscard]] const std::vector<std::size_t>& succs(std::size_t i) const {
    return nodes_[i].succs;
  }
  /// @brief Nodes in a topological order (ties by index).
  [[nodiscard]] const std::vector<std::size_t>& topo_order() const { return topo_; }
  /// @brief VRAM the tools may hold at once: the scenario's budget, capped by what the
  /// co-running plan leaves free.
  [[nodiscard]] double vram_budget_bytes() const { return vram_budget_bytes_; }
  /// @brief The co-running models (nullptr: the GPU runs only the tools and the background).
  [[nodiscard]] const std::shared_ptr<const CoRunners>& corunners() const { return corunners_; }
  /// @brief The planner's prediction of the co-runners' SLAs during a burst (nullptr: no
  /// co-running plan, or none fitted); what exploring policies may consult, never the testbed.
  [[nodiscard]] const CoRunnerGuard* guard() const {
    return corunners_ ? corunners_->guard.get() : nullptr;
  }

  /// @brief Placements node `i` may take, in enum order: {cpu} when the tool has no GPU
  /// implementation or its footprint alone exceeds the budget, else all three.
  [[nodiscard]] std::span<const Placement> options(std::size_t i) const {
    return nodes_[i].options;
  }
  /// @brief Whether node `i` may run on the GPU at all.
  [[nodiscard]] bool gpu_allowed(std::size_t i) const { return nodes_[i].options.size() > 1; }

  /// @brief Confines the tools' GPU work to `share` of the SMs (one MPS client for the tool
  /// server, its active-thread percentage 100 x share): tools computing at once share that
  /// partition in proportion to the SMs each asks for, and the co-runners see them hold at most
  /// share x SMs. 1 (the default) leaves them unconfined. Call before any run (not
  /// thread-safe against running).
  /// @pre 0 < share <= 1
  void set_tool_gpu_share(double share);
  /// @brief The tools' share of the SMs (1: unconfined).
  [[nodiscard]] double tool_gpu_share() const { return tool_gpu_share_; }

  /// @brief Checks a proposed mapping: one placement per node, each allowed for its node.
  /// The message names the node and the reason (unknown placement, no GPU implementation,
  /// footprint above the VRAM budget).
  [[nodiscard]] Status validate(std::span<const Placement> mapping) const;

  /// @brief Number of valid mappings (the product of the option counts).
  [[nodiscard]] std::uint64_t mapping_count() const;
  /// @brief Valid mapping number `index` in [0, mapping_count()), mixed radix, last node
  /// fastest.
  [[nodiscard]] Mapping mapping_at(std::uint64_t index) const;
  /// @brief "id=placement id=placement ...".
  [[nodiscard]] std::string describe(std::span<const Placement> mapping) const;

 private:
  struct Node {
    Tool tool;
    ToolCost cost;
    std::vector<Placement> options;
    std::vector<std::size_t> preds;
    std::vector<std::size_t> succs;
  };
  Scenario scenario_;
  Device device_;
  ExecModel model_;
  gpu::DeviceModel gpu_;
  gpu::Load background_;
  double vram_budget_bytes_ = 0;
  double tool_gpu_share_ = 1;
  std::shared_ptr<const CoRunners> corunners_;
  std::vector<Node> nodes_;
  std::vector<std::size_t> topo_;
};

}  // namespace corun::mapping
