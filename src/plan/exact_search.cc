// The exact solver's depth-first search (exact_internal.h): each node's forward checking and
// bounds, the settling of the configurations it left unchecked, and the split of the search
// over threads (run_split).
#include <algorithm>
#include <limits>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>

#include "exact_internal.h"

namespace corun::detail {

// Checks the configurations forward checking left unchecked at this depth (stale): drops
// those that cannot meet their SLA and gives the others their own bound, so that
// can_beat() and the children see exactly what checking all of them would have given.
void ExactSearch::settle(std::size_t depth, const std::vector<float>& sum,
                         const std::vector<float>& rest) {
  auto& next = next_at[depth];
  auto& value = value_at[depth];
  auto& stale = stale_at[depth];
  std::vector<float>& others = settle_load;
  for (std::size_t d = depth + 1; d < order.size(); ++d) {
    const std::size_t u = order[d];
    if (std::find(stale[u].begin(), stale[u].end(), 1) == stale[u].end()) continue;
    for (std::size_t k = 0; k < dims; ++k) {
      others[k] = sum[k] + rest[k] - (rest_min[d][k] - rest_min[d + 1][k]);
    }
    std::size_t kept = 0;
    for (std::size_t y = 0; y < next[u].size(); ++y) {
      const std::int32_t l = next[u][y];
      double v = value[u][y];
      if (stale[u][y] != 0 && !bears(u, l, others, &v)) continue;
      next[u][kept] = l;
      value[u][kept] = v;
      ++kept;
    }
    next[u].resize(kept);
    value[u].resize(kept);
    stale[u].assign(kept, 0);
  }
}

bool ExactSearch::has_stale(std::size_t depth) const {
  const auto& stale = stale_at[depth];
  for (std::size_t d = depth + 1; d < order.size(); ++d) {
    const auto& s = stale[order[d]];
    if (std::find(s.begin(), s.end(), 1) != s.end()) return true;
  }
  return false;
}

void ExactSearch::run() {
  const std::vector<float> none(dims, 0);
  sum_at.assign(order.size(), std::vector<float>(dims, 0));
  std::vector<std::vector<std::int32_t>> domains(p.models());
  std::vector<std::vector<double>> values(p.models());
  for (auto m : order) {
    domains[m] = cands[m];
    for (auto l : cands[m]) values[m].push_back(ub[m][static_cast<std::size_t>(l)]);
  }
  next_at.assign(order.size(), std::vector<std::vector<std::int32_t>>(p.models()));
  value_at.assign(order.size(), std::vector<std::vector<double>>(p.models()));
  stale_at.assign(order.size(), std::vector<std::vector<std::uint8_t>>(p.models()));
  dfs(0, none, 0.0, domains, values, 0.0);
}

void ExactSearch::swap_own() {
  std::swap(best_utility, own.utility);
  std::swap(best, own.best);
  std::swap(dir_tried, own.tried);
  std::swap(dir_cut, own.cut);
  std::swap(active_dirs, own.active);
  std::swap(calls, own.calls);
}

template <class Body>
void ExactSearch::task_run(std::size_t k, Body body) {
  swap_own();
  const double before = best_utility;
  const std::uint64_t n0 = nodes, e0 = evaluated;
  body();
  Split::Task t;
  if (best_utility > before) {
    t.utility = best_utility;
    t.best = best;
  }
  t.nodes = nodes - n0;
  t.evaluated = evaluated - e0;
  task_nodes += t.nodes;
  task_evaluated += t.evaluated;
  {
    std::lock_guard<std::mutex> lock(split->mutex);
    split->tasks.emplace(k, std::move(t));
  }
  swap_own();
}

// Assigns order[depth]. `domains` holds, for every unassigned model, the configurations
// that can still meet their SLA given the assignments so far (forward checking), and
// `values` their optimistic utilities; `assigned` is the assigned models' optimistic
// utility. These bounds only tighten further down, so a child whose bound from them
// cannot beat the incumbent is cut before any prediction, and so are the children after
// it (tried in order of that bound).
void ExactSearch::dfs(std::size_t depth, const std::vector<float>& parent_sum, double vram,
                      const std::vector<std::vector<std::int32_t>>& domains,
                      const std::vector<std::vector<double>>& values, double assigned) {
  if (nodes >= budget) return;
  const std::size_t m = order[depth];
  const std::size_t last = order.size();
  Frame f{depth,
          parent_sum,
          vram,
          domains,
          values,
          p.workload().device.vram_bytes(),
          std::vector<float>(dims),
          std::vector<float>(dims)};
  double rest_best = 0;  // the unassigned models' best optimistic utility, m excluded
  for (std::size_t d = depth + 1; d < last; ++d) {
    const auto& vu = values[order[d]];
    rest_best += *std::max_element(vu.begin(), vu.end());
  }
  std::vector<std::size_t> tried(domains[m].size());
  std::iota(tried.begin(), tried.end(), 0);
  std::stable_sort(tried.begin(), tried.end(),
                   [&](auto x, auto y) { return values[m][x] > values[m][y]; });
  for (const std::size_t x : tried) {
    if (!(assigned + values[m][x] + rest_best > best_utility + 1e-12)) break;
    if (split == nullptr || depth != split->depth) {
      visit(f, x);
      continue;
    }
    // A task of the split search: every worker meets every task, in the same order, and
    // runs those dealt to it (round robin).
    const std::size_t k = task++;
    if (k % split->workers != worker) continue;
    task_run(k, [&] { visit(f, x); });
  }
}

void ExactSearch::visit(Frame& f, std::size_t x) {
  const std::size_t depth = f.depth;
  const std::size_t m = order[depth];
  const std::size_t last = order.size();
  auto& next = next_at[depth];
  auto& value = value_at[depth];
  auto& sum = sum_at[depth];
  std::vector<float>& rest = f.rest;
  const std::int32_t l = f.domains[m][x];
  ++nodes;
  const auto lu = static_cast<std::size_t>(l);
  const double v = f.vram + p.space().local_vram_bytes(m, lu);
  if (v + rest_vram[depth + 1] > f.capacity) return;
  // The assigned load, added afresh from the parent's (an add-then-subtract in place
  // would drift over millions of nodes).
  for (std::size_t k = 0; k < dims; ++k) sum[k] = f.parent_sum[k] + c[m][lu][k];
  cur[m] = l;
  // Forward checking: filter every unassigned model's domain against the assigned load
  // plus the least the other unassigned models can add; keep its best utility bound.
  double bound = 0;
  rest = rest_min[depth + 1];
  bool ok = forward_check(f, &bound);
  const double unassigned_bound = bound;
  // Optimistic metrics of every assigned model; prune on a certain SLA breach or bound.
  ok = ok && assigned_models_bear(f, &bound);
  if (ok && bound > best_utility + 1e-12 && depth + 1 < last) {
    const double need = best_utility + 1e-12 - (bound - unassigned_bound);
    // First with the unchecked configurations at their parents' bounds (valid, looser);
    // only a node that this does not cut pays for checking them and tries again.
    const bool stale_left = has_stale(depth);
    if (stale_left && !can_beat(depth, sum, rest, next, value, need)) {
      ok = false;
    } else {
      settle(depth, sum, rest);
      if (!can_beat(depth, sum, rest, next, value, need)) ok = false;
    }
  }
  if (ok && bound > best_utility + 1e-12) {
    if (depth + 1 == last) {
      const PlanResult r = evaluate_plan(p, cur, "exact");
      ++evaluated;
      if (r.feasible && r.utility > best_utility) {
        best_utility = r.utility;
        best = cur;
      }
    } else {
      dfs(depth + 1, sum, v, next, value, bound - unassigned_bound);
    }
  }
  cur[m] = kAbsent;
}

bool ExactSearch::forward_check(Frame& f, double* bound) {
  const std::size_t depth = f.depth;
  const std::size_t last = order.size();
  const auto& domains = f.domains;
  const auto& values = f.values;
  auto& next = next_at[depth];
  auto& value = value_at[depth];
  auto& stale = stale_at[depth];
  const auto& sum = sum_at[depth];
  const auto& rest = f.rest;
  auto& others = f.others;
  bool ok = true;
  for (std::size_t d = depth + 1; d < last && ok; ++d) {
    const std::size_t u = order[d];
    const auto& cmin_u = rest_min[d];
    const auto& cmin_next = rest_min[d + 1];
    for (std::size_t k = 0; k < dims; ++k) {
      others[k] = sum[k] + rest[k] - (cmin_u[k] - cmin_next[k]);
    }
    next[u].clear();
    value[u].clear();
    stale[u].clear();
    double best_u = -std::numeric_limits<double>::infinity();
    const auto& du = domains[u];
    const auto& vu = values[u];
    for (std::size_t y = 0; y < du.size(); ++y) {
      const std::int32_t lu2 = du[y];
      // Worth no more than a configuration already checked: it cannot change this
      // model's bound, so it keeps its parent's (still valid) until can_beat() needs it.
      if (vu[y] <= best_u) {
        next[u].push_back(lu2);
        value[u].push_back(vu[y]);
        stale[u].push_back(1);
        continue;
      }
      double vy = 0;
      if (!bears(u, lu2, others, &vy)) continue;
      next[u].push_back(lu2);
      value[u].push_back(vy);
      stale[u].push_back(0);
      best_u = std::max(best_u, value[u].back());
    }
    if (next[u].empty()) ok = false;
    *bound += best_u;
  }
  return ok;
}

bool ExactSearch::assigned_models_bear(Frame& f, double* bound) {
  const std::size_t depth = f.depth;
  const auto& sum = sum_at[depth];
  const auto& rest = f.rest;
  auto& others = f.others;
  bool ok = true;
  for (std::size_t d = 0; d <= depth && ok; ++d) {
    const std::size_t i = order[d];
    const auto li = static_cast<std::size_t>(cur[i]);
    for (std::size_t k = 0; k < dims; ++k) others[k] = sum[k] - c[i][li][k] + rest[k];
    double vi = 0;
    ok = bears(i, cur[i], others, &vi);
    *bound += vi;
  }
  return ok;
}

// The search split over `workers` threads (this one included) at depth 1. The plan is the
// sequential search's (the first of the best plans in search order), whatever the number of
// workers; the statistics depend on that number only.
void ExactSearch::run_split(int workers) {
  if (workers <= 1 || order.size() < 3) {
    run();
    return;
  }
  Split sp;
  sp.depth = 1;
  sp.workers = static_cast<std::size_t>(workers);
  const std::uint64_t n0 = nodes, e0 = evaluated;
  own = Own{best_utility, best, dir_tried, dir_cut, active_dirs, calls};
  split = &sp;
  std::vector<ExactSearch> copies(sp.workers - 1, *this);
  std::vector<std::thread> pool;
  probation = kProbation / sp.workers;
  for (std::size_t w = 0; w < copies.size(); ++w) {
    copies[w].probation = probation;
    copies[w].worker = w + 1;
    pool.emplace_back([&copies, w] { copies[w].run(); });
  }
  run();
  for (auto& t : pool) t.join();
  // The levels above the tasks were walked by every worker alike: counted once (this one's).
  nodes = n0 + (nodes - n0 - task_nodes);
  evaluated = e0 + (evaluated - e0 - task_evaluated);
  for (const auto& [k, t] : sp.tasks) {
    nodes += t.nodes;
    evaluated += t.evaluated;
    // In task order, a strictly better plan only: the first of the best in search order.
    if (t.utility > best_utility) {
      best_utility = t.utility;
      best = t.best;
    }
  }
  split = nullptr;
}

}  // namespace corun::detail
