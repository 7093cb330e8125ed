// The exact solver's third bound (exact_internal.h): can_beat()'s one-dimensional relaxations
// of the shared load, each a multiple-choice knapsack bounded by its LP relaxation, and the
// ranking of the directions they are taken along.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "exact_internal.h"

namespace corun::detail {

void ExactSearch::rank_directions() {
  std::erase_if(active_dirs, [&](std::size_t j) {
    return dir_tried[j] >= probation && dir_cut[j] * 200 < dir_tried[j];  // under 0.5 % of tries
  });
  std::stable_sort(active_dirs.begin(), active_dirs.end(), [&](std::size_t a, std::size_t b) {
    return dir_cut[a] * (dir_tried[b] + 1) > dir_cut[b] * (dir_tried[a] + 1);
  });
}

// Whether the unassigned models can add more than `need` utility. Each direction j gives
// a one-dimensional relaxation. Let W be the unassigned models' total extent along j and
// A the assigned models'. Monotonicity gives two kinds of ceiling: the assigned models,
// loaded with their exact contributions plus the unassigned models' least, tolerate W up
// to some `cap`; and an unassigned model u in configuration x tolerates A + W up to
// theta[u][x][j]. For each level L of A + W the bound is a multiple-choice knapsack over
// the configurations with theta >= L, capacity L - A, which its LP relaxation bounds;
// between two consecutive thetas the admitted set is fixed and the bound grows with L.
// Walking the levels upwards gives the least L0 at which the bound could exceed `need`
// without any prediction; the assigned models are then checked once, at W = L0 - A: if
// one cannot bear it, cap < L0 - A and the direction proves the cut. Returns false when
// some direction proves that no completion beats `need`.
bool ExactSearch::can_beat(std::size_t depth, const std::vector<float>& sum,
                           const std::vector<float>& rest,
                           const std::vector<std::vector<std::int32_t>>& next,
                           const std::vector<std::vector<double>>& value, double need) {
  const std::size_t last = order.size();
  const std::size_t count = last - depth - 1;
  std::vector<float> probe(dims);
  std::vector<std::vector<Item>> items(count);
  std::vector<double> levels;
  std::vector<std::pair<double, double>> pts, hull, segments;
  if (++calls % 256 == 0) rank_directions();
  for (const std::size_t j : active_dirs) {
    ++dir_tried[j];
    double tmax = 0;
    for (std::size_t d = depth + 1; d < last; ++d) {
      const std::size_t u = order[d];
      double w = 0;
      for (auto l : next[u]) w = std::max(w, ext[u][static_cast<std::size_t>(l)][j]);
      tmax += w;
    }
    if (tmax <= 0) continue;
    double assigned = 0;
    for (std::size_t d = 0; d <= depth; ++d) {
      assigned += ext[order[d]][static_cast<std::size_t>(cur[order[d]])][j];
    }
    const double top = assigned + tmax;
    levels.assign(1, top);
    for (std::size_t d = depth + 1; d < last; ++d) {
      const std::size_t u = order[d];
      auto& group = items[d - depth - 1];
      group.clear();
      for (std::size_t x = 0; x < next[u].size(); ++x) {
        const auto lx = static_cast<std::size_t>(next[u][x]);
        const double th = theta[u][lx][j];
        group.push_back({ext[u][lx][j], value[u][x], th});
        if (th < top && th >= assigned) levels.push_back(th);
      }
    }
    std::sort(levels.begin(), levels.end());
    levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
    // Up the levels: `below` is a total extent up to which nothing beats `need`; `first`
    // a lower bound of the least total at which the unassigned models could.
    double below = assigned;
    double first = std::numeric_limits<double>::infinity();
    for (const double level : levels) {
      const double room = level - assigned;
      // Quick check: the best admitted value of each model, ignoring the capacity.
      double quick = 0;
      for (const auto& group : items) {
        double b = -std::numeric_limits<double>::infinity();
        for (const auto& e : group) {
          if (e.theta >= level && e.w <= room + 1e-12) b = std::max(b, e.v);
        }
        quick += b;
      }
      double least_room = 0;
      if (quick > need &&
          lp_knapsack(items, level, room, need, least_room, pts, hull, segments) > need) {
        first = std::max(below, assigned + least_room);
        break;
      }
      below = level;
    }
    if (std::isinf(first)) {
      ++dir_cut[j];
      return false;
    }
    // Every total extent that could beat `need` is at least `first`. If an assigned model
    // cannot bear the unassigned models' extent that `first` implies, it bears none of
    // them (monotonicity), and this direction proves the cut.
    const double t = first - assigned;
    if (t <= 0) continue;  // bearable: checked by the caller
    for (std::size_t d = 0; d <= depth; ++d) {
      const std::size_t i = order[d];
      const auto& ci = c[i][static_cast<std::size_t>(cur[i])];
      for (std::size_t k = 0; k < dims; ++k) {
        probe[k] = sum[k] - ci[k] + rest[k] + static_cast<float>(t * dirs[j][k]);
      }
      if (!bears(i, cur[i], probe)) {
        ++dir_cut[j];
        return false;
      }
    }
  }
  return true;
}

// LP relaxation of the multiple-choice knapsack: one item per group, among those with
// theta >= level, total weight at most `room`. -inf when a group has no admissible item.
double ExactSearch::lp_knapsack(const std::vector<std::vector<Item>>& items, double level,
                                double room, double need, double& least_room,
                                std::vector<std::pair<double, double>>& pts,
                                std::vector<std::pair<double, double>>& hull,
                                std::vector<std::pair<double, double>>& segments) {
  double total = 0;
  double cap = room;
  segments.clear();
  for (const auto& group : items) {
    pts.clear();
    for (const auto& e : group) {
      if (e.theta >= level && e.w <= room + 1e-12) pts.emplace_back(e.w, e.v);
    }
    if (pts.empty()) return -std::numeric_limits<double>::infinity();
    std::sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) {
      return a.first < b.first || (a.first == b.first && a.second > b.second);
    });
    hull.assign(1, pts[0]);
    for (std::size_t x = 1; x < pts.size(); ++x) {
      if (pts[x].second <= hull.back().second) continue;
      while (hull.size() >= 2) {
        const auto& a = hull[hull.size() - 2];
        const auto& b = hull.back();
        // Drop b when it lies on or under the chord from a to the new point.
        if ((b.second - a.second) * (pts[x].first - a.first) <=
            (pts[x].second - a.second) * (b.first - a.first)) {
          hull.pop_back();
        } else {
          break;
        }
      }
      hull.push_back(pts[x]);
    }
    total += hull[0].second;
    cap -= hull[0].first;
    for (std::size_t x = 1; x < hull.size(); ++x) {
      const double w = hull[x].first - hull[x - 1].first;
      const double dv = hull[x].second - hull[x - 1].second;
      segments.emplace_back(w > 0 ? dv / w : std::numeric_limits<double>::infinity(), w);
    }
  }
  if (cap < -1e-12) return -std::numeric_limits<double>::infinity();
  std::sort(segments.begin(), segments.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  // The least capacity at which the relaxation exceeds `need` (+inf if none does): the
  // relaxation's value grows piecewise linearly with capacity, segment by segment.
  least_room = std::numeric_limits<double>::infinity();
  {
    double v = total, used = room - cap;
    if (v > need) {
      least_room = used;
    } else {
      for (const auto& [slope, w] : segments) {
        if (v + slope * w > need) {
          least_room = used + (need - v) / slope;
          break;
        }
        v += slope * w;
        used += w;
      }
    }
  }
  for (const auto& [slope, w] : segments) {
    if (w <= cap) {
      total += std::isinf(slope) ? 0 : slope * w;
      cap -= w;
    } else {
      total += slope * cap;
      break;
    }
  }
  return total;
}

}  // namespace corun::detail
