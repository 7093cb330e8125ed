#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"

namespace corun::surrogate {

/// @brief A dense row-major matrix of doubles (training data: rows are samples).
struct Matrix {
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<double> data;

  Matrix() = default;
  Matrix(std::size_t r, std::size_t c) : rows(r), cols(c), data(r * c, 0.0) {}
  double& at(std::size_t r, std::size_t c) { return data[r * cols + c]; }
  [[nodiscard]] double at(std::size_t r, std::size_t c) const { return data[r * cols + c]; }
  [[nodiscard]] std::span<const double> row(std::size_t r) const {
    return {data.data() + r * cols, cols};
  }
  /// @brief The rows listed in `idx`, in that order.
  [[nodiscard]] Matrix take(std::span<const std::size_t> idx) const;
};

/// @brief Which function family maps features to targets.
enum class RegressorKind { kMlp, kGbdt, kLinear };

std::string_view to_string(RegressorKind k);
std::optional<RegressorKind> parse_regressor(std::string_view s);
/// @brief {"mlp", "gbdt", "linear"}.
const std::vector<std::string>& regressor_names();

/// @brief Training settings of the MLP. Defaults follow the MeanField paper's network (two
/// hidden layers of 64 and 32) with Adam, minibatches and early stopping.
struct MlpOptions {
  int hidden1 = 64;
  int hidden2 = 32;
  double learning_rate = 3e-3;
  double weight_decay = 1e-4;  ///< decoupled (AdamW) decay on weights, not biases
  int batch_size = 32;
  int max_steps = 3000;      ///< optimiser steps (bounded in steps, not epochs: data is tiny)
  int patience_steps = 400;  ///< early stopping: steps without a better validation loss
  double validation_fraction = 0.2;
  int min_validation_rows = 4;  ///< below this no split is made and all steps are run
  /// A linear skip connection from inputs to outputs, fitted first by ridge regression; the
  /// hidden layers then learn the nonlinear residual, starting from zero output. With tens of
  /// noisy rows per model the network alone overfits; with the skip, early stopping falls
  /// back to (at least) the linear fit when the residual holds nothing learnable.
  bool linear_skip = true;
  double skip_ridge_lambda = 1e-2;
};

/// @brief A trained MLP: in -> hidden1 (ReLU) -> hidden2 (ReLU) -> out, plus an optional
/// linear skip in -> out; weights row-major [from][to]. Inputs and outputs are in the
/// standardised units the caller trained with.
struct MlpModel {
  int in = 0, h1 = 0, h2 = 0, out = 0;
  std::vector<float> w1, b1, w2, b2, w3, b3;
  std::vector<float> skip;  ///< [in][out], empty without a skip connection
};

/// @brief Training settings of the gradient-boosted trees (XGBoost, exact, single thread so
/// that the result depends on the seed only).
struct GbdtOptions {
  int rounds = 300;
  int max_depth = 4;
  double eta = 0.05;
  double subsample = 0.8;
  double colsample = 1.0;
  double min_child_weight = 1.0;
  double lambda = 1.0;
  /// Per output, per input: +1 (prediction non-decreasing in that input), -1 (non-increasing)
  /// or 0; empty = unconstrained. Passed to XGBoost as monotone_constraints.
  std::vector<std::vector<int>> monotone;
};

/// @brief Trees exported from XGBoost into flat arrays: one ensemble per output. A node goes
/// left when x[feature] < threshold (or x is NaN and default_left), as XGBoost does. An output
/// is its base score plus the sum of its trees' leaves in one fixed order, which every form
/// (flat, packed, specialised) keeps so that they predict bit for bit the same: the trees
/// [begin, end) of the output are dealt to kSumLanes running sums in turn (tree begin + i goes
/// to lane i mod kSumLanes, each lane summed in tree order), the lanes are added pairwise
/// ((0+1)+(2+3))+((4+5)+(6+7)), and the base score last. Eight independent sums instead of one
/// chain of hundreds of dependent additions: a SIMD add per eight trees.
inline constexpr std::size_t kSumLanes = 8;

/// @brief The lanes of GbdtModel's summation order added up, then `base`.
inline float sum_lanes(const float* lanes, float base) {
  return base + (((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                 ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])));
}

