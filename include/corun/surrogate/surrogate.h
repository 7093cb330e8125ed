#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/profile/dataset.h"
#include "corun/spec/workload.h"
#include "corun/surrogate/features.h"
#include "corun/surrogate/regressor.h"
#include "corun/surrogate/standalone.h"
#include "corun/surrogate/targets.h"

namespace corun::surrogate {

/// @brief Version of the surrogate model file layout; files of another version are refused.
inline constexpr int kModelSchemaVersion = 1;

/// @brief Calibrated error of one predicted target: quantiles of log(measured / predicted) on
/// rows the regressor did not train on (k-fold out-of-fold predictions). A planner that wants a
/// 95 % margin multiplies a latency prediction by exp(q95).
struct ErrorQuantiles {
  double q05 = 0;
  double q50 = 0;
  double q95 = 0;
  double rmse = 0;       ///< root mean square of the log residuals
  std::size_t rows = 0;  ///< residuals behind the quantiles
  std::string source;    ///< "cross-validation", "in-sample" (too few rows) or "pooled"
};

/// @brief One regressor invocation: predicts `targets` of one model. Per-model kinds have one
/// head per model; kCrossModel has one per (model, target), all sharing one regressor.
struct Head {
  std::size_t model = 0;
  std::vector<Target> targets;
  std::vector<double> x_mean, x_scale;  ///< feature standardisation
  std::vector<double> y_mean, y_scale;  ///< target standardisation (per target, log space)
  std::size_t regressor = 0;            ///< index into Surrogate::regressors()
  std::size_t train_rows = 0;           ///< rows of this model the regressor trained on
  std::vector<ErrorQuantiles> error;    ///< per target
};

/// @brief Where a surrogate's training data came from (written into the model file).
struct Provenance {
  std::string testbed;
  std::string device;
  /// What the data was measured under: its seed (0: not recorded), written into the model
  /// file (threads are not: they never change a result).
  Context context{.seed = 0};
  std::string workload_hash;
  std::string workload_name;
  std::string dataset;  ///< the dataset file it was fitted from, if any
  std::size_t standalone_measurements = 0;
  std::size_t corun_samples = 0;
};

/// @brief What a workload must look like for a surrogate to apply: same models (by name and
/// catalog entry) with the same searched knob values.
struct ModelSignature {
  std::string name;
  std::string catalog_model;
  ModelFamily family = ModelFamily::kVision;
  std::vector<KnobSpec> knobs;
  /// The demand the standalone profile was measured at; a planner re-profiles the model alone
  /// when the workload's demand differs.
  Demand demand;
};

/// @brief Whether a surrogate of `kind` with `regressor` can be fitted monotone in the
/// co-runners' aggregate (FitOptions::monotone): the gbdt or linear regressor, and the
/// meanfield or pairwise kind (the joint kind has no aggregate inputs; the cross-model regressor
/// shares one output between latencies and throughput, which need opposite constraints).
bool can_fit_monotone(SurrogateKind kind, RegressorKind regressor);

/// @brief Fitting settings.
struct FitOptions {
  SurrogateKind kind = SurrogateKind::kMeanField;
  RegressorKind regressor = RegressorKind::kMlp;
  RegressorOptions regressor_options;
  /// Folds of the cross-validation behind the error model (0 or 1: in-sample residuals).
  int calibration_folds = 5;
  /// kCrossModel only: models whose co-run rows are not trained on (onboarding: a model only
  /// profiled standalone); predictions for them come from the shared regressor.
  std::vector<std::size_t> withheld_models;
  /// Constrain every latency prediction to be non-decreasing, and throughput non-increasing,
  /// in the others' aggregate features (FeatureMap::aggregate_inputs), so that adding or
  /// growing a co-runner never helps anyone: what the exact solver's pruning assumes. GBDT
  /// only (XGBoost monotone constraints).
  bool monotone = false;
};

/// @brief A fitted surrogate: feature kind, per-head standardisation, regressors and error
/// model, plus the standalone table its features are computed from. Self-contained: a model
/// file needs nothing but the workload to predict. Immutable after fit/load.
///
/// From a testbed `tb` to the predictions for one joint configuration `config`:
/// @code
///   const Context ctx{.seed = 1};
///   auto alone = profile::measure_plan(ctx, w, tb, profile::Plan::kStandalone, 2, 10);
///   auto corun = profile::measure_plan(ctx, w, tb, profile::Plan::kMeanField, 60, 10);
///   Result<StandaloneTable> table = StandaloneTable::from_samples(w, alone);
///   if (!table) return table.error();
///   Result<Surrogate> s = Surrogate::fit(Context{}, w, *table, corun, FitOptions{}, {});
///   if (!s) return s.error();
///   if (Status st = s->save("model.json"); !st) return st;  // Surrogate::load() reads it
///   Result<CompiledSurrogate> c = CompiledSurrogate::compile(*s, w);
///   if (!c) return c.error();
///   CompiledSurrogate::Workspace ws = c->make_workspace();  // one per thread
///   std::vector<float> out(c->models() * kTargetCount);
///   c->predict(config, out, ws);  // out[m * kTargetCount + target], natural units
/// @endcode
class Surrogate {
 public:
  /// @brief Fits on co-run samples (one row per running model per sample; failed rows are
  /// skipped). Deterministic in ctx.seed.
  /// @param cotenants empty, or one entry per co-run sample: load outside the workload that
  /// shared the GPU while the sample was measured (a synthetic co-tenant), added to the
  /// sample's aggregate as one more co-runner would be. Joint surrogates have no aggregate and
  /// refuse a non-zero entry.
  static Result<Surrogate> fit(const Context& ctx, const Workload& w,
                               const StandaloneTable& standalone,
                               std::span<const profile::SampleRecord> corun,
                               const FitOptions& options, Provenance provenance,
                               std::span<const Totals> cotenants = {});

