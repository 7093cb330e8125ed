// Closed-form queueing of the simulator against hand computations.

#include "../../src/testbed/queueing.h"

#include <gtest/gtest.h>

#include <cmath>

namespace corun::sim::queueing_test {
namespace {

TEST(ErlangC, SingleServerWaitsWithProbabilityRho) {
  // M/M/1: P(wait) = rho.
  EXPECT_NEAR(erlang_c(1, 0.3), 0.3, 1e-12);
  EXPECT_NEAR(erlang_c(1, 0.9), 0.9, 1e-12);
}

TEST(ErlangC, TwoServersHandComputed) {
  // M/M/2, a = 1: C = (a^2/2! * c/(c-a)) / (1 + a + a^2/2! * c/(c-a)) = 1 / 3.
  EXPECT_NEAR(erlang_c(2, 1.0), 1.0 / 3.0, 1e-12);
  // M/M/3, a = 2: numerator 8/6 * 3 = 4; denominator 1 + 2 + 2 + 4 = 9.
  EXPECT_NEAR(erlang_c(3, 2.0), 4.0 / 9.0, 1e-12);
}

TEST(ErlangC, Limits) {
  EXPECT_EQ(erlang_c(4, 0), 0);
  EXPECT_EQ(erlang_c(4, 4), 1);
  EXPECT_EQ(erlang_c(4, 9), 1);
  EXPECT_EQ(erlang_c(0, 1), 0);
}

TEST(GgcWait, MM1MatchesTextbook) {
  // M/M/1 with rho = 0.5, S = 1 s: mean wait rho S / (1 - rho) = 1 s; the wait exceeds t with
  // probability rho e^{-(1-rho) t / S}, so p95 = ln(0.5 / 0.05) / 0.5 = 4.605 s and p50 =
  // ln(0.5 / 0.5) / 0.5 = 0.
  const WaitTime w = ggc_wait(1, 0.5, 1.0, 1, 1, 1e9);
  EXPECT_NEAR(w.utilisation, 0.5, 1e-12);
  EXPECT_NEAR(w.mean_s, 1.0, 1e-9);
  EXPECT_NEAR(w.p95_s, std::log(10.0) / 0.5, 1e-9);
  EXPECT_NEAR(w.p50_s, 0.0, 1e-12);
}

TEST(GgcWait, DeterministicArrivalsAndServiceNeverWait) {
  const WaitTime w = ggc_wait(1, 0.9, 1.0, 0, 0, 10);
  EXPECT_EQ(w.mean_s, 0);
  EXPECT_EQ(w.p95_s, 0);
}

TEST(GgcWait, AllenCunneenHalvesTheWaitForMD1) {
  // M/D/1: (ca2 + cs2) / 2 = 1/2, the Pollaczek-Khinchine mean wait rho S / (2 (1 - rho)).
  const WaitTime w = ggc_wait(1, 0.5, 1.0, 1, 0, 1e9);
  EXPECT_NEAR(w.mean_s, 0.5, 1e-9);
}

TEST(GgcWait, OverloadIsLargeAndFinite) {
  const double window = 10;
  const WaitTime w = ggc_wait(2, 40, 0.1, 1, 0.1, window);  // rho = 2
  EXPECT_NEAR(w.utilisation, 2, 1e-12);
  EXPECT_TRUE(std::isfinite(w.mean_s));
  EXPECT_TRUE(std::isfinite(w.p95_s));
  // Backlog: waits uniform on [0, (1 - 1/rho) window] = [0, 5 s] on top of a capped steady part.
  EXPECT_GE(w.p95_s, 0.95 * 5);
  EXPECT_LE(w.p95_s, window + 0.95 * 5 + 1e-9);
  EXPECT_GE(w.p95_s, w.p50_s);
}

TEST(GgcWait, MonotoneInLoad) {
  double last = -1;
  for (double rate = 1; rate <= 30; rate += 0.5) {  // rho from 0.05 to 1.5
    const WaitTime w = ggc_wait(2, rate, 0.1, 1, 0.5, 10);
    EXPECT_GE(w.mean_s, last) << rate;
    last = w.mean_s;
  }
}

}  // namespace
}  // namespace corun::sim::queueing_test
