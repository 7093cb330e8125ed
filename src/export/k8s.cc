// k8s: the plan as Kubernetes objects that share one GPU under MPS through a Dynamic Resource
// Allocation claim. One ResourceClaim is the GPU (NVIDIA's DRA driver, driver gpu.nvidia.com:
// its GpuConfig with sharing strategy MPS, as in deploy/kubernetes/gpu-sharing/
// dra-mps-claim.yaml); one Deployment and Service per vLLM server and one for the GPU's Triton
// server, each referencing the claim, each container with its MPS client limits from the plan
// (the environment of --format mps: a client lowers its own limits below the claim's
// defaults). Keys: the Kubernetes API reference (apps/v1 Deployment: replicas, strategy,
// selector, template; core/v1 PodSpec: resourceClaims, containers[].resources.claims, env,
// ports, startupProbe/readinessProbe httpGet; core/v1 Service; resource.k8s.io ResourceClaim:
// spec.devices.requests[].deviceClassName, spec.devices.config[].opaque).

#include <algorithm>
#include <cctype>
#include <map>
#include <string>

#include "corun/core/strings.h"
#include "render.h"

namespace corun::exporting {
namespace {

constexpr const char* kRepositoryClaim = "corun-triton-repository";

// A model's name as a Kubernetes object name (an RFC 1035 label, what a Service needs):
// lower case, '_' and '.' as '-', a letter first, at most 63 characters.
std::string object_name(const std::string& model) {
  std::string out;
  for (const char c : model) {
    const auto u = static_cast<unsigned char>(c);
    out += std::isalnum(u) != 0 ? static_cast<char>(std::tolower(u)) : '-';
  }
  if (out.empty() || std::isalpha(static_cast<unsigned char>(out.front())) == 0) out = "m-" + out;
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

std::string env_block(const std::vector<std::pair<std::string, std::string>>& env) {
  std::string out = "          env:\n";
  for (const auto& [k, v] : env) out += "            - {name: " + k + ", value: " + yaml_quoted(v) + "}\n";
  return out;
}

std::string labels(const std::string& name) {
  return "{app.kubernetes.io/name: " + name + ", app.kubernetes.io/part-of: corun}";
}

// A Deployment of one server process on the shared GPU and the Service in front of it.
struct Workload {
  std::string name;       // object name
  std::string comment;    // what it serves
  std::string annotation; // corun.io/model ("" = none)
  std::string container;  // the container: name, image, args/command, ports, probes
  std::vector<std::pair<std::string, std::string>> env;
  std::string volumes;    // pod volumes ("" = none)
};

std::string deployment(const Workload& w, const std::string& claim) {
  std::string out = "---\n# " + w.comment + "\n";
  out += "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + w.name +
         "\n  labels: " + labels(w.name) +
         "\nspec:\n  replicas: 1\n"
         "  # A new configuration is a new process: the old pod leaves the GPU before the new one\n"
         "  # loads (transition.json of `corun export --from` says when both fit at once).\n"
         "  strategy: {type: Recreate}\n  selector:\n    matchLabels: {app.kubernetes.io/name: " +
         w.name + "}\n  template:\n    metadata:\n      labels: " + labels(w.name) + "\n";
  if (!w.annotation.empty()) {
    out += "      annotations:\n        " + std::string(kModelAnnotation) + ": " +
           yaml_quoted(w.annotation) + "\n";
  }
  out += "    spec:\n      resourceClaims:\n        - {name: gpu, resourceClaimName: " + claim +
         "}\n      containers:\n" + w.container + env_block(w.env) +
         "          resources:\n            claims:\n              - name: gpu\n";
  out += w.volumes;
  out += "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: " + w.name + "\n  labels: " +
         labels(w.name) + "\nspec:\n  selector: {app.kubernetes.io/name: " + w.name +
         "}\n  ports:\n    - {name: http, port: 8000, targetPort: http, protocol: TCP}\n";
  return out;
}

std::string probes(const std::string& path, int startup_failures) {
  // Start-up (weights, engines, CUDA graphs) may take minutes: the startup probe allows
  // startup_failures x 10 s before the readiness probe takes over.
  return "          startupProbe:\n            httpGet: {path: " + path +
         ", port: http}\n            periodSeconds: 10\n            failureThreshold: " +
         std::to_string(startup_failures) + "\n          readinessProbe:\n            httpGet: "
         "{path: " + path + ", port: http}\n            periodSeconds: 10\n";
}

}  // namespace

Result<std::vector<ExportFile>> render_k8s(const PlanInput& plan,
                                           const std::vector<ModelDeployment>& models,
                                           const ExportOptions& options) {
  const Device& dev = plan.workload.device;
  const std::string claim = "corun-gpu-" + std::to_string(options.device_index);
  std::map<std::string, std::string> taken;  // object name -> model
  taken["corun-triton"] = "(the Triton server)";
  for (const auto& d : models) {
    const std::string name = object_name(d.spec->name);
    if (const auto it = taken.find(name); it != taken.end()) {
      return Error("models: '" + d.spec->name + "' and " + it->second +
                       " have one Kubernetes name, '" + name + "'; rename one in " +
                       plan.workload.file,
                   Error::Kind::kInvalidInput);
    }
    taken[name] = "'" + d.spec->name + "'";
  }

  std::string out = file_header(
      plan, options,
      "Kubernetes objects: the plan's servers sharing one GPU under MPS through a Dynamic\n"
      "# Resource Allocation claim (NVIDIA DRA driver). `kubectl apply -f kubernetes.yaml` in the\n"
      "# namespace of your choice. One Deployment and Service per vLLM server, one for the GPU's\n"
      "# Triton server; its repository is triton/ of this export with the engines built, in the\n"
      "# PersistentVolumeClaim " +
          std::string(kRepositoryClaim) +
          " (which you provide). Each pod sets its MPS client\n# limits from the plan. A pod "
          "annotated corun.io/model is registered by the node's corun\n# serve --kube-node; "
          "Triton serves several models in one pod: register those with\n# POST /v1/models.");
  for (const auto& d : models) {
    for (const auto& w : d.warnings) out += "# WARNING: " + d.spec->name + ": " + w + "\n";
    if (d.admitted < 1) {
      out += "# WARNING: " + d.spec->name + ": the plan admits " +
             format_number(100 * d.admitted) +
             " % of its demand; no admission gateway is written for Kubernetes (--format "
             "compose writes admission.conf for NGINX): refuse the rest in your ingress\n";
    }
  }
  out += warning_line(mps_overcommit_warning(plan, models));
  const auto gib = static_cast<long long>(dev.vram_gb * 1e9 / (1024.0 * 1024.0 * 1024.0));
  out += "---\n# The GPU, shared under MPS by every pod below. Clients lower their own limits.\n"
         "apiVersion: resource.k8s.io/v1beta1   # resource.k8s.io/v1 from Kubernetes 1.34\n"
         "kind: ResourceClaim\nmetadata:\n  name: " +
         claim + "\n  labels: " + labels(claim) +
         "\nspec:\n  devices:\n    requests:\n      - name: gpu\n        deviceClassName: "
         "gpu.nvidia.com\n    config:\n      - requests: [\"gpu\"]\n        opaque:\n"
         "          driver: gpu.nvidia.com\n          parameters:\n"
         "            apiVersion: resource.nvidia.com/v1beta1\n            kind: GpuConfig\n"
         "            sharing:\n              strategy: MPS\n              mpsConfig:\n"
         "                defaultActiveThreadPercentage: 100\n"
         "                defaultPinnedDeviceMemoryLimit: " +
         std::to_string(gib) + "Gi\n";

  for (const auto& d : models) {
    if (d.server != Server::kVllm) continue;
    auto launch = vllm_launch(d, 8000);
    if (!launch) return launch.error();
    // One argument per item, "--flag=value", as compose writes them.
    std::vector<std::string> args = {"--model=" + launch->model_id};
    for (const auto& a : launch->args) {
      if (a.rfind("--", 0) == 0) {
        args.push_back(a);
      } else {
        args.back() += "=" + a;
      }
    }
    Workload w;
    w.name = object_name(d.spec->name);
    w.comment = model_line(d);
    if (const auto it = plan.entries.find(d.spec->name); it != plan.entries.end()) {
      w.annotation = it->second.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    w.container = "        - name: vllm\n          image: " + yaml_quoted(kVllmImage) + "\n          args:\n";
    for (const auto& a : args) w.container += "            - " + yaml_quoted(a) + "\n";
    w.container += "          ports:\n            - {name: http, containerPort: 8000, protocol: TCP}\n" +
                   probes("/health", 60);
    w.env = mps_environment(d, options);
    out += deployment(w, claim);
  }
  std::vector<ExportFile> files;
  const TritonServer triton = triton_server(models);
  if (!triton.models.empty()) {
    Workload w;
    w.name = "corun-triton";
    w.comment = "Triton server of the GPU:";
    std::vector<std::string> cmd = {"tritonserver", "--model-repository=/models",
                                    "--model-control-mode=explicit"};
    for (std::size_t i : triton.models) {
      cmd.push_back("--load-model=" + models[i].spec->name);
      w.comment += "\n#   " + model_line(models[i]);
    }
    w.container = "        - name: triton\n          image: " + yaml_quoted(kTritonImage) +
                  "\n          command:\n";
    for (const auto& c : cmd) w.container += "            - " + yaml_quoted(c) + "\n";
    w.container +=
        "          ports:\n            - {name: http, containerPort: 8000, protocol: TCP}\n" +
        probes("/v2/health/ready", 30) +
        "          volumeMounts:\n            - {name: repository, mountPath: /models, "
        "readOnly: true}\n";
    w.env = mps_environment(triton, options);
    w.volumes = std::string("      volumes:\n        - name: repository\n") +
                "          persistentVolumeClaim: {claimName: " + kRepositoryClaim +
                ", readOnly: true}\n";
    out += deployment(w, claim);
    for (auto& f : triton_repository(plan, models, options)) {
      files.push_back({"triton/" + f.path, std::move(f.content)});
    }
  }
  files.insert(files.begin(), ExportFile{"kubernetes.yaml", out});
  return files;
}

}  // namespace corun::exporting
