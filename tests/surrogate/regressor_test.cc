// Regressors on synthetic data with known answers: ridge recovers coefficients (and respects
// sign constraints), the MLP learns a nonlinear function, the flat GBDT export predicts exactly
// what XGBoost predicts, its packed form predicts bit for bit what the flat trees do and its
// specialised form the same up to float rounding (and stays monotone where the trees are), and
// model JSON round-trips (and malformed JSON is refused).
#include "corun/surrogate/regressor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>

#include "corun/core/rng.h"

namespace corun::surrogate::regressor_test {
namespace {

// x uniform in [-1, 1]^d; y = f(x).
template <class F>
void make_data(std::size_t n, std::size_t d, std::size_t k, std::uint64_t seed, F f, Matrix& x,
               Matrix& y) {
  Rng rng(seed);
  x = Matrix(n, d);
  y = Matrix(n, k);
  std::vector<double> row(d), out(k);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t c = 0; c < d; ++c) row[c] = x.at(r, c) = 2 * rng.uniform() - 1;
    f(row, out);
    for (std::size_t c = 0; c < k; ++c) y.at(r, c) = out[c];
  }
}

double r2(const Regressor& reg, const Matrix& x, const Matrix& y, std::size_t col) {
  double mean = 0;
  for (std::size_t r = 0; r < y.rows; ++r) mean += y.at(r, col);
  mean /= static_cast<double>(y.rows);
  double ss_res = 0, ss_tot = 0;
  for (std::size_t r = 0; r < x.rows; ++r) {
    const auto p = reg.predict_one(x.row(r));
    ss_res += (p[col] - y.at(r, col)) * (p[col] - y.at(r, col));
    ss_tot += (y.at(r, col) - mean) * (y.at(r, col) - mean);
  }
  return 1 - ss_res / ss_tot;
}

TEST(Linear, RecoversTheCoefficientsOfANoiselessPlane) {
  Matrix x, y;
  // y0 = 2 x0 - 3 x1 + 0.5; y1 = -x2 + 4.
  make_data(
      50, 3, 2, 1,
      [](const auto& v, auto& o) {
        o[0] = 2 * v[0] - 3 * v[1] + 0.5;
        o[1] = -v[2] + 4;
      },
      x, y);
  const LinearModel m = fit_linear(x, y, 1e-12);
  EXPECT_NEAR(m.w[0 * 2 + 0], 2, 1e-6);
  EXPECT_NEAR(m.w[1 * 2 + 0], -3, 1e-6);
  EXPECT_NEAR(m.w[2 * 2 + 0], 0, 1e-6);
  EXPECT_NEAR(m.b[0], 0.5, 1e-6);
  EXPECT_NEAR(m.w[2 * 2 + 1], -1, 1e-6);
  EXPECT_NEAR(m.b[1], 4, 1e-6);
}

TEST(Linear, SignConstraintZeroesAWeightOfTheWrongSign) {
  // y = 2 x0 - x1 + 0.5 on a balanced 2^2 design (x0, x1 in {-1, 1}, uncorrelated). Requiring
  // a non-negative weight on x1 drops it; regressing on x0 alone then gives w0 = 2 exactly
  // (the columns are orthogonal) and the intercept stays 0.5. Hand calculation.
  Matrix x(4, 2), y(4, 1);
  const double pts[4][2] = {{-1, -1}, {-1, 1}, {1, -1}, {1, 1}};
  for (std::size_t r = 0; r < 4; ++r) {
    x.at(r, 0) = pts[r][0];
    x.at(r, 1) = pts[r][1];
    y.at(r, 0) = 2 * pts[r][0] - pts[r][1] + 0.5;
  }
  const LinearModel free = fit_linear(x, y, 1e-12);
  EXPECT_NEAR(free.w[1], -1.0, 1e-9);
  const LinearModel signed_fit = fit_linear(x, y, 1e-12, {{0, +1}});
  EXPECT_NEAR(signed_fit.w[0], 2.0, 1e-9);
  EXPECT_EQ(signed_fit.w[1], 0.0);
  EXPECT_NEAR(signed_fit.b[0], 0.5, 1e-9);
  // A constraint the free fit already meets changes nothing.
  const LinearModel kept = fit_linear(x, y, 1e-12, {{+1, -1}});
  EXPECT_NEAR(kept.w[0], 2.0, 1e-9);
  EXPECT_NEAR(kept.w[1], -1.0, 1e-9);
}

