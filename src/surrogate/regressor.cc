// Regressor: the kinds' names and the dispatch to each kind (fit, prediction). Training,
// packed and specialised trees and JSON are in the files beside this one.
#include "corun/surrogate/regressor.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <variant>

#include "corun/core/enum_names.h"
#include "regressor_internal.h"

namespace corun::surrogate {

using detail::Overloaded;
using detail::walk_lanes;
using detail::walk_tree;

Matrix Matrix::take(std::span<const std::size_t> idx) const {
  Matrix m(idx.size(), cols);
  for (std::size_t r = 0; r < idx.size(); ++r) {
    std::copy_n(data.begin() + static_cast<std::ptrdiff_t>(idx[r] * cols), cols,
                m.data.begin() + static_cast<std::ptrdiff_t>(r * cols));
  }
  return m;
}

namespace {

constexpr EnumNames<RegressorKind, 3> kRegressorNames{{{{RegressorKind::kMlp, "mlp"},
                                                       {RegressorKind::kGbdt, "gbdt"},
                                                       {RegressorKind::kLinear, "linear"}}}};

}  // namespace

std::string_view to_string(RegressorKind k) { return kRegressorNames.name(k); }

std::optional<RegressorKind> parse_regressor(std::string_view s) {
  return kRegressorNames.parse(s);
}

const std::vector<std::string>& regressor_names() {
  static const std::vector<std::string> names = kRegressorNames.names();
  return names;
}

// ---------------------------------------------------------------------------------------------
// Regressor.

Result<Regressor> Regressor::fit(const Context& ctx, RegressorKind kind, const Matrix& x,
                                 const Matrix& y, const RegressorOptions& options) {
  if (x.rows == 0) return Error("no training rows");
  Regressor r;
  switch (kind) {
    case RegressorKind::kMlp:
      r.model_ = fit_mlp(ctx, x, y, options.mlp);
      break;
    case RegressorKind::kGbdt: {
      auto g = fit_gbdt(ctx, x, y, options.gbdt);
      if (!g) return g.error();
      PackedForest packed = PackedForest::pack(*g);
      r.model_ = Forest{std::move(*g), std::move(packed)};
      break;
    }
    case RegressorKind::kLinear:
      r.model_ = fit_linear(x, y, options.ridge_lambda, options.linear_monotone);
      break;
  }
  return r;
}

RegressorKind Regressor::kind() const {
  return std::visit(Overloaded{[](const MlpModel&) { return RegressorKind::kMlp; },
                               [](const Forest&) { return RegressorKind::kGbdt; },
                               [](const LinearModel&) { return RegressorKind::kLinear; }},
                    model_);
}

int Regressor::inputs() const {
  return std::visit(
      Overloaded{[](const Forest& f) { return f.trees.in; }, [](const auto& m) { return m.in; }},
      model_);
}

int Regressor::outputs() const {
  return std::visit(
      Overloaded{[](const Forest& f) { return f.trees.out; }, [](const auto& m) { return m.out; }},
      model_);
}

namespace {

// Four floats in one SSE register (GCC/Clang vector extension): the auto-vectoriser leaves the
// blocked accumulation below scalar, and this hot loop is what solvers spend their time in.
using F4 = float __attribute__((vector_size(16)));

inline F4 load4(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// y[o] = b[o] + sum_i x[i] w[i][o] over float weights, then ReLU if asked. Outputs are computed
// in blocks of 16 accumulators held in four registers over the whole input loop (each step reads
// one cache line of the row-major weights); inputs that are zero (half of them after a ReLU)
// are skipped.
inline void dense(const float* __restrict x, int in, const float* __restrict w,
                  const float* __restrict b, int out, float* __restrict y, bool relu) {
  const auto no = static_cast<std::size_t>(out);
  const auto ni = static_cast<std::size_t>(in);
  std::size_t ob = 0;
  for (; ob + 16 <= no; ob += 16) {
    F4 a0 = load4(b + ob), a1 = load4(b + ob + 4), a2 = load4(b + ob + 8), a3 = load4(b + ob + 12);
    for (std::size_t i = 0; i < ni; ++i) {
      const float xi = x[i];
      if (xi == 0.0f) continue;
      const F4 xv = {xi, xi, xi, xi};
      const float* wi = w + i * no + ob;
      a0 += xv * load4(wi);
      a1 += xv * load4(wi + 4);
      a2 += xv * load4(wi + 8);
      a3 += xv * load4(wi + 12);
    }
    std::memcpy(y + ob, &a0, sizeof a0);
    std::memcpy(y + ob + 4, &a1, sizeof a1);
    std::memcpy(y + ob + 8, &a2, sizeof a2);
    std::memcpy(y + ob + 12, &a3, sizeof a3);
  }
  for (std::size_t o = ob; o < no; ++o) {  // the few outputs of the last layer
    float acc = b[o];
    for (std::size_t i = 0; i < ni; ++i) acc += x[i] * w[i * no + o];
    y[o] = acc;
  }
  if (relu) {
    for (std::size_t o = 0; o < no; ++o) y[o] = y[o] > 0.0f ? y[o] : 0.0f;
  }
}

}  // namespace

namespace {

void predict_mlp(const MlpModel& m, const float* x, std::size_t n, float* y,
                 RegressorScratch& scratch) {
  if (scratch.h1.size() < static_cast<std::size_t>(m.h1))
    scratch.h1.resize(static_cast<std::size_t>(m.h1));
  if (scratch.h2.size() < static_cast<std::size_t>(m.h2))
    scratch.h2.resize(static_cast<std::size_t>(m.h2));
  for (std::size_t r = 0; r < n; ++r) {
    dense(x + r * static_cast<std::size_t>(m.in), m.in, m.w1.data(), m.b1.data(), m.h1,
          scratch.h1.data(), true);
    dense(scratch.h1.data(), m.h1, m.w2.data(), m.b2.data(), m.h2, scratch.h2.data(), true);
    float* yr = y + r * static_cast<std::size_t>(m.out);
    dense(scratch.h2.data(), m.h2, m.w3.data(), m.b3.data(), m.out, yr, false);
    if (!m.skip.empty()) {
      const float* xr = x + r * static_cast<std::size_t>(m.in);
      const auto no = static_cast<std::size_t>(m.out);
      for (std::size_t i = 0; i < static_cast<std::size_t>(m.in); ++i) {
        const float xi = xr[i];
        const float* wi = m.skip.data() + i * no;
        for (std::size_t o = 0; o < no; ++o) yr[o] += xi * wi[o];
      }
    }
  }
}

// One row through trees [begin, end), summed in GbdtModel's order, plus `base`.
float walk_packed(const PackedForest& f, const float* xr, std::size_t begin, std::size_t end,
                  float base) {
  std::array<float, kSumLanes> lanes{};
  walk_lanes(f, xr, begin, end,
             [&](std::size_t t, float v) { lanes[(t - begin) % kSumLanes] += v; });
  return sum_lanes(lanes.data(), base);
}

void predict_packed(const GbdtModel& m, const PackedForest& f, const float* x, std::size_t n,
                    float* y) {
  const auto no = static_cast<std::size_t>(m.out);
  const auto ni = static_cast<std::size_t>(m.in);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t o = 0; o < no; ++o) {
      y[r * no + o] =
          walk_packed(f, x + r * ni, static_cast<std::size_t>(m.output_tree_begin[o]),
                      static_cast<std::size_t>(m.output_tree_begin[o + 1]), m.base_score[o]);
    }
  }
}

void predict_trees(const GbdtModel& m, const PackedForest& packed, const float* x, std::size_t n,
                   float* y) {
  if (packed.depth >= 0) {
    predict_packed(m, packed, x, n, y);
    return;
  }
  // Tree-major: one tree's nodes stay in cache while every row of the batch walks it.
  const auto no = static_cast<std::size_t>(m.out);
  const auto ni = static_cast<std::size_t>(m.in);
  std::vector<float> lanes(n * kSumLanes);
  for (std::size_t o = 0; o < no; ++o) {
    std::fill(lanes.begin(), lanes.end(), 0.0f);
    const auto begin = static_cast<std::size_t>(m.output_tree_begin[o]);
    const auto end = static_cast<std::size_t>(m.output_tree_begin[o + 1]);
    for (auto t = begin; t < end; ++t) {
      const auto root = static_cast<std::size_t>(m.tree_begin[t]);
      const std::size_t lane = (t - begin) % kSumLanes;
      for (std::size_t r = 0; r < n; ++r) {
        lanes[r * kSumLanes + lane] += walk_tree(m, root, x + r * ni);
      }
    }
    for (std::size_t r = 0; r < n; ++r) {
      y[r * no + o] = sum_lanes(lanes.data() + r * kSumLanes, m.base_score[o]);
    }
  }
}

void predict_linear(const LinearModel& m, const float* x, std::size_t n, float* y) {
  const auto no = static_cast<std::size_t>(m.out);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t o = 0; o < no; ++o) {
      double s = m.b[o];
      for (std::size_t i = 0; i < static_cast<std::size_t>(m.in); ++i) {
        s += static_cast<double>(x[r * static_cast<std::size_t>(m.in) + i]) * m.w[i * no + o];
      }
      y[r * no + o] = static_cast<float>(s);
    }
  }
}

}  // namespace

void Regressor::predict(const float* x, std::size_t n, float* y, RegressorScratch& scratch) const {
  std::visit(Overloaded{[&](const MlpModel& m) { predict_mlp(m, x, n, y, scratch); },
                        [&](const Forest& f) { predict_trees(f.trees, f.packed, x, n, y); },
                        [&](const LinearModel& m) { predict_linear(m, x, n, y); }},
             model_);
}

std::vector<double> Regressor::predict_one(std::span<const double> x) const {
  const std::vector<float> xf(x.begin(), x.end());
  std::vector<float> y(static_cast<std::size_t>(outputs()));
  RegressorScratch scratch;
  predict(xf.data(), 1, y.data(), scratch);
  return {y.begin(), y.end()};
}

}  // namespace corun::surrogate
