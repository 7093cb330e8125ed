// Triton: a model repository with one directory per vision, encoder and speech model, laid out
// as Triton's model repository docs require (docs/user_guide/model_repository.md in
// github.com/triton-inference-server/server: `<repository>/<model>/config.pbtxt` beside numeric
// version directories `<model>/<version>/<model file>`, the file named by its backend's default:
// model.plan for tensorrt_plan, model.py for python). Field names and nesting of config.pbtxt
// follow Triton's ModelConfig message (model_config.proto in github.com/triton-inference-server/
// common, protobuf/model_config.proto): name, platform, backend, max_batch_size, input/output
// {name, data_type, dims}, instance_group {count, kind}, dynamic_batching
// {max_queue_delay_microseconds}, parameters (map<string, ModelParameter> {string_value}).
// TensorRT models leave inputs and outputs to Triton's auto-complete from the engine (on unless
// --disable-auto-complete-config); the engine is built by build_engine.sh (ONNX, then trtexec).
// A Python-backend model states its inputs and outputs (nothing to complete them from) and gets
// a model.py template implementing TritonPythonModel (python_backend README, "Usage").

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

// The engine variant a config is for: one per (model, precision, input size), because a
// TensorRT engine is built for one precision and, for a CNN, one input side. The file itself is
// always <model>/1/model.plan (tensorrt_plan's default name); the variant is recorded in the
// config (parameters.engine), so that a new variant is a new configuration Triton reloads.
std::string engine_variant(const ModelDeployment& d) {
  std::string f = d.spec->arch.name + "-" + std::string(to_string(d.settings.precision));
  if (d.spec->arch.family == ModelFamily::kVision) f += "-" + std::to_string(d.settings.imgsz);
  return f;
}

// trtexec's precision flag (TensorRT "trtexec" docs: --fp16, --bf16, --int8; FP32 is the
// default). INT8 without a calibration cache or a quantized (Q/DQ) ONNX gets placeholder
// scales: the script says so.
std::string trtexec_precision(Precision p) {
  switch (p) {
    case Precision::kFp16:
    case Precision::kAwq:
      return " --fp16";
    case Precision::kBf16:
      return " --bf16";
    case Precision::kInt8:
      return " --int8";
    case Precision::kFp32:
      return "";
  }
  return "";
}

// The shape of one input at `batch` rows, as trtexec's --minShapes/--optShapes/--maxShapes
// take it ("name:AxBxC", several joined by commas).
std::string shapes(const ModelDeployment& d, int batch) {
  const std::string b = std::to_string(batch);
  if (d.spec->arch.family == ModelFamily::kVision) {
    const std::string side = std::to_string(d.settings.imgsz);
    // Ultralytics' ONNX export names its input "images"; torchvision exports are named by
    // the exporting script: "input" is what torch.onnx.export examples use.
    const std::string input = is_ultralytics(d.spec->arch) ? "images" : "input";
    return input + ":" + b + "x3x" + side + "x" + side;
  }
  // Hugging Face encoders (optimum-cli export onnx) take input_ids, attention_mask and
  // token_type_ids of [batch, sequence]; the sequence length is the user's, $SEQ_LEN.
  std::vector<std::string> parts;
  for (const char* n : {"input_ids", "attention_mask", "token_type_ids"}) {
    parts.push_back(std::string(n) + ":" + b + "x${SEQ_LEN}");
  }
  return join(parts, ",");
}

// The build_engine.sh steps of one TensorRT model: its ONNX file, then trtexec with one
// optimisation profile from batch 1 to the plan's batch at the plan's input size.
std::string engine_steps(const ModelDeployment& d) {
  const ModelArch& a = d.spec->arch;
  // One ONNX per model and input side: the precision is trtexec's choice.
  std::string onnx_name = a.name;
  if (a.family == ModelFamily::kVision) onnx_name += "-" + std::to_string(d.settings.imgsz);
  const std::string onnx = "\"$ONNX_DIR/" + onnx_name + ".onnx\"";
  const std::string name = d.spec->name;
  std::string out = "\n# " + model_line(d) + "\n";
  if (is_ultralytics(a)) {
    // Ultralytics export modes (docs.ultralytics.com/modes/export): format=onnx, imgsz,
    // dynamic=True for a dynamic batch axis (and input side), opset. The ONNX file is written
    // next to the .pt weights.
    out += "yolo export model=" + a.name +
           ".pt format=onnx imgsz=" + std::to_string(d.settings.imgsz) + " dynamic=True\nmv " +
           a.name + ".onnx " + onnx + "\n";
  } else {
    out += "# ONNX: export " + a.display_name + " to " + onnx +
           " first (torch.onnx.export, or optimum-cli export onnx for Hugging Face models).\n"
           "test -f " +
           onnx + " || { echo \"missing $ONNX_DIR/" + onnx_name + ".onnx\" >&2; exit 1; }\n";
  }
  if (d.settings.precision == Precision::kInt8) {
    out +=
        "# INT8: give trtexec a calibration cache (--calib=FILE) or export a quantized "
        "(Q/DQ) ONNX;\n# without either the engine runs with placeholder scales.\n";
  }
  const int batch = std::max(1, d.settings.batch);
  out += "mkdir -p \"$REPO/" + name + "/1\"\n";
  out += "trtexec --onnx=" + onnx + " --saveEngine=\"$REPO/" + name + "/1/model.plan\"" +
         trtexec_precision(d.settings.precision) + " \\\n  --minShapes=\"" + shapes(d, 1) +
         "\" \\\n  --optShapes=\"" + shapes(d, batch) + "\" \\\n  --maxShapes=\"" +
         shapes(d, batch) + "\"\n";
  return out;
}