TEST(Mlp, LearnsANonlinearFunctionALinearModelCannot) {
  Matrix x, y, xt, yt;
  const auto f = [](const auto& v, auto& o) { o[0] = std::sin(3 * v[0]) + v[1] * v[1]; };
  make_data(600, 3, 1, 2, f, x, y);
  make_data(300, 3, 1, 3, f, xt, yt);
  RegressorOptions o;
  auto mlp = Regressor::fit(Context{.seed = 7}, RegressorKind::kMlp, x, y, o);
  auto lin = Regressor::fit(Context{.seed = 7}, RegressorKind::kLinear, x, y, o);
  ASSERT_TRUE(mlp.ok() && lin.ok());
  const double r2_mlp = r2(*mlp, xt, yt, 0);
  const double r2_lin = r2(*lin, xt, yt, 0);
  EXPECT_GT(r2_mlp, 0.95);
  EXPECT_GT(r2_mlp, r2_lin + 0.2) << "linear " << r2_lin;
  // The plain network (no linear skip) learns it too.
  o.mlp.linear_skip = false;
  auto plain = Regressor::fit(Context{.seed = 7}, RegressorKind::kMlp, x, y, o);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->mlp().skip.empty());
  EXPECT_GT(r2(*plain, xt, yt, 0), 0.9);
}

TEST(Mlp, SameSeedSameWeightsOtherSeedOtherWeights) {
  Matrix x, y;
  make_data(
      120, 4, 2, 4,
      [](const auto& v, auto& o) {
        o[0] = v[0] * v[1];
        o[1] = std::abs(v[2]) - v[3];
      },
      x, y);
  MlpOptions o;
  o.max_steps = 300;
  const MlpModel a = fit_mlp(Context{.seed = 11}, x, y, o);
  const MlpModel b = fit_mlp(Context{.seed = 11}, x, y, o);
  const MlpModel c = fit_mlp(Context{.seed = 12}, x, y, o);
  EXPECT_EQ(a.w1, b.w1);
  EXPECT_EQ(a.w3, b.w3);
  EXPECT_NE(a.w1, c.w1);
  EXPECT_EQ(a.in, 4);
  EXPECT_EQ(a.h1, 64);
  EXPECT_EQ(a.h2, 32);
  EXPECT_EQ(a.out, 2);
}

TEST(Mlp, EarlyStoppingFallsBackToTheLinearFitOnPureNoise) {
  // Targets are a plane plus noise: nothing nonlinear to learn, so the hidden path should add
  // (almost) nothing to the ridge skip on held-out data.
  Matrix x, y, xt, yt;
  Rng noise(5);
  make_data(
      80, 3, 1, 5, [&](const auto& v, auto& o) { o[0] = v[0] + 0.3 * noise.normal(); }, x, y);
  make_data(
      400, 3, 1, 6, [](const auto& v, auto& o) { o[0] = v[0]; }, xt, yt);
  RegressorOptions o;
  auto mlp = Regressor::fit(Context{.seed = 3}, RegressorKind::kMlp, x, y, o);
  auto lin = Regressor::fit(Context{.seed = 3}, RegressorKind::kLinear, x, y, o);
  ASSERT_TRUE(mlp.ok() && lin.ok());
  EXPECT_GT(r2(*mlp, xt, yt, 0), r2(*lin, xt, yt, 0) - 0.05);
}

TEST(Gbdt, FlatExportPredictsWhatXgboostPredicts) {
  Matrix x, y, xt, yt;
  const auto f = [](const auto& v, auto& o) {
    o[0] = v[0] > 0.2 ? 3 * v[1] : -v[2];
    o[1] = v[0] * v[0];
  };
  make_data(300, 4, 2, 8, f, x, y);
  make_data(100, 4, 2, 9, f, xt, yt);
  xt.at(0, 1) = NAN;  // missing values follow XGBoost's default direction
  GbdtOptions o;
  o.rounds = 60;
  auto model = fit_gbdt(Context{.seed = 21}, x, y, o);
  ASSERT_TRUE(model.ok()) << model.error().what();
  auto ref = xgboost_reference_predict(Context{.seed = 21}, x, y, xt, o);
  ASSERT_TRUE(ref.ok()) << ref.error().what();
  Regressor reg;
  auto back = Regressor::from_json({{"kind", "gbdt"},
                                    {"inputs", model->in},
                                    {"outputs", model->out},
                                    {"base_score", model->base_score},
                                    {"tree_begin", model->tree_begin},
                                    {"output_tree_begin", model->output_tree_begin},
                                    {"feature", model->feature},
                                    {"threshold", model->threshold},
                                    {"left", model->left},
                                    {"right", model->right},
                                    {"default_left", model->default_left}});
  ASSERT_TRUE(back.ok()) << back.error().what();
  std::vector<float> xf(xt.data.begin(), xt.data.end()), out(xt.rows * 2);
  RegressorScratch scratch;
  back->predict(xf.data(), xt.rows, out.data(), scratch);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], (*ref)[i], 1e-5) << i;
  EXPECT_EQ(model->output_tree_begin.back(), 2 * o.rounds);
}

