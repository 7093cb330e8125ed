// Sizes of configuration spaces, and what is known when they pass 2^64. Golden values are
// powers of two: 2^64 = 18446744073709551616 is one more than the largest 64-bit count, and
// 128^30 = 2^210 is exactly representable as a double (IEEE-754: any power of two in range).
#include "corun/space/space.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/spec/workload.h"

namespace corun::space_test {
namespace {

// `n` vision models with 8 image sizes x 16 skip rates = 128 local configurations each.
std::string wide_workload(int n) {
  std::string y = "device: rtx3090\nmodels:\n";
  for (int i = 0; i < n; ++i) {
    y += "  - {name: cam" + std::to_string(i) +
         ", model: yolo11n, knobs: {imgsz: [320, 352, 384, 416, 448, 480, 512, 544], "
         "skip_rate: [0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, "
         "0.65, 0.7, 0.75]}, demand: {fps: 1}}\n";
  }
  return y;
}

TEST(ConfigCount, ExactUpToTwoToThe64Minus1) {
  const std::vector<std::size_t> below = {std::size_t{1} << 32, (std::size_t{1} << 32) - 1};
  const ConfigCount b = ConfigCount::product(below);
  ASSERT_TRUE(b.exact());
  EXPECT_EQ(b.value(), 18446744069414584320ULL);  // 2^64 - 2^32
  const std::vector<std::size_t> at = {std::size_t{1} << 32, std::size_t{1} << 32};
  const ConfigCount a = ConfigCount::product(at);
  EXPECT_FALSE(a.exact());
  EXPECT_EQ(a.approx(), 18446744073709551616.0);  // 2^64
  EXPECT_NE(a.to_string().find("about"), std::string::npos) << a.to_string();
  EXPECT_EQ(ConfigCount::product(std::vector<std::size_t>{12, 9, 9, 9, 9}).value(), 78732u);
  // A zero factor makes the product exactly 0, even after the partial products overflowed.
  const std::vector<std::size_t> zero = {std::size_t{1} << 40, std::size_t{1} << 40, 0};
  ASSERT_TRUE(ConfigCount::product(zero).exact());
  EXPECT_EQ(ConfigCount::product(zero).value(), 0u);
  EXPECT_TRUE(ConfigCount::product({}).exact());
  EXPECT_EQ(ConfigCount::product({}).value(), 1u);
  EXPECT_DEATH((void)a.value(), "");
}

TEST(ConfigCount, BeyondADoubleIsInfiniteAndNeverExact) {
  const std::vector<std::size_t> huge(40, std::size_t{1} << 32);  // 2^1280
  const ConfigCount c = ConfigCount::product(huge);
  EXPECT_FALSE(c.exact());
  EXPECT_TRUE(std::isinf(c.approx()));
  EXPECT_EQ(c.to_string(), "more than 1.8e+308");
}

TEST(ConfigSpace, JointConfigCountNeedsNoSpace) {
  auto w = parse_workload(wide_workload(30), "wide.yaml", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  EXPECT_FALSE(joint_config_count(*w).exact());
  EXPECT_EQ(joint_config_count(*w).approx(), std::ldexp(1.0, 210));
  auto small = parse_workload(wide_workload(2), "two.yaml", Catalog::default_catalog());
  ASSERT_TRUE(small.ok()) << small.error().what();
  EXPECT_EQ(joint_config_count(*small).value(), 128u * 128u);
}

TEST(ConfigSpace, FeasibleCountOfAManyNeedSpaceIsABoundedLowerBound) {
  // Four yolo11x of 64 image sizes x 64 batches = 4096 local configurations, with thousands of
  // distinct memory needs: 2^48 joint configurations, too many to enumerate, and counting in
  // 1 MiB buckets would take more than 2e8 steps, so coarser buckets are used.
  std::string imgsz, batch;
  for (int i = 1; i <= 64; ++i) {
    imgsz += (i > 1 ? ", " : "") + std::to_string(32 * i);
    batch += (i > 1 ? ", " : "") + std::to_string(i);
  }
  std::string y = "device: rtx3090\nmodels:\n";
  for (int i = 0; i < 4; ++i) {
    y += "  - {name: cam" + std::to_string(i) + ", model: yolo11x, knobs: {imgsz: [" + imgsz +
         "], batch: [" + batch + "]}, demand: {fps: 1}}\n";
  }
  auto w = parse_workload(y, "many.yaml", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  const ConfigSpace space(*w);
  ASSERT_EQ(space.joint_count().value(), std::uint64_t{1} << 48);
  const double mib = 1024.0 * 1024.0;
  double steps = 0;  // (buckets + 1) x distinct needs, in 1 MiB buckets
  for (std::size_t m = 0; m < 4; ++m) {
    std::set<double> needs;
    for (std::size_t l = 0; l < 4096; ++l) {
      needs.insert(std::ceil(space.local_vram_bytes(m, l) / mib));
    }
    steps += (std::floor(w->device.vram_bytes() / mib) + 1) * static_cast<double>(needs.size());
  }
  ASSERT_GT(steps, 2e8);
  const ConfigCount feasible = space.feasible_count();
  EXPECT_FALSE(feasible.exact());
  EXPECT_LT(feasible.approx(), space.joint_count().approx());  // some do not fit
  // Any joint configuration whose models each need at most a quarter of the memory less 64 MiB
  // (more than any bucket used) is counted: rounding each need up to its bucket keeps the sum
  // within the device. Their number is the product of each model's such configurations.
  const double quarter = w->device.vram_bytes() / 4 - 64.0 * 1024 * 1024;
  double certain = 1;
  for (std::size_t m = 0; m < 4; ++m) {
    double n = 0;
    for (std::size_t l = 0; l < 4096; ++l) n += space.local_vram_bytes(m, l) <= quarter ? 1 : 0;
    certain *= n;
  }
  ASSERT_GT(certain, 0);
  EXPECT_GE(feasible.approx(), certain);
}

TEST(ConfigSpace, ThirtyModelsOf128ConfigurationsAreCountedApproximately) {
  auto w = parse_workload(wide_workload(30), "wide.yaml", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  const ConfigSpace space(*w);
  EXPECT_EQ(space.local_counts(), std::vector<std::size_t>(30, 128));
  EXPECT_FALSE(space.joint_count().exact());
  EXPECT_EQ(space.joint_count().approx(), std::ldexp(1.0, 210));  // 128^30 = 2^210
  EXPECT_FALSE(space.feasible_count().exact());
  // Nine such models still fit: 128^9 = 2^63.
  auto small = parse_workload(wide_workload(9), "nine.yaml", Catalog::default_catalog());
  ASSERT_TRUE(small.ok()) << small.error().what();
  const ConfigSpace nine(*small);
  ASSERT_TRUE(nine.joint_count().exact());
  EXPECT_EQ(nine.joint_count().value(), std::uint64_t{1} << 63);
}

}  // namespace
}  // namespace corun::space_test
