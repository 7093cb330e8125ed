#include "corun/runtime/refit.h"

namespace corun {

namespace {

bool same_demands(const Workload& a, const Workload& b) {
  if (a.models.size() != b.models.size()) return false;
  for (std::size_t m = 0; m < a.models.size(); ++m) {
    if (a.models[m].demand != b.models[m].demand) return false;
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<BackgroundRefit>> BackgroundRefit::open(
    const std::filesystem::path& dataset, const Catalog& catalog,
    const surrogate::Surrogate& fitted) {
  auto ds = profile::Dataset::open(dataset, profile::Dataset::Mode::kReadOnly);
  if (!ds) return ds.error();
  auto data = surrogate::load_training_data(*ds, catalog, fitted.provenance().workload_hash,
                                            fitted.kind() != surrogate::SurrogateKind::kJoint);
  if (!data) return data.error().wrap("reading the campaigns to refit on");
  std::unique_ptr<BackgroundRefit> r(new BackgroundRefit());
  r->data_ = std::move(*data);
  // The refit draws from the seed `fitted` was fitted with (Context::seed, recorded here).
  r->data_.provenance.context = fitted.provenance().context;
  r->fit_.kind = fitted.kind();
  r->fit_.regressor = fitted.regressor_kind();
  r->fit_.monotone = fitted.monotone();
  return r;
}

BackgroundRefit::~BackgroundRefit() {
  if (job_.valid()) job_.wait();
}

void BackgroundRefit::add(const Workload& current, const JointConfig& config,
                          const Measurement& m, const Context& interval) {
  if (!same_demands(current, data_.workload) || config.size() != data_.workload.models.size()) {
    return;
  }
  profile::SampleRecord rec;
  rec.index = online_.size();
  rec.config = config;
  rec.measurement_seed = interval.seed;
  rec.measurement = m;
  online_.push_back(std::move(rec));
}

void BackgroundRefit::start() {
  if (job_.valid()) return;
  std::vector<profile::SampleRecord> rows = data_.corun;
  rows.insert(rows.end(), online_.begin(), online_.end());
  // The online intervals ran without a synthetic co-tenant.
  std::vector<surrogate::Totals> cotenants = data_.cotenants;
  if (!cotenants.empty()) cotenants.resize(rows.size());
  used_ = online_.size();
  surrogate::Provenance prov = data_.provenance;
  // Fitted with the seed of the surrogate it replaces (set as the provenance's in open()).
  const Context ctx{.seed = prov.context.seed};
  job_ = std::async(std::launch::async,
                    [ctx, w = data_.workload, table = data_.standalone, rows = std::move(rows),
                     cotenants = std::move(cotenants), fit = fit_,
                     prov = std::move(prov)]() -> Result<surrogate::Surrogate> {
                      return surrogate::Surrogate::fit(ctx, w, table, rows, fit, prov, cotenants);
                    });
}

std::optional<Result<surrogate::Surrogate>> BackgroundRefit::wait() {
  if (!job_.valid()) return std::nullopt;
  return job_.get();
}

}  // namespace corun
