// HEFT on the worked example of Topcuoglu, Hariri and Wu, "Performance-Effective and
// Low-Complexity Task Scheduling for Heterogeneous Computing", IEEE TPDS 13(3):260-274, 2002,
// Fig. 2 (10 tasks, 3 processors): upward ranks in its Table 2, HEFT makespan 80 (Fig. 4a).
#include "corun/mapping/heft.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace corun::mapping::heft_test {
namespace {

HeftProblem topcuoglu_2002() {
  HeftProblem p;
  p.tasks = 10;
  p.processors = 3;
  // Computation costs W (Fig. 2, table): rows n1..n10, columns P1..P3.
  // clang-format off
  p.cost = {14, 16,  9,   // n1
            13, 19, 18,   // n2
            11, 13, 19,   // n3
            13,  8, 17,   // n4
            12, 13, 10,   // n5
            13, 16,  9,   // n6
             7, 15, 11,   // n7
             5, 11, 14,   // n8
            18, 12, 20,   // n9
            21,  7, 16};  // n10
  // clang-format on
  // Edges with their communication costs (Fig. 2, graph), 0-based.
  p.edges = {{0, 1, 18}, {0, 2, 12}, {0, 3, 9},  {0, 4, 11}, {0, 5, 14},
             {1, 7, 19}, {1, 8, 16}, {2, 6, 23}, {3, 7, 27}, {3, 8, 23},
             {4, 8, 13}, {5, 7, 15}, {6, 9, 17}, {7, 9, 11}, {8, 9, 13}};
  return p;
}

TEST(Heft, TopcuogluExampleMakespanIs80) {
  auto s = heft(topcuoglu_2002());
  ASSERT_TRUE(s.ok()) << s.error().what();
  EXPECT_DOUBLE_EQ(s->makespan, 80.0);
}

TEST(Heft, TopcuogluExampleUpwardRanks) {
  auto s = heft(topcuoglu_2002());
  ASSERT_TRUE(s.ok());
  // Table 2 of the paper: rank_u of n1..n10.
  const double expected[] = {108.0, 77.0, 80.0, 80.0, 69.0, 63.333, 42.667, 35.667, 44.333, 14.667};
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(s->rank_u[i], expected[i], 1e-3) << "n" << i + 1;
  // Scheduling order listed in the paper: n1, n3, n4, n2, n5, n6, n9, n7, n8, n10.
  const std::vector<std::size_t> order = {0, 2, 3, 1, 4, 5, 8, 6, 7, 9};
  EXPECT_EQ(s->order, order);
  // The exit task n10 runs last on P2 and finishes at 80 (Fig. 4a).
  EXPECT_EQ(s->processor[9], 1u);
  EXPECT_DOUBLE_EQ(s->finish[9], 80.0);
}

TEST(Heft, InsertionFillsAnIdleGap) {
  // x runs only on P1 (cost 4) and sends y 6 units of data; y runs only on P0 (cost 2), so y
  // starts at 4 + 6 = 10 and P0 idles over [0, 10). z (cost 1, independent, P0 only) has the
  // lowest rank (1 < y's 2 < x's 12) and is scheduled last: insertion puts it at 0 in the
  // gap instead of appending it at 12.
  const double inf = std::numeric_limits<double>::infinity();
  HeftProblem p;
  p.tasks = 3;
  p.processors = 2;
  p.cost = {inf, 4,     // x
            2,   inf,   // y
            1,   inf};  // z
  p.edges = {{0, 1, 6}};
  auto s = heft(p);
  ASSERT_TRUE(s.ok());
  const std::vector<std::size_t> order = {0, 1, 2};
  EXPECT_EQ(s->order, order);
  EXPECT_DOUBLE_EQ(s->start[1], 10.0);
  EXPECT_DOUBLE_EQ(s->start[2], 0.0);
  EXPECT_DOUBLE_EQ(s->makespan, 12.0);
}

TEST(Heft, RejectsCyclesAndUnrunnableTasks) {
  HeftProblem cyc;
  cyc.tasks = 2;
  cyc.processors = 1;
  cyc.cost = {1, 1};
  cyc.edges = {{0, 1, 0}, {1, 0, 0}};
  EXPECT_FALSE(heft(cyc).ok());
  HeftProblem none;
  none.tasks = 1;
  none.processors = 1;
  none.cost = {std::numeric_limits<double>::infinity()};
  EXPECT_FALSE(heft(none).ok());
}

}  // namespace
}  // namespace corun::mapping::heft_test
