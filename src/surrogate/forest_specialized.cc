// Specialised trees: a GBDT with some of its inputs held fixed (Regressor::specialize), and
// its prediction (SpecializedForest).
#include "corun/surrogate/regressor.h"

#include <algorithm>
#include <array>
#include <limits>
#include <variant>

#include "corun/core/check.h"
#include "regressor_internal.h"

namespace corun::surrogate {

using detail::goes_left;
using detail::tree_depth;
using detail::walk_in_lanes;
using detail::walk_lanes;
using detail::walk_tree;

namespace {

// Copies the subtree of `node` of `m` into `g` with splits on fixed inputs resolved; returns
// the index of its copy.
std::int32_t copy_free(const GbdtModel& m, std::size_t node, const float* x,
                       std::span<const std::uint8_t> fixed, GbdtModel& g) {
  while (m.feature[node] >= 0 && fixed[static_cast<std::size_t>(m.feature[node])] != 0) {
    const float v = x[m.feature[node]];
    const bool go_left = goes_left(v, m.threshold[node], m.default_left[node] != 0);
    node = static_cast<std::size_t>(go_left ? m.left[node] : m.right[node]);
  }
  const auto at = static_cast<std::int32_t>(g.feature.size());
  g.feature.push_back(m.feature[node]);
  g.threshold.push_back(m.threshold[node]);
  g.default_left.push_back(m.default_left[node]);
  g.left.push_back(-1);
  g.right.push_back(-1);
  if (m.feature[node] < 0) return at;
  const std::int32_t l = copy_free(m, static_cast<std::size_t>(m.left[node]), x, fixed, g);
  const std::int32_t r = copy_free(m, static_cast<std::size_t>(m.right[node]), x, fixed, g);
  g.left[static_cast<std::size_t>(at)] = l;
  g.right[static_cast<std::size_t>(at)] = r;
  return at;
}

// The distinct inputs the subtree of `node` splits on, appended to `seen`.
void tree_inputs(const GbdtModel& g, std::size_t node, std::vector<std::int32_t>& seen) {
  if (g.feature[node] < 0) return;
  if (std::find(seen.begin(), seen.end(), g.feature[node]) == seen.end()) {
    seen.push_back(g.feature[node]);
  }
  tree_inputs(g, static_cast<std::size_t>(g.left[node]), seen);
  tree_inputs(g, static_cast<std::size_t>(g.right[node]), seen);
}

// The thresholds the subtree of `node` compares with.
void tree_thresholds(const GbdtModel& g, std::size_t node, std::vector<float>& out) {
  if (g.feature[node] < 0) return;
  out.push_back(g.threshold[node]);
  tree_thresholds(g, static_cast<std::size_t>(g.left[node]), out);
  tree_thresholds(g, static_cast<std::size_t>(g.right[node]), out);
}

// Largest output count a specialised forest sums on the stack.
constexpr std::size_t kMaxSpecialOut = 8;

/// Copies the trees of `m` with their splits on fixed inputs resolved at `x`, unpacked.
GbdtModel resolve_fixed_inputs(const GbdtModel& m, const float* x,
                               std::span<const std::uint8_t> fixed) {
  GbdtModel g;  // the specialised trees, unpacked
  g.in = m.in;
  g.out = m.out;
  for (auto root : m.tree_begin) {
    g.tree_begin.push_back(copy_free(m, static_cast<std::size_t>(root), x, fixed, g));
  }
  return g;
}

/// Sets the cut inputs of `f` and their cuts (sorted, distinct thresholds).
void collect_cuts(const GbdtModel& g, SpecializedForest& f) {
  // The comparisons left: every split of the specialised trees, by input.
  std::vector<std::vector<float>> by_input(static_cast<std::size_t>(g.in));
  for (std::size_t i = 0; i < g.feature.size(); ++i) {
    if (g.feature[i] >= 0)
      by_input[static_cast<std::size_t>(g.feature[i])].push_back(g.threshold[i]);
  }
  for (std::size_t k = 0; k < by_input.size(); ++k) {
    auto& c = by_input[k];
    if (c.empty()) continue;
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    if (c.size() >= SpecializedForest::kNanRank) f.has_cells = false;  // ranks fit 16 bits
    f.cut_inputs.push_back(static_cast<std::int32_t>(k));
    f.cuts.push_back(std::move(c));
  }
}

// The trees of a specialised forest by what is left of each (see sort_trees), and the scratch
// the sorting reuses from tree to tree.
struct SortedTrees {
  std::vector<std::vector<float>> steps;
  std::vector<std::vector<float>> nan_value;
  std::vector<std::vector<std::int32_t>> by_depth;
  std::vector<std::int32_t> tree_out;  // each tree's output
  std::vector<float> row;
  std::vector<std::int32_t> inputs;
  std::vector<float> thresholds;
};

/// Adds output o's tree at `root`, which splits on the one input st.inputs[0], to that input's
/// steps: its value below every threshold, the change at each threshold's rank, and at NaN.
void add_step_tree(const GbdtModel& g, std::size_t root, std::size_t o, const SpecializedForest& f,
                   SortedTrees& st) {
  const auto no = static_cast<std::size_t>(f.out);
  std::vector<std::vector<float>>& steps = st.steps;
  std::vector<std::vector<float>>& nan_value = st.nan_value;
  std::vector<float>& row = st.row;
  std::vector<float>& thresholds = st.thresholds;
  const std::vector<std::int32_t>& inputs = st.inputs;
  const auto k = static_cast<std::size_t>(inputs[0]);
  const auto j = static_cast<std::size_t>(
      std::find(f.cut_inputs.begin(), f.cut_inputs.end(), inputs[0]) - f.cut_inputs.begin());
  const std::vector<float>& c = f.cuts[j];
  if (steps[j].empty()) {
    steps[j].assign((c.size() + 1) * no, 0.0f);
    nan_value[j].assign(no, 0.0f);
  }
  thresholds.clear();
  tree_thresholds(g, root, thresholds);
  std::sort(thresholds.begin(), thresholds.end());
  thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());
  // Below every threshold, then at each one: a value at threshold θ has rank (index of θ
  // among the cuts) + 1 and walks as every value of that rank does.
  row[k] = -std::numeric_limits<float>::infinity();
  float before = walk_tree(g, root, row.data());
  steps[j][o] += before;
  for (float th : thresholds) {
    const auto r =
        static_cast<std::size_t>(std::lower_bound(c.begin(), c.end(), th) - c.begin()) + 1;
    row[k] = th;
    const float v = walk_tree(g, root, row.data());
    steps[j][r * no + o] += v - before;
    before = v;
  }
  row[k] = std::numeric_limits<float>::quiet_NaN();
  nan_value[j][o] += walk_tree(g, root, row.data());
  row[k] = 0.0f;
}

/// Sorts the trees of `g` by what is left of each: a constant (summed into f.constant), a step
/// function of one input (add_step_tree), or a tree to walk (by depth).
SortedTrees sort_trees(const GbdtModel& m, const GbdtModel& g, SpecializedForest& f) {
  const auto no = static_cast<std::size_t>(m.out);
  SortedTrees st;
  st.steps.resize(f.cut_inputs.size());
  st.nan_value.resize(f.cut_inputs.size());
  st.by_depth.resize(PackedForest::kMaxDepth + 1);
  st.tree_out.assign(m.tree_begin.size(), 0);
  st.row.assign(static_cast<std::size_t>(g.in), 0.0f);
  for (std::size_t o = 0; o < no; ++o) {
    for (auto t = static_cast<std::size_t>(m.output_tree_begin[o]);
         t < static_cast<std::size_t>(m.output_tree_begin[o + 1]); ++t) {
      const auto root = static_cast<std::size_t>(g.tree_begin[t]);
      st.inputs.clear();
      tree_inputs(g, root, st.inputs);
      if (st.inputs.empty()) {
        f.constant[o] += g.threshold[root];
        continue;
      }
      if (st.inputs.size() == 1 && f.has_cells) {
        add_step_tree(g, root, o, f, st);
        continue;
      }
      const int d = tree_depth(g, root, PackedForest::kMaxDepth);
      st.by_depth[static_cast<std::size_t>(d)].push_back(static_cast<std::int32_t>(t));
      st.tree_out[t] = static_cast<std::int32_t>(o);
    }
  }
  return st;
}

/// Prefix-sums each input's steps into its table (by rank, then the NaN row).
void fill_step_tables(const SortedTrees& st, SpecializedForest& f) {
  const auto no = static_cast<std::size_t>(f.out);
  const std::vector<std::vector<float>>& steps = st.steps;
  const std::vector<std::vector<float>>& nan_value = st.nan_value;
  for (std::size_t j = 0; j < steps.size(); ++j) {
    if (steps[j].empty()) continue;
    const std::size_t ranks = f.cuts[j].size() + 1;
    std::vector<float>& tab = f.table[j];
    tab.assign((ranks + 1) * no, 0.0f);
    for (std::size_t o = 0; o < no; ++o) {
      float acc = 0;
      for (std::size_t r = 0; r < ranks; ++r) {
        acc += steps[j][r * no + o];
        tab[r * no + o] = acc;
      }
      tab[ranks * no + o] = nan_value[j][o];
    }
  }
}

/// The walk of `packed` on a row's ranks: each internal node as its threshold's index among its
/// input's cuts (16 bits), the input's index among the cut inputs (8) and its NaN direction.
SpecializedForest::RankGroup rank_group(PackedForest packed, const SpecializedForest& f) {
  // Padding under a leaf copied down (pack_node) keeps whatever it maps to: every leaf under
  // it is the same.
  SpecializedForest::RankGroup rg;
  rg.depth = packed.depth;
  rg.leaf = std::move(packed.leaf);
  rg.node.resize(packed.feature.size());
  for (std::size_t k = 0; k < packed.feature.size(); ++k) {
    const auto at = std::find(f.cut_inputs.begin(), f.cut_inputs.end(), packed.feature[k]);
    std::uint32_t j = 0, q = 0;
    if (at != f.cut_inputs.end()) {
      j = static_cast<std::uint32_t>(at - f.cut_inputs.begin());
      const auto& c = f.cuts[j];
      q = static_cast<std::uint32_t>(std::lower_bound(c.begin(), c.end(), packed.threshold[k]) -
                                     c.begin());
    }
    rg.node[k] = q | j << 16 | std::uint32_t{packed.default_left[k] != 0} << 24;
  }
  return rg;
}

/// Packs the trees left to walk into f's groups, one per depth: walked on the ranks when the
/// forest has cells (rank_groups), on the values otherwise (groups).
void add_walked_groups(const GbdtModel& g, const SortedTrees& st, SpecializedForest& f) {
  const std::vector<std::vector<std::int32_t>>& by_depth = st.by_depth;
  const std::vector<std::int32_t>& tree_out = st.tree_out;
  for (std::size_t d = 0; d < by_depth.size(); ++d) {
    if (by_depth[d].empty()) continue;
    GbdtModel part;
    part.in = g.in;
    part.out = 1;
    part.feature = g.feature;
    part.threshold = g.threshold;
    part.default_left = g.default_left;
    part.left = g.left;
    part.right = g.right;
    std::vector<std::uint16_t> to;
    for (auto t : by_depth[d]) {
      part.tree_begin.push_back(g.tree_begin[static_cast<std::size_t>(t)]);
      const auto lane = to.size() % kSumLanes;
      to.push_back(static_cast<std::uint16_t>(
          static_cast<std::size_t>(tree_out[static_cast<std::size_t>(t)]) * kSumLanes + lane));
    }
    PackedForest packed = PackedForest::pack(part);
    f.slot.push_back(std::move(to));
    if (!f.has_cells || f.cut_inputs.size() > 0xFF) {
      f.groups.push_back(std::move(packed));
      continue;
    }
    f.rank_groups.push_back(rank_group(std::move(packed), f));
  }
}

}  // namespace

