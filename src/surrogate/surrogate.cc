#include "corun/surrogate/surrogate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "corun/core/atomic_file.h"
#include "corun/core/check.h"
#include "corun/core/json_number.h"
#include "corun/core/rng.h"
#include "corun/core/stats.h"
#include "corun/core/version.h"

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
// too few rows for `folds` folds. Returns the source name.
Result<std::string> out_of_fold(RegressorKind kind, const Matrix& x, const Matrix& y,
                                const Regressor& full, const RegressorOptions& options, int folds,
                                std::uint64_t seed, std::vector<float>& pred) {
  pred.assign(x.rows * y.cols, 0.0f);
  const auto k = static_cast<std::size_t>(std::max(folds, 0));
  if (k < 2 || x.rows < 2 * k) {
    pred = predict_matrix(full, x);
    return std::string("in-sample");
  }
  std::vector<std::size_t> order(x.rows);
  std::iota(order.begin(), order.end(), 0);
  Rng rng(derive_seed(seed, {0xF01D}));
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  for (std::size_t f = 0; f < k; ++f) {
    std::vector<std::size_t> train, test;
    for (std::size_t i = 0; i < order.size(); ++i) (i % k == f ? test : train).push_back(order[i]);
    auto reg =
        Regressor::fit(kind, x.take(train), y.take(train), options, derive_seed(seed, {0xF01D, f}));
    if (!reg) return reg.error();
    const std::vector<float> p = predict_matrix(*reg, x.take(test));
    for (std::size_t r = 0; r < test.size(); ++r) {
      for (std::size_t c = 0; c < y.cols; ++c) pred[test[r] * y.cols + c] = p[r * y.cols + c];
    }
  }
  return std::string("cross-validation");
}

nlohmann::json error_json(const ErrorQuantiles& e, Target t) {
  return {{"target", std::string(to_string(t))},
          {"q05", e.q05},
          {"q50", e.q50},
          {"q95", e.q95},
          {"rmse", e.rmse},
          {"rows", e.rows},
          {"source", e.source}};
}

}  // namespace

bool can_fit_monotone(SurrogateKind kind, RegressorKind regressor) {
  return regressor != RegressorKind::kMlp &&
         (kind == SurrogateKind::kMeanField || kind == SurrogateKind::kPairwise);
}

