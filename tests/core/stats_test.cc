#include "corun/core/stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace corun::stats_test {
namespace {

// Hand-computed (numpy.percentile's default, linear): position q·(n−1) in the sorted data.
TEST(Quantile, InterpolatesBetweenOrderStatistics) {
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 0.5), 2.5);          // mean of the middle two
  EXPECT_DOUBLE_EQ(quantile({50, 10, 40, 20, 30}, 0.5), 30);   // the middle one
  EXPECT_DOUBLE_EQ(quantile({50, 10, 40, 20, 30}, 0.95), 48);  // 40 + 0.8 · (50 − 40)
  EXPECT_DOUBLE_EQ(quantile({50, 10, 40, 20, 30}, 0.0), 10);
  EXPECT_DOUBLE_EQ(quantile({50, 10, 40, 20, 30}, 1.0), 50);
  EXPECT_DOUBLE_EQ(quantile({7}, 0.99), 7);
}

TEST(Quantile, EmptyGivesTheCallersValue) {
  EXPECT_TRUE(std::isnan(quantile({}, 0.5)));
  EXPECT_EQ(quantile({}, 0.95, 0.0), 0.0);
}

}  // namespace
}  // namespace corun::stats_test
