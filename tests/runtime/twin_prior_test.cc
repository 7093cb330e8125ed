// The catalog twin's priors say how far a GPU strays from its catalog description. They are
// checked here against the simulator's own perturbation (each hidden parameter 10-40 % off):
// over many perturbed GPUs, how large is a model's error shared by all its configurations, and
// how much does one configuration deviate from it? The priors must be of that size (within a
// factor of two): too small, and the first plans on a new GPU breach; too large, and corun
// never dares to move to a configuration it has not measured.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "corun/catalog/catalog.h"
#include "corun/runtime/twin_source.h"
#include "corun/testbed/sim.h"

namespace corun::twin_prior_test {
namespace {

struct Spread {
  double shared2 = 0, within2 = 0;
  int models = 0;
};

double value(const ModelMetrics& mm, Target t) {
  switch (t) {
    case Target::kTtftP95:
      return mm.ttft_ms_p95.value_or(NAN);
    case Target::kTpotP95:
      return mm.tpot_ms_p95.value_or(NAN);
    default:
      return mm.latency_ms_p95;
  }
}

TEST(TwinPrior, MatchesHowThePerturbedSimulatorStraysFromTheCatalog) {
  const Catalog& c = Catalog::default_catalog();
  std::map<std::pair<ModelFamily, Target>, Spread> spread;
  const SimTestbed twin;
  for (const char* file : {"paper-n5", "mix-a100", "mix-l4"}) {
    auto w = load_workload(std::string(CORUN_SOURCE_DIR) + "/workloads/" + file + ".yaml", c);
    ASSERT_TRUE(w.ok()) << w.error().what();
    for (std::uint64_t seed = 1; seed <= 30; ++seed) {
      const SimTestbed truth(SimTruth::perturbed(Context{.seed = seed}));
      for (std::size_t m = 0; m < w->models.size(); ++m) {
        const ModelSpec& spec = w->models[m];
        std::vector<Target> targets = {Target::kLatencyP95};
        if (spec.arch.family == ModelFamily::kLlm) targets = {Target::kTtftP95, Target::kTpotP95};
        for (Target t : targets) {
          std::vector<double> r;
          for (std::size_t l = 0; l < spec.local_config_count(); ++l) {
            JointConfig cfg(w->models.size(), kAbsent);
            cfg[m] = static_cast<std::int32_t>(l);
            const Measurement a = twin.measure(Context{}, *w, cfg, MeasureOptions(10, {}, false));
            const Measurement b = truth.measure(Context{}, *w, cfg, MeasureOptions(10, {}, false));
            if (!a.ok() || !b.ok()) continue;
            const double x = std::log(value(b.models[0], t) / value(a.models[0], t));
            if (std::isfinite(x)) r.push_back(x);
          }
          if (r.size() < 2) continue;
          double mean = 0;
          for (double x : r) mean += x;
          mean /= static_cast<double>(r.size());
          double var = 0;
          for (double x : r) var += (x - mean) * (x - mean);
          auto& s = spread[{spec.arch.family, t}];
          s.shared2 += mean * mean;
          s.within2 += var / static_cast<double>(r.size() - 1);
          ++s.models;
        }
      }
    }
  }
  ASSERT_GE(spread.size(), 4u);
  for (const auto& [key, s] : spread) {
    const auto [family, t] = key;
    const ErrorPrior p = twin_prior(family, t);
    const double shared = std::sqrt(s.shared2 / s.models);
    const double within = std::sqrt(s.within2 / s.models);
    SCOPED_TRACE(std::string(to_string(family)) + " " + std::string(surrogate::to_string(t)));
    EXPECT_GT(p.shared_sd, 0.5 * shared);
    EXPECT_LT(p.shared_sd, 2.0 * shared);
    EXPECT_GT(p.config_sd, 0.5 * within);
    EXPECT_LT(p.config_sd, 2.0 * within);
  }
}

}  // namespace
}  // namespace corun::twin_prior_test