void SpecializedForest::predict(const float* x, const std::uint16_t* ranks, float* y) const {
  std::array<float, kMaxSpecialOut * kSumLanes> acc{};
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::uint16_t* to = slot[g].data();
    walk_lanes(groups[g], x, 0, slot[g].size(), [&](std::size_t t, float v) { acc[to[t]] += v; });
  }
  for (std::size_t g = 0; g < rank_groups.size(); ++g) {
    const RankGroup& f = rank_groups[g];
    const std::uint16_t* to = slot[g].data();
    const auto depth = static_cast<std::size_t>(f.depth);
    const std::size_t internal = (std::size_t{1} << depth) - 1;
    const std::uint32_t* node = f.node.data();
    const float* leaf = f.leaf.data();
    walk_in_lanes(
        depth, 0, slot[g].size(),
        [&](std::size_t t, std::size_t k) {
          const std::uint32_t w = node[t * internal + k];
          const std::uint32_t r = ranks[(w >> 16) & 0xFF];
          // x < threshold q  <=>  fewer than q + 1 thresholds are <= x; NaN: its default.
          // Arithmetic, not branches: the directions are unpredictable.
          const std::size_t left = static_cast<std::size_t>(r <= (w & 0xFFFF)) |
                                   static_cast<std::size_t>((w >> 24) & (r == kNanRank));
          return 2 * k + 2 - left;
        },
        [&](std::size_t t, std::size_t l) { acc[to[t]] += leaf[t * (internal + 1) + l]; });
  }
  const auto no = static_cast<std::size_t>(out);
  for (std::size_t o = 0; o < no; ++o) {
    y[o] = sum_lanes(acc.data() + o * kSumLanes, base_score[o]) + constant[o];
  }
  for (std::size_t j = 0; j < table.size(); ++j) {
    if (table[j].empty()) continue;
    const std::size_t r = ranks[j] == kNanRank ? cuts[j].size() + 1 : ranks[j];
    const float* row = table[j].data() + r * no;
    for (std::size_t o = 0; o < no; ++o) y[o] += row[o];
  }
}

