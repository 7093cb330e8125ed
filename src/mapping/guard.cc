#include "corun/mapping/guard.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <utility>

#include "corun/core/mutex.h"
#include "corun/core/rng.h"
#include "corun/profile/campaign.h"
#include "corun/surrogate/cotenant.h"
#include "corun/surrogate/targets.h"

namespace corun::mapping {
namespace {

using surrogate::Target;
using surrogate::Totals;

// Seed stream of the co-tenant campaign (distinct from the co-run campaign's).
constexpr std::uint64_t kCoTenantStream = 0xc07e;

// One CompiledSurrogate shared by every caller. Each prediction borrows a workspace from a pool
// of this surrogate's own, so that concurrent predictions never share scratch buffers and no
// prediction pays for a new one: a workspace holds the cell cache (8 MiB, zeroed when made),
// whose entries stay valid for this surrogate (a cell's outputs depend on its inputs alone).
class SurrogatePredictor final : public AggregatePredictor {
 public:
  explicit SurrogatePredictor(surrogate::CompiledSurrogate s) : s_(std::move(s)) {}

  void predict(std::size_t m, std::size_t l, const Totals& others,
               std::span<double> out) const override {
    std::unique_ptr<Workspace> ws = borrow();
    std::array<float, surrogate::kTargetCount> v{};
    s_.predict_given(m, l, others, v, *ws);
    for (std::size_t t = 0; t < v.size() && t < out.size(); ++t) out[t] = v[t];
    give_back(std::move(ws));
  }
  [[nodiscard]] Totals contribution(std::size_t m, std::size_t l) const override {
    return s_.contribution(m, l);
  }

 private:
  using Workspace = surrogate::CompiledSurrogate::Workspace;
  // At most this many idle workspaces are kept (one per thread that predicts at once).
  static constexpr std::size_t kPooled = 8;

  std::unique_ptr<Workspace> borrow() const CORUN_EXCLUDES(pool_mutex_) {
    {
      MutexLock lock(pool_mutex_);
      if (!pool_.empty()) {
        std::unique_ptr<Workspace> ws = std::move(pool_.back());
        pool_.pop_back();
        return ws;
      }
    }
    return std::make_unique<Workspace>(s_.make_workspace());
  }
  void give_back(std::unique_ptr<Workspace> ws) const CORUN_EXCLUDES(pool_mutex_) {
    MutexLock lock(pool_mutex_);
    if (pool_.size() < kPooled) pool_.push_back(std::move(ws));
  }