// The flat trees walked one node at a time, as XGBoost defines them: the reference for the
// packed and specialised forms.
std::vector<float> walk_flat(const GbdtModel& m, const float* x) {
  std::vector<float> y(static_cast<std::size_t>(m.out));
  for (std::size_t o = 0; o < y.size(); ++o) {
    // The order GbdtModel documents: tree begin + i into running sum i mod 8, the eight sums
    // added pairwise, the base score last.
    std::array<float, 8> lane{};
    for (auto t = m.output_tree_begin[o]; t < m.output_tree_begin[o + 1]; ++t) {
      auto node = static_cast<std::size_t>(m.tree_begin[static_cast<std::size_t>(t)]);
      while (m.feature[node] >= 0) {
        const float v = x[m.feature[node]];
        const bool left = std::isnan(v) ? m.default_left[node] != 0 : v < m.threshold[node];
        node = static_cast<std::size_t>(left ? m.left[node] : m.right[node]);
      }
      lane[static_cast<std::size_t>(t - m.output_tree_begin[o]) % 8] += m.threshold[node];
    }
    const float trees =
        ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    y[o] = m.base_score[o] + trees;
  }
  return y;
}

TEST(Gbdt, PackedAndSpecialisedFormsPredictBitForBit) {
  Matrix x, y;
  const auto f = [](const auto& v, auto& o) {
    o[0] = v[0] > 0.2 ? 3 * v[1] + v[3] : -v[2] * v[3];
    o[1] = v[0] * v[0] - v[3];
  };
  make_data(400, 4, 2, 5, f, x, y);
  RegressorOptions o;
  o.gbdt.rounds = 80;
  o.gbdt.max_depth = 5;
  auto reg = Regressor::fit(Context{.seed = 3}, RegressorKind::kGbdt, x, y, o);
  ASSERT_TRUE(reg.ok()) << reg.error().what();
  const GbdtModel& m = reg->gbdt();
  Rng rng(17);
  RegressorScratch scratch;
  std::vector<std::uint16_t> ranks;
  const std::vector<std::uint8_t> fixed = {1, 0, 1, 0};  // inputs 0 and 2 held
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> row(4);
    for (auto& v : row) v = static_cast<float>(2 * rng.uniform() - 1);
    if (trial % 10 == 0) row[1] = NAN;  // the default direction, through every form
    const auto want = walk_flat(m, row.data());
    std::vector<float> got(2);
    reg->predict(row.data(), 1, got.data(), scratch);
    EXPECT_EQ(got, want) << trial;
    // Specialised to this row's fixed inputs, then walked with other free inputs.
    auto spec = reg->specialize(row.data(), fixed);
    ASSERT_TRUE(spec.has_value());
    for (int k = 0; k < 3; ++k) {
      row[1] = static_cast<float>(2 * rng.uniform() - 1);
      row[3] = static_cast<float>(2 * rng.uniform() - 1);
      spec->predict(row.data(), got.data(), ranks);
      // Another summation order (constants, per-input tables, walked trees): float rounding
      // of a sum of 80 leaves, far below 1e-5 here.
      // The cell: per cut input, how many of its thresholds are <= the value.
      std::vector<std::uint16_t> cell(spec->cut_inputs.size());
      spec->cell(row.data(), cell.data());
      for (std::size_t j = 0; j < cell.size(); ++j) {
        const float v = row[static_cast<std::size_t>(spec->cut_inputs[j])];
        const auto& c = spec->cuts[j];
        EXPECT_EQ(cell[j], std::isnan(v) ? SpecializedForest::kNanRank
                                         : std::upper_bound(c.begin(), c.end(), v) - c.begin());
      }
      const auto flat = walk_flat(m, row.data());
      for (std::size_t o2 = 0; o2 < got.size(); ++o2) {
        EXPECT_NEAR(got[o2], flat[o2], 1e-5f * (1 + std::abs(flat[o2]))) << trial << "." << k;
      }
    }
  }
  // Other kinds have nothing to specialise.
  auto lin = Regressor::fit(Context{.seed = 3}, RegressorKind::kLinear, x, y, o);
  ASSERT_TRUE(lin.ok());
  std::vector<float> row(4, 0.0f);
  EXPECT_FALSE(lin->specialize(row.data(), fixed).has_value());
}

