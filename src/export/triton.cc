// Triton: a model repository with one config.pbtxt per vision, encoder and speech model.
// Field names and nesting follow Triton's ModelConfig message (model_config.proto in
// github.com/triton-inference-server/common, protobuf/model_config.proto): name, platform,
// backend, max_batch_size, default_model_filename, instance_group {count, kind},
// dynamic_batching {max_queue_delay_microseconds}, parameters (map<string, ModelParameter>
// {string_value}). Inputs and outputs are left out: Triton completes them from a TensorRT
// engine (auto-complete is on unless --disable-auto-complete-config).

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "corun/core/strings.h"
#include "render.h"

namespace corun::exporting {
namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string parameter(const std::string& key, const std::string& value) {
  return "parameters {\n  key: " + quoted(key) + "\n  value: { string_value: " + quoted(value) +
         " }\n}\n";
}

bool is_ultralytics(const ModelArch& a) {
  std::string s = a.source;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s.find("ultralytics") != std::string::npos;
}

// The engine file a config points at: one per (model, precision, input size), because a
// TensorRT engine is built for one precision and, for a CNN, one input side.
std::string engine_file(const ModelDeployment& d) {
  std::string f = d.spec->arch.name + "-" + std::string(to_string(d.settings.precision));
  if (d.spec->arch.family == ModelFamily::kVision) f += "-" + std::to_string(d.settings.imgsz);
  return f + ".plan";
}

// How to produce the engine, as a comment: Ultralytics' exporter for YOLO (docs.ultralytics.com
// /modes/export: format=engine, imgsz, half, int8, batch, dynamic), trtexec otherwise.
std::string build_hint(const ModelDeployment& d) {
  const ModelArch& a = d.spec->arch;
  const Precision p = d.settings.precision;
  const int batch = d.settings.batch;
  if (is_ultralytics(a)) {
    std::string cmd = "yolo export model=" + a.name +
                      ".pt format=engine imgsz=" + std::to_string(d.settings.imgsz);
    if (p == Precision::kFp16) cmd += " half=True";
    if (p == Precision::kInt8) cmd += " int8=True data=CALIBRATION.yaml";
    cmd += " batch=" + std::to_string(batch);
    // Triton's dynamic batcher sends any batch up to max_batch_size: the engine must accept
    // a variable batch dimension.
    if (batch > 1) cmd += " dynamic=True";
    return "#   " + cmd + "\n";
  }
  std::string flag;
  if (p == Precision::kFp16) flag = " --fp16";
  if (p == Precision::kBf16) flag = " --bf16";
  if (p == Precision::kInt8) flag = " --int8";
  return "#   trtexec --onnx=" + a.name + ".onnx --saveEngine=" + engine_file(d) + flag +
         " (batch dimension 1.." + std::to_string(batch) + ")\n";
}

// The fields corun sets in one model's ModelConfig, rendered as config.pbtxt (the repository)
// and as JSON (the load request's "config" parameter): one definition for both.
struct TritonFields {
  std::string name;
  bool python = false;  ///< backend "python", else platform "tensorrt_plan"
  int max_batch_size = 1;
  std::string default_model_filename;  ///< empty for the python backend
  int instances = 1;                   ///< instance_group count, KIND_GPU
  std::int64_t queue_delay_us = 0;
  std::vector<std::pair<std::string, std::string>> parameters;
};

TritonFields triton_fields(const ModelDeployment& d) {
  const ModelSpec& spec = *d.spec;
  const bool vision = spec.arch.family == ModelFamily::kVision;
  TritonFields f;
  f.name = spec.name;
  f.python = spec.arch.family == ModelFamily::kSpeech;
  f.max_batch_size = d.settings.batch;
  if (!f.python) f.default_model_filename = engine_file(d);
  // One instance per concurrent request the plan allows (encoder, speech); a camera stream is
  // one sequence of frames, served by one instance.
  f.instances = vision ? 1 : std::max(1, d.settings.request_concurrency);
  f.queue_delay_us = d.queue_delay_us;
  if (f.python) f.parameters.emplace_back("precision", std::string(to_string(d.settings.precision)));
  if (vision) {
    f.parameters.emplace_back("imgsz", std::to_string(d.settings.imgsz));
    f.parameters.emplace_back("skip_rate", format_number(d.settings.skip_rate));
    f.parameters.emplace_back("vid_stride", std::to_string(d.vid_stride));
  }
  return f;
}

}  // namespace

