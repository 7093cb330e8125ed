// Surrogates fitted on simulator data: MeanField features are the aggregates of standalone
// profiles, the compiled batch predictor agrees with itself one candidate at a time, model
// files round-trip, and workload mismatches are refused.
#include "corun/surrogate/surrogate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "../core/temp_dir.h"
#include "corun/catalog/catalog.h"
#include "corun/core/rng.h"
#include "corun/profile/campaign.h"

namespace corun::surrogate::surrogate_test {
namespace {

Workload load(const std::string& name) {
  auto w = load_workload(std::string(CORUN_SOURCE_DIR) + "/workloads/" + name,
                         Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().what());
  return std::move(w).value();
}

// Profiles of paper-n3 shared by the tests (measured once: the simulator is deterministic).
struct Data {
  Workload w;
  StandaloneTable table;
  std::vector<profile::SampleRecord> corun;
};

const Data& data() {
  static const Data d = [] {
    Data out;
    out.w = load("paper-n3.yaml");
    auto tb = make_testbed("sim");
    const auto standalone =
        profile::measure_plan(Context{.seed = 1}, out.w, **tb, profile::Plan::kStandalone, 2, 10);
    auto t = StandaloneTable::from_samples(out.w, standalone);
    EXPECT_TRUE(t.ok());
    out.table = std::move(*t);
    out.corun =
        profile::measure_plan(Context{.seed = 1}, out.w, **tb, profile::Plan::kMeanField, 60, 10);
    return out;
  }();
  return d;
}

Surrogate fit(SurrogateKind kind, RegressorKind reg, std::uint64_t seed = 1, int folds = 3) {
  FitOptions o;
  o.kind = kind;
  o.regressor = reg;
  o.calibration_folds = folds;
  o.regressor_options.mlp.max_steps = 600;
  o.regressor_options.gbdt.rounds = 40;
  Provenance p;
  p.testbed = "sim";
  p.device = "rtx3090";
  auto s = Surrogate::fit(Context{.seed = seed}, data().w, data().table, data().corun, o, p);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
  return std::move(s).value();
}

std::size_t index_of(const std::vector<std::string>& names, const std::string& n) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == n) return i;
  }
  ADD_FAILURE() << "no feature " << n;
  return 0;
}

TEST(StandaloneTable, AveragesRepeatsAsGeometricMeans) {
  const Data& d = data();
  EXPECT_EQ(d.table.measurements(), 2u * (12 + 9 + 9));
  // Recompute one entry by hand from the two passes.
  auto tb = make_testbed("sim");
  const auto standalone =
      profile::measure_plan(Context{.seed = 1}, d.w, **tb, profile::Plan::kStandalone, 2, 10);
  const std::size_t pass = 30;
  const auto& a = standalone[13].measurement;  // model 1 (cam0), local 1, first pass
  const auto& b = standalone[13 + pass].measurement;
  ASSERT_EQ(standalone[13].config, standalone[13 + pass].config);
  const double expect = std::sqrt(a.models[0].latency_ms_p95 * b.models[0].latency_ms_p95);
  EXPECT_NEAR(d.table.at(1, 1).target[static_cast<std::size_t>(Target::kLatencyP95)], expect,
              1e-9 * expect);
  EXPECT_NEAR(d.table.at(1, 1).sm_util, 0.5 * (a.gpu.sm_util + b.gpu.sm_util), 1e-12);
  EXPECT_EQ(d.table.at(1, 1).measurements, 2u);
}

