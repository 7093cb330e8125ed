#include "corun/surrogate/regressor.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <variant>

#include "corun/core/check.h"
#include "corun/core/enum_names.h"
#include "corun/core/json_number.h"
#include "corun/core/rng.h"

namespace corun::surrogate {

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
// MLP training: double precision, deterministic in the seed (single thread, fixed order).

namespace {

// Whether a tree walk goes left at `v`: below the threshold, or NaN (which compares false) with
// the default direction left. Branch-free (bitwise on 0/1 integers) on the hot path.
inline bool goes_left(float v, float threshold, bool default_left) {
  return (static_cast<int>(v < threshold) |
          (static_cast<int>(v != v) & static_cast<int>(default_left))) != 0;
}

struct Layer {
  int in = 0, out = 0;
  std::vector<double> w, b;            // w: [in][out]
  std::vector<double> gw, gb;          // gradients
  std::vector<double> mw, vw, mb, vb;  // Adam moments

  Layer(int in_, int out_, Rng& rng) : in(in_), out(out_) {
    const auto n = static_cast<std::size_t>(in) * static_cast<std::size_t>(out);
    w.resize(n);
    // He-uniform initialisation for ReLU layers.
    const double limit = std::sqrt(6.0 / std::max(1, in));
    for (auto& v : w) v = (2 * rng.uniform() - 1) * limit;
    b.assign(static_cast<std::size_t>(out), 0.0);
    gw.assign(n, 0.0);
    gb.assign(b.size(), 0.0);
    mw.assign(n, 0.0);
    vw.assign(n, 0.0);
    mb.assign(b.size(), 0.0);
    vb.assign(b.size(), 0.0);
  }

  // y[r][o] = b[o] + sum_i x[r][i] w[i][o], optionally ReLU.
  void forward(const double* x, std::size_t rows, double* y, bool relu) const {
    const auto no = static_cast<std::size_t>(out);
    const auto ni = static_cast<std::size_t>(in);
    for (std::size_t r = 0; r < rows; ++r) {
      double* yr = y + r * no;
      std::copy(b.begin(), b.end(), yr);
      const double* xr = x + r * ni;
      for (std::size_t i = 0; i < ni; ++i) {
        const double xi = xr[i];
        if (xi == 0) continue;
        const double* wi = w.data() + i * no;
        for (std::size_t o = 0; o < no; ++o) yr[o] += xi * wi[o];
      }
      if (relu) {
        for (std::size_t o = 0; o < no; ++o) yr[o] = std::max(0.0, yr[o]);
      }
    }
  }

  // Accumulates gradients from dy (rows x out) and input x; writes dx (rows x in) if given.
  void backward(const double* x, const double* dy, std::size_t rows, double* dx) {
    const auto no = static_cast<std::size_t>(out);
    const auto ni = static_cast<std::size_t>(in);
    std::fill(gw.begin(), gw.end(), 0.0);
    std::fill(gb.begin(), gb.end(), 0.0);
    for (std::size_t r = 0; r < rows; ++r) {
      const double* dyr = dy + r * no;
      const double* xr = x + r * ni;
      for (std::size_t o = 0; o < no; ++o) gb[o] += dyr[o];
      for (std::size_t i = 0; i < ni; ++i) {
        const double xi = xr[i];
        double* gwi = gw.data() + i * no;
        const double* wi = w.data() + i * no;
        double acc = 0;
        for (std::size_t o = 0; o < no; ++o) {
          gwi[o] += xi * dyr[o];
          acc += wi[o] * dyr[o];
        }
        if (dx != nullptr) dx[r * ni + i] = acc;
      }
    }
  }

  void adam(double lr, double decay, double bc1, double bc2) {
    constexpr double kB1 = 0.9, kB2 = 0.999, kEps = 1e-8;
    for (std::size_t k = 0; k < w.size(); ++k) {
      mw[k] = kB1 * mw[k] + (1 - kB1) * gw[k];
      vw[k] = kB2 * vw[k] + (1 - kB2) * gw[k] * gw[k];
      w[k] -= lr * ((mw[k] / bc1) / (std::sqrt(vw[k] / bc2) + kEps) + decay * w[k]);
    }
    for (std::size_t k = 0; k < b.size(); ++k) {
      mb[k] = kB1 * mb[k] + (1 - kB1) * gb[k];
      vb[k] = kB2 * vb[k] + (1 - kB2) * gb[k] * gb[k];
      b[k] -= lr * (mb[k] / bc1) / (std::sqrt(vb[k] / bc2) + kEps);
    }
  }
};

struct Net {
  Layer l1, l2, l3;
  Net(int in, const MlpOptions& o, int out, Rng& rng)
      : l1(in, o.hidden1, rng), l2(o.hidden1, o.hidden2, rng), l3(o.hidden2, out, rng) {}

