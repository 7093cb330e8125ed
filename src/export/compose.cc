// compose: a docker compose file that starts the servers of a plan as MPS clients of one GPU
// (one vLLM server per LLM, one Triton server for every other model of the GPU), plus the Triton
// model repository it mounts and, when the plan admits a model only in part, an NGINX admission
// gateway. Keys follow the Compose Specification (github.com/compose-spec/compose-spec, spec.md:
// services, image, command, ports, ipc, environment, volumes, depends_on with condition
// service_healthy, healthcheck {test, interval, timeout, retries, start_period}; deploy.md:
// resources.reservations.devices with driver, device_ids, capabilities, as in docs.docker.com
// "GPU support" for Compose). Health endpoints: vLLM's OpenAI server answers GET /health with
// 200 once the engine runs (docs.vllm.ai, "OpenAI-Compatible Server"); Triton's GET
// /v2/health/ready is 200 when the server and its loaded models are ready (KServe v2 protocol,
// Triton docs/protocol: "Health").

#include <algorithm>
#include <string>

#include "corun/core/strings.h"
#include "render.h"

namespace corun::exporting {
namespace {

constexpr const char* kCudaImage = "nvidia/cuda:12.4.1-base-ubuntu22.04";
// The MPS control daemon and its clients meet through named pipes in this directory, shared
// by a volume; clients also need the host's IPC namespace (ipc: host).
constexpr const char* kPipeDir = "/tmp/nvidia-mps";
constexpr const char* kNginxImage = "nginx:1.27";

std::string flow_list(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const auto& i : items) quoted.push_back(yaml_quoted(i));
  return "[" + join(quoted, ", ") + "]";
}

std::string gpu_reservation(const ExportOptions& options) {
  return "    deploy:\n      resources:\n        reservations:\n          devices:\n"
         "            - driver: nvidia\n              device_ids: [" +
         yaml_quoted(std::to_string(options.device_index)) + "]\n              capabilities: [gpu]\n";
}

// A healthcheck: `test` run in the container every 10 s; `start_period_s` of start-up (model
// download, engine load, CUDA-graph capture) whose failures do not count.
std::string healthcheck(const std::vector<std::string>& test, int start_period_s) {
  return "    healthcheck:\n      test: " + flow_list(test) +
         "\n      interval: 10s\n      timeout: 5s\n      retries: 3\n      start_period: " +
         std::to_string(start_period_s) + "s\n";
}

std::string depends_on_healthy(const std::vector<std::string>& services) {
  std::string out = "    depends_on:\n";
  for (const auto& s : services) out += "      " + s + ":\n        condition: service_healthy\n";
  return out;
}

// The part every GPU server shares: host port, IPC, MPS environment, volumes, MPS daemon, GPU.
std::string mps_client(int port, const std::vector<std::pair<std::string, std::string>>& env,
                       const std::vector<std::string>& volumes, const ExportOptions& options) {
  std::string out = "    ports: [" + yaml_quoted(std::to_string(port) + ":8000") + "]\n    ipc: host\n";
  out += "    environment:\n      CUDA_MPS_PIPE_DIRECTORY: " + yaml_quoted(kPipeDir) + "\n";
  for (const auto& [k, v] : env) out += "      " + k + ": " + yaml_quoted(v) + "\n";
  out += "    volumes:\n";
  for (const auto& v : volumes) out += "      - " + yaml_quoted(v) + "\n";
  return out + depends_on_healthy({"mps-control"}) + gpu_reservation(options);
}

}  // namespace