void SpecializedForest::predict(const float* x, float* y,
                                std::vector<std::uint16_t>& scratch) const {
  if (scratch.size() < cut_inputs.size()) scratch.resize(cut_inputs.size());
  if (has_cells) cell(x, scratch.data());
  predict(x, scratch.data(), y);
}

void SpecializedForest::cell(const float* x, std::uint16_t* ranks) const {
  for (std::size_t j = 0; j < cut_inputs.size(); ++j) {
    const float v = x[cut_inputs[j]];
    if (v != v) {
      ranks[j] = kNanRank;
      continue;
    }
    // How many thresholds are <= v, by a binary search without branches (each step a
    // conditional move: the thresholds' order makes the branches unpredictable).
    const std::vector<float>& c = cuts[j];
    const float* base = c.data();
    std::size_t n = c.size();
    while (n > 1) {
      const std::size_t half = n / 2;
      base = base[half - 1] <= v ? base + half : base;
      n -= half;
    }
    ranks[j] = static_cast<std::uint16_t>(base - c.data() + (n == 1 && *base <= v ? 1 : 0));
  }
}

std::optional<SpecializedForest> Regressor::specialize(const float* x,
                                                       std::span<const std::uint8_t> fixed) const {
  // Only trees of bounded depth (all that XGBoost grows here): the copy recurses.
  const auto* forest = std::get_if<Forest>(&model_);
  if (forest == nullptr || forest->packed.depth < 0) return std::nullopt;
  const GbdtModel& m = forest->trees;
  CORUN_CHECK(fixed.size() >= static_cast<std::size_t>(m.in));
  const GbdtModel g = resolve_fixed_inputs(m, x, fixed);
  SpecializedForest f;
  collect_cuts(g, f);
  if (m.out < 1 || static_cast<std::size_t>(m.out) > kMaxSpecialOut) return std::nullopt;
  const auto no = static_cast<std::size_t>(m.out);
  f.out = m.out;
  f.base_score = m.base_score;
  f.constant.assign(no, 0.0f);
  f.table.assign(f.cut_inputs.size(), {});
  // Each tree by what is left of it: a constant, a step function of one input (summed into
  // that input's table as steps at its thresholds' ranks, then prefix-summed: same-signed
  // steps for a monotone tree), or a tree to walk.
  const SortedTrees st = sort_trees(m, g, f);
  fill_step_tables(st, f);
  add_walked_groups(g, st, f);
  return f;
}

}  // namespace corun::surrogate