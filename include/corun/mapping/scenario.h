#pragma once

// A tool DAG scenario (workloads/tools/*.yaml): which tools are called, in what precedence,
// under which VRAM budget, on which device. Format: docs/placement.md.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/core/yaml.h"
#include "corun/mapping/tools.h"

namespace corun::mapping {

/// @brief Where one tool call runs. kGpuNow starts on the GPU as soon as its inputs are ready
/// and fails if VRAM is short at that moment; kGpuQueue waits in a FIFO until VRAM is free;
/// kCpu runs on host cores.
enum class Placement : std::uint8_t { kGpuNow = 0, kGpuQueue = 1, kCpu = 2 };

inline constexpr int kPlacementCount = 3;

/// @brief "gpu_now", "gpu_queue", "cpu".
std::string_view to_string(Placement p);
std::optional<Placement> parse_placement(std::string_view s);
/// @brief {"gpu_now", "gpu_queue", "cpu"}.
const std::vector<std::string>& placement_names();
/// @brief True for kGpuNow and kGpuQueue.
constexpr bool on_gpu(Placement p) { return p != Placement::kCpu; }

/// @brief One placement per node of a scenario, in node order.
using Mapping = std::vector<Placement>;

/// @brief One call of a catalog tool in the DAG.
struct ToolNode {
  std::string id;                  ///< unique within the scenario
  std::string tool;                ///< catalog tool name
  std::vector<std::size_t> after;  ///< indices of nodes whose outputs it needs
  int line = 0;                    ///< where it was declared
};

/// @brief Load outside the DAG that shares the machine (another tenant), constant over a run.
struct Background {
  double gpu_sm_util = 0;     ///< fraction of SMs it keeps busy
  double gpu_bw_util = 0;     ///< fraction of DRAM bandwidth it draws
  double cpu_busy_cores = 0;  ///< host cores it occupies
};

/// @brief The planned workload co-running on the GPU, as files (paths relative to the
/// scenario's directory): `plan` is read by exporting::parse_plan_input, `workload` (optional)
/// overrides the workload the plan names.
struct CoRunningFiles {
  std::string plan;
  std::string workload;
};

/// @brief A tool DAG to place. Nodes are acyclic (checked at load); any order is accepted.
struct Scenario {
  std::string name;
  std::string kind;  ///< serial | contention | memory | random
  std::string description;
  std::string file;                ///< where it was loaded from ("" when generated)
  std::string device = "rtx3090";  ///< catalog device name
  double vram_budget_gb = 0;       ///< VRAM the tools may hold at once (GB = 1e9 bytes)
  Context context;  ///< the run's: its seed (the file's `seed:`) draws noise and exploration
  double noise = 0;                ///< log-normal sigma of observed times
  Background background;
  CoRunningFiles co_running;  ///< empty plan: none
  std::vector<ToolNode> nodes;

  /// @brief Index of the node with this id.
  [[nodiscard]] std::optional<std::size_t> find(std::string_view id) const;
};

/// @brief Parses a scenario, checking tool names against `tools`, ids, edges and acyclicity.
/// Errors name the file, line and field path. `noise` defaults to the catalog's.
Result<Scenario> parse_scenario(std::string_view text, const std::string& file,
                                const ToolCatalog& tools);

/// @brief Parses a scenario from a YAML node: a file's root, or a request body that
/// serve/json_input.h turned into a node (to_yaml_node keeps JSON's types as YAML tags). The
/// checks are exactly those of parse_scenario(); field paths are relative to `root`
/// (`tools[2].after[0]`), and `file` names the source in each diagnostic.
/// @return the scenario, or none with every problem added to `diags` (at least one).
/// Thread-safety: reentrant; `tools` is only read.
std::optional<Scenario> parse_scenario_node(const YAML::Node& root, const std::string& file,
                                            const ToolCatalog& tools, Diagnostics& diags);

/// @brief Reads and parses one scenario file.
Result<Scenario> load_scenario(const std::filesystem::path& path, const ToolCatalog& tools);

/// @brief Every *.yaml scenario in `dir`, sorted by file name. Any bad file fails the whole
/// load (its error names the file).
Result<std::vector<Scenario>> load_scenario_dir(const std::filesystem::path& dir,
                                                const ToolCatalog& tools);

/// @brief A scenario as YAML text in the format parse_scenario reads.
std::string to_yaml(const Scenario& s);

}  // namespace corun::mapping