  // Mean squared error over rows and outputs.
  double loss(const Matrix& x, const Matrix& y, std::vector<double>& a1, std::vector<double>& a2,
              std::vector<double>& yh) const {
    const std::size_t n = x.rows;
    if (n == 0) return 0;
    a1.resize(n * static_cast<std::size_t>(l1.out));
    a2.resize(n * static_cast<std::size_t>(l2.out));
    yh.resize(n * y.cols);
    l1.forward(x.data.data(), n, a1.data(), true);
    l2.forward(a1.data(), n, a2.data(), true);
    l3.forward(a2.data(), n, yh.data(), false);
    double s = 0;
    for (std::size_t k = 0; k < yh.size(); ++k) s += (yh[k] - y.data[k]) * (yh[k] - y.data[k]);
    return s / static_cast<double>(yh.size());
  }
};

void copy_weights(const Layer& l, std::vector<float>& w, std::vector<float>& b) {
  w.assign(l.w.begin(), l.w.end());
  b.assign(l.b.begin(), l.b.end());
}

}  // namespace

MlpModel fit_mlp(const Matrix& x, const Matrix& y_in, const MlpOptions& o, std::uint64_t seed) {
  CORUN_CHECK(x.rows == y_in.rows && x.rows > 0);
  Rng rng(seed);
  const int in = static_cast<int>(x.cols);
  const int out = static_cast<int>(y_in.cols);
  Net net(in, o, out, rng);
  // The skip connection is the ridge fit; the hidden layers learn what it leaves.
  LinearModel skip;
  Matrix y = y_in;
  if (o.linear_skip) {
    skip = fit_linear(x, y_in, o.skip_ridge_lambda);
    for (std::size_t r = 0; r < x.rows; ++r) {
      for (std::size_t c = 0; c < y.cols; ++c) {
        double v = skip.b[c];
        for (std::size_t i = 0; i < x.cols; ++i) v += x.at(r, i) * skip.w[i * y.cols + c];
        y.at(r, c) -= v;
      }
    }
    // Start from the linear fit exactly: zero output from the hidden path.
    std::fill(net.l3.w.begin(), net.l3.w.end(), 0.0);
  }

  // Validation split (held out from the gradient, used only to stop and pick the best step).
  std::vector<std::size_t> order(x.rows);
  std::iota(order.begin(), order.end(), 0);
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  auto n_val = static_cast<std::size_t>(o.validation_fraction * static_cast<double>(x.rows));
  if (n_val < static_cast<std::size_t>(o.min_validation_rows)) n_val = 0;
  const std::span<const std::size_t> val_idx(order.data(), n_val);
  std::vector<std::size_t> train_idx(order.begin() + static_cast<std::ptrdiff_t>(n_val),
                                     order.end());
  const Matrix xv = x.take(val_idx), yv = y.take(val_idx);
  const Matrix xt = x.take(train_idx), yt = y.take(train_idx);
  const std::size_t n = xt.rows;
  const std::size_t bs =
      std::min<std::size_t>(static_cast<std::size_t>(std::max(1, o.batch_size)), n);
  const std::size_t steps_per_epoch = (n + bs - 1) / bs;

  std::vector<double> xb(bs * x.cols), yb(bs * y.cols);
  std::vector<double> a1(bs * static_cast<std::size_t>(o.hidden1));
  std::vector<double> a2(bs * static_cast<std::size_t>(o.hidden2));
  std::vector<double> yh(bs * y.cols), d3(bs * y.cols);
  std::vector<double> d2(bs * static_cast<std::size_t>(o.hidden2));
  std::vector<double> d1(bs * static_cast<std::size_t>(o.hidden1));
  std::vector<double> va1, va2, vyh;

  MlpModel best;
  auto snapshot = [&] {
    best.in = in;
    best.h1 = o.hidden1;
    best.h2 = o.hidden2;
    best.out = out;
    copy_weights(net.l1, best.w1, best.b1);
    copy_weights(net.l2, best.w2, best.b2);
    copy_weights(net.l3, best.w3, best.b3);
  };
  snapshot();
  double best_val =
      n_val > 0 ? net.loss(xv, yv, va1, va2, vyh) : std::numeric_limits<double>::infinity();
  int best_step = 0;

  std::vector<std::size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  double bc1 = 1, bc2 = 1;
  int step = 0;
  while (step < o.max_steps) {
    for (std::size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[rng.below(i)]);
    for (std::size_t s = 0; s < steps_per_epoch && step < o.max_steps; ++s, ++step) {
      const std::size_t begin = s * bs;
      const std::size_t rows = std::min(bs, n - begin);
      for (std::size_t r = 0; r < rows; ++r) {
        const auto src = xt.row(perm[begin + r]);
        std::copy(src.begin(), src.end(), xb.begin() + static_cast<std::ptrdiff_t>(r * x.cols));
        const auto ysrc = yt.row(perm[begin + r]);
        std::copy(ysrc.begin(), ysrc.end(), yb.begin() + static_cast<std::ptrdiff_t>(r * y.cols));
      }
      net.l1.forward(xb.data(), rows, a1.data(), true);
      net.l2.forward(a1.data(), rows, a2.data(), true);
      net.l3.forward(a2.data(), rows, yh.data(), false);
      const double scale = 2.0 / static_cast<double>(rows * y.cols);
      for (std::size_t k = 0; k < rows * y.cols; ++k) d3[k] = scale * (yh[k] - yb[k]);
      net.l3.backward(a2.data(), d3.data(), rows, d2.data());
      for (std::size_t k = 0; k < rows * static_cast<std::size_t>(o.hidden2); ++k) {
        if (a2[k] <= 0) d2[k] = 0;
      }
      net.l2.backward(a1.data(), d2.data(), rows, d1.data());
      for (std::size_t k = 0; k < rows * static_cast<std::size_t>(o.hidden1); ++k) {
        if (a1[k] <= 0) d1[k] = 0;
      }
      net.l1.backward(xb.data(), d1.data(), rows, nullptr);
      bc1 *= 0.9;
      bc2 *= 0.999;
      for (Layer* l : {&net.l1, &net.l2, &net.l3}) {
        l->adam(o.learning_rate, o.weight_decay, 1 - bc1, 1 - bc2);
      }
    }
    if (n_val > 0) {
      const double v = net.loss(xv, yv, va1, va2, vyh);
      if (v < best_val) {
        best_val = v;
        best_step = step;
        snapshot();
      } else if (step - best_step >= o.patience_steps) {
        break;
      }
    }
  }
  if (n_val == 0) snapshot();
  if (o.linear_skip) {
    best.skip.assign(skip.w.begin(), skip.w.end());
    for (std::size_t c = 0; c < best.b3.size(); ++c) best.b3[c] += static_cast<float>(skip.b[c]);
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// GBDT through the XGBoost C API.

namespace {

// Owns XGBoost handles; frees them on every path.
struct XgbDMatrix {
  DMatrixHandle h = nullptr;
  ~XgbDMatrix() {
    if (h != nullptr) XGDMatrixFree(h);
  }
};
struct XgbBooster {
  BoosterHandle h = nullptr;
  ~XgbBooster() {
    if (h != nullptr) XGBoosterFree(h);
  }
};

Error xgb_error(const std::string& what) {
  return Error("xgboost: " + what + ": " + XGBGetLastError(), Error::Kind::kInternal);
}

std::vector<float> to_float(const Matrix& m) { return {m.data.begin(), m.data.end()}; }

Result<std::unique_ptr<XgbDMatrix>> make_dmatrix(const Matrix& x, const double* labels,
                                                 std::size_t label_stride) {
  auto d = std::make_unique<XgbDMatrix>();
  const std::vector<float> xf = to_float(x);
  if (XGDMatrixCreateFromMat(xf.data(), x.rows, x.cols, std::numeric_limits<float>::quiet_NaN(),
                             &d->h) != 0) {
    return xgb_error("creating a matrix");
  }
  if (labels != nullptr) {
    std::vector<float> y(x.rows);
    for (std::size_t r = 0; r < x.rows; ++r) y[r] = static_cast<float>(labels[r * label_stride]);
    if (XGDMatrixSetFloatInfo(d->h, "label", y.data(), x.rows) != 0) {
      return xgb_error("setting labels");
    }
  }
  return d;
}

Result<std::unique_ptr<XgbBooster>> train_booster(DMatrixHandle train, const GbdtOptions& o,
                                                  std::uint64_t seed, std::size_t output) {
  auto b = std::make_unique<XgbBooster>();
  if (XGBoosterCreate(&train, 1, &b->h) != 0) return xgb_error("creating a booster");
  const auto num = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  // Exact, single-threaded trees: results depend on the data and the seed only.
  const std::vector<std::pair<std::string, std::string>> params = {
      {"objective", "reg:squarederror"},
      {"tree_method", "exact"},
      {"nthread", "1"},
      {"verbosity", "0"},
      {"base_score", "0"},
      {"seed", std::to_string(seed % 2147483647ULL)},
      {"max_depth", std::to_string(o.max_depth)},
      {"eta", num(o.eta)},
      {"subsample", num(o.subsample)},
      {"colsample_bytree", num(o.colsample)},
      {"min_child_weight", num(o.min_child_weight)},
      {"lambda", num(o.lambda)},
  };
  for (const auto& [k, v] : params) {
    if (XGBoosterSetParam(b->h, k.c_str(), v.c_str()) != 0) return xgb_error("parameter " + k);
  }
  if (output < o.monotone.size() && !o.monotone[output].empty()) {
    std::string c = "(";
    for (std::size_t i = 0; i < o.monotone[output].size(); ++i) {
      c += (i ? "," : "") + std::to_string(o.monotone[output][i]);
    }
    c += ")";
    if (XGBoosterSetParam(b->h, "monotone_constraints", c.c_str()) != 0) {
      return xgb_error("parameter monotone_constraints");
    }
  }
  for (int i = 0; i < o.rounds; ++i) {
    if (XGBoosterUpdateOneIter(b->h, i, train) != 0) return xgb_error("training");
  }
  return b;
}

// Appends the booster's trees (from its JSON model) to `m` as one more output.
Status export_trees(BoosterHandle booster, GbdtModel& m) {
  bst_ulong len = 0;
  const char* buf = nullptr;
  if (XGBoosterSaveModelToBuffer(booster, R"({"format": "json"})", &len, &buf) != 0) {
    return xgb_error("saving the model");
  }
  const auto j = nlohmann::json::parse(buf, buf + len, nullptr, false);
  if (j.is_discarded()) return Error("xgboost: unreadable JSON model", Error::Kind::kInternal);
  const auto& learner = j.at("learner");
  const std::string base = learner.at("learner_model_param").at("base_score").get<std::string>();
  m.base_score.push_back(std::stof(base));
  const auto& trees = learner.at("gradient_booster").at("model").at("trees");
  for (const auto& t : trees) {
    const auto left = json_numbers<std::int32_t>(t.at("left_children"));
    const auto right = json_numbers<std::int32_t>(t.at("right_children"));
    const auto feat = json_numbers<std::int32_t>(t.at("split_indices"));
    const auto cond = json_numbers<float>(t.at("split_conditions"));
    const auto& dl = t.at("default_left");
    const auto offset = static_cast<std::int32_t>(m.feature.size());
    m.tree_begin.push_back(offset);
    for (std::size_t k = 0; k < left.size(); ++k) {
      const bool leaf = left[k] == -1;
      m.feature.push_back(leaf ? -1 : feat[k]);
      m.threshold.push_back(cond[k]);
      m.left.push_back(leaf ? -1 : left[k] + offset);
      m.right.push_back(leaf ? -1 : right[k] + offset);
      const bool d = dl[k].is_boolean() ? dl[k].get<bool>() : dl[k].get<int>() != 0;
      m.default_left.push_back(d ? 1 : 0);
    }
  }
  m.output_tree_begin.push_back(static_cast<std::int32_t>(m.tree_begin.size()));
  return {};
}

}  // namespace

Result<GbdtModel> fit_gbdt(const Matrix& x, const Matrix& y, const GbdtOptions& o,
                           std::uint64_t seed) {
  CORUN_CHECK(x.rows == y.rows && x.rows > 0);
  GbdtModel m;
  m.in = static_cast<int>(x.cols);
  m.out = static_cast<int>(y.cols);
  m.output_tree_begin.push_back(0);
  for (std::size_t k = 0; k < y.cols; ++k) {
    auto d = make_dmatrix(x, y.data.data() + k, y.cols);
    if (!d) return d.error();
    auto b = train_booster((*d)->h, o, derive_seed(seed, {k}), k);
    if (!b) return b.error();
    if (auto s = export_trees((*b)->h, m); !s.ok()) return s.error();
  }
  return m;
}

Result<std::vector<float>> xgboost_reference_predict(const Matrix& x_train, const Matrix& y_train,
                                                     const Matrix& x_test, const GbdtOptions& o,
                                                     std::uint64_t seed) {
  std::vector<float> out(x_test.rows * y_train.cols);
  auto test = make_dmatrix(x_test, nullptr, 0);
  if (!test) return test.error();
  for (std::size_t k = 0; k < y_train.cols; ++k) {
    auto d = make_dmatrix(x_train, y_train.data.data() + k, y_train.cols);
    if (!d) return d.error();
    auto b = train_booster((*d)->h, o, derive_seed(seed, {k}), k);
    if (!b) return b.error();
    bst_ulong len = 0;
    const float* res = nullptr;
    if (XGBoosterPredict((*b)->h, (*test)->h, 0, 0, 0, &len, &res) != 0) {
      return xgb_error("predicting");
    }
    for (std::size_t r = 0; r < x_test.rows; ++r) out[r * y_train.cols + k] = res[r];
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Ridge regression.

namespace {

// Solves A_FF w_F = b_F (A symmetric positive definite, d x d) for the inputs in `free`;
// the other entries of `w` are 0.
std::vector<double> solve_on(const std::vector<double>& a, const std::vector<double>& b,
                             std::size_t d, const std::vector<std::size_t>& free) {
  const std::size_t f = free.size();
  std::vector<double> l(f * f, 0.0), z(f, 0.0), wf(f, 0.0), w(d, 0.0);
  // Cholesky A_FF = L L'.
  for (std::size_t j = 0; j < f; ++j) {
    double s = a[free[j] * d + free[j]];
    for (std::size_t p = 0; p < j; ++p) s -= l[j * f + p] * l[j * f + p];
    l[j * f + j] = std::sqrt(std::max(s, 1e-300));
    for (std::size_t i = j + 1; i < f; ++i) {
      double t = a[free[i] * d + free[j]];
      for (std::size_t p = 0; p < j; ++p) t -= l[i * f + p] * l[j * f + p];
      l[i * f + j] = t / l[j * f + j];
    }
  }
  for (std::size_t i = 0; i < f; ++i) {  // L z = b
    double t = b[free[i]];
    for (std::size_t p = 0; p < i; ++p) t -= l[i * f + p] * z[p];
    z[i] = t / l[i * f + i];
  }
  for (std::size_t i = f; i-- > 0;) {  // L' w = z
    double t = z[i];
    for (std::size_t p = i + 1; p < f; ++p) t -= l[p * f + i] * wf[p];
    wf[i] = t / l[i * f + i];
  }
  for (std::size_t i = 0; i < f; ++i) w[free[i]] = wf[i];
  return w;
}

}  // namespace

LinearModel fit_linear(const Matrix& x, const Matrix& y, double lambda,
                       const std::vector<std::vector<int>>& signs) {
  CORUN_CHECK(x.rows == y.rows && x.rows > 0);
  const std::size_t n = x.rows, d = x.cols, k = y.cols;
  std::vector<double> xm(d, 0.0), ym(k, 0.0);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < d; ++i) xm[i] += x.at(r, i);
    for (std::size_t o = 0; o < k; ++o) ym[o] += y.at(r, o);
  }
  for (auto& v : xm) v /= static_cast<double>(n);
  for (auto& v : ym) v /= static_cast<double>(n);
  // A = Xc'Xc + lambda n I (lambda relative to the data size), B = Xc'Yc.
  std::vector<double> a(d * d, 0.0), b(d * k, 0.0);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < d; ++i) {
      const double xi = x.at(r, i) - xm[i];
      for (std::size_t j = 0; j < d; ++j) a[i * d + j] += xi * (x.at(r, j) - xm[j]);
      for (std::size_t o = 0; o < k; ++o) b[i * k + o] += xi * (y.at(r, o) - ym[o]);
    }
  }
  for (std::size_t i = 0; i < d; ++i) a[i * d + i] += lambda * static_cast<double>(n) + 1e-12;
  LinearModel m;
  m.in = static_cast<int>(d);
  m.out = static_cast<int>(k);
  m.w.assign(d * k, 0.0);
  m.b.assign(k, 0.0);
  std::vector<double> bo(d);
  for (std::size_t o = 0; o < k; ++o) {
    for (std::size_t i = 0; i < d; ++i) bo[i] = b[i * k + o];
    const std::vector<int>* sign = o < signs.size() && !signs[o].empty() ? &signs[o] : nullptr;
    // Sign constraints by elimination: solve, drop every input whose weight has the wrong
    // sign (its weight becomes 0, which satisfies the constraint), solve again; at most d
    // rounds. The result is feasible, not necessarily the constrained least-squares optimum.
    std::vector<std::size_t> free(d);
    std::iota(free.begin(), free.end(), 0);
    std::vector<double> w;
    for (;;) {
      w = solve_on(a, bo, d, free);
      if (sign == nullptr) break;
      std::vector<std::size_t> kept;
      for (auto i : free) {
        if (i < sign->size() && (*sign)[i] != 0 && w[i] * (*sign)[i] < 0) continue;
        kept.push_back(i);
      }
      if (kept.size() == free.size()) break;
      free = std::move(kept);
    }
    double bias = ym[o];
    for (std::size_t i = 0; i < d; ++i) {
      m.w[i * k + o] = w[i];
      bias -= xm[i] * w[i];
    }
    m.b[o] = bias;
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// Packed trees.

namespace {

// Depth of the subtree at `node`, or any value above `limit` once it exceeds it (so that a
// long chain in a malformed file cannot exhaust the stack).
int tree_depth(const GbdtModel& m, std::size_t node, int limit) {
  if (m.feature[node] < 0) return 0;
  if (limit <= 0) return 1;
  const int l = tree_depth(m, static_cast<std::size_t>(m.left[node]), limit - 1);
  if (l >= limit) return l + 1;
  return 1 + std::max(l, tree_depth(m, static_cast<std::size_t>(m.right[node]), limit - 1));
}

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

// ---------------------------------------------------------------------------------------------
// Specialised trees.

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

// The leaf row x reaches from `node`.
float walk_tree(const GbdtModel& g, std::size_t node, const float* x) {
  while (g.feature[node] >= 0) {
    const bool go_left =
        goes_left(x[g.feature[node]], g.threshold[node], g.default_left[node] != 0);
    node = static_cast<std::size_t>(go_left ? g.left[node] : g.right[node]);
  }
  return g.threshold[node];
}

// Largest output count a specialised forest sums on the stack.
constexpr std::size_t kMaxSpecialOut = 8;

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
  GbdtModel g;  // the specialised trees, unpacked
  g.in = m.in;
  g.out = m.out;
  for (auto root : m.tree_begin) {
    g.tree_begin.push_back(copy_free(m, static_cast<std::size_t>(root), x, fixed, g));
  }
  SpecializedForest f;
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
  if (m.out < 1 || static_cast<std::size_t>(m.out) > kMaxSpecialOut) return std::nullopt;
  const auto no = static_cast<std::size_t>(m.out);
  f.out = m.out;
  f.base_score = m.base_score;
  f.constant.assign(no, 0.0f);
  f.table.assign(f.cut_inputs.size(), {});
  // Each tree by what is left of it: a constant, a step function of one input (summed into
  // that input's table as steps at its thresholds' ranks, then prefix-summed: same-signed
  // steps for a monotone tree), or a tree to walk.
  std::vector<std::vector<float>> steps(f.cut_inputs.size());
  std::vector<std::vector<float>> nan_value(f.cut_inputs.size());
  std::vector<std::vector<std::int32_t>> by_depth(PackedForest::kMaxDepth + 1);
  std::vector<std::int32_t> tree_out(m.tree_begin.size(), 0);  // each tree's output
  std::vector<float> row(static_cast<std::size_t>(g.in), 0.0f);
  std::vector<std::int32_t> inputs;
  std::vector<float> thresholds;
  for (std::size_t o = 0; o < no; ++o) {
    for (auto t = static_cast<std::size_t>(m.output_tree_begin[o]);
         t < static_cast<std::size_t>(m.output_tree_begin[o + 1]); ++t) {
      const auto root = static_cast<std::size_t>(g.tree_begin[t]);
      inputs.clear();
      tree_inputs(g, root, inputs);
      if (inputs.empty()) {
        f.constant[o] += g.threshold[root];
        continue;
      }
      if (inputs.size() == 1 && f.has_cells) {
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
        continue;
      }
      const int d = tree_depth(g, root, PackedForest::kMaxDepth);
      by_depth[static_cast<std::size_t>(d)].push_back(static_cast<std::int32_t>(t));
      tree_out[t] = static_cast<std::int32_t>(o);
    }
  }
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
    // Walked on the row's ranks: each internal node as its threshold's index among its input's
    // cuts (16 bits), the input's index among the cut inputs (8) and its NaN direction.
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
    f.rank_groups.push_back(std::move(rg));
  }
  return f;
}

// ---------------------------------------------------------------------------------------------
// Regressor.

Result<Regressor> Regressor::fit(RegressorKind kind, const Matrix& x, const Matrix& y,
                                 const RegressorOptions& options, std::uint64_t seed) {
  if (x.rows == 0) return Error("no training rows");
  Regressor r;
  switch (kind) {
    case RegressorKind::kMlp:
      r.model_ = fit_mlp(x, y, options.mlp, seed);
      break;
    case RegressorKind::kGbdt: {
      auto g = fit_gbdt(x, y, options.gbdt, seed);
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

namespace {

// One callable from several lambdas, one per alternative of a variant (std::visit).
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

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

// ---------------------------------------------------------------------------------------------
// JSON.

nlohmann::json Regressor::to_json() const {
  nlohmann::json j;
  j["kind"] = std::string(to_string(kind()));
  std::visit(Overloaded{[&](const MlpModel& m) {
                          j["layers"] = {m.in, m.h1, m.h2, m.out};
                          j["activation"] = "relu";
                          j["w1"] = m.w1;
                          j["b1"] = m.b1;
                          j["w2"] = m.w2;
                          j["b2"] = m.b2;
                          j["w3"] = m.w3;
                          j["b3"] = m.b3;
                          if (!m.skip.empty()) j["skip"] = m.skip;
                        },
                        [&](const Forest& f) {
                          const GbdtModel& m = f.trees;
                          j["inputs"] = m.in;
                          j["outputs"] = m.out;
                          j["base_score"] = m.base_score;
                          j["tree_begin"] = m.tree_begin;
                          j["output_tree_begin"] = m.output_tree_begin;
                          j["feature"] = m.feature;
                          j["threshold"] = m.threshold;
                          j["left"] = m.left;
                          j["right"] = m.right;
                          j["default_left"] = m.default_left;
                        },
                        [&](const LinearModel& m) {
                          j["inputs"] = m.in;
                          j["outputs"] = m.out;
                          j["w"] = m.w;
                          j["b"] = m.b;
                        }},
             model_);
  return j;
}

Result<Regressor> Regressor::from_json(const nlohmann::json& j) {
  try {
    Regressor r;
    const auto kind = parse_regressor(j.at("kind").get<std::string>());
    if (!kind) return Error("regressor.kind: unknown '" + j.at("kind").get<std::string>() + "'");
    switch (*kind) {
      case RegressorKind::kMlp: {
        const auto layers = json_numbers<int>(j.at("layers"));
        if (layers.size() != 4) return Error("regressor.layers: expected 4 sizes");
        MlpModel m;
        m.in = layers[0];
        m.h1 = layers[1];
        m.h2 = layers[2];
        m.out = layers[3];
        m.w1 = json_numbers<float>(j.at("w1"));
        m.b1 = json_numbers<float>(j.at("b1"));
        m.w2 = json_numbers<float>(j.at("w2"));
        m.b2 = json_numbers<float>(j.at("b2"));
        m.w3 = json_numbers<float>(j.at("w3"));
        m.b3 = json_numbers<float>(j.at("b3"));
        if (j.contains("skip")) m.skip = json_numbers<float>(j.at("skip"));
        const auto sz = [](int a, int b) {
          return static_cast<std::size_t>(a) * static_cast<std::size_t>(b);
        };
        if (m.w1.size() != sz(m.in, m.h1) || m.b1.size() != sz(1, m.h1) ||
            m.w2.size() != sz(m.h1, m.h2) || m.b2.size() != sz(1, m.h2) ||
            m.w3.size() != sz(m.h2, m.out) || m.b3.size() != sz(1, m.out) ||
            (!m.skip.empty() && m.skip.size() != sz(m.in, m.out))) {
          return Error("regressor: MLP weight arrays do not match its layer sizes");
        }
        r.model_ = std::move(m);
        break;
      }
      case RegressorKind::kGbdt: {
        GbdtModel m;
        m.in = json_number<int>(j.at("inputs"));
        m.out = json_number<int>(j.at("outputs"));
        m.base_score = json_numbers<float>(j.at("base_score"));
        m.tree_begin = json_numbers<std::int32_t>(j.at("tree_begin"));
        m.output_tree_begin = json_numbers<std::int32_t>(j.at("output_tree_begin"));
        m.feature = json_numbers<std::int32_t>(j.at("feature"));
        m.threshold = json_numbers<float>(j.at("threshold"));
        m.left = json_numbers<std::int32_t>(j.at("left"));
        m.right = json_numbers<std::int32_t>(j.at("right"));
        m.default_left = json_numbers<std::uint8_t>(j.at("default_left"));
        const std::size_t nodes = m.feature.size();
        bool ok = m.threshold.size() == nodes && m.left.size() == nodes &&
                  m.right.size() == nodes && m.default_left.size() == nodes &&
                  m.base_score.size() == static_cast<std::size_t>(m.out) &&
                  m.output_tree_begin.size() == static_cast<std::size_t>(m.out) + 1;
        for (std::size_t k = 0; ok && k < nodes; ++k) {
          if (m.feature[k] >= m.in) ok = false;
          if (m.feature[k] >= 0 &&
              (m.left[k] < 0 || m.right[k] < 0 || static_cast<std::size_t>(m.left[k]) >= nodes ||
               static_cast<std::size_t>(m.right[k]) >= nodes)) {
            ok = false;
          }
        }
        for (auto t : m.tree_begin) ok = ok && t >= 0 && static_cast<std::size_t>(t) < nodes;
        for (std::size_t k = 0; ok && k < m.output_tree_begin.size(); ++k) {
          const auto t = m.output_tree_begin[k];
          ok = t >= 0 && static_cast<std::size_t>(t) <= m.tree_begin.size() &&
               (k == 0 || t >= m.output_tree_begin[k - 1]);
        }
        // Every tree must be a tree: a node reached twice from one root means a cycle or a
        // shared subtree, which a malformed file could use to make prediction loop forever.
        std::vector<std::size_t> seen(nodes, 0), stack;
        for (std::size_t t = 0; ok && t < m.tree_begin.size(); ++t) {
          stack.assign(1, static_cast<std::size_t>(m.tree_begin[t]));
          while (ok && !stack.empty()) {
            const std::size_t k = stack.back();
            stack.pop_back();
            if (seen[k] == t + 1) {
              ok = false;
              break;
            }
            seen[k] = t + 1;
            if (m.feature[k] >= 0) {
              stack.push_back(static_cast<std::size_t>(m.left[k]));
              stack.push_back(static_cast<std::size_t>(m.right[k]));
            }
          }
        }
        if (!ok) return Error("regressor: GBDT node arrays are inconsistent");
        PackedForest packed = PackedForest::pack(m);
        r.model_ = Forest{std::move(m), std::move(packed)};
        break;
      }
      case RegressorKind::kLinear: {
        LinearModel m;
        m.in = json_number<int>(j.at("inputs"));
        m.out = json_number<int>(j.at("outputs"));
        m.w = j.at("w").get<std::vector<double>>();
        m.b = j.at("b").get<std::vector<double>>();
        if (m.w.size() != static_cast<std::size_t>(m.in) * static_cast<std::size_t>(m.out) ||
            m.b.size() != static_cast<std::size_t>(m.out)) {
          return Error("regressor: linear weights do not match its sizes");
        }
        r.model_ = std::move(m);
        break;
      }
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    return Error(std::string("regressor: ") + e.what());
  }
}

}  // namespace corun::surrogate