TEST(Features, MeanFieldAggregatesAreSumsOverTheOthersStandaloneProfiles) {
  const Data& d = data();
  auto fm = FeatureMap::build(SurrogateKind::kMeanField, d.w, d.table);
  ASSERT_TRUE(fm.ok());
  const JointConfig c = {5, 2, 7};
  std::vector<float> x(fm->dim(0));
  fm->fill(0, c, fm->totals(c), Target::kTtftP95, x.data());
  const auto& names = fm->names(0);
  const StandaloneProfile& p1 = d.table.at(1, 2);
  const StandaloneProfile& p2 = d.table.at(2, 7);
  EXPECT_FLOAT_EQ(x[index_of(names, "others.count")], 2.0f);
  EXPECT_FLOAT_EQ(x[index_of(names, "others.sm_util")],
                  static_cast<float>(p1.sm_util + p2.sm_util));
  EXPECT_FLOAT_EQ(x[index_of(names, "others.mem_bw_util")],
                  static_cast<float>(p1.mem_bw_util + p2.mem_bw_util));
  EXPECT_FLOAT_EQ(x[index_of(names, "others.vram_gb")],
                  static_cast<float>(p1.vram_gb + p2.vram_gb));
  EXPECT_FLOAT_EQ(x[index_of(names, "others.occupancy")],
                  static_cast<float>(p1.occupancy + p2.occupancy));
  EXPECT_FLOAT_EQ(x[index_of(names, "self.sm_util")], static_cast<float>(d.table.at(0, 5).sm_util));
  EXPECT_FLOAT_EQ(x[index_of(names, "knob.request_concurrency")],
                  static_cast<float>(d.w.models[0].settings(5).request_concurrency));
  // Swapping which co-runner holds which share does not change the aggregate view.
  const JointConfig absent = {5, kAbsent, 7};
  std::vector<float> y(fm->dim(0));
  fm->fill(0, absent, fm->totals(absent), Target::kTtftP95, y.data());
  EXPECT_FLOAT_EQ(y[index_of(names, "others.count")], 1.0f);
  EXPECT_FLOAT_EQ(y[index_of(names, "others.sm_util")], static_cast<float>(p2.sm_util));
}

TEST(Features, MeanFieldSizeIsIndependentOfNJointGrowsWithN) {
  const Workload w6 = load("paper-n6.yaml");
  auto tb = make_testbed("sim");
  auto t6 = StandaloneTable::from_samples(
      w6, profile::measure_plan(Context{.seed = 1}, w6, **tb, profile::Plan::kStandalone, 1, 10));
  ASSERT_TRUE(t6.ok());
  const Data& d = data();
  auto mf3 = FeatureMap::build(SurrogateKind::kMeanField, d.w, d.table);
  auto mf6 = FeatureMap::build(SurrogateKind::kMeanField, w6, *t6);
  auto j3 = FeatureMap::build(SurrogateKind::kJoint, d.w, d.table);
  auto j6 = FeatureMap::build(SurrogateKind::kJoint, w6, *t6);
  auto p6 = FeatureMap::build(SurrogateKind::kPairwise, w6, *t6);
  ASSERT_TRUE(mf3.ok() && mf6.ok() && j3.ok() && j6.ok() && p6.ok());
  EXPECT_EQ(mf3->dim(1), mf6->dim(1));
  EXPECT_EQ(mf3->dim(0), mf6->dim(0));
  // Joint: (present + knobs) per model: 4 + 3 + 3 for N = 3, plus 3 x 3 more for N = 6.
  EXPECT_EQ(j3->dim(0), 10u);
  EXPECT_EQ(j6->dim(0), 19u);
  EXPECT_EQ(p6->dim(3), 4u);
}