struct GbdtModel {
  int in = 0;
  int out = 0;
  std::vector<float> base_score;                ///< per output
  std::vector<std::int32_t> tree_begin;         ///< per tree: index of its root in the node arrays
  std::vector<std::int32_t> output_tree_begin;  ///< per output + 1: range of its trees
  std::vector<std::int32_t> feature;            ///< -1 marks a leaf
  std::vector<float> threshold;                 ///< split value, or the leaf value for a leaf
  std::vector<std::int32_t> left, right;
  std::vector<std::uint8_t> default_left;
};

/// @brief The same trees laid out for fast prediction: each padded to a complete binary tree of
/// one depth (a leaf above that depth is copied to every leaf below it), so that a walk is
/// `depth` steps of index arithmetic with no pointers, and several trees can be walked in
/// lockstep. Node n of a tree has children 2n+1 and 2n+2. Built from a GbdtModel; predicts
/// exactly what it does (same comparisons, same summation order).
struct PackedForest {
  int depth = -1;  ///< -1: not packed (trees too deep), predict from the GbdtModel
  std::vector<std::int32_t> feature;       ///< per tree, 2^depth - 1 internal nodes
  std::vector<float> threshold;            ///< parallel to feature
  std::vector<std::uint8_t> default_left;  ///< parallel to feature
  std::vector<float> leaf;                 ///< per tree, 2^depth leaves

  /// @brief Packs `m`; leaves depth at -1 when a tree is deeper than kMaxDepth.
  static PackedForest pack(const GbdtModel& m);
  static constexpr int kMaxDepth = 10;
};

/// @brief A GBDT specialised to fixed values of some of its inputs: every split on a fixed
/// input is resolved, so what remains splits only on the free inputs. What is left of a tree
/// is then one of three kinds: a constant (no split left), a step function of one free input
/// (every split left on that input), or a tree of several inputs. The constants are summed
/// once; the step functions of each input are summed into one table indexed by the input's
/// rank among its thresholds (one lookup instead of a walk per tree); only the trees of several
/// inputs are walked, grouped by depth and packed as PackedForests, eight in lockstep.
/// The predictions equal the full trees' up to float rounding (the sum runs in another order,
/// the same for every row): each part is monotone wherever every tree is (the table is built
/// from same-signed steps), so a monotone forest stays monotone, as the exact solver needs.
struct SpecializedForest {
  int out = 0;
  std::vector<float> base_score;
  /// The free inputs the trees still split on, and each one's sorted distinct thresholds. A
  /// row's rank among them decides every comparison a walk makes, so rows of the same cell (the
  /// same rank on every cut input) predict the same values.
  std::vector<std::int32_t> cut_inputs;
  std::vector<std::vector<float>> cuts;
  bool has_cells = true;  ///< false: an input has too many thresholds for 16-bit ranks
  std::vector<float> constant;  ///< per output: the trees with no split left, summed
  /// Per cut input: the sum of the trees that split on it alone, by rank, (cuts.size() + 2) x
  /// out (the last row: NaN); empty when no tree splits on it alone (or !has_cells).
  std::vector<std::vector<float>> table;
  /// The trees of several inputs, by depth, walked on the row's cell (the ranks): per internal
  /// node, bits 0-15 its threshold's index among its input's cuts, 16-23 that input's index
  /// among cut_inputs, 24 whether NaN goes left: 4 bytes a node where a PackedForest has 9.
  struct RankGroup {
    int depth = 0;
    std::vector<std::uint32_t> node;
    std::vector<float> leaf;
  };
  std::vector<RankGroup> rank_groups;
  /// The same trees walked on the row's values, when the ranks cannot be (!has_cells, or more
  /// than 255 cut inputs); then rank_groups is empty.
  std::vector<PackedForest> groups;
  /// Per group (of whichever kind), per packed tree: where its leaf is summed,
  /// output * kSumLanes + lane.
  std::vector<std::vector<std::uint16_t>> slot;

  /// @brief The cell of row x: per cut input, how many of its thresholds are <= x (kNanRank
  /// for NaN, which walks the default direction).
  void cell(const float* x, std::uint16_t* ranks) const;
  static constexpr std::uint16_t kNanRank = 0xFFFF;

  /// @brief y[0..out) for one row x (which must agree on the fixed inputs) whose cell() is
  /// `ranks` (read only when has_cells; may then not be null).
  void predict(const float* x, const std::uint16_t* ranks, float* y) const;
  /// @brief The same, computing the ranks into `scratch`.
  void predict(const float* x, float* y, std::vector<std::uint16_t>& scratch) const;
};