Result<Surrogate> Surrogate::fit(const Workload& w, const StandaloneTable& standalone,
                                 std::span<const profile::SampleRecord> corun, const FitOptions& o,
                                 Provenance provenance, std::span<const Totals> cotenants) {
  auto fm = FeatureMap::build(o.kind, w, standalone);
  if (!fm) return fm.error();
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
  // Per head: +1 on the aggregate inputs of latency outputs, -1 on those of throughput.
  auto constrained = [&](std::size_t m, const std::vector<Target>& targets) {
    RegressorOptions ro = o.regressor_options;
    if (!o.monotone) return ro;
    const auto agg = fm->aggregate_inputs(m);
    for (Target t : targets) {
      std::vector<int> c(fm->dim(m), 0);
      for (std::size_t k : agg) c[k] = is_latency(t) ? 1 : -1;
      ro.linear_monotone.push_back(c);
      ro.gbdt.monotone.push_back(std::move(c));
    }
    return ro;
  };
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

  if (o.kind == SurrogateKind::kCrossModel) {
    // One regressor over every (model, target) row of the models that were co-run.
    Rows rows;
    for (std::size_t m = 0; m < w.models.size(); ++m) {
      for (Target t : family_targets(w.models[m].arch.family)) {
        Head h;
        h.model = m;
        h.targets = {t};
        h.regressor = 0;
        const std::size_t before = rows.n;
        const bool withheld = std::find(o.withheld_models.begin(), o.withheld_models.end(), m) !=
                              o.withheld_models.end();
        if (!withheld) collect(*fm, m, h.targets, t, corun, cotenants, s.heads_.size(), rows);
        h.train_rows = rows.n - before;
        s.heads_.push_back(std::move(h));
      }
    }
    if (rows.n == 0) return Error("no usable co-run rows to fit the cross-model surrogate on");
    const std::size_t dim = fm->dim(0);
    std::vector<double> xm, xs, ym, ys;
    standardise(rows.x, rows.n, dim, xm, xs);
    standardise(rows.y, rows.n, 1, ym, ys);
    const Matrix x = to_matrix(rows.x, rows.n, dim, xm, xs);
    const Matrix y = to_matrix(rows.y, rows.n, 1, ym, ys);
    auto reg = Regressor::fit(o.regressor, x, y, o.regressor_options, derive_seed(o.seed, {0}));
    if (!reg) return reg.error().wrap("fitting the cross-model regressor");
    std::vector<float> pred;
    auto source = out_of_fold(o.regressor, x, y, *reg, o.regressor_options, o.calibration_folds,
                              o.seed, pred);
    if (!source) return source.error();
    std::vector<std::vector<double>> residuals(s.heads_.size());
    std::vector<double> pooled;
    for (std::size_t r = 0; r < rows.n; ++r) {
      const double res = (y.at(r, 0) - static_cast<double>(pred[r])) * ys[0];
      residuals[rows.head[r]].push_back(res);
      pooled.push_back(res);
    }
    for (std::size_t h = 0; h < s.heads_.size(); ++h) {
      Head& head = s.heads_[h];
      head.x_mean = xm;
      head.x_scale = xs;
      head.y_mean = ym;
      head.y_scale = ys;
      // A withheld model has no residuals of its own: it gets the pooled error of the others.
      head.error = {residuals[h].empty() ? summarise(pooled, "pooled")
                                         : summarise(residuals[h], *source)};
    }
    s.regressors_.push_back(std::move(*reg));
    return s;
  }

  if (!o.withheld_models.empty()) {
    return Error("withheld models are only supported by the crossmodel surrogate");
  }
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    Head h;
    h.model = m;
    h.targets = family_targets(w.models[m].arch.family);
    Rows rows;
    collect(*fm, m, h.targets, h.targets.front(), corun, cotenants, 0, rows);
    if (rows.n == 0) {
      // Samples that failed are work that ran and failed (exit 1), not bad input.
      const std::string why = first_failure(corun, m);
      return Error("no usable co-run rows for model '" + w.models[m].name +
                       "': every sample failed or left it out" + why,
                   why.empty() ? Error::Kind::kInvalidInput : Error::Kind::kResource);
    }
    const std::size_t dim = fm->dim(m);
    const std::size_t k = h.targets.size();
    standardise(rows.x, rows.n, dim, h.x_mean, h.x_scale);
    standardise(rows.y, rows.n, k, h.y_mean, h.y_scale);
    const Matrix x = to_matrix(rows.x, rows.n, dim, h.x_mean, h.x_scale);
    const Matrix y = to_matrix(rows.y, rows.n, k, h.y_mean, h.y_scale);
    const std::uint64_t seed = derive_seed(o.seed, {m});
    const RegressorOptions ro = constrained(m, h.targets);
    auto reg = Regressor::fit(o.regressor, x, y, ro, seed);
    if (!reg) return reg.error().wrap("fitting model '" + w.models[m].name + "'");
    std::vector<float> pred;
    auto source = out_of_fold(o.regressor, x, y, *reg, ro, o.calibration_folds, seed, pred);
    if (!source) return source.error();
    for (std::size_t c = 0; c < k; ++c) {
      std::vector<double> res(rows.n);
      for (std::size_t r = 0; r < rows.n; ++r) {
        res[r] = (y.at(r, c) - static_cast<double>(pred[r * k + c])) * h.y_scale[c];
      }
      h.error.push_back(summarise(res, *source));
    }
    h.train_rows = rows.n;
    h.regressor = s.regressors_.size();
    s.regressors_.push_back(std::move(*reg));
    s.heads_.push_back(std::move(h));
  }
  return s;
}

Status Surrogate::check_workload(const Workload& w) const {
  if (w.models.size() != signature_.size()) {
    return Error("the surrogate was fitted for " + std::to_string(signature_.size()) +
                 " models, the workload has " + std::to_string(w.models.size()));
  }
  for (std::size_t m = 0; m < signature_.size(); ++m) {
    const ModelSignature& sig = signature_[m];
    const ModelSpec& spec = w.models[m];
    const std::string where = "models[" + std::to_string(m) + "]";
    if (spec.name != sig.name) {
      return Error(where + ".name: the surrogate expects '" + sig.name + "', the workload has '" +
                   spec.name + "'");
    }
    if (spec.arch.name != sig.catalog_model) {
      return Error(where + ".model: the surrogate was fitted on '" + sig.catalog_model +
                   "', the workload runs '" + spec.arch.name + "'");
    }
    bool same = spec.knobs.size() == sig.knobs.size();
    for (std::size_t k = 0; same && k < sig.knobs.size(); ++k) {
      same = spec.knobs[k].id == sig.knobs[k].id && spec.knobs[k].values == sig.knobs[k].values;
    }
    if (!same) {
      return Error(where + ".knobs: differ from the knobs the surrogate was fitted on");
    }
  }
  return {};
}

