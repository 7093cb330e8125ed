// Fitting a surrogate (Surrogate::fit): training rows from the co-run samples, standardisation,
// the regressors and the error model calibrated on out-of-fold residuals.
#include "corun/surrogate/surrogate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "corun/core/rng.h"
#include "corun/core/stats.h"

namespace corun::surrogate {

namespace {

// Below this standard deviation a feature is constant in the training data: it is centred but
// not scaled, so that a value unseen in training is not blown up.
constexpr double kMinScale = 1e-9;

const ModelMetrics* find_metrics(const Measurement& m, std::size_t model) {
  for (const auto& mm : m.models) {
    if (mm.model == model) return &mm;
  }
  return nullptr;
}

// Training rows of one head: features (unstandardised), log targets relative to the base.
struct Rows {
  std::vector<double> x;          // row-major, dim columns
  std::vector<double> y;          // row-major, targets columns
  std::vector<std::size_t> head;  // kCrossModel: which head each row belongs to
  std::size_t n = 0;
};

// Appends the rows of model m for `targets` (all must be finite) to `rows`.
void collect(const FeatureMap& fm, std::size_t m, const std::vector<Target>& targets,
             Target feature_target, std::span<const profile::SampleRecord> corun,
             std::span<const Totals> cotenants, std::size_t head, Rows& rows) {
  const bool ratio = predicts_ratio(fm.kind());
  std::vector<float> buf(fm.dim(m));
  for (std::size_t i = 0; i < corun.size(); ++i) {
    const profile::SampleRecord& s = corun[i];
    if (m >= s.config.size() || s.config[m] == kAbsent || !s.measurement.ok()) continue;
    const ModelMetrics* mm = find_metrics(s.measurement, m);
    if (mm == nullptr || !mm->ok()) continue;
    const auto l = static_cast<std::size_t>(s.config[m]);
    if (ratio && !fm.standalone_ok(m, l)) continue;
    std::vector<double> y;
    bool ok = true;
    for (Target t : targets) {
      double v = std::log(metric_value(*mm, t));
      if (ratio) v -= fm.log_base(m, l, t);
      if (!std::isfinite(v)) ok = false;
      y.push_back(v);
    }
    if (!ok) continue;
    Totals totals = fm.totals(s.config);
    if (i < cotenants.size()) totals += cotenants[i];
    fm.fill(m, s.config, totals, feature_target, buf.data());
    rows.x.insert(rows.x.end(), buf.begin(), buf.end());
    rows.y.insert(rows.y.end(), y.begin(), y.end());
    rows.head.push_back(head);
    ++rows.n;
  }
}

// Why model m has no usable co-run row: the first failure its samples recorded, as " (the first
// failure: ...)", or "" when none failed (every sample left it out).
std::string first_failure(std::span<const profile::SampleRecord> corun, std::size_t m) {
  for (const profile::SampleRecord& s : corun) {
    if (m >= s.config.size() || s.config[m] == kAbsent) continue;
    if (!s.measurement.ok()) return " (the first failure: " + s.measurement.error + ")";
    const ModelMetrics* mm = find_metrics(s.measurement, m);
    if (mm != nullptr && !mm->ok()) return " (the first failure: " + mm->error + ")";
  }
  return "";
}

void standardise(const std::vector<double>& data, std::size_t n, std::size_t cols,
                 std::vector<double>& mean, std::vector<double>& scale) {
  mean.assign(cols, 0.0);
  scale.assign(cols, 1.0);
  if (n == 0) return;
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t c = 0; c < cols; ++c) mean[c] += data[r * cols + c];
  }
  for (auto& v : mean) v /= static_cast<double>(n);
  for (std::size_t c = 0; c < cols; ++c) {
    double s = 0;
    for (std::size_t r = 0; r < n; ++r) {
      const double d = data[r * cols + c] - mean[c];
      s += d * d;
    }
    const double sd = std::sqrt(s / static_cast<double>(n));
    scale[c] = sd > kMinScale ? sd : 1.0;
  }
}

