// The corrected predictor's batched path: a batch of joint configurations, predicted by the base
// and corrected in one pass, gives bit for bit what CorrectionTable::apply gives one model at a
// time (the definition of a correction), with learners that have observed windows (learned
// biases, slopes of both signs, conformal levels), for a plain and for a mean-field base.
#include "corun/runtime/corrected_predictor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "corun/core/rng.h"
#include "corun/runtime/learner.h"

namespace corun::corrected_predictor_test {
namespace {

constexpr std::size_t kModels = 5;
constexpr std::size_t kLocals = 7;

// A mean-field test predictor: model m in configuration l adds (l + 1)·(m + 1)/40 of load; its
// metrics grow with the others' load. Model 1 is an LLM (TTFT and TPOT, no request latency),
// the others report a request latency (TTFT and TPOT 0: not corrected). Configuration 6 of
// model 2 never ran alone: the 1e9 ms sentinel, which no correction may move.
class TestAggregate final : public AggregatePredictor {
 public:
  [[nodiscard]] std::size_t models() const override { return kModels; }
  [[nodiscard]] std::size_t aggregate_dims() const override { return 1; }
  void contribution(std::size_t m, std::int32_t l, std::span<float> out) const override {
    out[0] = static_cast<float>((l + 1) * static_cast<std::int32_t>(m + 1)) / 40.0f;
  }
  [[nodiscard]] Predicted predict_given(std::size_t m, std::int32_t l,
                                        std::span<const float> others) const override {
    Predicted p;
    const float slow = 1.0f + others[0];
    if (m == 2 && l == 6) {
      p.latency_ms_p95 = 1e9f;
      return p;
    }
    if (m == 1) {
      p.ttft_ms_p95 = (50.0f + 3.0f * static_cast<float>(l)) * slow;
      p.tpot_ms_p95 = (8.0f + 0.5f * static_cast<float>(l)) * slow;
    } else {
      p.latency_ms_p95 = (10.0f + static_cast<float>(l * static_cast<std::int32_t>(m))) * slow;
    }
    p.throughput = (100.0f + 10.0f * static_cast<float>(l)) / slow;
    return p;
  }
  // A load outside the plan: its SM share, as the one dimension.
  bool cotenant(double sm, double, std::span<float> out) const override {
    out[0] = static_cast<float>(sm);
    return true;
  }
};

// The same predictions behind the plain interface: the corrected predictor's other form.
class TestPlain final : public Predictor {
 public:
  [[nodiscard]] std::size_t models() const override { return kModels; }
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override {
    inner_.predict(configs, rows, out);
  }