nlohmann::json Surrogate::to_json() const {
  nlohmann::json j;
  j["kind"] = "corun-surrogate";
  j["schema_version"] = kModelSchemaVersion;
  j["corun_version"] = std::string(version());
  j["git_hash"] = std::string(git_hash());
  j["surrogate"] = std::string(to_string(kind_));
  j["regressor"] = std::string(to_string(regressor_kind_));
  j["monotone"] = monotone_;
  j["testbed"] = provenance_.testbed;
  j["device"] = provenance_.device;
  j["seed"] = provenance_.seed;
  j["workload"] = {{"hash", provenance_.workload_hash}, {"name", provenance_.workload_name}};
  j["dataset"] = provenance_.dataset;
  j["standalone_measurements"] = provenance_.standalone_measurements;
  j["corun_samples"] = provenance_.corun_samples;
  j["models"] = nlohmann::json::array();
  for (const auto& sig : signature_) {
    nlohmann::json knobs = nlohmann::json::array();
    for (const auto& k : sig.knobs) {
      knobs.push_back({{"knob", knob_decl(k.id).name}, {"values", k.values}});
    }
    j["models"].push_back({{"name", sig.name},
                           {"catalog_model", sig.catalog_model},
                           {"family", std::string(corun::to_string(sig.family))},
                           {"knobs", knobs},
                           {"demand",
                            {{"fps", sig.demand.fps},
                             {"rps", sig.demand.rps},
                             {"prompt_tokens", sig.demand.prompt_tokens},
                             {"output_tokens", sig.demand.output_tokens}}}});
    // Written only for closed-loop demands, so that files of rate demands stay as they were.
    if (sig.demand.closed_loop()) {
      j["models"].back()["demand"]["concurrency"] = sig.demand.concurrency;
    }
  }
  j["feature_names"] = feature_names_;
  j["standalone"] = standalone_.to_json();
  j["heads"] = nlohmann::json::array();
  for (const auto& h : heads_) {
    nlohmann::json targets = nlohmann::json::array(), error = nlohmann::json::array();
    for (std::size_t k = 0; k < h.targets.size(); ++k) {
      targets.push_back(std::string(to_string(h.targets[k])));
      error.push_back(error_json(h.error[k], h.targets[k]));
    }
    j["heads"].push_back({{"model", h.model},
                          {"targets", targets},
                          {"x_mean", h.x_mean},
                          {"x_scale", h.x_scale},
                          {"y_mean", h.y_mean},
                          {"y_scale", h.y_scale},
                          {"regressor", h.regressor},
                          {"train_rows", h.train_rows},
                          {"error", error}});
  }
  j["regressors"] = nlohmann::json::array();
  for (const auto& r : regressors_) j["regressors"].push_back(r.to_json());
  return j;
}

