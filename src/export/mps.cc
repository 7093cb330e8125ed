// MPS: the client limits of each model as an env file (`docker run --env-file`, systemd
// EnvironmentFile=). Variables: NVIDIA's Multi-Process Service guide, "Environment Variables"
// (docs.nvidia.com/deploy/mps): CUDA_MPS_ACTIVE_THREAD_PERCENTAGE caps the share of the GPU's
// threads a client may use; CUDA_MPS_PINNED_DEVICE_MEM_LIMIT caps its device memory per
// device, "<device>=<limit>" with an M (MiB) or G suffix, e.g. "0=1G".

#include <string>

#include "corun/core/strings.h"
#include "render.h"

namespace corun::exporting {

std::vector<std::pair<std::string, std::string>> mps_environment(const ModelDeployment& d,
                                                                 const ExportOptions& options) {
  return {
      {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string(d.mps_active_thread_percentage)},
      {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
       std::to_string(options.device_index) + "=" + std::to_string(d.mps_mem_limit_mib) + "M"},
  };
}

Result<std::vector<ExportFile>> render_mps(const PlanInput& plan,
                                           const std::vector<ModelDeployment>& models,
                                           const ExportOptions& options) {
  std::vector<ExportFile> files;
  for (const auto& d : models) {
    std::string out = file_header(
        plan, options,
        "MPS client limits of " + model_line(d) +
            "\n# Variables: NVIDIA MPS guide, Environment Variables. Start the " +
            (d.server == Server::kVllm ? "vLLM" : "Triton") +
            " server of this model\n# with them, under a running nvidia-cuda-mps-control -d. "
            "VRAM budget " +
            fixed_decimals(d.vram_bytes / 1e9, 3) + " GB (limit in MiB, rounded up), SM share " +
            format_number(d.settings.sm_share) + " %.");
    for (const auto& [k, v] : mps_environment(d, options)) out += k + "=" + v + "\n";
    files.push_back({d.spec->name + ".env", out});
  }
  return files;
}

}  // namespace corun::exporting