 private:
  TestAggregate inner_;
};

// A decision's corrections as the controller builds them (Controller::corrections_locked):
// learners taught `windows` observations each of random configurations at random loads, around
// a bias and a load slope of random sign per (model, target); model 4 never observed.
CorrectionTable learned_table(std::uint64_t seed, int windows) {
  Rng rng(seed);
  const ErrorPrior prior{0, 0.3, 0.3, 0.1, 0.05};
  CorrectionTable t;
  t.at.resize(kModels);
  t.margins.resize(kModels);
  t.slope.assign(kModels, {});
  t.slope_var.assign(kModels, {});
  t.z.assign(kModels, {});
  t.load_now.assign(kModels, 0.0f);
  t.loads.resize(kModels);
  for (std::size_t m = 0; m < kModels; ++m) {
    t.loads[m].resize(kLocals);
    for (std::size_t l = 0; l < kLocals; ++l) t.loads[m][l] = static_cast<float>(rng.uniform());
    t.load_now[m] = static_cast<float>(1 + rng.uniform());
    t.at[m].resize(kLocals);
    for (Target target : surrogate::kAllTargets) {
      const auto k = static_cast<std::size_t>(target);
      TargetLearner learner(prior, LearningOptions{});
      const double bias = 0.4 * rng.normal();
      const double slope = 0.5 * rng.normal();
      const int seen = m == 4 ? 0 : windows;
      for (int i = 0; i < seen; ++i) {
        const auto l = static_cast<std::int32_t>(rng.below(kLocals));
        const double u = 2 * rng.uniform();
        learner.observe(l, u, bias + slope * u + 0.05 * rng.normal());
      }
      const bool taught = learner.observations() > 0;
      t.slope[m][k] = taught ? static_cast<float>(learner.slope()) : 0.0f;
      t.slope_var[m][k] = taught ? static_cast<float>(learner.slope_var()) : 0.0f;
      t.z[m][k] = static_cast<float>(learner.z());
      for (std::size_t l = 0; l < kLocals; ++l) {
        const LogPrediction p = learner.predict(static_cast<std::int32_t>(l), t.load_now[m]);
        t.at[m][l][k] = {static_cast<float>(p.mean), static_cast<float>(p.var)};
      }
    }
  }
  return t;
}

// `rows` random joint configurations, about one model in five absent.
std::vector<std::int32_t> random_rows(std::uint64_t seed, std::size_t rows) {
  Rng rng(seed);
  std::vector<std::int32_t> out(rows * kModels);
  for (auto& l : out) {
    l = rng.below(5) == 0 ? kAbsent : static_cast<std::int32_t>(rng.below(kLocals));
  }
  return out;
}

// The definition, one model at a time: the base's prediction of the row, each present model
// corrected at the load of the others present (CorrectionTable::load, summed in model order).
std::vector<Predicted> one_at_a_time(const Predictor& base, const CorrectionTable& t,
                                     std::span<const std::int32_t> configs, std::size_t rows) {
  std::vector<Predicted> out(rows * kModels);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto row = configs.subspan(r * kModels, kModels);
    const auto mine = std::span<Predicted>(out).subspan(r * kModels, kModels);
    base.predict(row, 1, mine);
    float total = 0;
    for (std::size_t m = 0; m < kModels; ++m) {
      if (row[m] != kAbsent) total += t.load(m, row[m]);
    }
    for (std::size_t m = 0; m < kModels; ++m) {
      if (row[m] != kAbsent) mine[m] = t.apply(m, row[m], total - t.load(m, row[m]), mine[m]);
    }
  }
  return out;
}

// Bit-identical, not merely near: a solver comparing two candidates must see the same numbers
// whichever path predicted them.
void expect_same_bits(const std::vector<Predicted>& a, const std::vector<Predicted>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(Predicted)), 0)
        << "row " << i / kModels << " model " << i % kModels << ": latency " << a[i].latency_ms_p95
        << " vs " << b[i].latency_ms_p95 << ", ttft " << a[i].ttft_ms_p95 << " vs "
        << b[i].ttft_ms_p95 << ", tpot " << a[i].tpot_ms_p95 << " vs " << b[i].tpot_ms_p95
        << ", throughput " << a[i].throughput << " vs " << b[i].throughput;
  }
}

TEST(CorrectedPredictor, ABatchIsBitForBitTheCorrectionOfEachModel) {
  constexpr std::size_t kRows = 500;
  for (const bool mean_field : {true, false}) {
    const std::shared_ptr<const Predictor> base =
        mean_field ? std::shared_ptr<const Predictor>(std::make_shared<TestAggregate>())
                   : std::make_shared<TestPlain>();
    for (const std::uint64_t seed : {1, 2, 3}) {
      const auto table = std::make_shared<const CorrectionTable>(learned_table(seed, 12));
      // The learners learned slopes of both signs: every branch of a correction is taken.
      bool rising = false;
      bool falling = false;
      for (const auto& s : table->slope) {
        for (float v : s) {
          rising = rising || v > 0;
          falling = falling || v < 0;
        }
      }
      ASSERT_TRUE(rising && falling);
      const auto corrected = make_corrected(base, table);
      const std::vector<std::int32_t> configs = random_rows(100 + seed, kRows);
      std::vector<Predicted> batched(kRows * kModels);
      corrected->predict(configs, kRows, batched);
      const std::vector<Predicted> expected = one_at_a_time(*base, *table, configs, kRows);
      expect_same_bits(batched, expected);
      // The corrections changed the predictions (a test of an identity would pass anything).
      std::vector<Predicted> uncorrected(kRows * kModels);
      base->predict(configs, kRows, uncorrected);
      std::size_t moved = 0;
      for (std::size_t i = 0; i < batched.size(); ++i) {
        moved += std::memcmp(&batched[i], &uncorrected[i], sizeof(Predicted)) != 0 ? 1 : 0;
        // The sentinel stays.
        if (configs[i] == 6 && i % kModels == 2) {
          EXPECT_EQ(batched[i].latency_ms_p95, 1e9f);
        }
      }
      EXPECT_GT(moved, batched.size() / 2);
    }
  }
}

