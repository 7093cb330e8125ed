// compose: a docker compose file that starts every model's server as an MPS client on one GPU,
// plus the Triton model repository it mounts. Keys follow the Compose Specification
// (github.com/compose-spec/compose-spec, spec.md: services, image, command, ports, ipc,
// environment, volumes, depends_on; deploy.md: resources.reservations.devices with driver,
// device_ids, capabilities, as in docs.docker.com "GPU support" for Compose).

#include <string>

#include "corun/core/strings.h"
#include "render.h"

namespace corun::exporting {
namespace {

// Pinned images: the flags written here are those of these versions.
constexpr const char* kVllmImage = "vllm/vllm-openai:v0.8.5";
constexpr const char* kTritonImage = "nvcr.io/nvidia/tritonserver:24.08-py3";
constexpr const char* kCudaImage = "nvidia/cuda:12.4.1-base-ubuntu22.04";
// The MPS control daemon and its clients meet through named pipes in this directory, shared
// by a volume; clients also need the host's IPC namespace (ipc: host).
constexpr const char* kPipeDir = "/tmp/nvidia-mps";

// A YAML double-quoted scalar (JSON string escaping is valid YAML).
std::string q(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string flow_list(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const auto& i : items) quoted.push_back(q(i));
  return "[" + join(quoted, ", ") + "]";
}

std::string gpu_reservation(const ExportOptions& options) {
  return "    deploy:\n      resources:\n        reservations:\n          devices:\n"
         "            - driver: nvidia\n              device_ids: [" +
         q(std::to_string(options.device_index)) + "]\n              capabilities: [gpu]\n";
}

}  // namespace

Result<std::vector<ExportFile>> render_compose(const PlanInput& plan,
                                               const std::vector<ModelDeployment>& models,
                                               const ExportOptions& options) {
  std::string out = file_header(
      plan, options,
      "docker compose file: every model's server, each an MPS client of one GPU.\n"
      "# Keys: Compose Specification. Run with `docker compose up` from this directory; the\n"
      "# Triton repository is ./triton (engines go in triton/NAME/1/, see each config.pbtxt).\n"
      "# MPS works best with the GPU in exclusive-process mode (nvidia-smi -c EXCLUSIVE_PROCESS).");
  out += "services:\n";
  out += "  mps-control:\n    image: " + q(kCudaImage) +
         "\n    command: [\"nvidia-cuda-mps-control\", \"-f\"]\n    ipc: host\n"
         "    environment:\n      CUDA_MPS_PIPE_DIRECTORY: " +
         q(kPipeDir) + "\n      CUDA_MPS_LOG_DIRECTORY: " + q(std::string(kPipeDir) + "/log") +
         "\n    volumes:\n      - " + q(std::string("nvidia-mps:") + kPipeDir) + "\n" +
         gpu_reservation(options);
  std::vector<ExportFile> files;
  for (const auto& d : models) {
    const ModelSpec& spec = *d.spec;
    out += "  # " + model_line(d) + "\n";
    out += "  " + spec.name + ":\n";
    std::vector<std::string> volumes = {std::string("nvidia-mps:") + kPipeDir};
    if (d.server == Server::kVllm) {
      // The image's entrypoint is vLLM's OpenAI server: the command is its arguments, and the
      // server listens on 8000 inside the container.
      auto launch = vllm_launch(d, 8000);
      if (!launch) return launch.error();
      // One argument per line, "--flag=value" (argparse's long form), so that the plan's
      // flags read like vllm.sh.
      std::vector<std::string> cmd = {"--model=" + launch->model_id};
      for (const auto& a : launch->args) {
        if (a.rfind("--", 0) == 0 || cmd.empty()) {
          cmd.push_back(a);
        } else {
          cmd.back() += "=" + a;
        }
      }
      out += "    image: " + q(kVllmImage) + "\n    command:\n";
      for (const auto& c : cmd) out += "      - " + q(c) + "\n";
      volumes.push_back("${HOME}/.cache/huggingface:/root/.cache/huggingface");
    } else {
      if (spec.arch.family == ModelFamily::kVision) {
        out += "    # frame source: skip_rate " + format_number(d.settings.skip_rate) +
               ", Ultralytics vid_stride " + std::to_string(d.vid_stride) + ", imgsz " +
               std::to_string(d.settings.imgsz) + "\n";
      }
      out += "    image: " + q(kTritonImage) + "\n    command: " +
             flow_list({"tritonserver", "--model-repository=/models",
                        "--model-control-mode=explicit", "--load-model=" + spec.name}) +
             "\n";
      volumes.emplace_back("./triton:/models:ro");
      files.push_back({"triton/" + spec.name + "/config.pbtxt", triton_config(plan, d, options)});
    }
    out += "    ports: [" + q(std::to_string(d.port) + ":8000") + "]\n    ipc: host\n";
    out += "    environment:\n      CUDA_MPS_PIPE_DIRECTORY: " + q(kPipeDir) + "\n";
    for (const auto& [k, v] : mps_environment(d, options)) out += "      " + k + ": " + q(v) + "\n";
    out += "    volumes:\n";
    for (const auto& v : volumes) out += "      - " + q(v) + "\n";
    out += "    depends_on: [\"mps-control\"]\n" + gpu_reservation(options);
  }
  out += "volumes:\n  nvidia-mps: {}\n";
  files.insert(files.begin(), ExportFile{"docker-compose.yaml", out});
  return files;
}

}  // namespace corun::exporting
