#pragma once

// HEFT (Topcuoglu, Hariri, Wu: "Performance-Effective and Low-Complexity Task Scheduling for
// Heterogeneous Computing", IEEE TPDS 13(3), 2002): list scheduling of a task DAG on any
// number of processors with per-processor costs and per-edge communication costs.

#include <cstddef>
#include <vector>

#include "corun/core/result.h"

namespace corun::mapping {

/// @brief A HEFT instance. cost[t * processors + p] is task t's execution time on processor
/// p (+infinity: t cannot run there). An edge's communication cost is paid only when its two
/// tasks run on different processors.
struct HeftProblem {
  struct Edge {
    std::size_t from = 0;
    std::size_t to = 0;
    double comm = 0;
  };
  std::size_t tasks = 0;
  std::size_t processors = 0;
  std::vector<double> cost;
  std::vector<Edge> edges;

  [[nodiscard]] double w(std::size_t task, std::size_t proc) const {
    return cost[task * processors + proc];
  }
};

/// @brief HEFT's schedule: upward ranks, the order tasks were scheduled in, and each task's
/// processor and times.
struct HeftSchedule {
  std::vector<double> rank_u;      ///< per task
  std::vector<std::size_t> order;  ///< tasks by decreasing rank_u (ties: lower index first)
  std::vector<std::size_t> processor;
  std::vector<double> start;
  std::vector<double> finish;
  double makespan = 0;
};

/// @brief Runs HEFT: rank_u(i) = w̄_i + max over successors j of (c̄_ij + rank_u(j)), where
/// w̄_i is the mean cost over the processors that can run i and c̄_ij the edge's cost; then,
/// in decreasing rank order, each task goes to the processor with the earliest finish time,
/// inserted into the earliest idle gap long enough after its data-ready time.
/// Errors: a task no processor can run, a bad edge, or a cycle.
Result<HeftSchedule> heft(const HeftProblem& problem);

}  // namespace corun::mapping