// The fields corun sets in one model's ModelConfig, rendered as config.pbtxt (the repository)
// and as JSON (the load request's "config" parameter): one definition for both.
struct TritonFields {
  std::string name;
  bool python = false;  ///< backend "python", else platform "tensorrt_plan"
  int max_batch_size = 1;
  int instances = 1;  ///< instance_group count, KIND_GPU
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
  // One instance per concurrent request the plan allows (encoder, speech); a camera stream is
  // one sequence of frames, served by one instance.
  f.instances = vision ? 1 : std::max(1, d.settings.request_concurrency);
  f.queue_delay_us = d.queue_delay_us;
  if (f.python) {
    f.parameters.emplace_back("precision", std::string(to_string(d.settings.precision)));
  } else {
    f.parameters.emplace_back("engine", engine_variant(d));
  }
  if (vision) {
    f.parameters.emplace_back("imgsz", std::to_string(d.settings.imgsz));
    f.parameters.emplace_back("skip_rate", format_number(d.settings.skip_rate));
    f.parameters.emplace_back("vid_stride", std::to_string(d.vid_stride));
    // One model for every stream (`streams:`): the frame source sends each stream's frames to
    // it, and dynamic batching groups frames of all of them.
    if (!spec.streams.empty()) f.parameters.emplace_back("streams", join(spec.streams, ","));
  }
  return f;
}

// A Python-backend speech model's tensors: Triton cannot complete them (there is no engine to
// read them from). One request is one utterance: 16 kHz mono samples in, its text out.
struct TensorSpec {
  const char* name;
  const char* data_type;
  int dims;  ///< one dimension of this size, -1: variable
};
constexpr TensorSpec kSpeechInput = {"AUDIO", "TYPE_FP32", -1};
constexpr TensorSpec kSpeechOutput = {"TEXT", "TYPE_STRING", 1};

std::string tensor_pbtxt(const char* list, const TensorSpec& t) {
  return std::string(list) + " [\n  {\n    name: \"" + t.name +
         "\"\n    data_type: " + t.data_type + "\n    dims: [ " + std::to_string(t.dims) +
         " ]\n  }\n]\n";
}

}  // namespace

