// MLP training: double precision, deterministic in the seed (single thread, fixed order).
#include "corun/surrogate/regressor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "corun/core/check.h"
#include "corun/core/rng.h"

namespace corun::surrogate {

namespace {

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

MlpModel fit_mlp(const Context& ctx, const Matrix& x, const Matrix& y_in, const MlpOptions& o) {
  CORUN_CHECK(x.rows == y_in.rows && x.rows > 0);
  Rng rng(ctx.seed);
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

}  // namespace corun::surrogate
