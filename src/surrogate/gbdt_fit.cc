// GBDT through the XGBoost C API: training, export of the trees to flat arrays, and XGBoost's
// own predictions (the reference for tests).
#include "corun/surrogate/regressor.h"

#include <xgboost/c_api.h>

#include <cstdio>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "corun/core/check.h"
#include "corun/core/json_number.h"
#include "corun/core/rng.h"

namespace corun::surrogate {

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

Result<GbdtModel> fit_gbdt(const Context& ctx, const Matrix& x, const Matrix& y,
                           const GbdtOptions& o) {
  CORUN_CHECK(x.rows == y.rows && x.rows > 0);
  GbdtModel m;
  m.in = static_cast<int>(x.cols);
  m.out = static_cast<int>(y.cols);
  m.output_tree_begin.push_back(0);
  for (std::size_t k = 0; k < y.cols; ++k) {
    auto d = make_dmatrix(x, y.data.data() + k, y.cols);
    if (!d) return d.error();
    auto b = train_booster((*d)->h, o, ctx.derived({k}).seed, k);
    if (!b) return b.error();
    if (auto s = export_trees((*b)->h, m); !s.ok()) return s.error();
  }
  return m;
}

Result<std::vector<float>> xgboost_reference_predict(const Context& ctx, const Matrix& x_train,
                                                     const Matrix& y_train, const Matrix& x_test,
                                                     const GbdtOptions& o) {
  std::vector<float> out(x_test.rows * y_train.cols);
  auto test = make_dmatrix(x_test, nullptr, 0);
  if (!test) return test.error();
  for (std::size_t k = 0; k < y_train.cols; ++k) {
    auto d = make_dmatrix(x_train, y_train.data.data() + k, y_train.cols);
    if (!d) return d.error();
    auto b = train_booster((*d)->h, o, ctx.derived({k}).seed, k);
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

}  // namespace corun::surrogate
