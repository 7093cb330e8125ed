#include "corun/runtime/pipeline.h"

#include <chrono>

#include "corun/catalog/catalog.h"
#include "corun/profile/campaign.h"
#include "corun/profile/dataset.h"
#include "corun/profile/progress.h"
#include "corun/surrogate/training.h"

namespace corun {
namespace {

Result<profile::CampaignReport> campaign(profile::Dataset& ds, const Workload& w,
                                         std::string_view text, const Testbed& testbed,
                                         const profile::CampaignSpec& spec, std::uint64_t budget,
                                         const PipelineOptions& o, std::string label) {
  const std::uint64_t total = profile::plan_size(w, spec.plan, budget);
  std::uint64_t stored = 0;
  if (auto cs = ds.campaigns(); cs.ok()) {
    for (const auto& c : *cs) {
      if (c.workload_hash == w.hash && c.spec.plan == spec.plan &&
          c.spec.context.seed == spec.context.seed && c.spec.testbed == spec.testbed &&
          c.spec.window_s == spec.window_s) {
        stored = std::min(c.stored_samples, total);
      }
    }
  }
  profile::Progress progress(o.log, o.terminal, std::move(label), total, stored);
  return profile::run_campaign(ds, w, text, testbed, spec, budget, &progress);
}

// Whether a stored model was fitted on this workload's samples with these settings.
bool matches(const surrogate::Surrogate& s, const Context& ctx, const Workload& w,
             const PipelineOptions& o, std::uint64_t corun_samples) {
  const auto& p = s.provenance();
  return p.workload_hash == w.hash && p.testbed == o.testbed && p.context.seed == ctx.seed &&
         p.corun_samples == corun_samples && s.kind() == o.kind &&
         s.regressor_kind() == o.regressor && s.monotone() == o.monotone &&
         s.check_workload(w).ok();
}

}  // namespace

Result<PipelineResult> profile_and_fit(const Context& ctx, const Workload& w,
                                       std::string_view workload_text, const Testbed& testbed,
                                       const PipelineOptions& o) {
  if (o.dataset.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(o.dataset.parent_path(), ec);
    if (ec) {
      return Error("cannot create " + o.dataset.parent_path().string() + ": " + ec.message(),
                   Error::Kind::kIo);
    }
  }
  auto ds = profile::Dataset::open(o.dataset, profile::Dataset::Mode::kCreate);
  if (!ds) return ds.error();
  PipelineResult r;
  const profile::CampaignSpec standalone{profile::Plan::kStandalone, ctx, o.testbed, o.window_s};
  auto a = campaign(*ds, w, workload_text, testbed, standalone, o.standalone_repeats, o,
                    "profile standalone");
  if (!a) return a.error().wrap("standalone campaign");
  r.standalone_total = a->total;
  r.standalone_measured = a->measured;
  const std::uint64_t budget = o.corun_budget > 0 ? o.corun_budget : 20 * w.models.size();
  const profile::CampaignSpec meanfield{profile::Plan::kMeanField, ctx, o.testbed, o.window_s};
  auto b = campaign(*ds, w, workload_text, testbed, meanfield, budget, o, "profile meanfield");
  if (!b) return b.error().wrap("meanfield campaign");
  r.corun_total = b->total;
  r.corun_measured = b->measured;

  auto data = surrogate::load_training_data(
      *ds, o.catalog != nullptr ? *o.catalog : Catalog::default_catalog(), w.hash, true);
  if (!data) return data.error();
  if (std::filesystem::exists(o.model)) {
    auto old = surrogate::Surrogate::load(o.model);
    if (old && matches(*old, ctx, w, o, data->corun.size())) {
      r.surrogate = std::move(*old);
      r.model_reused = true;
      return r;
    }
  }
  surrogate::FitOptions fit;
  fit.kind = o.kind;
  fit.regressor = o.regressor;
  fit.monotone = o.monotone;
  data->provenance.context = ctx;
  data->provenance.dataset = o.dataset.string();
  const auto start = std::chrono::steady_clock::now();
  auto s = surrogate::Surrogate::fit(ctx, w, data->standalone, data->corun, fit, data->provenance);
  if (!s) return s.error().wrap("fitting the surrogate");
  r.fit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (auto st = s->save(o.model); !st.ok()) return st.error();
  r.surrogate = std::move(*s);
  return r;
}

}  // namespace corun