Result<Surrogate> Surrogate::from_json(const nlohmann::json& j) {
  try {
    if (!j.is_object() || j.value("kind", "") != "corun-surrogate") {
      return Error("not a corun surrogate model (kind must be 'corun-surrogate')");
    }
    const int version = json_number<int>(j.at("schema_version"));
    if (version != kModelSchemaVersion) {
      return Error("schema_version: the file has " + std::to_string(version) +
                   ", this corun reads " + std::to_string(kModelSchemaVersion));
    }
    Surrogate s;
    const auto kind = parse_surrogate(j.at("surrogate").get<std::string>());
    if (!kind)
      return Error("surrogate: unknown kind '" + j.at("surrogate").get<std::string>() + "'");
    s.kind_ = *kind;
    const auto reg = parse_regressor(j.at("regressor").get<std::string>());
    if (!reg) return Error("regressor: unknown '" + j.at("regressor").get<std::string>() + "'");
    s.regressor_kind_ = *reg;
    s.monotone_ = j.value("monotone", false);
    s.provenance_.testbed = j.at("testbed").get<std::string>();
    s.provenance_.device = j.at("device").get<std::string>();
    s.provenance_.seed = json_number<std::uint64_t>(j.at("seed"));
    s.provenance_.workload_hash = j.at("workload").at("hash").get<std::string>();
    s.provenance_.workload_name = j.at("workload").at("name").get<std::string>();
    s.provenance_.dataset = j.value("dataset", "");
    s.provenance_.standalone_measurements = json_number_or(j, "standalone_measurements", std::size_t{0});
    s.provenance_.corun_samples = json_number_or(j, "corun_samples", std::size_t{0});
    for (const auto& m : j.at("models")) {
      ModelSignature sig;
      sig.name = m.at("name").get<std::string>();
      sig.catalog_model = m.at("catalog_model").get<std::string>();
      const std::string family = m.at("family").get<std::string>();
      bool found = false;
      for (auto f :
           {ModelFamily::kVision, ModelFamily::kEncoder, ModelFamily::kSpeech, ModelFamily::kLlm}) {
        if (corun::to_string(f) == family) {
          sig.family = f;
          found = true;
        }
      }
      if (!found) return Error("models[].family: unknown '" + family + "'");
      for (const auto& k : m.at("knobs")) {
        const auto id = find_knob(k.at("knob").get<std::string>());
        if (!id)
          return Error("models[].knobs: unknown knob '" + k.at("knob").get<std::string>() + "'");
        sig.knobs.push_back({*id, k.at("values").get<std::vector<double>>()});
      }
      if (m.contains("demand")) {  // absent in files written before demands were recorded
        const auto& d = m.at("demand");
        sig.demand.fps = d.value("fps", 0.0);
        sig.demand.rps = d.value("rps", 0.0);
        sig.demand.prompt_tokens = json_number_or(d, "prompt_tokens", 0);
        sig.demand.output_tokens = json_number_or(d, "output_tokens", 0);
        sig.demand.concurrency = json_number_or(d, "concurrency", 0);
      }
      s.signature_.push_back(std::move(sig));
    }
    s.feature_names_ = j.value("feature_names", std::vector<std::string>{});
    auto table = StandaloneTable::from_json(j.at("standalone"));
    if (!table) return table.error();
    s.standalone_ = std::move(*table);
    if (s.standalone_.models() != s.signature_.size()) {
      return Error("standalone: " + std::to_string(s.standalone_.models()) +
                   " models, models: " + std::to_string(s.signature_.size()));
    }
    for (const auto& r : j.at("regressors")) {
      auto reg_r = Regressor::from_json(r);
      if (!reg_r) return reg_r.error().wrap("regressors[]");
      s.regressors_.push_back(std::move(*reg_r));
    }
    for (const auto& hj : j.at("heads")) {
      Head h;
      h.model = json_number<std::size_t>(hj.at("model"));
      for (const auto& t : hj.at("targets")) {
        const auto tg = parse_target(t.get<std::string>());
        if (!tg) return Error("heads[].targets: unknown target '" + t.get<std::string>() + "'");
        h.targets.push_back(*tg);
      }
      h.x_mean = hj.at("x_mean").get<std::vector<double>>();
      h.x_scale = hj.at("x_scale").get<std::vector<double>>();
      h.y_mean = hj.at("y_mean").get<std::vector<double>>();
      h.y_scale = hj.at("y_scale").get<std::vector<double>>();
      h.regressor = json_number<std::size_t>(hj.at("regressor"));
      h.train_rows = json_number_or(hj, "train_rows", std::size_t{0});
      for (const auto& e : hj.at("error")) {
        ErrorQuantiles q;
        q.q05 = e.at("q05").get<double>();
        q.q50 = e.at("q50").get<double>();
        q.q95 = e.at("q95").get<double>();
        q.rmse = e.at("rmse").get<double>();
        q.rows = json_number<std::size_t>(e.at("rows"));
        q.source = e.at("source").get<std::string>();
        h.error.push_back(std::move(q));
      }
      if (h.model >= s.signature_.size() || h.regressor >= s.regressors_.size() ||
          h.targets.empty() || h.error.size() != h.targets.size() ||
          h.y_mean.size() != h.targets.size() || h.y_scale.size() != h.targets.size() ||
          h.x_mean.size() != h.x_scale.size() ||
          static_cast<int>(h.x_mean.size()) != s.regressors_[h.regressor].inputs() ||
          s.regressors_[h.regressor].outputs() != static_cast<int>(h.targets.size())) {
        return Error("heads[]: inconsistent sizes (model, regressor, targets, standardisation)");
      }
      for (double v : h.x_scale) {
        if (!(v > 0)) return Error("heads[].x_scale: must be positive");
      }
      for (double v : h.y_scale) {
        if (!(v > 0)) return Error("heads[].y_scale: must be positive");
      }
      s.heads_.push_back(std::move(h));
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return Error(std::string("surrogate model: ") + e.what());
  }
}

Status Surrogate::save(const std::filesystem::path& path) const {
  return write_file_atomic(path, to_json().dump() + "\n");
}

Result<Surrogate> Surrogate::load(const std::filesystem::path& path) {
  auto text = read_file(path);
  if (!text) return text.error();
  // Whatever is wrong inside the file (cut short, altered bytes, another schema) makes it a
  // damaged model, exit code 3: refitting it from its dataset is the recovery
  // (docs/formats.md, "Damaged files").
  if (text->empty()) {
    return Error(path.string() + ": damaged surrogate model: the file is empty",
                 Error::Kind::kDamaged);
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::parse_error& e) {
    return Error(path.string() + ": damaged surrogate model: not valid JSON at byte " +
                     std::to_string(e.byte) + " of " + std::to_string(text->size()),
                 Error::Kind::kDamaged);
  } catch (const nlohmann::json::out_of_range& e) {
    // The parser reports a number too large for a double (a damaged digit or exponent) as
    // out_of_range, not as a parse error.
    return Error(path.string() + ": damaged surrogate model: " + e.what(), Error::Kind::kDamaged);
  }
  auto s = from_json(j);
  if (!s)
    return s.error().wrap(path.string() + ": damaged surrogate model").as(Error::Kind::kDamaged);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Compiled form.

Result<CompiledSurrogate> CompiledSurrogate::compile(const Surrogate& s, const Workload& w,
                                                     const StandaloneTable* standalone) {
  if (auto st = s.check_workload(w); !st.ok()) return st.error();
  auto fm = FeatureMap::build(s.kind(), w, standalone != nullptr ? *standalone : s.standalone());
  if (!fm) return fm.error();
  CompiledSurrogate c;
  c.features_ = std::move(*fm);
  c.regressors_ = s.regressors();
  c.models_ = w.models.size();
  c.ratio_ = predicts_ratio(s.kind());
  c.monotone_ = s.monotone();
  c.upper95_.assign(c.models_ * kTargetCount, 1.0f);
  c.q50_.assign(c.models_ * kTargetCount, 0.0);
  c.rmse_.assign(c.models_ * kTargetCount, 0.0);
  for (const Head& h : s.heads()) {
    CHead ch;
    ch.model = h.model;
    ch.dim = c.features_.dim(h.model);
    if (ch.dim != h.x_mean.size()) {
      return Error("surrogate head of model '" + w.models[h.model].name + "' expects " +
                   std::to_string(h.x_mean.size()) + " features, the workload gives " +
                   std::to_string(ch.dim));
    }
    ch.feature_target = h.targets.front();
    for (std::size_t k = 0; k < h.targets.size(); ++k) {
      ch.targets.push_back(static_cast<std::size_t>(h.targets[k]));
      const std::size_t slot = h.model * kTargetCount + static_cast<std::size_t>(h.targets[k]);
      c.upper95_[slot] = static_cast<float>(std::exp(h.error[k].q95));
      c.q50_[slot] = h.error[k].q50;
      c.rmse_[slot] = h.error[k].rmse;
    }
    ch.x_mean.assign(h.x_mean.begin(), h.x_mean.end());
    for (double v : h.x_scale) ch.x_inv_scale.push_back(static_cast<float>(1.0 / v));
    ch.y_mean.assign(h.y_mean.begin(), h.y_mean.end());
    ch.y_scale.assign(h.y_scale.begin(), h.y_scale.end());
    ch.regressor = h.regressor;
    c.max_dim_ = std::max(c.max_dim_, ch.dim);
    c.max_out_ = std::max(c.max_out_, ch.targets.size());
    c.heads_.push_back(std::move(ch));
  }
  c.specialize(w);
  return c;
}

void CompiledSurrogate::specialize(const Workload& w) {
  if (!mean_field()) return;
  std::size_t total = 0;
  for (const CHead& h : heads_) {
    if (regressors_[h.regressor].kind() != RegressorKind::kGbdt) return;
    total += w.models[h.model].local_config_count();
  }
  if (total > kMaxSpecialized) return;
  std::vector<std::vector<SpecializedForest>> special;
  std::vector<float> x(max_dim_);
  std::vector<std::int32_t> config(models_, kAbsent);
  for (const CHead& h : heads_) {
    std::vector<std::uint8_t> fixed(h.dim, 1);
    for (std::size_t k : features_.aggregate_inputs(h.model)) fixed[k] = 0;
    auto& per_config = special.emplace_back();
    const std::size_t locals = w.models[h.model].local_config_count();
    for (std::size_t l = 0; l < locals; ++l) {
      config[h.model] = static_cast<std::int32_t>(l);
      features_.fill(h.model, config, features_.contribution(h.model, l), h.feature_target,
                     x.data());
      for (std::size_t k = 0; k < h.dim; ++k) x[k] = (x[k] - h.x_mean[k]) * h.x_inv_scale[k];
      auto f = regressors_[h.regressor].specialize(x.data(), fixed);
      if (!f) return;
      per_config.push_back(std::move(*f));
    }
    config[h.model] = kAbsent;
  }
  special_ = std::move(special);
}

std::size_t CompiledSurrogate::CellHash::operator()(const CellKey& k) const {
  // The key as five words, each multiplied in (independent products, not one chain).
  static_assert(sizeof(k.ranks) == 4 * sizeof(std::uint64_t));
  std::array<std::uint64_t, 4> w{};
  std::memcpy(w.data(), k.ranks.data(), sizeof(w));
  std::uint64_t h = (std::uint64_t{k.head} << 32 | k.local) * 0x9E3779B97F4A7C15ULL;
  h ^= w[0] * 0xC2B2AE3D27D4EB4FULL;
  h ^= w[1] * 0x165667B19E3779F9ULL;
  h ^= w[2] * 0xD6E8FEB86659FD93ULL;
  h ^= w[3] * 0xFF51AFD7ED558CCDULL;
  h ^= h >> 32;
  h *= 0xC4CEB9FE1A85EC53ULL;
  return static_cast<std::size_t>(h ^ (h >> 29));
}

CompiledSurrogate::CellCache::Value& CompiledSurrogate::CellCache::slot(const CellKey& k,
                                                                        bool& hit) {
  if (slots_.empty()) slots_.resize(kSlots);
  Entry& e = slots_[CellHash{}(k) & (kSlots - 1)];
  hit = e.used && e.key == k;
  if (!hit) {
    if (!e.used) ++filled_;
    e.key = k;
    e.used = true;
  }
  return e.value;
}

CompiledSurrogate::Workspace CompiledSurrogate::make_workspace() const {
  Workspace ws;
  ws.x.resize(kChunk * std::max<std::size_t>(max_dim_, 1));
  ws.z.resize(kChunk * std::max<std::size_t>(max_out_, 1));
  ws.totals.resize(kChunk);
  ws.rows.resize(kChunk);
  ws.config.assign(models_, kAbsent);
  ws.scratch.h1.resize(256);
  ws.scratch.h2.resize(256);
  return ws;
}

void CompiledSurrogate::predict(std::span<const std::int32_t> configs, std::span<float> out,
                                Workspace& ws) const {
  CORUN_CHECK(models_ > 0 && configs.size() % models_ == 0);
  const std::size_t n = configs.size() / models_;
  CORUN_CHECK(out.size() >= n * models_ * kTargetCount);
  // A workspace made for another surrogate may be too small for this one: grow it once.
  if (ws.totals.size() < kChunk || ws.x.size() < kChunk * max_dim_ ||
      ws.z.size() < kChunk * max_out_) {
    ws = make_workspace();
  }
  std::fill_n(out.begin(), n * models_ * kTargetCount, std::numeric_limits<float>::quiet_NaN());
  for (std::size_t begin = 0; begin < n; begin += kChunk) {
    const std::size_t count = std::min(kChunk, n - begin);
    for (std::size_t i = 0; i < count; ++i) {
      ws.totals[i] = features_.totals(configs.subspan((begin + i) * models_, models_));
    }
    for (const CHead& h : heads_) {
      std::size_t rows = 0;
      for (std::size_t i = 0; i < count; ++i) {
        const auto c = configs.subspan((begin + i) * models_, models_);
        const std::int32_t local = c[h.model];
        if (local == kAbsent) continue;
        if (ratio_ && !features_.standalone_ok(h.model, static_cast<std::size_t>(local))) continue;
        float* x = ws.x.data() + rows * h.dim;
        features_.fill(h.model, c, ws.totals[i], h.feature_target, x);
        for (std::size_t k = 0; k < h.dim; ++k) x[k] = (x[k] - h.x_mean[k]) * h.x_inv_scale[k];
        ws.rows[rows++] = static_cast<std::uint32_t>(i);
      }
      if (rows == 0) continue;
      const std::size_t k_out = h.targets.size();
      if (!special_.empty()) {
        const std::size_t hi = static_cast<std::size_t>(&h - heads_.data());
        for (std::size_t r = 0; r < rows; ++r) {
          const std::size_t cand = begin + ws.rows[r];
          const auto local = static_cast<std::size_t>(configs[cand * models_ + h.model]);
          special_[hi][local].predict(ws.x.data() + r * h.dim, ws.z.data() + r * k_out,
                                      ws.scratch.ranks);
        }
      } else {
        regressors_[h.regressor].predict(ws.x.data(), rows, ws.z.data(), ws.scratch);
      }
      for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t cand = begin + ws.rows[r];
        const auto local = static_cast<std::size_t>(configs[cand * models_ + h.model]);
        for (std::size_t k = 0; k < k_out; ++k) {
          const std::size_t t = h.targets[k];
          float v = ws.z[r * k_out + k] * h.y_scale[k] + h.y_mean[k];
          if (ratio_) {
            v += static_cast<float>(features_.log_base(h.model, local, static_cast<Target>(t)));
          }
          out[(cand * models_ + h.model) * kTargetCount + t] = std::exp(v);
        }
      }
    }
  }
}

void CompiledSurrogate::predict_given(std::size_t m, std::size_t l, const Totals& others,
                                      std::span<float> out, Workspace& ws) const {
  CORUN_CHECK(mean_field() && m < models_ && out.size() >= kTargetCount);
  if (ws.totals.empty() || ws.x.size() < max_dim_ || ws.z.size() < max_out_ ||
      ws.config.size() != models_) {
    ws = make_workspace();
  }
  std::fill_n(out.begin(), kTargetCount, std::numeric_limits<float>::quiet_NaN());
  if (ratio_ && !features_.standalone_ok(m, l)) return;
  const Totals all = others + features_.contribution(m, l);
  ws.config[m] = static_cast<std::int32_t>(l);  // fill() reads only the model's own entry
  for (std::size_t hi = 0; hi < heads_.size(); ++hi) {
    const CHead& h = heads_[hi];
    if (h.model != m) continue;
    float* x = ws.x.data();
    features_.fill(m, ws.config, all, h.feature_target, x);
    for (std::size_t k = 0; k < h.dim; ++k) x[k] = (x[k] - h.x_mean[k]) * h.x_inv_scale[k];
    if (!special_.empty()) {
      const SpecializedForest& f = special_[hi][l];
      if (f.has_cells && f.cut_inputs.size() <= CellKey::kMaxCutInputs) {
        CellKey key;
        key.head = static_cast<std::uint32_t>(hi);
        key.local = static_cast<std::uint32_t>(l);
        f.cell(x, key.ranks.data());
        bool hit = false;
        CellCache::Value& remembered = ws.cells.slot(key, hit);
        if (!hit) f.predict(x, key.ranks.data(), remembered.data());
        std::copy_n(remembered.begin(), h.targets.size(), ws.z.begin());
      } else {
        f.predict(x, ws.z.data(), ws.scratch.ranks);
      }
    } else {
      regressors_[h.regressor].predict(x, 1, ws.z.data(), ws.scratch);
    }
    for (std::size_t k = 0; k < h.targets.size(); ++k) {
      const std::size_t t = h.targets[k];
      float v = ws.z[k] * h.y_scale[k] + h.y_mean[k];
      if (ratio_) v += static_cast<float>(features_.log_base(m, l, static_cast<Target>(t)));
      out[t] = std::exp(v);
    }
  }
  ws.config[m] = kAbsent;
}

}  // namespace corun::surrogate
