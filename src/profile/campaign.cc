#include "corun/profile/campaign.h"

#include <algorithm>

namespace corun::profile {

SampleRecord measure_sample(const Context& ctx, const Workload& w, const ConfigSpace& space,
                            const Testbed& testbed, Plan plan, double window_s,
                            std::uint64_t index) {
  SampleRecord r;
  r.index = index;
  r.config = plan_sample(ctx, w, space, plan, index);
  r.measurement_seed = measurement_seed(ctx, plan, index);
  Conditions c;
  c.interference = plan_cotenant(ctx, plan, index);
  r.measurement = testbed.measure(Context{.seed = r.measurement_seed}, w, r.config,
                                  MeasureOptions(window_s, c));
  return r;
}

std::vector<SampleRecord> measure_plan(const Context& ctx, const Workload& w,
                                       const Testbed& testbed, Plan plan, std::uint64_t budget,
                                       double window_s) {
  const ConfigSpace space(w);
  const std::uint64_t size = plan_size(w, plan, budget);
  std::vector<SampleRecord> out;
  out.reserve(size);
  for (std::uint64_t i = 0; i < size; ++i) {
    out.push_back(measure_sample(ctx, w, space, testbed, plan, window_s, i));
  }
  return out;
}

Result<CampaignReport> run_campaign(Dataset& dataset, const Workload& w,
                                    std::string_view workload_text, const Testbed& testbed,
                                    const CampaignSpec& spec, std::uint64_t budget,
                                    Progress* progress) {
  if (testbed.name() != spec.testbed) {
    return Error("campaign names testbed '" + spec.testbed + "' but runs on '" +
                 std::string(testbed.name()) + "'");
  }
  if (spec.plan != Plan::kStandalone && budget == 0) {
    return Error("--budget: a " + std::string(to_string(spec.plan)) +
                 " plan needs a budget of at least 1 joint configuration");
  }
  CampaignReport report;
  report.total = plan_size(w, spec.plan, budget);
  auto id = dataset.ensure_campaign(spec, w, workload_text, w.device.name, report.total);
  if (!id) return id.error();
  report.campaign = *id;
  auto stored = dataset.stored_indices(*id);
  if (!stored) return stored.error();
  std::vector<bool> have(report.total, false);
  for (auto i : *stored) {
    if (i < report.total) {
      have[i] = true;
      ++report.already_stored;
    }
  }
  if (progress != nullptr) progress->update(report.already_stored);
  const ConfigSpace space(w);
  const Context ctx{.seed = spec.context.seed};  // the campaign's seed: part of its identity
  std::uint64_t done = report.already_stored;
  for (std::uint64_t i = 0; i < report.total; ++i) {
    if (have[i]) continue;
    const SampleRecord r = measure_sample(ctx, w, space, testbed, spec.plan, spec.window_s, i);
    if (auto s = dataset.insert(*id, r); !s.ok()) return s.error();
    ++report.measured;
    if (!r.measurement.ok()) ++report.failed;
    ++done;
    if (progress != nullptr) progress->update(done);
  }
  if (progress != nullptr) progress->finish();
  return report;
}

}  // namespace corun::profile
