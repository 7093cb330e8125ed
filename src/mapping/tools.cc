#include "corun/mapping/tools.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "corun/catalog/catalog.h"
#include "corun/core/strings.h"
#include "corun/core/yaml.h"

namespace corun::mapping {

const Tool* ToolCatalog::find(std::string_view name) const {
  for (const auto& t : tools) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::vector<std::string> ToolCatalog::names() const {
  std::vector<std::string> out;
  out.reserve(tools.size());
  for (const auto& t : tools) out.push_back(t.name);
  return out;
}

namespace {

constexpr double kMega = 1e6;
constexpr double kGiga = 1e9;

// Seconds of audio per encoder position of a speech model: 10 ms mel hop, halved by the
// stride-2 convolution stem (Whisper: 30 s = 3000 frames = 1500 positions, Radford et al.
// 2022, Section 2.2). A speech model encodes fixed windows of default_seq_len positions.
constexpr double kAudioSecondsPerPosition = 0.02;

void parse_model(const YamlField& f, ExecModel& m) {
  if (!f.expect_map()) return;
  f.check_keys({"cpu_op_overhead_us", "cpu_mem_efficiency", "noise"});
  m.cpu_op_overhead_us = f.number_at("cpu_op_overhead_us", 0, 1000, true).value_or(0);
  m.cpu_mem_efficiency = f.number_at("cpu_mem_efficiency", 0.05, 1, true).value_or(1);
  m.default_noise = f.number_at("noise", 0, 0.5, true).value_or(0);
}

std::optional<Precision> parse_precision_field(const YamlField& f, bool required) {
  const YamlField p = f["precision"];
  if (!p.present()) {
    if (required) p.error("missing required field");
    return std::nullopt;
  }
  const auto s = p.string();
  if (!s) return std::nullopt;
  const auto prec = parse_precision(*s);
  if (!prec) p.error("unknown precision '" + *s + "'" + did_you_mean(*s, precision_names()));
  return prec;
}

// Sums the phases into the call's totals (FLOPs, bytes, kernels).
void total_phases(Tool& t) {
  t.flops = t.bytes = t.ops = 0;
  for (const ToolPhase& ph : t.phases) {
    t.flops += ph.repeats * ph.cost.flops;
    t.bytes += ph.repeats * ph.cost.bytes;
    t.ops += ph.repeats * ph.cost.kernels;
  }
}

void add_phases(Tool& t, const gpu::ModelPhases& ph, double times) {
  t.phases.push_back({ph.main, times});
  if (ph.decode_steps > 0) t.phases.push_back({ph.decode, times * ph.decode_steps});
}

// A tool that calls catalog model `arch` with the call's shape under `call`: its GPU phases
// and VRAM are the simulator's for that model (gpu::speech_phases, gpu::llm_phases,
// forward_cost), at batch 1.
void model_call(const YamlField& f, const ModelArch& arch, Tool& t) {
  const YamlField call = f["call"];
  const Precision p = t.precision;
  if (std::find(arch.precisions.begin(), arch.precisions.end(), p) == arch.precisions.end()) {
    f["precision"].error("model '" + arch.name + "' has no " + std::string(to_string(p)) +
                         " variant");
    return;
  }
  t.weights_bytes = weight_bytes(arch, p);
  if (call.present() && !call.expect_map()) return;
  switch (arch.family) {
    case ModelFamily::kVision: {
      call.check_keys({"image_px"});
      const int px = static_cast<int>(
          call.integer_at("image_px", 32, 8192, false).value_or(arch.reference_size));
      t.phases.push_back({forward_cost(arch, 1, px, p), 1});
      t.working_bytes = activation_bytes(arch, 1, px, p);
      t.call = "image_px=" + std::to_string(px);
      break;
    }
    case ModelFamily::kEncoder: {
      call.check_keys({"tokens"});
      const int tokens = static_cast<int>(
          call.integer_at("tokens", 1, 1 << 20, false).value_or(arch.default_seq_len));
      t.phases.push_back({forward_cost(arch, 1, tokens, p), 1});
      t.working_bytes = activation_bytes(arch, 1, tokens, p);
      t.call = "tokens=" + std::to_string(tokens);
      break;
    }
    case ModelFamily::kSpeech: {
      call.check_keys({"audio_s", "tokens"});
      const double window_s = arch.default_seq_len * kAudioSecondsPerPosition;
      const double audio_s = call.number_at("audio_s", 0.1, 36000, true).value_or(window_s);
      ModelArch a = arch;
      if (call["tokens"].present()) {
        a.speech_decode_tokens =
            static_cast<int>(call.integer_at("tokens", 1, 1 << 16, false).value_or(1));
      }
      // Whisper-style models pad every window to its full length: a call encodes
      // ceil(audio / window) windows and decodes the tokens of each.
      const double windows = std::max(1.0, std::ceil(audio_s / window_s - 1e-9));
      add_phases(t, gpu::speech_phases(a, 1, 0, p), windows);
      t.working_bytes = activation_bytes(a, 1, 0, p);
      t.call = "audio_s=" + format_number(audio_s) +
               ", tokens=" + std::to_string(a.speech_decode_tokens);
      break;
    }
    case ModelFamily::kLlm: {
      call.check_keys({"prompt_tokens", "output_tokens", "prefill_chunk"});
      const int prompt =
          static_cast<int>(call.integer_at("prompt_tokens", 1, 1 << 20, true).value_or(1));
      const int output =
          static_cast<int>(call.integer_at("output_tokens", 1, 1 << 20, true).value_or(1));
      const int chunk =
          static_cast<int>(call.integer_at("prefill_chunk", 1, 1 << 20, false).value_or(prompt));
      add_phases(t, gpu::llm_phases(arch, prompt, output, chunk, p), 1);
      t.llm = LlmCall{arch, prompt, output, chunk};
      // The KV cache of the whole context at the end of decode, plus one chunk's activations.
      t.working_bytes = (prompt + output) * kv_bytes_per_token(arch, p) +
                        activation_bytes(arch, 1, std::min(chunk, prompt), p);
      t.call =
          "prompt_tokens=" + std::to_string(prompt) + ", output_tokens=" + std::to_string(output);
      break;
    }
  }
}

std::optional<Tool> parse_tool(const YamlField& f, const std::string& name, const Catalog& models) {
  if (!f.expect_map()) return std::nullopt;
  const Diagnostics* diags = f.diagnostics();
  const std::size_t before = diags ? diags->items().size() : 0;
  Tool t;
  t.name = name;
  t.display_name = f.string_at("display_name", true).value_or("");
  t.category = f.string_at("category", true).value_or("");
  t.source = f.string_at("source", true).value_or("");
  t.cpu_efficiency = f.number_at("cpu_efficiency", 1e-4, 1, true).value_or(1);
  t.cpu_threads = static_cast<int>(f.integer_at("cpu_threads", 1, 1024, true).value_or(1));
  if (const YamlField m = f["model"]; m.present()) {
    // A catalog model: its numbers come from the model catalog, never from here.
    f.check_keys({"display_name", "category", "model", "call", "precision", "cpu_dram_gb",
                  "cpu_efficiency", "cpu_threads", "input_mb", "output_mb", "source"});
    t.model = m.string().value_or("");
    t.precision = parse_precision_field(f, true).value_or(Precision::kFp16);
    const ModelArch* arch = models.find_model(t.model);
    if (!arch) {
      m.error("unknown model '" + t.model + "'" + did_you_mean(t.model, models.model_names()));
    } else if (!diags || diags->items().size() == before) {
      model_call(f, *arch, t);
    }
    total_phases(t);
  } else {
    f.check_keys({"display_name", "category", "gpu", "gflops", "dram_gb", "cpu_dram_gb", "ops",
                  "ctas", "precision", "cpu_efficiency", "cpu_threads", "weights_mb", "working_mb",
                  "input_mb", "output_mb", "source"});
    if (f["gpu"].present()) t.has_gpu = f["gpu"].boolean().value_or(true);
    PhaseCost c;
    c.flops = f.number_at("gflops", 0, 1e6, true).value_or(0) * kGiga;
    c.bytes = f.number_at("dram_gb", 0, 1e4, true).value_or(0) * kGiga;
    c.kernels = f.number_at("ops", 0, 1e7, true).value_or(0);
    // GPU-only fields are required exactly when a GPU implementation exists.
    const bool gpu = t.has_gpu;
    c.ctas = f.number_at("ctas", 1, 1e7, gpu).value_or(1);
    t.phases.push_back({c, 1});
    t.weights_bytes = f.number_at("weights_mb", 0, 1e6, gpu).value_or(0) * kMega;
    t.working_bytes = f.number_at("working_mb", 0, 1e6, gpu).value_or(0) * kMega;
    t.precision = parse_precision_field(f, gpu).value_or(Precision::kFp16);
    total_phases(t);
  }
  t.cpu_bytes = f["cpu_dram_gb"].present()
                    ? f.number_at("cpu_dram_gb", 0, 1e4, false).value_or(0) * kGiga
                    : t.bytes;
  t.input_bytes = f.number_at("input_mb", 0, 1e6, t.has_gpu).value_or(0) * kMega;
  t.output_bytes = f.number_at("output_mb", 0, 1e6, t.has_gpu).value_or(0) * kMega;
  if (diags && diags->items().size() > before) return std::nullopt;
  return t;
}

}  // namespace

Result<ToolCatalog> parse_tool_catalog(std::string_view text, const std::string& file,
                                       const Catalog& models) {
  auto root = parse_yaml(text, file);
  if (!root) return root.error();
  Diagnostics diags;
  const YamlField top(*root, file, "", &diags);
  ToolCatalog cat;
  if (!top.expect_map()) return diags.to_error();
  top.check_keys({"version", "execution_model", "tools"});
  top.integer_at("version", 1, 1, true);
  if (const YamlField m = top["execution_model"]; m.present()) {
    parse_model(m, cat.model);
  } else {
    m.error("missing required field");
  }
  const YamlField tools = top["tools"];
  if (!tools.present()) {
    tools.error("missing required field");
  } else if (tools.expect_map()) {
    for (const auto& key : tools.keys()) {
      if (auto t = parse_tool(tools[key], key, models)) cat.tools.push_back(std::move(*t));
    }
    if (cat.tools.empty() && diags.empty()) tools.error("must list at least one tool");
  }
  if (!diags.empty()) return diags.to_error();
  return cat;
}

Result<ToolCatalog> default_tool_catalog() { return tool_catalog(Catalog::default_catalog()); }

Result<ToolCatalog> tool_catalog(const Catalog& catalog) {
  const auto text = catalog.file("tools.yaml");
  if (!text) return Error("the catalog has no tools.yaml", Error::Kind::kNotFound);
  return parse_tool_catalog(*text, "tools.yaml", catalog);
}

ToolCost derive_cost(const Tool& tool, const Device& device, const ExecModel& model) {
  ToolCost c;
  c.has_gpu = tool.has_gpu;
  c.vram_bytes = tool.vram_bytes();
  // CPU: the slower of math on the tool's threads and its DRAM traffic on their share of the
  // host's bandwidth (a few threads cannot saturate all channels).
  const HostCpu& cpu = device.cpu;
  const int cores = std::max(1, cpu.cores);
  const double threads = std::min(tool.cpu_threads, cores);
  const double cpu_math_s =
      tool.flops / std::max(1.0, threads * cpu.fp32_gflops_per_core * kGiga * tool.cpu_efficiency);
  const double host_bw = cpu.mem_bandwidth_gbps * kGiga * model.cpu_mem_efficiency;
  const double cpu_mem_s = tool.cpu_bytes / std::max(1.0, host_bw * threads / cores);
  c.cpu_s = std::max(cpu_math_s, cpu_mem_s) + tool.ops * model.cpu_op_overhead_us * 1e-6;
  c.cpu_memory_bound = cpu_mem_s > cpu_math_s;
  c.cpu_core_share = threads / cores;
  // Bandwidth the CPU run draws from the whole host, as a fraction of it.
  c.cpu_bw_demand = c.cpu_s > 0 ? (tool.cpu_bytes / std::max(1.0, host_bw)) / c.cpu_s : 0;
  if (!tool.has_gpu) return c;

  // GPU: the shared GPU model's phase shapes on the whole device (no MPS cap: the tool runs
  // in its framework's own context), plus PCIe copies.
  const gpu::DeviceModel dev = gpu::device_model(device);
  c.h2d_s = gpu::pcie_copy_s(tool.input_bytes, dev);
  c.d2h_s = gpu::pcie_copy_s(tool.output_bytes, dev);
  const double flops_per_s = gpu::sustained_flops(device, tool.precision) * dev.compute_scale;
  const double element_bytes = activation_bytes_per_element(tool.precision);
  std::vector<GpuSegment> segments;
  if (tool.llm) {
    // An LLM call runs the simulator's engine steps: the prefill chunks, then one decode step
    // per output token at batch 1.
    const LlmCall& l = *tool.llm;
    const gpu::LlmRequestShapes r =
        gpu::llm_request_shapes(l.arch, l.prompt_tokens, l.output_tokens, l.prefill_chunk,
                                tool.precision, device, dev, dev.sms);
    segments.push_back({r.prefill, 1});
    segments.push_back({r.decode, r.decode_steps});
  } else {
    for (const ToolPhase& ph : tool.phases) {
      if (ph.repeats <= 0) continue;
      segments.push_back(
          {gpu::make_shape(ph.cost, dev, flops_per_s, element_bytes, dev.sms), ph.repeats});
    }
  }
  double busy_sms = 0, busy_bw = 0, busy_compute = 0;
  for (const GpuSegment& seg : segments) {
    const double alone = seg.repeats * seg.shape.alone_s;
    const double per_kernel =
        seg.repeats * seg.shape.kernels *
        (seg.shape.kernel_fixed_s + dev.launch_scale * gpu::launch_delay_s(1));
    c.launch_s += per_kernel;
    c.kernel_s += alone - per_kernel;
    c.kernels += seg.repeats * seg.shape.kernels;
    busy_sms += alone * seg.shape.sms / dev.sms;
    busy_bw += alone * seg.shape.bw_demand;
    busy_compute += alone * seg.shape.compute_fraction;
    c.segments.push_back(seg);
  }
  const double compute = c.compute_s();
  if (compute > 0) {
    c.sm_demand = busy_sms / compute;
    c.bw_demand = busy_bw / compute;
    c.power_activity = gpu::power_activity(c.sm_demand * dev.sms, busy_compute / compute, dev);
  }
  return c;
}

}  // namespace corun::mapping
