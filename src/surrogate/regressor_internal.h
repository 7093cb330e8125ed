#pragma once

// Helpers shared by the regressor's files (regressor.cc and the files split from it): the tree
// walks that more than one form of a forest uses, and the overload set for std::visit.
// Private to src/surrogate.

#include <algorithm>
#include <array>
#include <cstddef>

#include "corun/surrogate/regressor.h"

namespace corun::surrogate::detail {

// Whether a tree walk goes left at `v`: below the threshold, or NaN (which compares false) with
// the default direction left. Branch-free (bitwise on 0/1 integers) on the hot path.
inline bool goes_left(float v, float threshold, bool default_left) {
  return (static_cast<int>(v < threshold) |
          (static_cast<int>(v != v) & static_cast<int>(default_left))) != 0;
}

// Depth of the subtree at `node`, or any value above `limit` once it exceeds it (so that a
// long chain in a malformed file cannot exhaust the stack).
inline int tree_depth(const GbdtModel& m, std::size_t node, int limit) {
  if (m.feature[node] < 0) return 0;
  if (limit <= 0) return 1;
  const int l = tree_depth(m, static_cast<std::size_t>(m.left[node]), limit - 1);
  if (l >= limit) return l + 1;
  return 1 + std::max(l, tree_depth(m, static_cast<std::size_t>(m.right[node]), limit - 1));
}

// Trees [begin, end) of complete binary trees of `depth` levels, eight walked in lockstep so
// that their dependent loads overlap: step(t, node) is the child a row takes at internal node
// `node` of tree t; emit(t, leaf index) is called for each tree, in tree order.
template <class Step, class Emit>
void walk_in_lanes(std::size_t depth, std::size_t begin, std::size_t end, Step step, Emit emit) {
  const std::size_t internal = (std::size_t{1} << depth) - 1;
  constexpr std::size_t kLanes = 8;
  std::size_t t = begin;
  for (; t + kLanes <= end; t += kLanes) {
    std::array<std::size_t, kLanes> node{};
    for (std::size_t level = 0; level < depth; ++level) {
      for (std::size_t j = 0; j < kLanes; ++j) node[j] = step(t + j, node[j]);
    }
    for (std::size_t j = 0; j < kLanes; ++j) emit(t + j, node[j] - internal);
  }
  for (; t < end; ++t) {
    std::size_t node = 0;
    for (std::size_t level = 0; level < depth; ++level) node = step(t, node);
    emit(t, node - internal);
  }
}

// One row through trees [begin, end) of a packed forest: emit(t, leaf value) for each tree,
// in tree order.
template <class Emit>
void walk_lanes(const PackedForest& f, const float* xr, std::size_t begin, std::size_t end,
                Emit emit) {
  const auto depth = static_cast<std::size_t>(f.depth);
  const std::size_t internal = (std::size_t{1} << depth) - 1;
  const std::size_t width = internal + 1;
  walk_in_lanes(
      depth, begin, end,
      [&](std::size_t t, std::size_t node) {
        const std::size_t k = t * internal + node;
        const float v = xr[f.feature[k]];
        // A NaN compares false and takes the default direction, as in the unpacked walk.
        const bool go_left = goes_left(v, f.threshold[k], f.default_left[k] != 0);
        return 2 * node + (go_left ? 1 : 2);
      },
      [&](std::size_t t, std::size_t leaf) { emit(t, f.leaf[t * width + leaf]); });
}

// The leaf row x reaches from `node`.
inline float walk_tree(const GbdtModel& g, std::size_t node, const float* x) {
  while (g.feature[node] >= 0) {
    const bool go_left =
        goes_left(x[g.feature[node]], g.threshold[node], g.default_left[node] != 0);
    node = static_cast<std::size_t>(go_left ? g.left[node] : g.right[node]);
  }
  return g.threshold[node];
}

// One callable from several lambdas, one per alternative of a variant (std::visit).
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace corun::surrogate::detail