  [[nodiscard]] SurrogateKind kind() const { return kind_; }
  [[nodiscard]] RegressorKind regressor_kind() const { return regressor_kind_; }
  /// @brief Whether it was fitted with FitOptions::monotone (exact search is then provably
  /// optimal under it).
  [[nodiscard]] bool monotone() const { return monotone_; }
  [[nodiscard]] const Provenance& provenance() const { return provenance_; }
  [[nodiscard]] const StandaloneTable& standalone() const { return standalone_; }
  [[nodiscard]] const std::vector<Head>& heads() const { return heads_; }
  [[nodiscard]] const std::vector<Regressor>& regressors() const { return regressors_; }
  [[nodiscard]] const std::vector<ModelSignature>& signature() const { return signature_; }

  /// @brief Whether `w` has the models and knob values this surrogate was fitted for; the
  /// error names the first difference.
  [[nodiscard]] Status check_workload(const Workload& w) const;

  [[nodiscard]] nlohmann::json to_json() const;
  static Result<Surrogate> from_json(const nlohmann::json& j);
  /// @brief Writes the model file atomically.
  [[nodiscard]] Status save(const std::filesystem::path& path) const;
  /// @brief Reads a model file. A missing file is kNotFound; an empty, cut-short or altered
  /// one, or one of another schema version, is kDamaged, its message naming the file.
  static Result<Surrogate> load(const std::filesystem::path& path);

 private:
  SurrogateKind kind_ = SurrogateKind::kMeanField;
  RegressorKind regressor_kind_ = RegressorKind::kMlp;
  bool monotone_ = false;
  Provenance provenance_;
  StandaloneTable standalone_;
  std::vector<ModelSignature> signature_;
  std::vector<Head> heads_;
  std::vector<Regressor> regressors_;
  std::vector<std::string> feature_names_;  ///< of head 0's model, for readers of the file
};

/// @brief A surrogate compiled for search: flat per-configuration feature blocks, float
/// weights, batched prediction over many candidates with no allocation per candidate and one
/// dispatch per head and batch (no virtual call per neuron or tree node).
/// Immutable; thread-safe to share, with one Workspace per thread.
class CompiledSurrogate {
 public:
  /// @brief Candidates processed per inner batch (bounds the workspace).
  static constexpr std::size_t kChunk = 256;

  /// @brief A cell of a specialised forest (SpecializedForest::cell) of one head and local
  /// configuration: every row in it predicts the same outputs.
  struct CellKey {
    static constexpr std::size_t kMaxCutInputs = 16;
    std::uint32_t head = 0;
    std::uint32_t local = 0;
    std::array<std::uint16_t, kMaxCutInputs> ranks{};
    bool operator==(const CellKey&) const = default;
  };
  struct CellHash {
    std::size_t operator()(const CellKey& k) const;
  };
  /// @brief Outputs by cell, direct-mapped: a fixed array of kSlots entries (allocated on the
  /// first put), each cell in the one slot its hash names, a newer cell replacing an older one
  /// there. One cache line per lookup, no allocation per entry, nothing to clear.
  class CellCache {
   public:
    using Value = std::array<float, kTargetCount>;
    /// @brief The slot of `k`: `hit` says whether it holds k's outputs; if not, it is k's now
    /// (a cell there before is forgotten) and the caller writes them into it.
    [[nodiscard]] Value& slot(const CellKey& k, bool& hit);
    /// @brief Cells remembered now.
    [[nodiscard]] std::size_t size() const { return filled_; }
    [[nodiscard]] bool empty() const { return filled_ == 0; }
    static constexpr std::size_t kSlots = std::size_t{1} << 17;

