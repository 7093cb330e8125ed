// Which flag, field or variable carries each knob into each format: the one table behind the
// renderers' contract, its test and docs/export.md.

#include "corun/export/knob_map.h"

namespace corun::exporting {
namespace {

using F = ExportFormat;
using K = KnobId;

std::vector<KnobExport> make_table() {
  const std::string mem = "`CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`";
  return {
      // vLLM: launch arguments of each LLM.
      {F::kVllm, K::kPrecision, "model id, `--quantization awq`, `--dtype`",
       "the catalog checkpoint of the precision (`checkpoints` in catalog/models.yaml); AWQ runs "
       "`--dtype float16`, fp16/bf16/fp32 set `float16`/`bfloat16`/`float32`; also moves "
       "`--gpu-memory-utilization`"},
      {F::kVllm, K::kBatch, "",
       "not an LLM knob (vision, encoder, speech): vLLM batches continuously up to "
       "`--max-num-seqs`"},
      {F::kVllm, K::kSmShare, "",
       "not a vLLM setting: an MPS client limit, written by `--format mps` and `compose`"},
      {F::kVllm, K::kRequestConcurrency, "`--max-num-seqs`",
       "sequences in the continuous batch; also moves `--gpu-memory-utilization` (KV cache)"},
      {F::kVllm, K::kImgsz, "", "vision only; vLLM serves the LLMs"},
      {F::kVllm, K::kSkipRate, "", "vision only; vLLM serves the LLMs"},
      {F::kVllm, K::kPrefillChunk, "`--enable-chunked-prefill --max-num-batched-tokens`",
       "tokens per scheduler step, raised to `--max-num-seqs` when smaller (vLLM requires "
       "max_num_batched_tokens >= max_num_seqs)"},
      // Triton: config.pbtxt of each vision, encoder and speech model.
      {F::kTriton, K::kPrecision, "`parameters.engine`, build_engine.sh",
       "NAME/1/model.plan is built at the precision (trtexec `--fp16`/`--int8`/`--bf16`; fp32 "
       "without a flag) and `parameters.engine` names the variant, so a new one is a new "
       "configuration; speech models get it as `parameters.precision` of the Python backend"},
      {F::kTriton, K::kBatch,
       "`max_batch_size`, `dynamic_batching.max_queue_delay_microseconds`, build_engine.sh",
       "delay = time for `batch` inputs to arrive at the planned input rate, (batch - 1) / rate; "
       "the engine's optimisation profile runs from batch 1 to `batch`"},
      {F::kTriton, K::kSmShare, "",
       "an MPS client limit (`--format mps`, `compose`); Triton has no SM cap of its own"},
      {F::kTriton, K::kRequestConcurrency, "`instance_group.count`",
       "model instances executing at once (encoder, speech); vision models run one"},
      {F::kTriton, K::kImgsz, "`parameters.imgsz`, `parameters.engine`, build_engine.sh",
       "the ONNX export and the engine's optimisation profile are for this input side"},
      {F::kTriton, K::kSkipRate, "`parameters.skip_rate`, `parameters.vid_stride`",
       "the frame source drops frames before Triton: Ultralytics `vid_stride` = ceil(1 / (1 - "
       "skip_rate)); the queue delay uses the planned rate fps x (1 - skip_rate)"},
      {F::kTriton, K::kPrefillChunk, "", "LLM only; LLMs are served by vLLM"},
      // MPS: one env file per model.
      {F::kMps, K::kPrecision, mem, "weights at the precision are part of the model's VRAM"},
      {F::kMps, K::kBatch, mem, "activations of a batch"},
      {F::kMps, K::kSmShare, "`CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`",
       "rounded to an integer in 1..100, 100 when the knob is not searched; the Triton server "
       "gets the sum of its models' (at most 100)"},
      {F::kMps, K::kRequestConcurrency, mem,
       "KV cache of the concurrent sequences (LLM), activations of concurrent requests"},
      {F::kMps, K::kImgsz, mem, "activations at the input size"},
      {F::kMps, K::kSkipRate, "",
       "frames are dropped before the GPU: changes neither memory nor SM share"},
      {F::kMps, K::kPrefillChunk, mem,
       "activations of one prefill chunk (the chunk, or the prompt when shorter)"},
      // compose: the servers above with their MPS environment.
      {F::kCompose, K::kPrecision,
       "vLLM `--model`/`--quantization`/`--dtype`, Triton engine, "
       "MPS memory limit",
       "as in the vllm, triton and mps formats"},
      {F::kCompose, K::kBatch, "Triton `max_batch_size` and queue delay, MPS memory limit",
       "as in the triton and mps formats"},
      {F::kCompose, K::kSmShare,
       "`CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` of each vLLM service and of the Triton service",
       "as in the mps format"},
      {F::kCompose, K::kRequestConcurrency,
       "vLLM `--max-num-seqs`, Triton `instance_group.count`, MPS memory limit",
       "as in the vllm, triton and mps formats"},
      {F::kCompose, K::kImgsz, "Triton `parameters.imgsz` and engine, MPS memory limit",
       "as in the triton and mps formats"},
      {F::kCompose, K::kSkipRate, "Triton `parameters.skip_rate`/`vid_stride`",
       "as in the triton format"},
      {F::kCompose, K::kPrefillChunk, "vLLM `--max-num-batched-tokens`, MPS memory limit",
       "as in the vllm and mps formats"},
      // k8s: the same servers as Deployments, the MPS environment in each pod.
      {F::kK8s, K::kPrecision,
       "vLLM `--model`/`--quantization`/`--dtype`, Triton engine, "
       "MPS memory limit",
       "as in the compose format"},
      {F::kK8s, K::kBatch, "Triton `max_batch_size` and queue delay, MPS memory limit",
       "as in the compose format"},
      {F::kK8s, K::kSmShare,
       "`CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` in the pod of each vLLM server and of the Triton "
       "server",
       "as in the compose format; the GPU's ResourceClaim sets 100 % as the default clients "
       "lower"},
      {F::kK8s, K::kRequestConcurrency,
       "vLLM `--max-num-seqs`, Triton `instance_group.count`, MPS memory limit",
       "as in the compose format"},
      {F::kK8s, K::kImgsz, "Triton `parameters.imgsz` and engine, MPS memory limit",
       "as in the compose format"},
      {F::kK8s, K::kSkipRate, "Triton `parameters.skip_rate`/`vid_stride`",
       "as in the compose format"},
      {F::kK8s, K::kPrefillChunk, "vLLM `--max-num-batched-tokens`, MPS memory limit",
       "as in the compose format"},
  };
}

}  // namespace

const std::vector<KnobExport>& knob_exports() {
  static const std::vector<KnobExport> table = make_table();
  return table;
}

std::string knob_export_table_markdown() {
  std::string out = "| format | knob | written as | how, or why not |\n|---|---|---|---|\n";
  for (const auto& e : knob_exports()) {
    out += "| " + std::string(to_string(e.format)) + " | `" + knob_decl(e.knob).name + "` | " +
           (e.exported() ? e.target : "not applicable") + " | " + e.note + " |\n";
  }
  return out;
}

}  // namespace corun::exporting
