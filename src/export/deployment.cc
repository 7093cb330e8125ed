// The numbers every export format shares, derived once per planned model from the catalog
// cost model (space layer) and the plan's knobs. How each is derived is documented on its
// field in deployment.h and in docs/export.md.

#include "corun/export/deployment.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "corun/core/version.h"
#include "corun/space/space.h"

namespace corun::exporting {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// 1e-9 absorbs the binary representation of decimal knob values: 1 / (1 - 0.5) is 2 exactly,
// but 1 / (1 - 0.8) is 5.000000000000001, which must stay a stride of 5.
int frame_stride(double skip_rate) {
  const double keep = 1.0 - skip_rate;
  if (keep <= 0) return 1;
  return std::max(1, static_cast<int>(std::ceil(1.0 / keep - 1e-9)));
}

}  // namespace

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
    d.port = options.base_port + position++;

    d.vram_bytes = model_vram_bytes(spec, p.settings);
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
        d.max_model_len = demand.prompt_tokens + demand.output_tokens;
        break;
    }
    if (spec.arch.family != ModelFamily::kLlm && batch > 1 && d.input_rate_per_s > 0) {
      d.queue_delay_us = std::llround(static_cast<double>(batch - 1) / d.input_rate_per_s * 1e6);
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace corun::exporting
