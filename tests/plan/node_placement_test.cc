// The placement baselines on a tiny case computed by hand (in the comments).
#include "corun/plan/node_placement.h"

#include <gtest/gtest.h>

namespace corun::node_placement_test {
namespace {

// Three units of 10 GB; five models requesting 4, 5, 3, 6 and 2 GB.
PlacementInput tiny() {
  PlacementInput in;
  in.vram_request_bytes = {4, 5, 3, 6, 2};
  in.unit_vram_bytes = {10, 10, 10};
  in.allowed.assign(5, std::vector<bool>(3, true));
  in.demand = {1, 3, 2, 0.5, 2.5};
  // Interference: the demand already on the unit (the model's own plays no part).
  in.interference = [&in](std::size_t, std::span<const std::size_t> residents, std::size_t) {
    double s = 0;
    for (std::size_t r : residents) s += in.demand[r];
    return s;
  };
  return in;
}

using Units = std::vector<std::int32_t>;

TEST(Placement, BinpackFillsTheFullestUnitThatFits) {
  // m0(4) -> u0 [4,0,0]; m1(5) fits u0 (9), the fullest -> u0 [9,0,0]; m2(3) no room on u0,
  // u1 and u2 tie -> u1 [9,3,0]; m3(6): u1 (9) is fuller than u2 -> u1 [9,9,0]; m4(2) -> u2.
  EXPECT_EQ(place_binpack(tiny()), (Units{0, 0, 1, 1, 2}));
}

TEST(Placement, SpreadTakesTheLeastLoadedUnit) {
  // m0 -> u0 [.4,0,0]; m1 -> u1 [.4,.5,0]; m2 -> u2 [.4,.5,.3]; m3(6): u2 is least used and
  // 3+6 fits -> u2 [.4,.5,.9]; m4 -> u0.
  EXPECT_EQ(place_spread(tiny()), (Units{0, 1, 2, 2, 0}));
}

TEST(Placement, RoundRobinCyclesOverUnitsThatFit) {
  // m0 u0, m1 u1, m2 u2, m3 back to u0 (4+6 = 10 fits), m4 u1.
  EXPECT_EQ(place_round_robin(tiny()), (Units{0, 1, 2, 0, 1}));
}

TEST(Placement, IgniterPlacesByDecreasingDemandWhereInterferenceIsLeast) {
  // Order by demand: m1(3), m4(2.5), m2(2), m0(1), m3(0.5).
  // m1 -> u0 (all 0); m4 -> u1 (u0 has 3); m2 -> u2 (3, 2.5, 0); m0 -> u2 (3, 2.5, 2);
  // m3(6 GB): u0 has 5 GB used (no room), u1 2.5 with 2 GB used, u2 has 7 GB (no room) -> u1.
  EXPECT_EQ(place_igniter(tiny()), (Units{2, 0, 2, 1, 1}));
}

TEST(Placement, PinsAndMemoryLimitsAreRespected) {
  PlacementInput in = tiny();
  in.allowed[0] = {false, false, true};  // m0 pinned to u2
  in.vram_request_bytes[4] = 11;         // m4 fits nowhere
  for (const auto& rule : placement_rule_names()) {
    SCOPED_TRACE(rule);
    const auto a = place_by_rule(rule, in);
    EXPECT_EQ(a[0], 2);
    EXPECT_EQ(a[4], kNotPlaced);
    std::vector<double> used(3, 0);
    for (std::size_t m = 0; m < a.size(); ++m) {
      if (a[m] != kNotPlaced) used[static_cast<std::size_t>(a[m])] += in.vram_request_bytes[m];
    }
    for (double u : used) EXPECT_LE(u, 10);
  }
}

}  // namespace
}  // namespace corun::node_placement_test
