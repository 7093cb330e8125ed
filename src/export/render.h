#pragma once

// Private to the export layer: the pieces each format is made of, shared by the compose file
// (which starts the vLLM and Triton servers of the other formats with the MPS environment).

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "corun/core/result.h"
#include "corun/export/deployment.h"
#include "corun/export/export.h"

namespace corun::exporting {

/// Pinned images: the flags and layouts written by every format are those of these versions.
inline constexpr const char* kVllmImage = "vllm/vllm-openai:v0.8.5";
inline constexpr const char* kTritonImage = "nvcr.io/nvidia/tritonserver:24.08-py3";

/// A YAML double-quoted scalar: JSON string escaping (control characters included) is valid
/// YAML.
std::string yaml_quoted(const std::string& s);

/// The model id vLLM loads and its arguments after it ("--flag", "value", ...).
struct VllmLaunch {
  std::string model_id;
  std::vector<std::string> args;
};

/// vLLM arguments of one LLM listening on `port`. Errors when the precision has no catalogued
/// checkpoint or no vLLM equivalent.
Result<VllmLaunch> vllm_launch(const ModelDeployment& d, int port);

/// "# VRAM budget ..." lines of one LLM: its budget, the KV cache at --max-model-len, what
/// --gpu-memory-utilization gives it, and its warnings.
std::string vllm_memory_comment(const PlanInput& plan, const ModelDeployment& d);

/// The Triton model configuration (config.pbtxt text) of one non-LLM model.
std::string triton_config(const PlanInput& plan, const ModelDeployment& d,
                          const ExportOptions& options);

/// The same configuration in the JSON form of model_config.proto: what `GET v2/models/NAME/config`
/// returns and what `POST v2/repository/models/NAME/load` takes as its "config" parameter.
nlohmann::json triton_config_json(const ModelDeployment& d);

/// The Triton repository of the plan's Triton models: NAME/config.pbtxt, NAME/1/model.py (a
/// template, Python backend) and build_engine.sh (TensorRT models); empty when Triton serves
/// none of them.
std::vector<ExportFile> triton_repository(const PlanInput& plan,
                                          const std::vector<ModelDeployment>& models,
                                          const ExportOptions& options);

/// admission.conf: an NGINX gateway that rate-limits every model of `models` the plan admits
/// only in part (admitted < 1) and that `server` runs (any server when nullopt); empty when
/// there is none. `compose`: upstreams are the compose services, else the host ports.
std::string admission_conf(const PlanInput& plan, const std::vector<ModelDeployment>& models,
                           const ExportOptions& options, bool compose,
                           std::optional<Server> server);

/// The MPS client environment of one model, in the order it is written.
std::vector<std::pair<std::string, std::string>> mps_environment(const ModelDeployment& d,
                                                                 const ExportOptions& options);

/// The MPS client environment of the GPU's Triton server (all its models in one process).
std::vector<std::pair<std::string, std::string>> mps_environment(const TritonServer& t,
                                                                 const ExportOptions& options);

/// A warning, in words, when the MPS memory limits of the plan's processes add up to more
/// than the GPU's memory (limits cap, they do not reserve); empty otherwise.
std::string mps_overcommit_warning(const PlanInput& plan,
                                   const std::vector<ModelDeployment>& models);

/// "# WARNING: `warning`" and a newline; empty for an empty warning.
std::string warning_line(const std::string& warning);

/// "# name: catalog-model, settings" plus the plan and provenance lines every file starts with.
std::string file_header(const PlanInput& plan, const ExportOptions& options,
                        const std::string& what);

/// "cam0: yolo11n, imgsz=320,skip_rate=0" (or "... (no searched knob)").
std::string model_line(const ModelDeployment& d);

/// "12.345" with `digits` decimals.
std::string fixed_decimals(double v, int digits);

Result<std::vector<ExportFile>> render_vllm(const PlanInput& plan,
                                            const std::vector<ModelDeployment>& models,
                                            const ExportOptions& options);
Result<std::vector<ExportFile>> render_triton(const PlanInput& plan,
                                              const std::vector<ModelDeployment>& models,
                                              const ExportOptions& options);
Result<std::vector<ExportFile>> render_mps(const PlanInput& plan,
                                           const std::vector<ModelDeployment>& models,
                                           const ExportOptions& options);
Result<std::vector<ExportFile>> render_k8s(const PlanInput& plan,
                                           const std::vector<ModelDeployment>& models,
                                           const ExportOptions& options);
Result<std::vector<ExportFile>> render_compose(const PlanInput& plan,
                                               const std::vector<ModelDeployment>& models,
                                               const ExportOptions& options);

}  // namespace corun::exporting