   private:
    struct alignas(64) Entry {
      CellKey key;
      Value value{};
      bool used = false;
    };
    std::vector<Entry> slots_;
    std::size_t filled_ = 0;
  };
  /// @brief Reusable buffers of one thread.
  struct Workspace {
    std::vector<float> x;  ///< kChunk x max feature dim
    std::vector<float> z;  ///< kChunk x max outputs
    std::vector<Totals> totals;
    std::vector<std::uint32_t> rows;   ///< candidate of each filled row
    std::vector<std::int32_t> config;  ///< models() entries, for predict_given()
    RegressorScratch scratch;
    /// predict_given()'s outputs by cell: exact search asks for the same cells again and again
    /// (about three times each at N = 12).
    CellCache cells;
  };

  /// @brief Compiles `s` for `w`. `standalone` replaces the surrogate's own standalone table
  /// (same models and configurations) when models were re-profiled alone since the fit, e.g.
  /// after a demand or context change; the regressors are reused as they are.
  static Result<CompiledSurrogate> compile(const Surrogate& s, const Workload& w,
                                           const StandaloneTable* standalone = nullptr);

  [[nodiscard]] std::size_t models() const { return models_; }
  [[nodiscard]] Workspace make_workspace() const;

  /// @brief Predicts every model's targets for `n` candidates. `configs` holds n x models()
  /// local indices (row-major, kAbsent allowed); `out` receives n x models() x kTargetCount
  /// values in natural units (ms, items/s), NaN where a target does not apply, a model is
  /// absent, or its configuration never ran alone (ratio kinds cannot predict it).
  void predict(std::span<const std::int32_t> configs, std::span<float> out, Workspace& ws) const;

  /// @brief Whether GBDT heads are specialised per local configuration (each candidate walks
  /// only its aggregate splits, in predict() and predict_given()).
  [[nodiscard]] bool specialized() const { return !special_.empty(); }
  /// @brief Predicts through the full forests from now on: the same values bit for bit, more
  /// slowly (benchmarks and tests compare the two paths).
  void drop_specialized() { special_.clear(); }

  /// @brief Whether a model's prediction depends on the others only through the additive
  /// Totals of their standalone profiles (every kind but joint); then predict_given() applies.
  [[nodiscard]] bool mean_field() const { return features_.kind() != SurrogateKind::kJoint; }
  /// @brief Whether the surrogate was fitted monotone in the aggregate inputs.
  [[nodiscard]] bool monotone() const { return monotone_; }
  /// @brief Model m's additive contribution to the aggregate state in local configuration l.
  [[nodiscard]] Totals contribution(std::size_t m, std::size_t l) const {
    return features_.contribution(m, l);
  }
  /// @brief Predicts model m in local configuration l when the other running models add up to
  /// `others` (mean_field() kinds only); writes kTargetCount values, NaN as in predict().
  void predict_given(std::size_t m, std::size_t l, const Totals& others, std::span<float> out,
                     Workspace& ws) const;

  /// @brief exp(q95) of the error model for (model, target): multiply a prediction by it to
  /// get a 95 % upper bound. 1 when the target does not apply.
  [[nodiscard]] float upper95_factor(std::size_t model, Target t) const {
    return upper95_[model * kTargetCount + static_cast<std::size_t>(t)];
  }
  /// @brief A one-sided upper bound at `z` standard deviations: the larger of exp(q95) and
  /// exp(q50 + z * rmse) of the log residuals (z = 3.09 for 99.9 % under a normal tail). Planners
  /// that must hold an SLA over many intervals need more than a 95 % bound: at 95 % one
  /// model-interval in twenty may breach. 1 when the target does not apply.
  [[nodiscard]] float upper_factor(std::size_t model, Target t, double z) const {
    const std::size_t k = model * kTargetCount + static_cast<std::size_t>(t);
    return std::max(upper95_[k], static_cast<float>(std::exp(q50_[k] + z * rmse_[k])));
  }

 private:
  void specialize(const Workload& w);

  struct CHead {
    std::size_t model = 0;
    std::size_t dim = 0;
    Target feature_target = Target::kLatencyP95;  // kCrossModel: the indicator set in features
    std::vector<std::size_t> targets;             // Target ordinals of the outputs
    std::vector<float> x_mean, x_inv_scale;
    std::vector<float> y_mean, y_scale;
    std::size_t regressor = 0;
  };
  FeatureMap features_;
  std::vector<CHead> heads_;
  std::vector<Regressor> regressors_;
  // [head][local configuration]: GBDT heads specialised to the model's own features, so that
  // predict() and predict_given() walk only the aggregate splits. Empty when not applicable (other
  // regressors, joint kind) or when there would be more than kMaxSpecialized of them.
  std::vector<std::vector<SpecializedForest>> special_;
  static constexpr std::size_t kMaxSpecialized = 8192;
  std::vector<float> upper95_;
  std::vector<double> q50_, rmse_;  ///< per model x target, of the log residuals (0 if n/a)
  std::size_t models_ = 0;
  std::size_t max_dim_ = 0;
  std::size_t max_out_ = 0;
  bool ratio_ = true;
  bool monotone_ = false;
};

}  // namespace corun::surrogate