Matrix to_matrix(const std::vector<double>& data, std::size_t n, std::size_t cols,
                 const std::vector<double>& mean, const std::vector<double>& scale) {
  Matrix m(n, cols);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      m.at(r, c) = (data[r * cols + c] - mean[c]) / scale[c];
    }
  }
  return m;
}

ErrorQuantiles summarise(const std::vector<double>& residuals, std::string source) {
  ErrorQuantiles e;
  e.rows = residuals.size();
  e.source = std::move(source);
  if (residuals.empty()) return e;
  e.q05 = quantile(residuals, 0.05);
  e.q50 = quantile(residuals, 0.50);
  e.q95 = quantile(residuals, 0.95);
  double s = 0;
  for (double r : residuals) s += r * r;
  e.rmse = std::sqrt(s / static_cast<double>(residuals.size()));
  return e;
}

std::vector<float> predict_matrix(const Regressor& reg, const Matrix& x) {
  const std::vector<float> xf(x.data.begin(), x.data.end());
  std::vector<float> y(x.rows * static_cast<std::size_t>(reg.outputs()));
  RegressorScratch scratch;
  reg.predict(xf.data(), x.rows, y.data(), scratch);
  return y;
}

// Out-of-fold predictions (standardised units) of every row, or in-sample ones when there are
// too few rows for `folds` folds. The folds and their fits draw from ctx.seed. Returns the
// source name.
Result<std::string> out_of_fold(const Context& ctx, RegressorKind kind, const Matrix& x,
                                const Matrix& y, const Regressor& full,
                                const RegressorOptions& options, int folds,
                                std::vector<float>& pred) {
  pred.assign(x.rows * y.cols, 0.0f);
  const auto k = static_cast<std::size_t>(std::max(folds, 0));
  if (k < 2 || x.rows < 2 * k) {
    pred = predict_matrix(full, x);
    return std::string("in-sample");
  }
  std::vector<std::size_t> order(x.rows);
  std::iota(order.begin(), order.end(), 0);
  Rng rng(ctx.derived({0xF01D}).seed);
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  for (std::size_t f = 0; f < k; ++f) {
    std::vector<std::size_t> train, test;
    for (std::size_t i = 0; i < order.size(); ++i) (i % k == f ? test : train).push_back(order[i]);
    auto reg =
        Regressor::fit(ctx.derived({0xF01D, f}), kind, x.take(train), y.take(train), options);
    if (!reg) return reg.error();
    const std::vector<float> p = predict_matrix(*reg, x.take(test));
    for (std::size_t r = 0; r < test.size(); ++r) {
      for (std::size_t c = 0; c < y.cols; ++c) pred[test[r] * y.cols + c] = p[r * y.cols + c];
    }
  }
  return std::string("cross-validation");
}

/// Refuses settings and co-tenant loads that the surrogate kind cannot fit.
Status check_fit_inputs(const FitOptions& o, std::span<const profile::SampleRecord> corun,
                        std::span<const Totals> cotenants) {
  if (!cotenants.empty() && cotenants.size() != corun.size()) {
    return Error("co-tenant loads: " + std::to_string(cotenants.size()) + " for " +
                 std::to_string(corun.size()) + " co-run samples");
  }
  if (o.kind == SurrogateKind::kJoint && std::any_of(cotenants.begin(), cotenants.end(),
                                                     [](const Totals& c) { return c.count > 0; })) {
    return Error("a joint surrogate has no aggregate state to add a co-tenant's load to");
  }
  if (o.monotone && !can_fit_monotone(o.kind, o.regressor)) {
    return Error(
        "monotone fitting needs the gbdt or linear regressor and the meanfield or "
        "pairwise surrogate");
  }
  return {};
}

// What every fitting step reads: the run's context (its seed), the features, the workload, its
// co-run samples (and their co-tenant loads) and the settings.
struct FitInputs {
  const Context& ctx;
  const FeatureMap& fm;
  const Workload& w;
  std::span<const profile::SampleRecord> corun;
  std::span<const Totals> cotenants;
  const FitOptions& o;
};

// The heads and regressors a fit produces, in the order the surrogate keeps them.
struct FittedHeads {
  std::vector<Head> heads;
  std::vector<Regressor> regressors;
};

