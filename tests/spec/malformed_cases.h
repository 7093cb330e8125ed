#pragma once

// Malformed workloads shared by the spec tests (in-process, also under ASan) and the CLI tests
// (exit code 2 from the real binary). Each names a fragment the error must contain: the field
// path and, where it matters, the reason or suggestion.

#include <string>
#include <vector>

namespace corun::testing {

struct MalformedCase {
  std::string label;
  std::string text;
  std::vector<std::string> expect;  ///< fragments that must all appear in the error
};

inline const std::string kGoodVision = R"(  - name: cam0
    model: yolo11s
    knobs: {imgsz: [320, 640], skip_rate: [0, 0.5]}
    demand: {fps: 30}
    sla: {latency_ms_p95: 60}
)";

inline std::vector<MalformedCase> malformed_cases() {
  const std::string head = "device: rtx3090\nmodels:\n";
  auto vision = [&](const std::string& body) { return head + "  - name: cam0\n    model: yolo11s\n" + body; };
  auto llm = [&](const std::string& body) { return head + "  - name: chat\n    model: qwen2.5-1.5b\n" + body; };
  return {
      {"invalid yaml", "device: rtx3090\nmodels: [\n", {"invalid YAML", ":3"}},
      {"binary with nul", std::string("\x7f" "ELF\x02\x01\x01\0\0\0", 10), {"NUL byte"}},
      {"binary garbage", "\xff\xfe\x89PNG\r\n\x1a\n", {"mapping"}},
      {"top-level list", "- a\n- b\n", {"must be a mapping"}},
      {"empty file", "", {"must be a mapping"}},
      {"unknown top key", "device: rtx3090\nmodles: []\n", {"modles", "did you mean 'models'"}},
      {"missing device", "models:\n" + kGoodVision, {"device: missing required field"}},
      {"unknown device", "device: rtx3909\nmodels:\n" + kGoodVision,
       {"device", "did you mean 'rtx3090'"}},
      {"models not a list", "device: rtx3090\nmodels: 3\n", {"models: expected a list"}},
      {"models empty", "device: rtx3090\nmodels: []\n", {"models: must not be empty"}},
      {"model not a mapping", "device: rtx3090\nmodels: [[1, 2]]\n",
       {"models[0]", "expected a mapping"}},
      {"missing name", head + "  - model: yolo11s\n    demand: {fps: 30}\n",
       {"models[0].name: missing required field"}},
      {"missing model", head + "  - name: cam0\n    demand: {fps: 30}\n",
       {"models[0].model: missing required field"}},
      {"unknown catalog model", head + "  - name: cam0\n    model: yolo11q\n    demand: {fps: 30}\n",
       {"models[0].model", "unknown catalog model 'yolo11q'", "did you mean"}},
      {"duplicate names", "device: rtx3090\nmodels:\n" + kGoodVision + kGoodVision,
       {"models[1].name", "duplicate model name 'cam0'"}},
      {"bad model name", head + "  - name: cam 0\n    model: yolo11s\n    demand: {fps: 30}\n",
       {"models[0].name", "letters, digits"}},
      {"unknown knob", vision("    knobs: {imgsize: [320]}\n    demand: {fps: 30}\n"),
       {"models[0].knobs.imgsize", "did you mean 'imgsz'"}},
      {"knob wrong type", vision("    knobs: {imgsz: big}\n    demand: {fps: 30}\n"),
       {"models[0].knobs.imgsz", "expected a number"}},
      {"imgsz not multiple of 32", vision("    knobs: {imgsz: [320, 500]}\n    demand: {fps: 30}\n"),
       {"models[0].knobs.imgsz[1]", "multiple of 32"}},
      {"negative skip rate", vision("    knobs: {skip_rate: [-0.1, 0]}\n    demand: {fps: 30}\n"),
       {"models[0].knobs.skip_rate[0]", "out of range"}},
      {"huge skip rate", vision("    knobs: {skip_rate: [0, 5]}\n    demand: {fps: 30}\n"),
       {"models[0].knobs.skip_rate[1]", "out of range"}},
      {"zero batch", vision("    knobs: {batch: [0, 1]}\n    demand: {fps: 30}\n"),
       {"models[0].knobs.batch[0]", "out of range"}},
      {"huge batch", vision("    knobs: {batch: [1, 1e12]}\n    demand: {fps: 30}\n"),
       {"models[0].knobs.batch[1]", "out of range"}},
      {"fractional batch", vision("    knobs: {batch: [1.5]}\n    demand: {fps: 30}\n"),
       {"models[0].knobs.batch", "whole number"}},
      {"empty knob list", vision("    knobs: {imgsz: []}\n    demand: {fps: 30}\n"),
       {"models[0].knobs.imgsz", "must not be empty"}},
      {"duplicate knob value", vision("    knobs: {imgsz: [320, 320]}\n    demand: {fps: 30}\n"),
       {"models[0].knobs.imgsz[1]", "duplicate value 320"}},
      {"unknown precision", llm("    knobs: {precision: [fp16, fp8]}\n    demand: {rps: 1, prompt_tokens: 8, output_tokens: 8}\n"),
       {"models[0].knobs.precision[1]", "unknown precision 'fp8'"}},
      {"missing precision variant", vision("    knobs: {precision: [fp16, awq]}\n    demand: {fps: 30}\n"),
       {"models[0].knobs.precision[1]", "has no awq variant"}},
      {"knob for wrong family", llm("    knobs: {imgsz: [320]}\n    demand: {rps: 1, prompt_tokens: 8, output_tokens: 8}\n"),
       {"models[0].knobs.imgsz", "does not apply to llm"}},
      {"missing demand", vision(""), {"models[0].demand", "missing required field"}},
      {"negative fps", vision("    demand: {fps: -30}\n"), {"models[0].demand.fps", "out of range"}},
      {"nan fps", vision("    demand: {fps: .nan}\n"), {"models[0].demand.fps", "expected a number"}},
      {"infinite fps", vision("    demand: {fps: .inf}\n"), {"models[0].demand.fps", "expected a number"}},
      {"misspelt demand key", vision("    demand: {fsp: 30}\n"),
       {"models[0].demand.fsp", "did you mean 'fps'"}},
      {"demand as list", vision("    demand: [30]\n"), {"models[0].demand", "expected a mapping"}},
      {"llm demand incomplete", llm("    demand: {rps: 1}\n"),
       {"models[0].demand.prompt_tokens: missing required field"}},
      {"huge prompt", llm("    demand: {rps: 1, prompt_tokens: 1e15, output_tokens: 8}\n"),
       {"models[0].demand.prompt_tokens", "out of range"}},
      // Optional maxima of a request's lengths: integers > 0, at least their mean.
      {"max prompt below mean",
       llm("    demand: {rps: 1, prompt_tokens: 512, output_tokens: 8, max_prompt_tokens: 256}\n"),
       {"models[0].demand.max_prompt_tokens", "below the mean", "prompt_tokens: 512"}},
      {"max output zero",
       llm("    demand: {rps: 1, prompt_tokens: 8, output_tokens: 8, max_output_tokens: 0}\n"),
       {"models[0].demand.max_output_tokens", "out of range"}},
      {"fractional max output",
       llm("    demand: {rps: 1, prompt_tokens: 8, output_tokens: 8, max_output_tokens: 9.5}\n"),
       {"models[0].demand.max_output_tokens", "whole number"}},
      {"max prompt for vision", vision("    demand: {fps: 30, max_prompt_tokens: 100}\n"),
       {"models[0].demand.max_prompt_tokens"}},
      // Closed-loop demand (benchmark mode): one of rate or concurrency, 1..1024 requests.
      {"rate and concurrency", vision("    demand: {fps: 30, concurrency: 4}\n"),
       {"models[0].demand.concurrency", "either fps", "not both"}},
      {"llm rate and concurrency",
       llm("    demand: {rps: 1, concurrency: 2, prompt_tokens: 8, output_tokens: 8}\n"),
       {"models[0].demand.concurrency", "either rps", "not both"}},
      {"zero concurrency", vision("    demand: {concurrency: 0}\n"),
       {"models[0].demand.concurrency", "out of range"}},
      {"concurrency above 1024", vision("    demand: {concurrency: 1025}\n"),
       {"models[0].demand.concurrency", "out of range"}},
      {"fractional concurrency", vision("    demand: {concurrency: 2.5}\n"),
       {"models[0].demand.concurrency", "whole number"}},
      {"llm concurrency without lengths", llm("    demand: {concurrency: 4}\n"),
       {"models[0].demand.prompt_tokens: missing required field"}},
      {"misspelt concurrency", vision("    demand: {concurency: 4}\n"),
       {"models[0].demand.concurency", "did you mean 'concurrency'"}},
      {"demand event with rate and concurrency",
       "device: rtx3090\nmodels:\n" + kGoodVision +
           "timeline: {duration_s: 60, events: [{at_s: 5, demand: {model: cam0, fps: 10, "
           "concurrency: 2}}]}\n",
       {"timeline.events[0].demand.concurrency", "not both"}},
      {"demand event without a demand",
       "device: rtx3090\nmodels:\n" + kGoodVision +
           "timeline: {duration_s: 60, events: [{at_s: 5, demand: {model: cam0}}]}\n",
       {"timeline.events[0].demand.fps", "missing required field"}},
      {"negative sla", vision("    demand: {fps: 30}\n    sla: {latency_ms_p95: -5}\n"),
       {"models[0].sla.latency_ms_p95", "out of range"}},
      {"llm sla on vision", vision("    demand: {fps: 30}\n    sla: {ttft_ms_p95: 100}\n"),
       {"models[0].sla.ttft_ms_p95", "unknown field"}},
      {"weight string", vision("    demand: {fps: 30}\n    weight: heavy\n"),
       {"models[0].weight", "expected a number"}},
      {"misspelt objective key", "device: rtx3090\nmodels:\n" + kGoodVision + "objective: {maximise: utility}\n",
       {"objective.maximise", "did you mean 'maximize'"}},
      {"unknown objective", "device: rtx3090\nmodels:\n" + kGoodVision + "objective: {maximize: speed}\n",
       {"objective.maximize", "unknown objective 'speed'"}},
      {"event for unknown model",
       "device: rtx3090\nmodels:\n" + kGoodVision +
           "timeline: {duration_s: 60, events: [{at_s: 5, depart: cam9}]}\n",
       {"timeline.events[0].depart", "no model 'cam9'", "did you mean 'cam0'"}},
      {"event with two kinds",
       "device: rtx3090\nmodels:\n" + kGoodVision +
           "timeline: {duration_s: 60, events: [{at_s: 5, depart: cam0, arrive: cam0}]}\n",
       {"timeline.events[0]", "exactly one of"}},
      {"event after the end",
       "device: rtx3090\nmodels:\n" + kGoodVision +
           "timeline: {duration_s: 60, events: [{at_s: 90, depart: cam0}]}\n",
       {"timeline", "after the end"}},
      {"context event on vision",
       "device: rtx3090\nmodels:\n" + kGoodVision +
           "timeline: {duration_s: 60, events: [{at_s: 5, context: {model: cam0, prompt_tokens: 9}}]}\n",
       {"timeline.events[0].context", "apply to LLMs"}},
      {"interference share above 1",
       "device: rtx3090\nmodels:\n" + kGoodVision +
           "timeline: {duration_s: 60, events: [{at_s: 5, interference: {sm_util: 1.3}}]}\n",
       {"timeline.events[0].interference.sm_util", "out of range [0, 1]"}},
      {"interference without a share",
       "device: rtx3090\nmodels:\n" + kGoodVision +
           "timeline: {duration_s: 60, events: [{at_s: 5, interference: {}}]}\n",
       {"timeline.events[0].interference", "needs sm_util or bandwidth_util"}},
      {"misspelt interference key",
       "device: rtx3090\nmodels:\n" + kGoodVision +
           "timeline: {duration_s: 60, events: [{at_s: 5, interference: {sm_utl: 0.2}}]}\n",
       {"timeline.events[0].interference.sm_utl", "did you mean 'sm_util'"}},
      {"power cap above the board's TDP",
       "device: rtx3090\nmodels:\n" + kGoodVision +
           "timeline: {duration_s: 60, events: [{at_s: 5, power_cap_w: 500}]}\n",
       {"timeline.events[0].power_cap_w", "out of range [70, 350]"}},
      {"perturbation seed not a positive integer",
       "device: rtx3090\nmodels:\n" + kGoodVision +
           "timeline: {duration_s: 60, events: [{at_s: 5, perturb: 0}]}\n",
       {"timeline.events[0].perturb", "out of range"}},
      {"unknown profiling",
       "device: rtx3090\nprofiling: nope\nmodels:\n" + kGoodVision,
       {"profiling", "unknown profiling 'nope'", "meanfield, none"}},
      {"tool burst without a period",
       "device: rtx3090\nmodels:\n" + kGoodVision + "tools: {scenario: rag.yaml}\n",
       {"tools.every_s", "missing"}},
      {"tool burst of period zero",
       "device: rtx3090\nmodels:\n" + kGoodVision + "tools: {scenario: rag.yaml, every_s: 0}\n",
       {"tools.every_s", "out of range"}},
      {"tool burst without a scenario",
       "device: rtx3090\nmodels:\n" + kGoodVision + "tools: {every_s: 30}\n",
       {"tools.scenario", "missing"}},
      {"misspelt tool burst key",
       "device: rtx3090\nmodels:\n" + kGoodVision +
           "tools: {scenario: rag.yaml, evry_s: 30}\n",
       {"tools.evry_s", "did you mean 'every_s'"}},
      {"tool burst on a node",
       "device: a100-80gb\ngpus: 2\nmodels:\n" + kGoodVision +
           "tools: {scenario: rag.yaml, every_s: 30}\n",
       {"tools", "planned on one GPU"}},
      {"streams on an llm", llm("    streams: [a, b]\n    demand: {rps: 1, prompt_tokens: 8, output_tokens: 8}\n"),
       {"models[0].streams", "only a vision model"}},
      {"streams twice", vision("    streams: [a, b, a]\n    demand: {fps: 30}\n"),
       {"models[0].streams[2]", "listed twice"}},
      {"streams empty", vision("    streams: []\n    demand: {fps: 30}\n"),
       {"models[0].streams", "must not be empty"}},
      {"streams bad name", vision("    streams: [\"cam 1\"]\n    demand: {fps: 30}\n"),
       {"models[0].streams[0]", "names use letters"}},
  };
}

}  // namespace corun::testing