nlohmann::json triton_config_json(const ModelDeployment& d) {
  const TritonFields f = triton_fields(d);
  // Proto3's JSON mapping of ModelConfig: field names as in the .proto, enums by name, a
  // map<string, ModelParameter> as an object.
  nlohmann::json j = {{"name", f.name}, {"max_batch_size", f.max_batch_size}};
  if (f.python) {
    j["backend"] = "python";
  } else {
    j["platform"] = "tensorrt_plan";
    j["default_model_filename"] = f.default_model_filename;
  }
  j["instance_group"] = nlohmann::json::array({{{"count", f.instances}, {"kind", "KIND_GPU"}}});
  j["dynamic_batching"] = {{"max_queue_delay_microseconds", f.queue_delay_us}};
  if (!f.parameters.empty()) {
    nlohmann::json params = nlohmann::json::object();
    for (const auto& [k, v] : f.parameters) params[k] = {{"string_value", v}};
    j["parameters"] = std::move(params);
  }
  return j;
}

std::string triton_config(const PlanInput& plan, const ModelDeployment& d,
                          const ExportOptions& options) {
  const ModelSpec& spec = *d.spec;
  const bool vision = spec.arch.family == ModelFamily::kVision;
  const bool speech = spec.arch.family == ModelFamily::kSpeech;
  std::string out = file_header(plan, options,
                                "Triton model configuration of " + model_line(d) +
                                    "\n# Fields: Triton model_config.proto (ModelConfig).");
  if (speech) {
    // An encoder-decoder with its own decode loop is not one engine: Triton's Python backend
    // runs it; its model.py is the serving stack's, corun only configures it.
    out += "# Backend: Python; " + spec.name + "/1/model.py runs " + spec.arch.display_name +
           " at parameters.precision (not written by corun).\n";
  } else {
    out += "# Engine: " + spec.name + "/1/" + engine_file(d) + ", e.g.\n" + build_hint(d);
  }
  if (vision) {
    out += d.settings.skip_rate > 0
               ? "# Frame source: drop " + format_number(d.settings.skip_rate) +
                     " of the frames before inference; Ultralytics vid_stride " +
                     std::to_string(d.vid_stride) + " keeps 1 frame in " +
                     std::to_string(d.vid_stride) + " (1 / (1 - skip_rate), rounded up).\n"
               : "# Frame source: every frame is inferred (vid_stride 1).\n";
  }
  out += d.queue_delay_us > 0
             ? "# Queue delay: " + std::to_string(d.settings.batch) + " inputs arrive in " +
                   std::to_string(d.queue_delay_us) + " us at the planned " +
                   format_number(d.input_rate_per_s) + " inputs/s.\n"
             : "# Queue delay: none (batch 1, or no demand to wait for).\n";

  const TritonFields f = triton_fields(d);
  out += "name: " + quoted(f.name) + "\n";
  out += f.python ? "backend: \"python\"\n" : "platform: \"tensorrt_plan\"\n";
  out += "max_batch_size: " + std::to_string(f.max_batch_size) + "\n";
  if (!f.python) out += "default_model_filename: " + quoted(f.default_model_filename) + "\n";
  out += "instance_group [\n  {\n    count: " + std::to_string(f.instances) +
         "\n    kind: KIND_GPU\n  }\n]\n";
  out += "dynamic_batching {\n  max_queue_delay_microseconds: " + std::to_string(f.queue_delay_us) +
         "\n}\n";
  for (const auto& [k, v] : f.parameters) out += parameter(k, v);
  return out;
}

Result<std::vector<ExportFile>> render_triton(const PlanInput& plan,
                                              const std::vector<ModelDeployment>& models,
                                              const ExportOptions& options) {
  std::vector<ExportFile> files;
  for (const auto& d : models) {
    if (d.server != Server::kTriton) continue;
    files.push_back({d.spec->name + "/config.pbtxt", triton_config(plan, d, options)});
  }
  if (files.empty()) {
    return Error(
        "the plan has no vision, encoder or speech model: Triton serves those (try "
        "--format vllm)");
  }
  return files;
}

}  // namespace corun::exporting