TEST(Surrogate, CompiledBatchAgreesWithOneCandidateAtATime) {
  const Data& d = data();
  for (auto [kind, reg] : {std::pair{SurrogateKind::kMeanField, RegressorKind::kMlp},
                           std::pair{SurrogateKind::kMeanField, RegressorKind::kGbdt},
                           std::pair{SurrogateKind::kJoint, RegressorKind::kMlp},
                           std::pair{SurrogateKind::kPairwise, RegressorKind::kLinear}}) {
    SCOPED_TRACE(std::string(to_string(kind)) + "/" + std::string(to_string(reg)));
    const Surrogate s = fit(kind, reg, 1, 0);
    auto c = CompiledSurrogate::compile(s, d.w);
    ASSERT_TRUE(c.ok()) << c.error().what();
    // 600 candidates: more than one inner chunk, some with a model absent.
    const ConfigSpace space(d.w);
    Rng rng(3);
    std::vector<std::int32_t> configs;
    for (int i = 0; i < 600; ++i) {
      for (std::size_t m = 0; m < 3; ++m) {
        const bool absent = m > 0 && i % 7 == static_cast<int>(m);
        configs.push_back(absent ? kAbsent
                                 : static_cast<std::int32_t>(rng.below(space.local_counts()[m])));
      }
    }
    auto ws = c->make_workspace();
    std::vector<float> batch(600 * 3 * kTargetCount), one(3 * kTargetCount);
    c->predict(configs, batch, ws);
    // GBDT heads walk per-configuration specialised forests: the full forests' predictions up
    // to float rounding (their trees are summed in another order: a sum of ~10^3 leaves of
    // magnitude <= 1 in float rounds by well under 1e-4 in log space).
    EXPECT_EQ(c->specialized(), reg == RegressorKind::kGbdt);
    if (c->specialized()) {
      CompiledSurrogate full = *c;
      full.drop_specialized();
      std::vector<float> unspecialised(batch.size());
      full.predict(configs, unspecialised, ws);
      for (std::size_t k = 0; k < batch.size(); ++k) {
        if (std::isnan(batch[k])) {
          EXPECT_TRUE(std::isnan(unspecialised[k])) << k;
        } else {
          EXPECT_NEAR(batch[k], unspecialised[k], 1e-4f * std::abs(unspecialised[k])) << k;
        }
      }
    }
    for (int i = 0; i < 600; ++i) {
      c->predict(std::span(configs).subspan(static_cast<std::size_t>(i) * 3, 3), one, ws);
      for (std::size_t k = 0; k < one.size(); ++k) {
        const float b = batch[static_cast<std::size_t>(i) * one.size() + k];
        if (std::isnan(one[k])) {
          EXPECT_TRUE(std::isnan(b));
        } else {
          EXPECT_EQ(b, one[k]) << "candidate " << i << " slot " << k;
        }
      }
      const std::int32_t* cfg = &configs[static_cast<std::size_t>(i) * 3];
      for (std::size_t m = 0; m < 3; ++m) {
        const float ttft = one[m * kTargetCount + static_cast<std::size_t>(Target::kTtftP95)];
        const float lat = one[m * kTargetCount + static_cast<std::size_t>(Target::kLatencyP95)];
        if (cfg[m] == kAbsent) {
          EXPECT_TRUE(std::isnan(lat) && std::isnan(ttft));
        } else if (m == 0) {
          EXPECT_GT(ttft, 0.0f);  // the LLM: TTFT and TPOT, no frame latency
          EXPECT_TRUE(std::isnan(lat));
        } else {
          EXPECT_GT(lat, 0.0f);
          EXPECT_TRUE(std::isnan(ttft));
        }
      }
    }
  }
}

// predict_given() remembers each specialised forest's outputs by cell (the rank of every free
// input among the forest's thresholds): a cell seen before answers from memory with exactly what
// walking the specialised forest gives (the full forest's prediction up to float rounding), and
// asking again costs no walk.
TEST(Surrogate, PredictGivenRemembersCellsAndAgreesWithTheFullForests) {
  const Data& d = data();
  auto c =
      CompiledSurrogate::compile(fit(SurrogateKind::kMeanField, RegressorKind::kGbdt, 1, 0), d.w);
  ASSERT_TRUE(c.ok()) << c.error().what();
  ASSERT_TRUE(c->specialized());
  CompiledSurrogate full = *c;
  full.drop_specialized();
  const ConfigSpace space(d.w);
  Rng rng(11);
  struct Ask {
    std::size_t m, l;
    Totals others;
  };
  std::vector<Ask> asks;
  for (int i = 0; i < 300; ++i) {
    Ask a;
    a.m = rng.below(3);
    a.l = rng.below(space.local_counts()[a.m]);
    // The others: one or two of the other models in random configurations.
    for (std::size_t o = 0; o < 3; ++o) {
      if (o != a.m && rng.uniform() < 0.7) {
        a.others += c->contribution(o, rng.below(space.local_counts()[o]));
      }
    }
    asks.push_back(a);
  }
  auto ws = c->make_workspace();
  auto ws_full = full.make_workspace();
  std::array<float, kTargetCount> got{}, again{}, want{};
  for (const Ask& a : asks) {
    c->predict_given(a.m, a.l, a.others, got, ws);
    full.predict_given(a.m, a.l, a.others, want, ws_full);
    for (std::size_t k = 0; k < kTargetCount; ++k) {
      if (std::isnan(want[k])) {
        EXPECT_TRUE(std::isnan(got[k]));
      } else {
        EXPECT_NEAR(got[k], want[k], 1e-4f * std::abs(want[k]))
            << "model " << a.m << " config " << a.l << " target " << k;
      }
    }
  }
  const std::size_t cells = ws.cells.size();
  EXPECT_GT(cells, 0u);
  EXPECT_TRUE(ws_full.cells.empty());  // the full forests have no cells to remember
  // Asked again, a remembered cell answers exactly what its walk gave.
  auto ws_fresh = c->make_workspace();
  for (const Ask& a : asks) {
    c->predict_given(a.m, a.l, a.others, again, ws);
    c->predict_given(a.m, a.l, a.others, want, ws_fresh);
    for (std::size_t k = 0; k < kTargetCount; ++k) {
      if (!std::isnan(want[k])) {
        EXPECT_EQ(again[k], want[k]);
      }
    }
  }
  EXPECT_EQ(ws.cells.size(), cells);  // every cell asked again was remembered
}

