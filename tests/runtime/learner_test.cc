// The online error model of one (model, target): it learns a bias, a load slope and the window
// noise from observations, widens its bound for what it has not seen, follows a change of the
// truth in one step, and its conformal level reacts to misses in the direction that restores
// the target rate.
#include "corun/runtime/learner.h"

#include <gtest/gtest.h>

#include <cmath>

#include "corun/core/rng.h"

namespace corun::learner_test {
namespace {

LearningOptions options() {
  LearningOptions o;
  o.breach_target = 0.01;
  return o;
}

constexpr ErrorPrior kPrior{0, 0.3, 0.3, 0.1, 0.1};

TEST(TargetLearner, LearnsASharedBiasAndTheNoise) {
  TargetLearner l(kPrior, options());
  Rng rng(7);
  // The truth: predictions are 35 % low (log 0.3), windows scatter with sd 0.08.
  for (int i = 0; i < 60; ++i) l.observe(0, 1.0, 0.3 + 0.08 * rng.normal());
  const LogPrediction p = l.predict(0, 1.0);
  EXPECT_NEAR(p.mean, 0.3, 0.05);
  EXPECT_NEAR(std::sqrt(l.noise_var()), 0.08, 0.03);
  // Once learned, the bound of the observed configuration is about the noise quantile.
  EXPECT_LT(l.margin(0, 1.0), std::expm1(3.0 * 0.1));
}

TEST(TargetLearner, AConfigurationNeverSeenKeepsItsPriorDoubt) {
  TargetLearner l(kPrior, options());
  Rng rng(3);
  for (int i = 0; i < 30; ++i) l.observe(2, 0.5, 0.1 + 0.05 * rng.normal());
  // The shared part transfers to configuration 5, the doubt about its own deviation stays.
  EXPECT_NEAR(l.predict(5, 0.5).mean, l.predict(2, 0.5).mean, 0.1);
  EXPECT_GT(l.predict(5, 0.5).var, l.predict(2, 0.5).var + 0.5 * kPrior.config_sd * kPrior.config_sd);
  EXPECT_GT(l.margin(5, 0.5), l.margin(2, 0.5));
}

TEST(TargetLearner, LearnsTheLoadSlopeAndDoubtsLoadsNeverSeen) {
  TargetLearner l(kPrior, options());
  Rng rng(11);
  // The predictor misses how the error grows with the co-runners' load: y = 0.4 (u − 1).
  for (int i = 0; i < 80; ++i) {
    const double u = i % 2 == 0 ? 1.0 : 1.5;
    l.observe(0, u, 0.4 * (u - 1.0) + 0.03 * rng.normal());
  }
  EXPECT_NEAR(l.slope(), 0.4, 0.1);
  EXPECT_NEAR(l.predict(0, 1.25).mean, 0.1, 0.05);
  EXPECT_NEAR(l.predict(0, 3.0).mean, 0.8, 0.2);  // extrapolated along the slope
  // Extrapolating beyond the loads measured is less certain than interpolating between them, by
  // the slope's own variance times the distance squared.
  const double extra = l.predict(0, 3.0).var - l.predict(0, 1.25).var;
  EXPECT_GT(extra, 0.0);
  EXPECT_NEAR(extra, (2.0 * 2.0 - 0.25 * 0.25) * l.slope_var(), 0.5 * extra);
}

TEST(TargetLearner, FollowsAChangeOfTheTruthInOneObservation) {
  TargetLearner l(kPrior, options());
  Rng rng(5);
  for (int i = 0; i < 40; ++i) l.observe(0, 1.0, 0.02 * rng.normal());
  // A co-tenant: everything is 2.2x slower from now on (log 0.8), far outside the noise.
  const auto u = l.observe(0, 1.0, 0.8);
  EXPECT_TRUE(u.change);
  EXPECT_TRUE(u.miss);
  EXPECT_GT(l.predict(0, 1.0).mean, 0.6);
}

TEST(TargetLearner, ConformalLevelMovesBothWays) {
  TargetLearner l(kPrior, options());
  const double z0 = l.z();
  EXPECT_NEAR(z0, 2.326, 0.01);  // normal 99th percentile
  // A miss (above the bound, short of a change of the truth) raises the bound's level...
  for (int i = 0; i < 5; ++i) l.observe(0, 1.0, 0.0);
  const LogPrediction p = l.predict(0, 1.0);
  const double y = p.mean + 2.8 * std::sqrt(p.var);  // bound: 2.33 sd; change: 3.29 sd
  ASSERT_FALSE(l.is_change(0, 1.0, y));
  EXPECT_TRUE(l.observe(0, 1.0, y).miss);
  const double after_miss = l.z();
  EXPECT_GT(after_miss, z0);
  // ... and values within it lower it again, slowly (a 1 % target: ~100 hits per miss).
  for (int i = 0; i < 300; ++i) l.observe(0, 1.0, 0.0);
  EXPECT_LT(l.z(), after_miss);
}

TEST(TargetLearner, HeavyTailsAreCalibratedTowardTheTarget) {
  // Windows whose noise has a heavier tail than the Gaussian the learner assumes: one in ten is
  // four times as noisy. Even on the pooled spread a fixed 99 % Gaussian bound would miss about
  // 2 % of the time (by hand: sd sqrt(0.9·0.05² + 0.1·0.2²) = 0.079, bound 2.33·0.079 = 0.18,
  // which a 0.2-sd window exceeds 18 % of the time); the learner's running noise estimate,
  // mostly taught by quiet windows, misses more. Adaptive conformal inference raises the level
  // until misses are rare again. (Its guarantee, |rate − α| ≤ (1 + γ)/(γT), is loose at γ =
  // 0.005: this asserts the direction and a halving, not the 1 % itself.)
  auto run = [](bool calibrate) {
    LearningOptions o = options();
    if (!calibrate) o.calibration_step = 0;
    TargetLearner l(kPrior, o);
    Rng rng(2026);
    std::size_t late = 0;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      const double sd = rng.uniform() < 0.1 ? 0.2 : 0.05;
      if (l.observe(0, 1.0, sd * rng.normal()).miss && i >= n / 2) ++late;
    }
    return std::make_pair(static_cast<double>(late) / (n / 2), l.z());
  };
  const auto [fixed_rate, fixed_z] = run(false);
  const auto [rate, z] = run(true);
  EXPECT_GT(fixed_rate, 0.014);
  EXPECT_GT(fixed_rate, 0.02);
  EXPECT_LT(rate, fixed_rate / 2);
  EXPECT_LT(rate, 0.025);
  EXPECT_GT(z, fixed_z);
}

TEST(TargetLearner, RestartKeepsNoiseAndLevel) {
  TargetLearner l(kPrior, options());
  Rng rng(9);
  for (int i = 0; i < 50; ++i) l.observe(1, 1.0, 0.5 + 0.06 * rng.normal());
  const double noise = l.noise_var();
  const double z = l.z();
  l.restart(kPrior);
  EXPECT_NEAR(l.predict(1, 1.0).mean, 0.0, 1e-12);
  EXPECT_EQ(l.noise_var(), noise);
  EXPECT_EQ(l.z(), z);
}

TEST(TargetLearner, ReopenWidensToThePriorAndKeepsWhatWasLearned) {
  TargetLearner l(kPrior, options());
  Rng rng(11);
  // Learned: predictions 20 % low, windows scatter with sd 0.03 (below the prior's 0.1).
  for (int i = 0; i < 60; ++i) l.observe(1, 1.0, 0.2 + 0.03 * rng.normal());
  const LogPrediction before = l.predict(1, 1.0);
  ASSERT_LT(before.var, 0.1 * 0.1);
  l.reopen();
  const LogPrediction after = l.predict(1, 1.0);
  EXPECT_NEAR(after.mean, before.mean, 1e-12);                  // the estimate stays
  // At least the shared prior's variance (the configuration's learned deviation is negatively
  // correlated with the shared error, so the sum is a little less than prior + noise).
  EXPECT_GE(after.var, 0.3 * 0.3);
  EXPECT_GT(after.var, 10 * before.var);
  EXPECT_EQ(l.noise_var(), 0.1 * 0.1);
  l.reopen();                                                  // idempotent
  EXPECT_EQ(l.predict(1, 1.0).var, after.var);
}

TEST(CorrectionTable, ChargesExtrapolationOnlyUpward) {
  CorrectionTable t;
  t.at = {{{}}};
  t.at[0][0][static_cast<std::size_t>(Target::kLatencyP95)] = {0.1f, 0.01f};
  t.slope = {{}};
  t.slope_var = {{}};
  t.z = {{}};
  t.slope[0][static_cast<std::size_t>(Target::kLatencyP95)] = 0.2f;
  t.slope_var[0][static_cast<std::size_t>(Target::kLatencyP95)] = 0.09f;
  t.z[0][static_cast<std::size_t>(Target::kLatencyP95)] = 2.0f;
  t.load_now = {1.0f};
  Predicted p;
  p.latency_ms_p95 = 10;
  // At the load of the plan in force: the learned correction exp(0.1).
  EXPECT_NEAR(t.apply(0, 0, 1.0f, p).latency_ms_p95, 10 * std::exp(0.1), 1e-4);
  // Less load: the slope only (lower, never an extra charge).
  EXPECT_NEAR(t.apply(0, 0, 0.5f, p).latency_ms_p95, 10 * std::exp(0.1 - 0.1), 1e-4);
  // More load: the slope plus z * (sd grown by the slope's doubt - sd now), by hand:
  // 0.1 + 0.2 * 0.5 + 2 * (sqrt(0.01 + 0.25 * 0.09) - 0.1) = 0.2 + 2 * 0.0803 = 0.3606.
  EXPECT_NEAR(t.apply(0, 0, 1.5f, p).latency_ms_p95, 10 * std::exp(0.3606), 2e-3);
  // Monotone in the load (what the exact solver's pruning needs).
  double last = 0;
  for (float u = 0; u < 4; u += 0.25f) {
    const double v = t.apply(0, 0, u, p).latency_ms_p95;
    EXPECT_GE(v, last);
    last = v;
  }
}

}  // namespace
}  // namespace corun::learner_test