nlohmann::json triton_config_json(const ModelDeployment& d) {
  const TritonFields f = triton_fields(d);
  // Proto3's JSON mapping of ModelConfig: field names as in the .proto, enums by name, a
  // map<string, ModelParameter> as an object.
  nlohmann::json j = {{"name", f.name}, {"max_batch_size", f.max_batch_size}};
  if (f.python) {
    j["backend"] = "python";
    auto tensor = [](const TensorSpec& t) {
      return nlohmann::json{{"name", t.name}, {"data_type", t.data_type}, {"dims", {t.dims}}};
    };
    j["input"] = nlohmann::json::array({tensor(kSpeechInput)});
    j["output"] = nlohmann::json::array({tensor(kSpeechOutput)});
  } else {
    j["platform"] = "tensorrt_plan";
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
    // runs it from 1/model.py, a template corun writes and the user completes.
    out += "# Backend: Python; " + spec.name + "/1/model.py (a TEMPLATE to complete) runs " +
           spec.arch.display_name + " at parameters.precision.\n";
  } else {
    out += "# Engine: " + spec.name + "/1/model.plan, " + engine_variant(d) +
           ", built by build_engine.sh\n# (ONNX, then trtexec with batch 1.." +
           std::to_string(std::max(1, d.settings.batch)) + " as its optimisation profile).\n";
  }
  if (vision) {
    out += d.settings.skip_rate > 0
               ? "# Frame source: drop " + format_number(d.settings.skip_rate) +
                     " of the frames before inference; Ultralytics vid_stride " +
                     std::to_string(d.vid_stride) + " keeps 1 frame in " +
                     std::to_string(d.vid_stride) + " (1 / (1 - skip_rate), rounded up).\n"
               : "# Frame source: every frame is inferred (vid_stride 1).\n";
    if (!spec.streams.empty()) {
      out += "# Streams: " + join(spec.streams, ", ") + " send their frames to this one model (" +
             format_number(spec.demand.fps) +
             " fps in all); its batches hold frames of any of them.\n";
    }
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
  if (f.python) out += tensor_pbtxt("input", kSpeechInput) + tensor_pbtxt("output", kSpeechOutput);
  out += "instance_group [\n  {\n    count: " + std::to_string(f.instances) +
         "\n    kind: KIND_GPU\n  }\n]\n";
  out += "dynamic_batching {\n  max_queue_delay_microseconds: " + std::to_string(f.queue_delay_us) +
         "\n}\n";
  for (const auto& [k, v] : f.parameters) out += parameter(k, v);
  return out;
}

namespace {

// 1/model.py of a Python-backend model: a template, see its header.
std::string python_model_template(const PlanInput& plan, const ModelDeployment& d,
                                  const ExportOptions& options) {
  const std::string name = d.spec->name;
  const std::string where = name + "/1/model.py";
  std::string out = file_header(
      plan, options,
      "TEMPLATE of " + where + ", Triton's Python backend for " + model_line(d) +
          "\n# corun wrote the interface (config.pbtxt: input AUDIO, FP32 16 kHz mono samples; "
          "output TEXT,\n# one string per utterance) and the class the python_backend README "
          "requires\n# (TritonPythonModel: initialize, execute, finalize). Loading and running "
          "the model is\n# yours: complete every FILL IN. Until then initialize() raises, so "
          "Triton reports the\n# model as failed to load instead of serving made-up answers.");
  const std::string display = d.spec->arch.display_name;
  out += R"py(import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        # The plan's precision (config.pbtxt parameters.precision).
        self.precision = config["parameters"]["precision"]["string_value"]
        self.device = "cuda:" + args["model_instance_device_id"]
        # FILL IN: load )py" +
         display + R"py( at self.precision on self.device.
        raise NotImplementedError(")py" +
         where + R"py( is a corun template: load the model in initialize()")

    def execute(self, requests):
        responses = []
        for request in requests:
            # [batch, samples]: the batch axis comes from max_batch_size > 0.
            audio = pb_utils.get_input_tensor_by_name(request, "AUDIO").as_numpy()
            texts = self.transcribe(audio)
            text = np.array([t.encode("utf-8") for t in texts], dtype=np.object_)
            output = pb_utils.Tensor("TEXT", text.reshape(-1, 1))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses

    def transcribe(self, audio):
        # FILL IN: one string per row of audio (16 kHz mono float32 samples).
        raise NotImplementedError(")py" +
         where + R"py( is a corun template: write transcribe()")

    def finalize(self):
        # FILL IN: release the model; Triton calls this once when it unloads the model.
        pass
)py";
  return out;
}

// build_engine.sh: the engines of every TensorRT model of `models`; empty when none.
std::string build_engine_script(const PlanInput& plan, const std::vector<ModelDeployment>& models,
                                const ExportOptions& options) {
  std::string steps;
  for (const auto& d : models) {
    if (d.server == Server::kTriton && !triton_fields(d).python) steps += engine_steps(d);
  }
  if (steps.empty()) return "";
  return "#!/bin/sh -e\n" +
         file_header(
             plan, options,
             "TensorRT engines of this Triton repository: each model's ONNX, then trtexec\n"
             "# (TensorRT's trtexec: --onnx, --saveEngine, --fp16/--bf16/--int8, --minShapes/\n"
             "# --optShapes/--maxShapes: one optimisation profile, batch 1 to the plan's batch "
             "at the\n# plan's input size) into <model>/1/model.plan, where Triton's "
             "tensorrt_plan backend\n# looks. Not Ultralytics' format=engine: it writes a "
             "metadata header before the\n# serialized engine, which Triton cannot "
             "deserialize. Run it inside the Triton image\n# (or with the same TensorRT "
             "version), from any directory; SEQ_LEN sets encoders'\n# sequence length, "
             "ONNX_DIR where the ONNX files go.") +
         "REPO=$(cd \"$(dirname \"$0\")\" && pwd)\nONNX_DIR=${ONNX_DIR:-$REPO/onnx}\n"
         "SEQ_LEN=${SEQ_LEN:-128}\nmkdir -p \"$ONNX_DIR\"\n" +
         steps;
}

}  // namespace

std::vector<ExportFile> triton_repository(const PlanInput& plan,
                                          const std::vector<ModelDeployment>& models,
                                          const ExportOptions& options) {
  std::vector<ExportFile> files;
  for (const auto& d : models) {
    if (d.server != Server::kTriton) continue;
    files.push_back({d.spec->name + "/config.pbtxt", triton_config(plan, d, options)});
    if (triton_fields(d).python) {
      files.push_back({d.spec->name + "/1/model.py", python_model_template(plan, d, options)});
    }
  }
  std::string script = build_engine_script(plan, models, options);
  if (!script.empty()) files.push_back({"build_engine.sh", std::move(script)});
  return files;
}

Result<std::vector<ExportFile>> render_triton(const PlanInput& plan,
                                              const std::vector<ModelDeployment>& models,
                                              const ExportOptions& options) {
  std::vector<ExportFile> files = triton_repository(plan, models, options);
  if (files.empty()) {
    return Error(
        "the plan has no vision, encoder or speech model: Triton serves those (try "
        "--format vllm)");
  }
  std::string gateway = admission_conf(plan, models, options, false, Server::kTriton);
  if (!gateway.empty()) files.push_back({"admission.conf", std::move(gateway)});
  return files;
}

}  // namespace corun::exporting