TEST(Surrogate, ModelFileRoundTripsAndIsVersioned) {
  const Data& d = data();
  const Surrogate s = fit(SurrogateKind::kMeanField, RegressorKind::kMlp);
  const testing::TempDir dir("corun-surrogate-test");
  const auto path = dir.path() / "model.json";
  ASSERT_TRUE(s.save(path).ok());
  auto back = Surrogate::load(path);
  ASSERT_TRUE(back.ok()) << back.error().what();
  const nlohmann::json j = s.to_json();
  EXPECT_EQ(j["schema_version"], kModelSchemaVersion);
  EXPECT_EQ(j["testbed"], "sim");
  EXPECT_EQ(j["device"], "rtx3090");
  EXPECT_TRUE(j.contains("corun_version") && j.contains("git_hash") && j.contains("seed"));
  EXPECT_EQ(back->to_json(), j);
  auto c1 = CompiledSurrogate::compile(s, d.w);
  auto c2 = CompiledSurrogate::compile(*back, d.w);
  ASSERT_TRUE(c1.ok() && c2.ok());
  std::vector<std::int32_t> configs = {0, 0, 0, 11, 8, 8, 5, 3, kAbsent};
  std::vector<float> a(3 * 3 * kTargetCount), b(a.size());
  auto ws = c1->make_workspace();
  c1->predict(configs, a, ws);
  c2->predict(configs, b, ws);
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (!std::isnan(a[k])) {
      EXPECT_EQ(a[k], b[k]);
    }
  }
  // Another schema version is refused, with the versions named.
  nlohmann::json other = j;
  other["schema_version"] = 99;
  auto bad = Surrogate::from_json(other);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what().find("99"), std::string::npos);
  EXPECT_FALSE(Surrogate::from_json(nlohmann::json{{"kind", "something"}}).ok());
}

TEST(Surrogate, DamagedFilesTheFuzzerFoundAreRefusedWithAReason) {
  // fuzz/regressions/surrogate/: numbers no field can hold (a child index of -1.3e19, which
  // converted to int was undefined behaviour; inputs = 1e300; a negative head model).
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(CORUN_SOURCE_DIR) +
                                                           "/fuzz/regressions/surrogate")) {
    SCOPED_TRACE(e.path().string());
    ++files;
    const auto s = Surrogate::load(e.path());
    ASSERT_FALSE(s.ok());
    EXPECT_FALSE(s.error().message().empty());
  }
  EXPECT_GE(files, 3U);
}

TEST(Surrogate, SameSeedSameModel) {
  const Surrogate a = fit(SurrogateKind::kMeanField, RegressorKind::kMlp, 5, 0);
  const Surrogate b = fit(SurrogateKind::kMeanField, RegressorKind::kMlp, 5, 0);
  EXPECT_EQ(a.to_json(), b.to_json());
}

