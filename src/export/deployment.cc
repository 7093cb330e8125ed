// The numbers every export format shares, derived once per planned model from the catalog
// cost model (space layer) and the plan's knobs. How each is derived is documented on its
// field in deployment.h and in docs/export.md.

#include "corun/export/deployment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "corun/catalog/model.h"
#include "corun/core/version.h"
#include "corun/space/space.h"

namespace corun::exporting {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string fixed_gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", bytes / 1e9);
  return buf;
}

// 1e-9 absorbs the binary representation of decimal knob values: 1 / (1 - 0.5) is 2 exactly,
// but 1 / (1 - 0.8) is 5.000000000000001, which must stay a stride of 5.
int frame_stride(double skip_rate) {
  const double keep = 1.0 - skip_rate;
  if (keep <= 0) return 1;
  return std::max(1, static_cast<int>(std::ceil(1.0 / keep - 1e-9)));
}

// The integer multiple of `granule` at or above `n`.
int round_up(long long n, int granule) {
  return static_cast<int>((n + granule - 1) / granule * granule);
}

// vLLM's --max-model-len for an LLM's demand (ModelDeployment::max_model_len).
int max_model_len(const Demand& d) {
  if (d.prompt_tokens + d.output_tokens <= 0) return 0;
  // A maximum is at least its mean when the workload is read; a timeline `context` event may
  // raise the mean past it later, and then the mean bounds the request instead.
  const long long prompt = d.max_prompt_tokens > 0
                               ? std::max(d.max_prompt_tokens, d.prompt_tokens)
                               : static_cast<long long>(kMaxModelLenMeanMultiple) * d.prompt_tokens;
  const long long output = d.max_output_tokens > 0
                               ? std::max(d.max_output_tokens, d.output_tokens)
                               : static_cast<long long>(kMaxModelLenMeanMultiple) * d.output_tokens;
  return round_up(prompt + output, kMaxModelLenGranule);
}

// --gpu-memory-utilization of an LLM and the warnings of its KV cache: the plan's budget,
// raised (rounded up to 0.001) to hold request_concurrency sequences of max_model_len tokens
// when `slack_bytes` (memory nobody budgets) allows, else raised by the slack only. Returns the
// bytes taken from the slack.
double size_llm_memory(ModelDeployment& d, double device_bytes, double slack_bytes) {
  const double extra = d.kv_bytes_at_max_len - d.vram_bytes;
  if (extra <= 0 || device_bytes <= 0) return 0;
  const double wanted = std::ceil(d.kv_bytes_at_max_len / device_bytes * 1000.0) / 1000.0;
  const double granted_bytes = wanted * device_bytes - d.vram_bytes;
  if (granted_bytes <= slack_bytes) {
    d.vram_fraction = std::min(1.0, wanted);
    return granted_bytes;
  }
  const double fraction =
      std::floor((d.vram_bytes + std::max(0.0, slack_bytes)) / device_bytes * 1000.0) / 1000.0;
  d.vram_fraction = std::clamp(std::max(fraction, d.vram_fraction), 0.001, 1.0);
  const double kv_per_token = kv_bytes_per_token(d.spec->arch, d.settings.precision);
  const double kv_room = d.vram_fraction * device_bytes -
                         (d.vram_bytes - llm_kv_cache_bytes(*d.spec, d.settings, device_bytes));
  const double full_length = kv_per_token > 0 ? kv_room / (kv_per_token * d.max_model_len) : 0;
  const int fits = static_cast<int>(std::floor(std::max(0.0, full_length)));
  std::string w = "the KV cache of " + std::to_string(d.settings.request_concurrency) +
                  " sequences of --max-model-len " + std::to_string(d.max_model_len) +
                  " tokens needs " + fixed_gb(d.kv_bytes_at_max_len) + " GB; the GPU has " +
                  fixed_gb(d.vram_fraction * device_bytes) + " GB for this model (its budget and " +
                  "the memory no model of the plan uses), which holds " + std::to_string(fits) +
                  " full-length sequence" + (fits == 1 ? "" : "s") + " at once";
  w += fits == 0 ? ": vLLM will refuse to start; lower max_prompt_tokens/max_output_tokens"
                 : ": vLLM queues or preempts the rest; lower the maximum lengths or "
                   "request_concurrency, or give the model a GPU of its own";
  d.warnings.push_back(std::move(w));
  return std::max(0.0, slack_bytes);
}

}  // namespace

