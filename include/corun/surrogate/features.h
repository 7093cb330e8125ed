#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "corun/core/result.h"
#include "corun/spec/workload.h"
#include "corun/surrogate/standalone.h"
#include "corun/surrogate/targets.h"

namespace corun::surrogate {

/// @brief How a surrogate sees a model's context.
/// kMeanField: the model's knobs, its standalone profile, and the aggregate state of the
///   others (sums of their standalone SM and bandwidth demand, VRAM, count, power) — computable
///   for any candidate from standalone profiles, the same size whatever N.
/// kJoint: the concatenation of every model's configuration (Abacus-style; grows with N).
/// kPairwise: self and others' SM (the L2 proxy) and DRAM utilisation, linear (gpulet-style).
/// kCrossModel: MeanField features with model descriptors instead of knobs, one regressor shared
///   by all models and targets: predicts models that were only ever profiled standalone.
enum class SurrogateKind { kMeanField, kJoint, kPairwise, kCrossModel };

std::string_view to_string(SurrogateKind k);
std::optional<SurrogateKind> parse_surrogate(std::string_view s);
/// @brief {"meanfield", "joint", "pairwise", "crossmodel"}.
const std::vector<std::string>& surrogate_names();

/// @brief Whether a kind predicts log(co-run / standalone) rather than log(co-run): every kind
/// that sees the standalone profile does, so the regressor only learns the slowdown.
constexpr bool predicts_ratio(SurrogateKind k) { return k != SurrogateKind::kJoint; }

/// @brief Aggregates of one candidate over all running models (others = these minus self).
struct Totals {
  double count = 0;
  double sm = 0;
  double bw = 0;
  double vram_gb = 0;
  double power_w = 0;
  double occupancy = 0;

  /// @brief Adds another workload's (or a group's) contribution, field by field.
  Totals& operator+=(const Totals& o) {
    count += o.count;
    sm += o.sm;
    bw += o.bw;
    vram_gb += o.vram_gb;
    power_w += o.power_w;
    occupancy += o.occupancy;
    return *this;
  }
  friend Totals operator+(Totals a, const Totals& b) { return a += b; }
};

/// @brief Turns (model, candidate joint configuration) into a feature vector. Everything that
/// depends on one model's local configuration is precomputed, so filling a vector costs O(F)
/// plus O(N) for the totals of a candidate, with no allocation. The one feature code path used
/// for training and for prediction. Immutable; thread-safe to share.
class FeatureMap {
 public:
  FeatureMap() = default;
  /// @brief Precomputes features of `kind` for the workload from its standalone table.
  static Result<FeatureMap> build(SurrogateKind kind, const Workload& w,
                                  const StandaloneTable& standalone);

  [[nodiscard]] SurrogateKind kind() const { return kind_; }
  [[nodiscard]] std::size_t models() const { return models_.size(); }
  /// @brief Features of model m's vectors.
  [[nodiscard]] std::size_t dim(std::size_t m) const { return models_[m].dim; }
  /// @brief Human-readable names of model m's features, in order.
  [[nodiscard]] const std::vector<std::string>& names(std::size_t m) const {
    return models_[m].names;
  }

  /// @brief What model m in local configuration l adds to Totals (count 1 and its standalone
  /// demand); totals() is the sum of these over the running models.
  [[nodiscard]] Totals contribution(std::size_t m, std::size_t l) const;

  /// @brief Indices of model m's features that grow with the other models' aggregate demand
  /// (never shrink when a co-runner is added or moves to a heavier configuration); empty for
  /// the joint kind, whose features are not aggregates.
  [[nodiscard]] std::vector<std::size_t> aggregate_inputs(std::size_t m) const;

  /// @brief Sums over the running models of candidate `c`.
  [[nodiscard]] Totals totals(std::span<const std::int32_t> c) const;

  /// @brief Writes dim(m) features of model m (c[m] != kAbsent) into `out`. `target` selects
  /// the target indicator of kCrossModel and is ignored by the other kinds.
  void fill(std::size_t m, std::span<const std::int32_t> c, const Totals& totals, Target target,
            float* out) const;

  /// @brief log of model m's standalone value of `t` in local configuration l (the base a
  /// ratio prediction multiplies), NaN when unknown.
  [[nodiscard]] double log_base(std::size_t m, std::size_t l, Target t) const {
    return models_[m].log_base[l * kTargetCount + static_cast<std::size_t>(t)];
  }
  /// @brief Whether model m's local configuration l ran alone (ratio kinds need it).
  [[nodiscard]] bool standalone_ok(std::size_t m, std::size_t l) const {
    return models_[m].ok[l] != 0;
  }

 private:
  struct PerModel {
    std::size_t dim = 0;
    std::size_t own_dim = 0;                            // per-local block copied first
    std::vector<float> own;                             // [local][own_dim]
    std::vector<double> sm, bw, vram_gb, power_w, occ;  // per local: contribution to Totals
    std::vector<double> log_base;                       // [local][kTargetCount]
    std::vector<std::uint8_t> ok;                       // per local
    std::vector<std::string> names;
    std::size_t joint_offset = 0;  // kJoint: where its block starts in every vector
  };

  SurrogateKind kind_ = SurrogateKind::kMeanField;
  std::vector<PerModel> models_;
  std::size_t joint_dim_ = 0;
  double idle_power_w_ = 0;
  double tdp_w_ = 1;
};

}  // namespace corun::surrogate
