#include "corun/mapping/heft.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

namespace corun::mapping {

Result<HeftSchedule> heft(const HeftProblem& hp) {
  const std::size_t n = hp.tasks;
  const std::size_t procs = hp.processors;
  if (procs == 0 || hp.cost.size() != n * procs) {
    return Error("HEFT: cost table must have tasks x processors entries");
  }
  std::vector<std::vector<std::pair<std::size_t, double>>> succ(n), pred(n);
  for (const auto& e : hp.edges) {
    if (e.from >= n || e.to >= n || e.from == e.to) return Error("HEFT: bad edge");
    succ[e.from].emplace_back(e.to, e.comm);
    pred[e.to].emplace_back(e.from, e.comm);
  }
  std::vector<double> mean_w(n, 0);
  for (std::size_t t = 0; t < n; ++t) {
    int runnable = 0;
    for (std::size_t p = 0; p < procs; ++p) {
      if (std::isfinite(hp.w(t, p))) {
        mean_w[t] += hp.w(t, p);
        ++runnable;
      }
    }
    if (runnable == 0) return Error("HEFT: task " + std::to_string(t) + " has no processor");
    mean_w[t] /= runnable;
  }
  // Upward ranks in reverse topological order (Kahn on the reversed graph).
  HeftSchedule s;
  s.rank_u.assign(n, 0);
  std::vector<std::size_t> outdeg(n);
  std::vector<std::size_t> stack;
  for (std::size_t t = 0; t < n; ++t) {
    outdeg[t] = succ[t].size();
    if (outdeg[t] == 0) stack.push_back(t);
  }
  std::size_t ranked = 0;
  while (!stack.empty()) {
    const std::size_t t = stack.back();
    stack.pop_back();
    ++ranked;
    double best = 0;
    for (const auto& [j, c] : succ[t]) best = std::max(best, c + s.rank_u[j]);
    s.rank_u[t] = mean_w[t] + best;
    for (const auto& [i, c] : pred[t]) {
      (void)c;
      if (--outdeg[i] == 0) stack.push_back(i);
    }
  }
  if (ranked != n) return Error("HEFT: the task graph has a cycle");
  s.order.resize(n);
  std::iota(s.order.begin(), s.order.end(), std::size_t{0});
  // Decreasing rank is a topological order when costs are positive; ties go to the lower
  // index (the paper's example lists n3 before n4 at rank 80).
  // Ranks equal up to rounding (80 computed as 14.333 + 23 + 42.667) count as ties.
  std::stable_sort(s.order.begin(), s.order.end(), [&](std::size_t a, std::size_t b) {
    const double ra = s.rank_u[a], rb = s.rank_u[b];
    return ra - rb > 1e-9 * std::max({1.0, std::abs(ra), std::abs(rb)});
  });

  s.processor.assign(n, 0);
  s.start.assign(n, 0);
  s.finish.assign(n, 0);
  std::vector<bool> done(n, false);
  // Busy intervals per processor, kept sorted by start.
  std::vector<std::vector<std::pair<double, double>>> busy(procs);
  for (const std::size_t t : s.order) {
    for (const auto& [i, c] : pred[t]) {
      (void)c;
      if (!done[i]) return Error("HEFT: rank order is not topological (zero-cost tasks?)");
    }
    double best_finish = std::numeric_limits<double>::infinity();
    double best_start = 0;
    std::size_t best_proc = 0;
    for (std::size_t p = 0; p < procs; ++p) {
      const double w = hp.w(t, p);
      if (!std::isfinite(w)) continue;
      double ready = 0;
      for (const auto& [i, c] : pred[t]) {
        ready = std::max(ready, s.finish[i] + (s.processor[i] == p ? 0.0 : c));
      }
      // Insertion policy: the earliest gap between scheduled tasks that fits w after `ready`.
      double start = ready;
      for (const auto& [b0, b1] : busy[p]) {
        if (start + w <= b0) break;
        start = std::max(start, b1);
      }
      if (start + w < best_finish) {
        best_finish = start + w;
        best_start = start;
        best_proc = p;
      }
    }
    s.processor[t] = best_proc;
    s.start[t] = best_start;
    s.finish[t] = best_finish;
    done[t] = true;
    auto& b = busy[best_proc];
    b.insert(std::upper_bound(b.begin(), b.end(), std::make_pair(best_start, best_finish)),
             {best_start, best_finish});
    s.makespan = std::max(s.makespan, best_finish);
  }
  return s;
}

}  // namespace corun::mapping
