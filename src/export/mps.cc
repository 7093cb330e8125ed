// MPS: the client limits of each model as an env file (`docker run --env-file`, systemd
// EnvironmentFile=). Variables: NVIDIA's Multi-Process Service guide, "Environment Variables"
// (docs.nvidia.com/deploy/mps): CUDA_MPS_ACTIVE_THREAD_PERCENTAGE caps the share of the GPU's
// threads a client may use; CUDA_MPS_PINNED_DEVICE_MEM_LIMIT caps its device memory per
// device, "<device>=<limit>" with an M (MiB) or G suffix, e.g. "0=1G".

#include <cstdint>
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

std::vector<std::pair<std::string, std::string>> mps_environment(const TritonServer& t,
                                                                 const ExportOptions& options) {
  return {
      {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string(t.mps_active_thread_percentage)},
      {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
       std::to_string(options.device_index) + "=" + std::to_string(t.mps_mem_limit_mib) + "M"},
  };
}

std::string mps_overcommit_warning(const PlanInput& plan,
                                   const std::vector<ModelDeployment>& models) {
  std::int64_t total_mib = 0;
  for (const auto& d : models) {
    if (d.server == Server::kVllm) total_mib += d.mps_mem_limit_mib;
  }
  const TritonServer triton = triton_server(models);
  if (!triton.models.empty()) total_mib += triton.mps_mem_limit_mib;
  const auto device_mib =
      static_cast<std::int64_t>(plan.workload.device.vram_bytes() / (1024.0 * 1024.0));
  if (total_mib <= device_mib) return "";
  // A limit caps a process; it reserves nothing. Above the GPU's memory in total, the
  // processes can start but not all of them can reach their limits at once.
  return "the MPS memory limits add up to " + std::to_string(total_mib) + " MiB, above the GPU's " +
         std::to_string(device_mib) +
         " MiB (the 1 GiB floor per process and the CUDA-graph headroom are not in the plan's "
         "budget): the servers may run out of memory together";
}

std::string warning_line(const std::string& warning) {
  return warning.empty() ? warning : "# WARNING: " + warning + "\n";
}

Result<std::vector<ExportFile>> render_mps(const PlanInput& plan,
                                           const std::vector<ModelDeployment>& models,
                                           const ExportOptions& options) {
  std::vector<ExportFile> files;
  // MPS limits a process: each vLLM server is one, the GPU's Triton server hosts the others.
  for (const auto& d : models) {
    if (d.server != Server::kVllm) continue;
    std::string out = file_header(
        plan, options,
        "MPS client limits of " + model_line(d) +
            "\n# Variables: NVIDIA MPS guide, Environment Variables. Start the vLLM server of "
            "this model\n# with them, under a running nvidia-cuda-mps-control -d. Memory: "
            "--gpu-memory-utilization's\n# share " +
            fixed_decimals(d.vram_fraction * plan.workload.device.vram_gb, 3) +
            " GB + 512 MiB of CUDA graphs, in MiB rounded up, at least 1024 MiB;\n# SM share " +
            format_number(d.settings.sm_share) + " %.");
    out += warning_line(mps_overcommit_warning(plan, models));
    for (const auto& [k, v] : mps_environment(d, options)) out += k + "=" + v + "\n";
    files.push_back({d.spec->name + ".env", out});
  }
  const TritonServer triton = triton_server(models);
  if (!triton.models.empty()) {
    std::vector<std::string> hosted;
    std::string budgets;
    for (std::size_t i : triton.models) {
      const ModelDeployment& d = models[i];
      hosted.push_back(d.spec->name);
      budgets += "\n#   " + model_line(d) + ": " + std::to_string(d.mps_mem_limit_mib) + " MiB, " +
                 std::to_string(d.mps_active_thread_percentage) + " %";
    }
    std::string out = file_header(
        plan, options,
        "MPS client limits of the GPU's Triton server, which hosts " + join(hosted, ", ") +
            ".\n# Variables: NVIDIA MPS guide, Environment Variables. MPS limits a process, "
            "not a model:\n# memory is the sum of the models' budgets (at least 1024 MiB), "
            "the SM percentage the sum\n# of their shares (at most 100). Per model:" +
            budgets);
    out += warning_line(mps_overcommit_warning(plan, models));
    for (const auto& [k, v] : mps_environment(triton, options)) out += k + "=" + v + "\n";
    files.push_back({"triton.env", out});
  }
  return files;
}

}  // namespace corun::exporting