  surrogate::CompiledSurrogate s_;
  mutable Mutex pool_mutex_;
  mutable std::vector<std::unique_ptr<Workspace>> pool_ CORUN_GUARDED_BY(pool_mutex_);
};

// The measured value of target t scaled by the predicted slowdown; the raw prediction when
// nothing was measured (or the surrogate cannot say for the plan alone).
double anchored(double measured, double with_burst, double without) {
  if (!std::isfinite(with_burst)) return measured;
  if (std::isfinite(measured) && measured > 0 && std::isfinite(without) && without > 0) {
    return measured * with_burst / without;
  }
  return with_burst;
}

}  // namespace

Result<std::shared_ptr<const AggregatePredictor>> surrogate_predictor(
    surrogate::CompiledSurrogate compiled) {
  if (!compiled.mean_field()) {
    return Error(
        "a joint surrogate has no aggregate state to add the tools to: protect the co-runners "
        "with a meanfield, pairwise or crossmodel surrogate",
        Error::Kind::kInvalidInput);
  }
  return std::shared_ptr<const AggregatePredictor>(
      std::make_shared<SurrogatePredictor>(std::move(compiled)));
}

CoRunnerGuard::CoRunnerGuard(const CoRunners& co, std::shared_ptr<const AggregatePredictor> p,
                             std::string source)
    : predictor_(std::move(p)),
      workload_(co.plan.workload),
      config_(co.config),
      alone_(co.measured.models),
      source_(std::move(source)) {}

Result<CoRunnerGuard> CoRunnerGuard::fit(const CoRunners& co, const Testbed& testbed,
                                         const GuardFitOptions& o) {
  const Workload& w = co.plan.workload;
  const std::string where = co.plan.plan_file + ": co-runner surrogate";
  const Context ctx{.seed = co.context.seed};
  const auto alone = profile::measure_plan(ctx, w, testbed, profile::Plan::kStandalone,
                                           o.standalone_repeats, co.window_s);
  auto table = surrogate::StandaloneTable::from_samples(w, alone);
  if (!table) return table.error().wrap(where);
  const std::uint64_t budget = o.corun_budget > 0 ? o.corun_budget : 20 * w.models.size();
  auto corun =
      profile::measure_plan(ctx, w, testbed, profile::Plan::kMeanField, budget, co.window_s);
  // The workload's own co-runs never load the GPU the way a tool burst does (a whole GPU's
  // worth of SMs on top of the plan): profile the plan in force again next to a synthetic
  // co-tenant of random SM share and bandwidth, entered in the aggregate as a burst will be.
  std::vector<Totals> cotenants(corun.size());  // the plain co-runs: none
  const std::uint64_t stream = derive_seed(co.context.seed, {kCoTenantStream});
  Rng rng(stream);
  const std::uint64_t loaded = o.cotenant_budget > 0 ? o.cotenant_budget : budget;
  for (std::uint64_t i = 0; i < loaded; ++i) {
    profile::SampleRecord r;
    r.index = budget + i;
    r.config = co.config;
    r.measurement_seed = derive_seed(stream, {i});
    Conditions c;
    c.interference.sm_util = rng.uniform();
    c.interference.bandwidth_util = o.max_cotenant_bw_util * rng.uniform();
    r.measurement = testbed.measure(Context{.seed = r.measurement_seed}, w, r.config,
                                    MeasureOptions(co.window_s, c));
    cotenants.push_back(surrogate::cotenant_totals(w.device, c.interference));
    corun.push_back(std::move(r));
  }
  surrogate::FitOptions fit;
  fit.kind = o.kind;
  fit.regressor = o.regressor;
  // Monotone in the others' aggregate, as `corun run` fits it: adding the tools to the
  // aggregate can then never be predicted to help a co-runner.
  fit.monotone = o.regressor != surrogate::RegressorKind::kMlp;
  // The guard uses point predictions anchored on the plan's measurement, not the error model.
  fit.calibration_folds = 0;
  surrogate::Provenance prov;
  prov.testbed = std::string(testbed.name());
  prov.device = w.device.name;
  prov.context = co.context;
  prov.workload_hash = w.hash;
  prov.workload_name = w.file;
  prov.standalone_measurements = table->measurements();
  prov.corun_samples = corun.size();
  auto s = surrogate::Surrogate::fit(Context{.seed = co.context.seed}, w, *table, corun, fit, prov,
                                     cotenants);
  if (!s) return s.error().wrap(where);
  const std::string source = "meanfield " + std::string(surrogate::to_string(o.regressor)) +
                             " fitted on " + prov.testbed + " (seed " +
                             std::to_string(co.context.seed) + ", " +
                             std::to_string(prov.standalone_measurements) +
                             " standalone measurements, " + std::to_string(budget) + " co-runs, " +
                             std::to_string(loaded) + " next to a synthetic co-tenant)";
  return from_surrogate(co, *s, source);
}

Result<CoRunnerGuard> CoRunnerGuard::from_surrogate(const CoRunners& co,
                                                    const surrogate::Surrogate& s,
                                                    std::string source) {
  auto compiled = surrogate::CompiledSurrogate::compile(s, co.plan.workload);
  if (!compiled) return compiled.error().wrap(co.plan.plan_file + ": co-runner surrogate");
  auto p = surrogate_predictor(std::move(*compiled));
  if (!p) return p.error().wrap(co.plan.plan_file + ": co-runner surrogate");
  return CoRunnerGuard(co, std::move(*p), std::move(source));
}

Totals CoRunnerGuard::burst_contribution(const BurstLoad& burst) const {
  return burst.any() ? surrogate::cotenant_totals(workload_.device, {burst.sm_util, burst.bw_util})
                     : Totals{};
}

std::vector<SlaOutcome> CoRunnerGuard::predict(const BurstLoad& burst) const {
  std::vector<ModelMetrics> during = alone_;
  if (burst.any()) {
    const Totals tools = burst_contribution(burst);
    std::array<double, surrogate::kTargetCount> with{}, without{};
    for (ModelMetrics& m : during) {
      if (!m.ok()) continue;
      Totals others;
      for (std::size_t j = 0; j < config_.size(); ++j) {
        if (j == m.model || config_[j] == kAbsent) continue;
        others += predictor_->contribution(j, static_cast<std::size_t>(config_[j]));
      }
      const auto l = static_cast<std::size_t>(config_[m.model]);
      predictor_->predict(m.model, l, others, without);
      predictor_->predict(m.model, l, others + tools, with);
      const auto at = [&](Target t) { return static_cast<std::size_t>(t); };
      const auto scale = [&](Target t, double measured) {
        return anchored(measured, with[at(t)], without[at(t)]);
      };
      m.latency_ms_p95 = scale(Target::kLatencyP95, m.latency_ms_p95);
      m.throughput = scale(Target::kThroughput, m.throughput);
      if (m.ttft_ms_p95) m.ttft_ms_p95 = scale(Target::kTtftP95, *m.ttft_ms_p95);
      if (m.tpot_ms_p95) m.tpot_ms_p95 = scale(Target::kTpotP95, *m.tpot_ms_p95);
    }
  }
  return compare_slas(workload_, alone_, during);
}

std::vector<SlaOutcome> predicted_breaches(const CoRunnerGuard& guard, const BurstLoad& burst) {
  return breaches(guard.predict(burst));
}

}  // namespace corun::mapping