TEST(Surrogate, ErrorModelIsCalibratedOnHeldOutFolds) {
  const Surrogate s = fit(SurrogateKind::kMeanField, RegressorKind::kLinear);
  for (const Head& h : s.heads()) {
    ASSERT_EQ(h.error.size(), h.targets.size());
    for (const auto& e : h.error) {
      EXPECT_EQ(e.source, "cross-validation");
      EXPECT_EQ(e.rows, h.train_rows);
      EXPECT_LE(e.q05, e.q50);
      EXPECT_LE(e.q50, e.q95);
      EXPECT_GT(e.rmse, 0);
    }
  }
}

TEST(Surrogate, RefusesAWorkloadItWasNotFittedFor) {
  const Surrogate s = fit(SurrogateKind::kMeanField, RegressorKind::kLinear);
  EXPECT_TRUE(s.check_workload(data().w).ok());
  const Workload w4 = load("paper-n4.yaml");
  EXPECT_FALSE(s.check_workload(w4).ok());
  Workload changed = data().w;
  changed.models[1].knobs[0].values = {320, 640};
  const Status st = s.check_workload(changed);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().what().find("models[1].knobs"), std::string::npos) << st.error().what();
  EXPECT_FALSE(CompiledSurrogate::compile(s, changed).ok());
}

TEST(Surrogate, CrossModelPredictsAModelItNeverSawCoRun) {
  const Data& d = data();
  // Co-run rows of cam1 are withheld; its predictions come from the shared regressor.
  FitOptions o;
  o.kind = SurrogateKind::kCrossModel;
  o.regressor = RegressorKind::kMlp;
  o.withheld_models = {2};
  o.calibration_folds = 0;
  o.regressor_options.mlp.max_steps = 400;
  auto s = Surrogate::fit(Context{}, d.w, d.table, d.corun, o, {});
  ASSERT_TRUE(s.ok()) << s.error().what();
  for (const Head& h : s->heads()) {
    if (h.model == 2) {
      EXPECT_EQ(h.train_rows, 0u);
      EXPECT_EQ(h.error[0].source, "pooled");  // none of its own: the others' residuals
    }
  }
  auto c = CompiledSurrogate::compile(*s, d.w);
  ASSERT_TRUE(c.ok());
  std::vector<std::int32_t> config = {3, 4, 8};
  std::vector<float> out(3 * kTargetCount);
  auto ws = c->make_workspace();
  c->predict(config, out, ws);
  const float lat = out[2 * kTargetCount + static_cast<std::size_t>(Target::kLatencyP95)];
  const double alone = d.table.at(2, 8).target[static_cast<std::size_t>(Target::kLatencyP95)];
  // Co-running can only slow it down, and not by orders of magnitude here.
  EXPECT_GT(lat, 0.8 * alone);
  EXPECT_LT(lat, 5 * alone);
  // Withholding is a cross-model feature only.
  o.kind = SurrogateKind::kMeanField;
  EXPECT_FALSE(Surrogate::fit(Context{}, d.w, d.table, d.corun, o, {}).ok());
}

TEST(Surrogate, NoUsableRowsIsAnError) {
  const Data& d = data();
  FitOptions o;
  auto s = Surrogate::fit(Context{}, d.w, d.table, {}, o, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().what().find("no usable co-run rows"), std::string::npos);
  EXPECT_EQ(s.error().kind(), Error::Kind::kInvalidInput);  // nothing ran
}

TEST(Surrogate, SamplesThatAllFailedNameTheFirstFailure) {
  // A testbed whose worker cannot start fails every sample: the error says why, and it is
  // work that ran and failed (exit 1), not bad input.
  const Data& d = data();
  std::vector<profile::SampleRecord> failed = d.corun;
  for (auto& r : failed) r.measurement.error = "cannot start worker /x/corun-torch-worker";
  auto s = Surrogate::fit(Context{}, d.w, d.table, failed, FitOptions{}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().what().find("the first failure: cannot start worker /x/corun-torch-worker"),
            std::string::npos)
      << s.error().what();
  EXPECT_EQ(s.error().kind(), Error::Kind::kResource);
}

}  // namespace
}  // namespace corun::surrogate::surrogate_test