// Trees deeper than PackedForest::kMaxDepth are walked unpacked, in the same summation order:
// nine chains of twelve splits (more trees than summation lanes), bit for bit the flat walk.
TEST(Gbdt, TreesTooDeepToPackPredictInTheSameOrder) {
  nlohmann::json j = {{"kind", "gbdt"}, {"inputs", 1}, {"outputs", 1}, {"base_score", {0.5}}};
  std::vector<int> tree_begin, feature, left, right, default_left;
  std::vector<double> threshold;
  constexpr int kTrees = 9, kSplits = 12;
  for (int t = 0; t < kTrees; ++t) {
    tree_begin.push_back(static_cast<int>(feature.size()));
    auto leaf = [&](double v) {
      feature.push_back(-1);
      threshold.push_back(v);
      left.push_back(-1);
      right.push_back(-1);
      default_left.push_back(0);
    };
    for (int d = 0; d < kSplits; ++d) {
      // Node: x < d / 12 goes to a leaf; otherwise on down the chain (the last: another leaf).
      const int at = static_cast<int>(feature.size());
      feature.push_back(0);
      threshold.push_back(static_cast<double>(d) / kSplits);
      left.push_back(at + 1);
      right.push_back(at + 2);
      default_left.push_back(d % 2);
      leaf(0.1 * (t + 1) + 0.01 * d);
    }
    leaf(-0.3 * (t + 1));
  }
  j["tree_begin"] = tree_begin;
  j["output_tree_begin"] = {0, kTrees};
  j["feature"] = feature;
  j["threshold"] = threshold;
  j["left"] = left;
  j["right"] = right;
  j["default_left"] = default_left;
  auto reg = Regressor::from_json(j);
  ASSERT_TRUE(reg.ok()) << reg.error().what();
  RegressorScratch scratch;
  for (const float x : {-1.0f, 0.0f, 0.3f, 0.55f, 0.99f, 2.0f, NAN}) {
    float got = 0;
    reg->predict(&x, 1, &got, scratch);
    EXPECT_EQ(got, walk_flat(reg->gbdt(), &x).at(0)) << x;
  }
}

// A forest fitted under monotone constraints, specialised, stays monotone along its free
// inputs exactly (not only up to rounding): the exact solver's proof compares predictions at
// different loads. Swept through every threshold of the free inputs, each step is checked.
TEST(Gbdt, SpecialisedFormStaysMonotone) {
  Matrix x, y;
  make_data(
      500, 4, 2, 6,
      [](const auto& v, auto& o) {
        o[0] = v[0] * v[1] + 2 * v[1] + std::sin(3 * v[2]) + v[1] * v[3];  // rising in v[1], v[3]
        o[1] = -v[3] - 0.5 * v[1] * v[0];  // falling in v[3]; v[1] unconstrained
      },
      x, y);
  RegressorOptions o;
  o.gbdt.rounds = 120;
  o.gbdt.max_depth = 4;
  o.gbdt.monotone = {{0, 1, 0, 1}, {0, 0, 0, -1}};
  auto reg = Regressor::fit(Context{.seed = 5}, RegressorKind::kGbdt, x, y, o);
  ASSERT_TRUE(reg.ok()) << reg.error().what();
  const std::vector<std::uint8_t> fixed = {1, 0, 1, 0};
  Rng rng(23);
  std::vector<std::uint16_t> ranks;
  int steps = 0;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> row(4);
    for (auto& v : row) v = static_cast<float>(2 * rng.uniform() - 1);
    auto spec = reg->specialize(row.data(), fixed);
    ASSERT_TRUE(spec.has_value());
    ASSERT_FALSE(spec->table.empty());
    // Along input 3 (rising for output 0, falling for output 1), the other free input held.
    std::vector<float> grid = {-2.0f, 2.0f};
    for (std::size_t j = 0; j < spec->cut_inputs.size(); ++j) {
      if (spec->cut_inputs[j] != 3) continue;
      for (float c : spec->cuts[j]) {
        grid.push_back(c);
        grid.push_back(std::nextafter(c, -3.0f));
      }
    }
    std::sort(grid.begin(), grid.end());
    std::array<float, 2> prev{}, now{};
    for (std::size_t i = 0; i < grid.size(); ++i) {
      row[3] = grid[i];
      spec->predict(row.data(), now.data(), ranks);
      if (i > 0) {
        EXPECT_GE(now[0], prev[0]) << trial << " at " << grid[i];
        EXPECT_LE(now[1], prev[1]) << trial << " at " << grid[i];
        ++steps;
      }
      prev = now;
    }
  }
  EXPECT_GT(steps, 200);
}