/// The regressor options of model m's head: with FitOptions::monotone, per head +1 on the
/// aggregate inputs of latency outputs, -1 on those of throughput.
RegressorOptions constrained_options(const FitInputs& in, std::size_t m,
                                     const std::vector<Target>& targets) {
  RegressorOptions ro = in.o.regressor_options;
  if (!in.o.monotone) return ro;
  const auto agg = in.fm.aggregate_inputs(m);
  for (Target t : targets) {
    std::vector<int> c(in.fm.dim(m), 0);
    for (std::size_t k : agg) c[k] = is_latency(t) ? 1 : -1;
    ro.linear_monotone.push_back(c);
    ro.gbdt.monotone.push_back(std::move(c));
  }
  return ro;
}

/// Appends a head per (model, target) to `heads` and collects the rows of each model that is
/// not withheld, tagged with its head.
Rows collect_cross_model_rows(const FitInputs& in, std::vector<Head>& heads) {
  const FitOptions& o = in.o;
  Rows rows;
  for (std::size_t m = 0; m < in.w.models.size(); ++m) {
    for (Target t : family_targets(in.w.models[m].arch.family)) {
      Head h;
      h.model = m;
      h.targets = {t};
      h.regressor = 0;
      const std::size_t before = rows.n;
      const bool withheld = std::find(o.withheld_models.begin(), o.withheld_models.end(), m) !=
                            o.withheld_models.end();
      if (!withheld) collect(in.fm, m, h.targets, t, in.corun, in.cotenants, heads.size(), rows);
      h.train_rows = rows.n - before;
      heads.push_back(std::move(h));
    }
  }
  return rows;
}

/// Fits the cross-model surrogate: one regressor shared by every (model, target) head.
Status fit_cross_model(const FitInputs& in, FittedHeads& out) {
  const FitOptions& o = in.o;
  // One regressor over every (model, target) row of the models that were co-run.
  const Rows rows = collect_cross_model_rows(in, out.heads);
  if (rows.n == 0) return Error("no usable co-run rows to fit the cross-model surrogate on");
  const std::size_t dim = in.fm.dim(0);
  std::vector<double> xm, xs, ym, ys;
  standardise(rows.x, rows.n, dim, xm, xs);
  standardise(rows.y, rows.n, 1, ym, ys);
  const Matrix x = to_matrix(rows.x, rows.n, dim, xm, xs);
  const Matrix y = to_matrix(rows.y, rows.n, 1, ym, ys);
  auto reg = Regressor::fit(in.ctx.derived({0}), o.regressor, x, y, o.regressor_options);
  if (!reg) return reg.error().wrap("fitting the cross-model regressor");
  std::vector<float> pred;
  auto source =
      out_of_fold(in.ctx, o.regressor, x, y, *reg, o.regressor_options, o.calibration_folds, pred);
  if (!source) return source.error();
  std::vector<std::vector<double>> residuals(out.heads.size());
  std::vector<double> pooled;
  for (std::size_t r = 0; r < rows.n; ++r) {
    const double res = (y.at(r, 0) - static_cast<double>(pred[r])) * ys[0];
    residuals[rows.head[r]].push_back(res);
    pooled.push_back(res);
  }
  for (std::size_t h = 0; h < out.heads.size(); ++h) {
    Head& head = out.heads[h];
    head.x_mean = xm;
    head.x_scale = xs;
    head.y_mean = ym;
    head.y_scale = ys;
    // A withheld model has no residuals of its own: it gets the pooled error of the others.
    head.error = {residuals[h].empty() ? summarise(pooled, "pooled")
                                       : summarise(residuals[h], *source)};
  }
  out.regressors.push_back(std::move(*reg));
  return {};
}