/// @brief Ridge regression: y = x W + b.
struct LinearModel {
  int in = 0;
  int out = 0;
  std::vector<double> w;  ///< [in][out]
  std::vector<double> b;  ///< [out]
};

/// @brief Settings of all regressors; only the chosen kind's are used.
struct RegressorOptions {
  MlpOptions mlp;
  GbdtOptions gbdt;
  double ridge_lambda = 1e-2;
  /// Sign constraints of the linear regressor, as GbdtOptions::monotone (empty = none).
  std::vector<std::vector<int>> linear_monotone;
};

/// @brief Scratch buffers for batched prediction; reused across calls so that prediction does
/// not allocate once warmed up.
struct RegressorScratch {
  std::vector<float> h1, h2;
  std::vector<std::uint16_t> ranks;  ///< a row's cell (SpecializedForest)
};

/// @brief One trained regressor of any kind, predicting `out` values from `in` features.
class Regressor {
 public:
  Regressor() = default;

  /// @brief Fits on standardised inputs `x` and targets `y`. Deterministic in `ctx.seed`.
  static Result<Regressor> fit(const Context& ctx, RegressorKind kind, const Matrix& x,
                               const Matrix& y, const RegressorOptions& options);

  [[nodiscard]] RegressorKind kind() const;
  [[nodiscard]] int inputs() const;
  [[nodiscard]] int outputs() const;

  /// @brief Predicts `n` rows: x is n x inputs() row-major, y receives n x outputs().
  /// Allocation-free once `scratch` has grown to the largest n seen.
  void predict(const float* x, std::size_t n, float* y, RegressorScratch& scratch) const;

  /// @brief Convenience single-row prediction in doubles (tests, CLI).
  [[nodiscard]] std::vector<double> predict_one(std::span<const double> x) const;

  /// @brief For GBDT regressors: the trees with inputs i where fixed[i] != 0 held at x[i].
  /// Empty for other kinds.
  [[nodiscard]] std::optional<SpecializedForest> specialize(
      const float* x, std::span<const std::uint8_t> fixed) const;

  [[nodiscard]] nlohmann::json to_json() const;
  static Result<Regressor> from_json(const nlohmann::json& j);

  /// @brief Read-only access for tests and benchmarks; the regressor must be of that kind
  /// (std::bad_variant_access otherwise).
  [[nodiscard]] const MlpModel& mlp() const { return std::get<MlpModel>(model_); }
  [[nodiscard]] const GbdtModel& gbdt() const { return std::get<Forest>(model_).trees; }
  [[nodiscard]] const LinearModel& linear() const { return std::get<LinearModel>(model_); }

 private:
  /// The trees as fitted, and packed for prediction (packed.depth -1: too deep to pack).
  struct Forest {
    GbdtModel trees;
    PackedForest packed;
  };
  /// The model; which alternative it holds is the regressor's kind, so the two cannot disagree.
  std::variant<LinearModel, MlpModel, Forest> model_;
};

/// @brief Fits an MLP (exposed for tests of the optimiser on synthetic data).
MlpModel fit_mlp(const Context& ctx, const Matrix& x, const Matrix& y, const MlpOptions& options);
/// @brief Fits XGBoost trees through its C API and exports them to flat arrays.
Result<GbdtModel> fit_gbdt(const Context& ctx, const Matrix& x, const Matrix& y,
                           const GbdtOptions& options);
/// @brief Ridge regression by Cholesky on the normal equations (intercept not penalised).
/// `signs` (per output, per input: +1, -1 or 0; may be empty) constrains weights to be
/// non-negative or non-positive, as GbdtOptions::monotone does for trees.
LinearModel fit_linear(const Matrix& x, const Matrix& y, double lambda,
                       const std::vector<std::vector<int>>& signs = {});

/// @brief Predictions of XGBoost itself for the same data and options (tests compare the flat
/// export against it). Returns n x out values.
Result<std::vector<float>> xgboost_reference_predict(const Context& ctx, const Matrix& x_train,
                                                     const Matrix& y_train, const Matrix& x_test,
                                                     const GbdtOptions& options);

}  // namespace corun::surrogate
