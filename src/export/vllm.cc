// vLLM: one `vllm serve` command per LLM of the plan. Flag names and meanings are vLLM's engine
// arguments (docs.vllm.ai, "Engine Arguments"; v0.8.5 is the version the compose file pins).

#include <algorithm>
#include <string>

#include "corun/core/strings.h"
#include "render.h"

namespace corun::exporting {

Result<VllmLaunch> vllm_launch(const ModelDeployment& d, int port) {
  const ModelSpec& spec = *d.spec;
  const Precision precision = d.settings.precision;
  const ModelCheckpoint* checkpoint = spec.arch.checkpoint(precision);
  if (checkpoint == nullptr) {
    std::vector<std::string> known;
    for (const auto& c : spec.arch.checkpoints) known.emplace_back(to_string(c.precision));
    return Error("model '" + spec.name + "' (" + spec.arch.name +
                 "): the catalog has no "
                 "checkpoint for precision " +
                 std::string(to_string(precision)) +
                 " (vLLM loads a model by its Hugging Face id; catalogued: " +
                 (known.empty() ? std::string("none") : join(known, ", ")) + ")");
  }
  // --dtype is the activation and math type (vLLM "--dtype {auto,half,float16,bfloat16,float,
  // float32}"). AWQ checkpoints keep FP16 activations. --quantization awq names the scheme
  // explicitly; vLLM then keeps its AWQ kernels instead of upgrading to awq_marlin (faster on
  // Ampere and newer), so the served model is the variant the plan chose, not a faster one.
  std::string dtype;
  bool awq = false;
  switch (precision) {
    case Precision::kFp32:
      dtype = "float32";
      break;
    case Precision::kFp16:
      dtype = "float16";
      break;
    case Precision::kBf16:
      dtype = "bfloat16";
      break;
    case Precision::kAwq:
      dtype = "float16";
      awq = true;
      break;
    case Precision::kInt8:
      return Error("model '" + spec.name +
                   "': precision int8 has no vLLM equivalent here (an "
                   "INT8 checkpoint names its own scheme); export supports fp32, fp16, bf16 "
                   "and awq");
  }
  VllmLaunch l;
  l.model_id = checkpoint->hf_id;
  auto add = [&](std::string flag, std::string value) {
    l.args.push_back(std::move(flag));
    if (!value.empty()) l.args.push_back(std::move(value));
  };
  add("--served-model-name", spec.name);
  add("--port", std::to_string(port));
  add("--dtype", dtype);
  if (awq) add("--quantization", "awq");
  const int seqs = std::max(1, d.settings.request_concurrency);
  add("--max-num-seqs", std::to_string(seqs));
  // vLLM refuses max_num_batched_tokens < max_num_seqs (SchedulerConfig._verify_args, vllm/
  // config/scheduler.py): every running sequence needs one token of each step's budget.
  add("--enable-chunked-prefill", "");
  add("--max-num-batched-tokens", std::to_string(std::max(d.settings.prefill_chunk, seqs)));
  // The longest request the server admits: vLLM rejects a request whose prompt + max_tokens
  // exceed it ("--max-model-len: model context length", Engine Arguments), so it is the
  // demand's maximum lengths, not their mean (deployment.h, max_model_len). Without the flag
  // vLLM sizes for the model's full context (32768 for Qwen2.5) and may not start in its share.
  if (d.max_model_len > 0) add("--max-model-len", std::to_string(d.max_model_len));
  add("--gpu-memory-utilization", fixed_decimals(d.vram_fraction, 3));
  return l;
}

std::string vllm_memory_comment(const PlanInput& plan, const ModelDeployment& d) {
  const double device_gb = plan.workload.device.vram_gb;
  std::string out = "# VRAM budget " + fixed_decimals(d.vram_bytes / 1e9, 3) + " GB";
  if (d.kv_bytes_at_max_len > d.vram_bytes) {
    out += "; " + fixed_decimals(d.kv_bytes_at_max_len / 1e9, 3) + " GB with the KV cache of " +
           std::to_string(d.settings.request_concurrency) + " sequences at --max-model-len";
  }
  out += "\n# --gpu-memory-utilization x " + fixed_decimals(device_gb, 2) +
         " GB = " + fixed_decimals(d.vram_fraction * device_gb, 3) +
         " GB; its MPS memory limit adds 512 MiB for CUDA graphs\n";
  for (const auto& w : d.warnings) out += "# WARNING: " + w + "\n";
  return out;
}

Result<std::vector<ExportFile>> render_vllm(const PlanInput& plan,
                                            const std::vector<ModelDeployment>& models,
                                            const ExportOptions& options) {
  std::string body;
  std::string others;
  int llms = 0;
  for (const auto& d : models) {
    if (d.server != Server::kVllm) {
      others += "#   " + model_line(d) + " (" + std::string(to_string(d.spec->arch.family)) +
                ": Triton, see --format triton)\n";
      continue;
    }
    auto launch = vllm_launch(d, d.port);
    if (!launch) return launch.error();
    ++llms;
    body += "\n# " + model_line(d) + "\n" + vllm_memory_comment(plan, d);
    body += "vllm serve " + launch->model_id;
    for (std::size_t i = 0; i < launch->args.size(); ++i) {
      const std::string& a = launch->args[i];
      // One flag per line, its value on the same line.
      body += (a.rfind("--", 0) == 0 ? " \\\n  " : " ") + a;
    }
    body += " &\n";
  }
  if (llms == 0) {
    return Error("the plan has no LLM: vLLM serves the llm family (try --format triton)");
  }
  std::string out = "#!/bin/sh\n" + file_header(plan, options,
                                                "vLLM launch commands, one server per LLM (flags: "
                                                "docs.vllm.ai, Engine Arguments).");
  if (!others.empty()) out += "# Not served by vLLM:\n" + others;
  out += body + "wait\n";
  std::vector<ExportFile> files = {{"vllm.sh", out}};
  std::string gateway = admission_conf(plan, models, options, false, Server::kVllm);
  if (!gateway.empty()) files.push_back({"admission.conf", std::move(gateway)});
  return files;
}

}  // namespace corun::exporting