/// Fits model m's head (every target of its family) on a regressor of its own.
Status fit_model_head(const FitInputs& in, std::size_t m, FittedHeads& out) {
  const FitOptions& o = in.o;
  const Workload& w = in.w;
  Head h;
  h.model = m;
  h.targets = family_targets(w.models[m].arch.family);
  Rows rows;
  collect(in.fm, m, h.targets, h.targets.front(), in.corun, in.cotenants, 0, rows);
  if (rows.n == 0) {
    // Samples that failed are work that ran and failed (exit 1), not bad input.
    const std::string why = first_failure(in.corun, m);
    return Error("no usable co-run rows for model '" + w.models[m].name +
                     "': every sample failed or left it out" + why,
                 why.empty() ? Error::Kind::kInvalidInput : Error::Kind::kResource);
  }
  const std::size_t dim = in.fm.dim(m);
  const std::size_t k = h.targets.size();
  standardise(rows.x, rows.n, dim, h.x_mean, h.x_scale);
  standardise(rows.y, rows.n, k, h.y_mean, h.y_scale);
  const Matrix x = to_matrix(rows.x, rows.n, dim, h.x_mean, h.x_scale);
  const Matrix y = to_matrix(rows.y, rows.n, k, h.y_mean, h.y_scale);
  const Context model_ctx = in.ctx.derived({m});
  const RegressorOptions ro = constrained_options(in, m, h.targets);
  auto reg = Regressor::fit(model_ctx, o.regressor, x, y, ro);
  if (!reg) return reg.error().wrap("fitting model '" + w.models[m].name + "'");
  std::vector<float> pred;
  auto source = out_of_fold(model_ctx, o.regressor, x, y, *reg, ro, o.calibration_folds, pred);
  if (!source) return source.error();
  for (std::size_t c = 0; c < k; ++c) {
    std::vector<double> res(rows.n);
    for (std::size_t r = 0; r < rows.n; ++r) {
      res[r] = (y.at(r, c) - static_cast<double>(pred[r * k + c])) * h.y_scale[c];
    }
    h.error.push_back(summarise(res, *source));
  }
  h.train_rows = rows.n;
  h.regressor = out.regressors.size();
  out.regressors.push_back(std::move(*reg));
  out.heads.push_back(std::move(h));
  return {};
}

/// Fits the per-model kinds: one head and one regressor per model, in workload order.
Status fit_per_model(const FitInputs& in, FittedHeads& out) {
  if (!in.o.withheld_models.empty()) {
    return Error("withheld models are only supported by the crossmodel surrogate");
  }
  for (std::size_t m = 0; m < in.w.models.size(); ++m) {
    if (Status st = fit_model_head(in, m, out); !st.ok()) return st;
  }
  return {};
}

}  // namespace

bool can_fit_monotone(SurrogateKind kind, RegressorKind regressor) {
  return regressor != RegressorKind::kMlp &&
         (kind == SurrogateKind::kMeanField || kind == SurrogateKind::kPairwise);
}

Result<Surrogate> Surrogate::fit(const Context& ctx, const Workload& w,
                                 const StandaloneTable& standalone,
                                 std::span<const profile::SampleRecord> corun, const FitOptions& o,
                                 Provenance provenance, std::span<const Totals> cotenants) {
  auto fm = FeatureMap::build(o.kind, w, standalone);
  if (!fm) return fm.error();
  if (Status st = check_fit_inputs(o, corun, cotenants); !st.ok()) return st.error();
  Surrogate s;
  s.kind_ = o.kind;
  s.regressor_kind_ = o.regressor;
  s.monotone_ = o.monotone;
  s.provenance_ = std::move(provenance);
  s.provenance_.standalone_measurements = standalone.measurements();
  s.provenance_.corun_samples = corun.size();
  s.standalone_ = standalone;
  for (const auto& m : w.models) {
    s.signature_.push_back({m.name, m.arch.name, m.arch.family, m.knobs, m.demand});
  }
  if (!w.models.empty()) s.feature_names_ = fm->names(0);

  const FitInputs in{ctx, *fm, w, corun, cotenants, o};
  FittedHeads fitted;
  const Status fit_status = o.kind == SurrogateKind::kCrossModel ? fit_cross_model(in, fitted)
                                                                 : fit_per_model(in, fitted);
  if (!fit_status.ok()) return fit_status.error();
  s.heads_ = std::move(fitted.heads);
  s.regressors_ = std::move(fitted.regressors);
  return s;
}

}  // namespace corun::surrogate