TEST(CorrectedPredictor, AMeanFieldPredictionGivenTheOthersIsTheCorrectionOfTheBase) {
  const auto base = std::make_shared<TestAggregate>();
  const auto table = std::make_shared<const CorrectionTable>(learned_table(7, 12));
  const auto corrected = make_corrected(base, table);
  const auto* agg = dynamic_cast<const AggregatePredictor*>(corrected.get());
  ASSERT_NE(agg, nullptr);
  ASSERT_EQ(agg->aggregate_dims(), 2u);
  for (std::size_t m = 0; m < kModels; ++m) {
    for (std::int32_t l = 0; l < static_cast<std::int32_t>(kLocals); ++l) {
      std::vector<float> c(2);
      agg->contribution(m, l, c);
      EXPECT_EQ(c[1], table->load(m, l));
      for (const float u : {0.0f, 0.7f, 1.3f, 2.9f}) {
        const std::vector<float> others = {0.5f, u};
        const Predicted got = agg->predict_given(m, l, others);
        const Predicted want =
            table->apply(m, l, u, base->predict_given(m, l, std::span<const float>(others).first(1)));
        EXPECT_EQ(std::memcmp(&got, &want, sizeof(Predicted)), 0) << "model " << m << " l " << l;
      }
    }
  }
}

TEST(CorrectedPredictor, CorrectionsOfNothingLearnedLeaveTheBaseAsItIs) {
  // Learning off: every correction is 0 at every load (Controller::corrections_locked).
  CorrectionTable t;
  t.at.assign(kModels, std::vector<std::array<CorrectionTable::PerTarget, kTargetCount>>(kLocals));
  t.slope.assign(kModels, {});
  t.slope_var.assign(kModels, {});
  t.z.assign(kModels, {});
  t.load_now.assign(kModels, 0.0f);
  t.loads.assign(kModels, std::vector<float>(kLocals, 0.3f));
  const auto base = std::make_shared<TestAggregate>();
  const auto corrected = make_corrected(base, std::make_shared<const CorrectionTable>(t));
  const std::vector<std::int32_t> configs = random_rows(9, 200);
  std::vector<Predicted> got(200 * kModels);
  std::vector<Predicted> want(200 * kModels);
  corrected->predict(configs, 200, got);
  base->predict(configs, 200, want);
  expect_same_bits(got, want);
}

// A load outside the plan (a swap's start-up kernels) goes through the corrections as the base
// expresses it, adding nothing to the co-runners' load they were learned on; a base that cannot
// express one makes the corrected predictor say so too.
TEST(CorrectedPredictor, ALoadOutsideThePlanIsTheBasesAndNoCoRunnersLoad) {
  auto table = std::make_shared<const CorrectionTable>(learned_table(3, 20));
  const auto corrected = make_corrected(std::make_shared<TestAggregate>(), table);
  const auto* agg = dynamic_cast<const AggregatePredictor*>(corrected.get());
  ASSERT_NE(agg, nullptr);
  ASSERT_EQ(agg->aggregate_dims(), 2u);
  std::vector<float> out(2, -1.0f);
  ASSERT_TRUE(agg->cotenant(0.25, 0.5, out));
  EXPECT_FLOAT_EQ(out[0], 0.25f);
  EXPECT_FLOAT_EQ(out[1], 0.0f);
}

// A predictor whose aggregate has no unit for a load outside the plan.
class Opaque final : public AggregatePredictor {
 public:
  [[nodiscard]] std::size_t models() const override { return kModels; }
  [[nodiscard]] std::size_t aggregate_dims() const override { return 1; }
  void contribution(std::size_t, std::int32_t, std::span<float> out) const override { out[0] = 1; }
  [[nodiscard]] Predicted predict_given(std::size_t, std::int32_t,
                                        std::span<const float>) const override {
    return {};
  }
};

TEST(CorrectedPredictor, ABaseThatCannotExpressALoadOutsideThePlanSaysSo) {
  auto table = std::make_shared<const CorrectionTable>(learned_table(3, 20));
  const auto corrected = make_corrected(std::make_shared<Opaque>(), table);
  const auto* agg = dynamic_cast<const AggregatePredictor*>(corrected.get());
  ASSERT_NE(agg, nullptr);
  std::vector<float> out(2, -1.0f);
  EXPECT_FALSE(agg->cotenant(0.25, 0.5, out));
  EXPECT_EQ(out, std::vector<float>(2, -1.0f));
}

}  // namespace
}  // namespace corun::corrected_predictor_test
