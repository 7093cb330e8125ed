#include "corun/mapping/corunners.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "corun/mapping/guard.h"

namespace corun::mapping {

Result<CoRunners> CoRunners::measure(const Context& ctx, exporting::PlanInput plan,
                                     const Testbed& testbed, double window_s) {
  CoRunners c;
  c.config.assign(plan.workload.models.size(), kAbsent);
  for (const exporting::PlannedModel& p : plan.models) {
    c.config[p.model] = static_cast<std::int32_t>(p.local_index);
  }
  c.context = ctx;
  c.window_s = window_s;
  c.testbed = std::string(testbed.name());
  c.measured = testbed.measure(ctx, plan.workload, c.config, MeasureOptions(window_s));
  if (!c.measured.error.empty()) {
    return Error(plan.plan_file + ": the co-running plan did not run on " +
                     std::string(testbed.name()) + ": " + c.measured.error,
                 Error::Kind::kInvalidInput);
  }
  c.plan = std::move(plan);
  return c;
}

std::size_t CoRunners::running() const {
  return static_cast<std::size_t>(
      std::count_if(config.begin(), config.end(), [](std::int32_t l) { return l != kAbsent; }));
}

gpu::Load CoRunners::load(const gpu::DeviceModel& dev) const {
  // The measurement reports bandwidth as a fraction of the datasheet value; the GPU model
  // counts demand in units of the achievable bandwidth.
  const double bw = measured.gpu.mem_bw_util * dev.peak_dram_bytes_s / dev.dram_bytes_s;
  gpu::Load l = gpu::cotenant_load(dev, measured.gpu.sm_util, bw);
  if (l.active > 0) l.active = static_cast<double>(running());
  return l;
}

std::string SlaOutcome::describe() const {
  char buf[200];
  const double change = sla != 0 ? 100 * (during / sla - 1) : 0;
  std::snprintf(buf, sizeof buf, "%s %s %.1f %s %.1f (%+.1f %%)", model.c_str(), metric.c_str(),
                during, metric == "min_throughput" ? "<" : ">", sla, change);
  return buf;
}

double SlaOutcome::excess() const {
  if (sla == 0) return 0;
  return metric == "min_throughput" ? 1 - during / sla : during / sla - 1;
}

nlohmann::json to_json(const SlaOutcome& o) {
  return {{"model", o.model},
          {"metric", o.metric},
          {"sla", o.sla},
          {"alone", o.alone},
          {"during", o.during},
          {"excess", o.excess()},
          {"breached", o.breached},
          {"breached_alone", o.breached_alone},
          {"describe", o.describe()}};
}

std::vector<SlaOutcome> compare_slas(const Workload& workload, std::span<const ModelMetrics> alone,
                                     std::span<const ModelMetrics> during) {
  std::vector<SlaOutcome> out;
  for (std::size_t k = 0; k < during.size() && k < alone.size(); ++k) {
    const ModelMetrics& now = during[k];
    const ModelMetrics& before = alone[k];
    const Sla& sla = workload.models[now.model].sla;
    const auto add = [&](const char* metric, const std::optional<double>& bound, double was,
                         double is, bool lower_is_bad) {
      if (!bound) return;
      SlaOutcome o{now.name, metric, *bound, was, is, false, false};
      const auto violates = [&](double v) { return lower_is_bad ? v < *bound : v > *bound; };
      o.breached_alone = violates(was);
      o.breached = violates(is) && !o.breached_alone;
      out.push_back(std::move(o));
    };
    add("latency_ms_p95", sla.latency_ms_p95, before.latency_ms_p95, now.latency_ms_p95, false);
    add("ttft_ms_p95", sla.ttft_ms_p95, before.ttft_ms_p95.value_or(0), now.ttft_ms_p95.value_or(0),
        false);
    add("tpot_ms_p95", sla.tpot_ms_p95, before.tpot_ms_p95.value_or(0), now.tpot_ms_p95.value_or(0),
        false);
    add("min_throughput", sla.min_throughput, before.throughput, now.throughput, true);
  }
  return out;
}

Result<std::vector<SlaOutcome>> CoRunners::during(const BurstLoad& burst, const Testbed& tb) const {
  Measurement with = measured;
  if (burst.any()) {
    Conditions c;
    c.interference.sm_util = burst.sm_util;
    c.interference.bandwidth_util = burst.bw_util;
    with = tb.measure(context, plan.workload, config, MeasureOptions(window_s, c));
    if (!with.ok()) {
      return Error(plan.plan_file +
                   ": the co-running plan did not run next to the tools: " + with.error);
    }
  }
  return compare_slas(plan.workload, measured.models, with.models);
}

std::vector<SlaOutcome> breaches(const std::vector<SlaOutcome>& outcomes) {
  std::vector<SlaOutcome> out;
  for (const SlaOutcome& o : outcomes) {
    if (o.breached) out.push_back(o);
  }
  return out;
}

double worst_excess(const std::vector<SlaOutcome>& outcomes) {
  double worst = 0;
  for (const SlaOutcome& o : outcomes) {
    if (o.breached) worst = std::max(worst, o.excess());
  }
  return worst;
}

Result<std::shared_ptr<const CoRunners>> load_corunners(const Context& ctx,
                                                        const std::filesystem::path& plan_file,
                                                        const std::string& workload_file,
                                                        const Catalog& catalog,
                                                        const Testbed& testbed) {
  auto plan = exporting::load_plan_input(plan_file, workload_file, catalog);
  if (!plan) return plan.error();
  return guarded_corunners(ctx, std::move(*plan), testbed);
}

Result<std::shared_ptr<const CoRunners>> guarded_corunners(const Context& ctx,
                                                           exporting::PlanInput plan,
                                                           const Testbed& testbed) {
  auto c = CoRunners::measure(ctx, std::move(plan), testbed);
  if (!c) return c.error();
  auto guard = CoRunnerGuard::fit(*c, testbed);
  if (!guard) return guard.error();
  c->guard = std::make_shared<const CoRunnerGuard>(std::move(*guard));
  return std::make_shared<const CoRunners>(std::move(*c));
}

Result<std::shared_ptr<const CoRunners>> scenario_corunners(const Scenario& scenario,
                                                            const Catalog& catalog,
                                                            const Testbed& testbed) {
  if (scenario.co_running.plan.empty()) return std::shared_ptr<const CoRunners>();
  const std::filesystem::path dir = std::filesystem::path(scenario.file).parent_path();
  const auto resolve = [&](const std::string& f) {
    return f.empty() || std::filesystem::path(f).is_absolute() ? f : (dir / f).string();
  };
  auto c = load_corunners(scenario.context, resolve(scenario.co_running.plan),
                          resolve(scenario.co_running.workload), catalog, testbed);
  if (!c) return c.error().wrap(scenario.file + ": co_running");
  return c;
}

}  // namespace corun::mapping