Result<std::vector<ExportFile>> render_compose(const PlanInput& plan,
                                               const std::vector<ModelDeployment>& models,
                                               const ExportOptions& options) {
  std::string out = file_header(
      plan, options,
      "docker compose file: every server of the plan, each an MPS client of one GPU: one vLLM\n"
      "# server per LLM, one Triton server for all the other models. Keys: Compose "
      "Specification.\n# Run with `docker compose up` from this directory; the Triton "
      "repository is ./triton\n# (build its engines with triton/build_engine.sh first). MPS "
      "works best with the GPU in\n# exclusive-process mode (nvidia-smi -c EXCLUSIVE_PROCESS).");
  for (const auto& d : models) {
    for (const auto& w : d.warnings) out += "# WARNING: " + d.spec->name + ": " + w + "\n";
  }
  out += warning_line(mps_overcommit_warning(plan, models));
  out += "services:\n";
  out += "  mps-control:\n    image: " + yaml_quoted(kCudaImage) +
         "\n    command: [\"nvidia-cuda-mps-control\", \"-f\"]\n    ipc: host\n"
         "    environment:\n      CUDA_MPS_PIPE_DIRECTORY: " +
         yaml_quoted(kPipeDir) + "\n      CUDA_MPS_LOG_DIRECTORY: " + yaml_quoted(std::string(kPipeDir) + "/log") +
         "\n    volumes:\n      - " + yaml_quoted(std::string("nvidia-mps:") + kPipeDir) + "\n" +
         // The control daemon answers on its pipe once it runs.
         healthcheck({"CMD-SHELL", "echo get_server_list | nvidia-cuda-mps-control"}, 10) +
         gpu_reservation(options);
  const std::string pipe_volume = std::string("nvidia-mps:") + kPipeDir;
  for (const auto& d : models) {
    if (d.server != Server::kVllm) continue;
    const ModelSpec& spec = *d.spec;
    // The image's entrypoint is vLLM's OpenAI server: the command is its arguments, and the
    // server listens on 8000 inside the container.
    auto launch = vllm_launch(d, 8000);
    if (!launch) return launch.error();
    // One argument per line, "--flag=value" (argparse's long form), so that the plan's flags
    // read like vllm.sh.
    std::vector<std::string> cmd = {"--model=" + launch->model_id};
    for (const auto& a : launch->args) {
      if (a.rfind("--", 0) == 0 || cmd.empty()) {
        cmd.push_back(a);
      } else {
        cmd.back() += "=" + a;
      }
    }
    out += "  # " + model_line(d) + "\n  " + spec.name + ":\n    image: " + yaml_quoted(kVllmImage) +
           "\n    command:\n";
    for (const auto& c : cmd) out += "      - " + yaml_quoted(c) + "\n";
    // Start-up downloads the weights, profiles memory and captures CUDA graphs: minutes.
    out += healthcheck({"CMD-SHELL", "curl -fsS http://localhost:8000/health || exit 1"}, 600);
    out +=
        mps_client(d.port, mps_environment(d, options),
                   {pipe_volume, "${HOME}/.cache/huggingface:/root/.cache/huggingface"}, options);
  }
  std::vector<ExportFile> files;
  const TritonServer triton = triton_server(models);
  if (!triton.models.empty()) {
    std::vector<std::string> cmd = {"tritonserver", "--model-repository=/models",
                                    "--model-control-mode=explicit"};
    out += "  # Triton server of the GPU:";
    for (std::size_t i : triton.models) {
      const ModelDeployment& d = models[i];
      cmd.push_back("--load-model=" + d.spec->name);
      out += "\n  #   " + model_line(d);
      if (d.spec->arch.family == ModelFamily::kVision) {
        out += " (frame source: skip_rate " + format_number(d.settings.skip_rate) +
               ", Ultralytics vid_stride " + std::to_string(d.vid_stride) + ")";
      }
    }
    out += "\n  triton:\n    image: " + yaml_quoted(kTritonImage) + "\n    command: " + flow_list(cmd) + "\n";
    // Ready once every model it loads is ready (engines deserialized, model.py initialized).
    out += healthcheck({"CMD-SHELL", "curl -fsS http://localhost:8000/v2/health/ready || exit 1"},
                       300);
    out += mps_client(triton.port, mps_environment(triton, options),
                      {pipe_volume, "./triton:/models:ro"}, options);
    for (auto& f : triton_repository(plan, models, options)) {
      files.push_back({"triton/" + f.path, std::move(f.content)});
    }
  }
  std::string gateway = admission_conf(plan, models, options, true, std::nullopt);
  if (!gateway.empty()) {
    std::vector<std::string> ports;
    std::vector<std::string> upstreams;
    for (const auto& d : models) {
      if (d.admitted >= 1) continue;
      ports.push_back(yaml_quoted(std::to_string(d.gateway_port) + ":" + std::to_string(d.gateway_port)));
      const std::string service = d.server == Server::kVllm ? d.spec->name : "triton";
      if (std::find(upstreams.begin(), upstreams.end(), service) == upstreams.end()) {
        upstreams.push_back(service);
      }
    }
    out += "  # Admission gateway: rate limits of the models admitted in part (admission.conf).\n";
    // NGINX's master process is alive ("$$": a literal "$", Compose interpolates "$").
    out += "  gateway:\n    image: " + yaml_quoted(kNginxImage) + "\n    ports: [" + join(ports, ", ") +
           "]\n    volumes:\n      - " + yaml_quoted("./admission.conf:/etc/nginx/conf.d/admission.conf:ro") +
           "\n" + healthcheck({"CMD-SHELL", "kill -0 $$(cat /var/run/nginx.pid)"}, 10) +
           depends_on_healthy(upstreams);
    files.push_back({"admission.conf", std::move(gateway)});
  }
  out += "volumes:\n  nvidia-mps: {}\n";
  files.insert(files.begin(), ExportFile{"docker-compose.yaml", out});
  return files;
}

}  // namespace corun::exporting