TEST(Regressor, JsonRoundTripPredictsIdentically) {
  Matrix x, y;
  make_data(
      100, 3, 2, 10,
      [](const auto& v, auto& o) {
        o[0] = v[0] - v[1] * v[2];
        o[1] = std::cos(v[0]);
      },
      x, y);
  RegressorOptions o;
  o.mlp.max_steps = 200;
  o.gbdt.rounds = 30;
  for (auto kind : {RegressorKind::kMlp, RegressorKind::kGbdt, RegressorKind::kLinear}) {
    auto reg = Regressor::fit(Context{.seed = 4}, kind, x, y, o);
    ASSERT_TRUE(reg.ok());
    // Through text, as in a model file.
    auto back = Regressor::from_json(nlohmann::json::parse(reg->to_json().dump()));
    ASSERT_TRUE(back.ok()) << back.error().what();
    EXPECT_EQ(back->kind(), kind);
    for (std::size_t r = 0; r < 10; ++r) {
      EXPECT_EQ(reg->predict_one(x.row(r)), back->predict_one(x.row(r))) << to_string(kind);
    }
  }
}

TEST(Regressor, MalformedJsonIsRefused) {
  EXPECT_FALSE(Regressor::from_json({{"kind", "forest"}}).ok());
  EXPECT_FALSE(Regressor::from_json({{"kind", "mlp"}, {"layers", {2, 1, 1, 1}}}).ok());
  EXPECT_FALSE(Regressor::from_json({{"kind", "mlp"},
                                     {"layers", {2, 1, 1, 1}},
                                     {"w1", {1.0}},  // should hold 2 weights
                                     {"b1", {0.0}},
                                     {"w2", {1.0}},
                                     {"b2", {0.0}},
                                     {"w3", {1.0}},
                                     {"b3", {0.0}}})
                   .ok());
  EXPECT_FALSE(Regressor::from_json(
                   {{"kind", "linear"}, {"inputs", 2}, {"outputs", 1}, {"w", {1.0}}, {"b", {0.0}}})
                   .ok());
  // A tree whose right child points back at its root would make prediction loop forever.
  const nlohmann::json cyclic = {{"kind", "gbdt"},        {"inputs", 1},
                                 {"outputs", 1},          {"base_score", {0.0}},
                                 {"tree_begin", {0}},     {"output_tree_begin", {0, 1}},
                                 {"feature", {0, -1}},    {"threshold", {0.5, 1.0}},
                                 {"left", {1, -1}},       {"right", {0, -1}},
                                 {"default_left", {1, 0}}};
  EXPECT_FALSE(Regressor::from_json(cyclic).ok());
  nlohmann::json fine = cyclic;
  fine["feature"] = {0, -1, -1};
  fine["threshold"] = {0.5, 1.0, 2.0};
  fine["left"] = {1, -1, -1};
  fine["right"] = {2, -1, -1};
  fine["default_left"] = {1, 0, 0};
  auto ok = Regressor::from_json(fine);
  ASSERT_TRUE(ok.ok()) << ok.error().what();
  // x < 0.5 goes left (leaf 1.0), else right (leaf 2.0); NaN follows default_left.
  EXPECT_EQ(ok->predict_one(std::vector<double>{0.2})[0], 1.0);
  EXPECT_EQ(ok->predict_one(std::vector<double>{0.7})[0], 2.0);
  EXPECT_EQ(ok->predict_one(std::vector<double>{NAN})[0], 1.0);
}

TEST(Regressor, NamesRoundTrip) {
  for (const auto& n : regressor_names()) {
    const auto k = parse_regressor(n);
    ASSERT_TRUE(k.has_value());
    EXPECT_EQ(to_string(*k), n);
  }
  EXPECT_FALSE(parse_regressor("xgb").has_value());
}

}  // namespace
}  // namespace corun::surrogate::regressor_test