TritonServer triton_server(const std::vector<ModelDeployment>& models) {
  TritonServer t;
  int percentage = 0;
  for (std::size_t i = 0; i < models.size(); ++i) {
    const ModelDeployment& d = models[i];
    if (d.server != Server::kTriton) continue;
    if (t.models.empty()) t.port = d.port;
    t.models.push_back(i);
    t.mps_mem_limit_mib += d.mps_mem_limit_mib;
    percentage += d.mps_active_thread_percentage;
  }
  t.mps_mem_limit_mib = std::max(t.mps_mem_limit_mib, kMpsMemoryFloorMib);
  t.mps_active_thread_percentage = std::clamp(percentage, 1, 100);
  return t;
}

ExportOptions default_export_options() {
  ExportOptions o;
  o.generator = "corun " + std::string(version()) + " (" + std::string(git_hash()) + ")";
  return o;
}

std::vector<ModelDeployment> plan_deployment(const PlanInput& plan, const ExportOptions& options) {
  std::vector<ModelDeployment> out;
  const double device_bytes = plan.workload.device.vram_bytes();
  int position = 0;
  for (const PlannedModel& p : plan.models) {
    const ModelSpec& spec = plan.spec(p);
    ModelDeployment d;
    d.spec = &spec;
    d.settings = p.settings;
    d.settings_text = spec.describe(p.local_index);
    d.server = spec.arch.family == ModelFamily::kLlm ? Server::kVllm : Server::kTriton;
    d.gateway_port = options.base_port + kGatewayPortOffset + position;
    d.port = options.base_port + position++;

    d.vram_bytes = model_vram_bytes(spec, p.settings, device_bytes);
    const double fraction = device_bytes > 0 ? d.vram_bytes / device_bytes : 1.0;
    d.vram_fraction = std::clamp(std::floor(fraction * 1000.0) / 1000.0, 0.001, 1.0);
    d.mps_mem_limit_mib = static_cast<std::int64_t>(std::ceil(d.vram_bytes / kMiB));
    d.mps_active_thread_percentage =
        std::clamp(static_cast<int>(std::lround(p.settings.sm_share)), 1, 100);

    const Demand& demand = spec.demand;
    const int batch = std::max(1, p.settings.batch);
    switch (spec.arch.family) {
      case ModelFamily::kVision:
        d.vid_stride = frame_stride(p.settings.skip_rate);
        d.input_rate_per_s = demand.fps * (1.0 - p.settings.skip_rate);
        break;
      case ModelFamily::kEncoder:
      case ModelFamily::kSpeech:
        d.input_rate_per_s = demand.rps;
        break;
      case ModelFamily::kLlm:
        d.input_rate_per_s = demand.rps;
        d.max_model_len = max_model_len(demand);
        // The budget with the KV cache of request_concurrency full-length sequences in place
        // of the one it holds (a KV-limited budget holds fewer than request_concurrency).
        d.kv_bytes_at_max_len =
            d.vram_bytes - llm_kv_cache_bytes(spec, p.settings, device_bytes) +
            std::max(0, p.settings.request_concurrency) * static_cast<double>(d.max_model_len) *
                kv_bytes_per_token(spec.arch, p.settings.precision);
        break;
    }
    if (spec.arch.family != ModelFamily::kLlm && batch > 1 && d.input_rate_per_s > 0) {
      d.queue_delay_us = std::llround(static_cast<double>(batch - 1) / d.input_rate_per_s * 1e6);
    }
    d.admitted = p.admitted;
    out.push_back(std::move(d));
  }

  // The memory no model budgets, less the CUDA-graph headroom every vLLM server keeps beyond
  // its --gpu-memory-utilization: what an LLM's KV cache at --max-model-len may grow into.
  double slack = device_bytes;
  for (const auto& d : out) {
    slack -= d.vram_bytes + (d.server == Server::kVllm ? kCudaGraphHeadroomBytes : 0.0);
  }
  for (auto& d : out) {
    if (d.server == Server::kVllm) slack -= size_llm_memory(d, device_bytes, slack);
  }
  // One Triton server per GPU hosts every Triton model: they are reached on its port.
  int triton_port = 0;
  for (auto& d : out) {
    if (d.server == Server::kVllm) {
      const double limit = d.vram_fraction * device_bytes + kCudaGraphHeadroomBytes;
      d.mps_mem_limit_mib =
          std::max(kMpsMemoryFloorMib,
                   static_cast<std::int64_t>(std::max(std::ceil(limit / kMiB),
                                                      static_cast<double>(d.mps_mem_limit_mib))));
    } else {
      if (triton_port == 0) triton_port = d.port;
      d.port = triton_port;
    }
  }
  return out;
}

}  // namespace corun::exporting
