// Hot paths of the surrogate: batched prediction over many candidate joint configurations, as a
// solver calls it. Reports candidates/s (items) and model predictions/s (counter).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>

#include "corun/catalog/catalog.h"
#include "corun/core/rng.h"
#include "corun/profile/campaign.h"
#include "corun/surrogate/surrogate.h"

namespace corun {
namespace {

using surrogate::CompiledSurrogate;
using surrogate::RegressorKind;
using surrogate::SurrogateKind;

const Workload& paper_n5() {
  static const Workload w = [] {
    auto r = load_workload(CORUN_SOURCE_DIR "/workloads/paper-n5.yaml", Catalog::default_catalog());
    if (!r) std::abort();
    return std::move(r).value();
  }();
  return w;
}

// A surrogate fitted once per kind on simulator profiles (standalone + 100 co-run samples).
const CompiledSurrogate& compiled(SurrogateKind kind, RegressorKind reg) {
  static std::map<std::pair<SurrogateKind, RegressorKind>, CompiledSurrogate> cache;
  const auto key = std::make_pair(kind, reg);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const Workload& w = paper_n5();
  auto tb = make_testbed("sim");
  if (!tb) std::abort();
  auto table = surrogate::StandaloneTable::from_samples(
      w, profile::measure_plan(Context{.seed = 1}, w, **tb, profile::Plan::kStandalone, 1, 10));
  if (!table) std::abort();
  const auto corun =
      profile::measure_plan(Context{.seed = 1}, w, **tb, profile::Plan::kMeanField, 100, 10);
  surrogate::FitOptions o;
  o.kind = kind;
  o.regressor = reg;
  o.calibration_folds = 0;
  auto s = surrogate::Surrogate::fit(Context{}, w, *table, corun, o, {});  // seed 1
  if (!s) std::abort();
  auto c = CompiledSurrogate::compile(*s, w);
  if (!c) std::abort();
  return cache.emplace(key, std::move(*c)).first->second;
}

// Predicts state.range(0) random candidates per call (all five models running).
void predict_batch(benchmark::State& state, SurrogateKind kind, RegressorKind reg) {
  const CompiledSurrogate& c = compiled(kind, reg);
  const ConfigSpace space(paper_n5());
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<std::int32_t> configs(n * space.models());
  Rng rng(7);
  for (std::size_t i = 0; i < configs.size(); ++i) {
    configs[i] = static_cast<std::int32_t>(rng.below(space.local_counts()[i % space.models()]));
  }
  std::vector<float> out(n * space.models() * surrogate::kTargetCount);
  auto ws = c.make_workspace();
  for (auto _ : state) {
    c.predict(configs, out, ws);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
  state.counters["predictions/s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * n * space.models()), benchmark::Counter::kIsRate);
}

void BM_PredictMeanFieldMlp(benchmark::State& state) {
  predict_batch(state, SurrogateKind::kMeanField, RegressorKind::kMlp);
}
void BM_PredictMeanFieldGbdt(benchmark::State& state) {
  predict_batch(state, SurrogateKind::kMeanField, RegressorKind::kGbdt);
}
void BM_PredictMeanFieldLinear(benchmark::State& state) {
  predict_batch(state, SurrogateKind::kMeanField, RegressorKind::kLinear);
}
void BM_PredictJointMlp(benchmark::State& state) {
  predict_batch(state, SurrogateKind::kJoint, RegressorKind::kMlp);
}
BENCHMARK(BM_PredictMeanFieldMlp)->Arg(1)->Arg(256)->Arg(4096);
BENCHMARK(BM_PredictMeanFieldGbdt)->Arg(1)->Arg(4096);
BENCHMARK(BM_PredictMeanFieldLinear)->Arg(4096);
BENCHMARK(BM_PredictJointMlp)->Arg(4096);

}  // namespace
}  // namespace corun
