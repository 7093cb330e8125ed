#pragma once

// Standalone profiling of the tool catalog: each tool alone, end to end (transfers included),
// on CPU and GPU, classified as GPU-preferred, CPU-preferred, device-neutral or ambiguous.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/catalog/device.h"
#include "corun/mapping/tools.h"

namespace corun::mapping {

/// @brief Which device a tool prefers when it runs alone.
enum class Preference { kGpu, kCpu, kNeutral, kAmbiguous };

/// @brief "gpu-preferred", "cpu-preferred", "device-neutral", "ambiguous".
std::string_view to_string(Preference p);

/// @brief Classification thresholds on the standalone speedup s = cpu_ms / gpu_ms.
/// - s >= clear (2): GPU-preferred; s <= 1/clear: CPU-preferred. A 2x gap is more than
///   co-runner contention in our scenarios usually takes away (REFERENCES: 6-41 % pairwise
///   slowdowns, launch delays growing ~12x with 5 co-runners only hurt launch-bound tools).
/// - 1/neutral <= s <= neutral (1.25): device-neutral, within the run-to-run and contention
///   noise of a single measurement. A tool with no GPU implementation is device-neutral too:
///   whatever placement is asked, its only implementation runs (the scheduler keeps it on cpu).
/// - otherwise ambiguous: one side wins alone by 25 %-100 %, which contention can reverse.
struct ProfileThresholds {
  double clear = 2.0;
  double neutral = 1.25;
};

/// @brief One tool's standalone profile on one device.
struct ToolProfile {
  std::string tool;
  std::string display_name;
  bool has_gpu = false;
  double cpu_ms = 0;
  std::optional<double> gpu_ms;  ///< end to end: upload + compute + download
  double gpu_compute_ms = 0;     ///< kernels and launch gaps only
  double gpu_transfer_ms = 0;    ///< upload + download
  double speedup = 1;            ///< cpu_ms / gpu_ms (1 without a GPU implementation)
  double vram_gb = 0;
  double sm_demand = 0;  ///< fraction of SMs its compute phase keeps busy
  Preference preference = Preference::kNeutral;
  bool transfer_dominated = false;  ///< GPU compute beats CPU, PCIe copies undo it
  std::string reason;
};

/// @brief Profiles every tool of `tools` on `device`, alone and noise-free, by running each
/// as a one-node DAG through the Executor (so the numbers are the executor's own).
std::vector<ToolProfile> profile_tools(const ToolCatalog& tools, const Device& device,
                                       const ProfileThresholds& thresholds = {});

/// @brief Classifies one standalone speedup (cpu_ms / gpu_ms).
Preference classify_speedup(double speedup, const ProfileThresholds& thresholds);

}  // namespace corun::mapping
