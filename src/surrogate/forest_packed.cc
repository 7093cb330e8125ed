// Packed trees: a GbdtModel laid out as complete binary trees of one depth (PackedForest::pack).
#include "corun/surrogate/regressor.h"

#include <algorithm>

#include "regressor_internal.h"

namespace corun::surrogate {

using detail::tree_depth;

namespace {

// Writes the subtree of `node` at position `pos` of a complete tree of `depth` levels.
void pack_node(const GbdtModel& m, std::size_t node, std::size_t pos, int level, int depth,
               std::size_t tree, PackedForest& f) {
  const std::size_t internal = (std::size_t{1} << depth) - 1;
  if (level == depth) {
    f.leaf[tree * (internal + 1) + (pos - internal)] = m.threshold[node];
    return;
  }
  if (m.feature[node] < 0) {
    // A leaf above the bottom: every leaf under it carries its value, whatever the walk does.
    pack_node(m, node, 2 * pos + 1, level + 1, depth, tree, f);
    pack_node(m, node, 2 * pos + 2, level + 1, depth, tree, f);
    return;
  }
  const std::size_t k = tree * internal + pos;
  f.feature[k] = m.feature[node];
  f.threshold[k] = m.threshold[node];
  f.default_left[k] = m.default_left[node];
  pack_node(m, static_cast<std::size_t>(m.left[node]), 2 * pos + 1, level + 1, depth, tree, f);
  pack_node(m, static_cast<std::size_t>(m.right[node]), 2 * pos + 2, level + 1, depth, tree, f);
}

}  // namespace

PackedForest PackedForest::pack(const GbdtModel& m) {
  PackedForest f;
  int depth = 0;
  for (auto root : m.tree_begin) {
    depth = std::max(depth, tree_depth(m, static_cast<std::size_t>(root), kMaxDepth));
    if (depth > kMaxDepth) return f;
  }
  const std::size_t trees = m.tree_begin.size();
  const std::size_t internal = (std::size_t{1} << depth) - 1;
  f.depth = depth;
  f.feature.assign(trees * internal, 0);
  f.threshold.assign(trees * internal, 0.0f);
  f.default_left.assign(trees * internal, 0);
  f.leaf.assign(trees * (internal + 1), 0.0f);
  for (std::size_t t = 0; t < trees; ++t) {
    pack_node(m, static_cast<std::size_t>(m.tree_begin[t]), 0, 0, depth, t, f);
  }
  return f;
}

}  // namespace corun::surrogate
