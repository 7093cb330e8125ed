#include "corun/runtime/corrected_predictor.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "corun/core/check.h"

namespace corun {

namespace {

// The Predicted field of each target, by Target's value (latency, TTFT, TPOT, throughput).
constexpr std::array<float Predicted::*, kTargetCount> kField = {
    &Predicted::latency_ms_p95, &Predicted::ttft_ms_p95, &Predicted::tpot_ms_p95,
    &Predicted::throughput};

// The corrections of one decision laid out for the batched path: one flat cell per (model,
// local configuration), each with what CorrectionTable::apply reads for it, so that a row costs
// a load sum and, per corrected value, one exp — the exp being unavoidable only where the
// correction moves with the co-runners' load (a learned slope). Where it does not, the factor is
// computed once per decision. Every value is the one CorrectionTable::apply computes, bit for
// bit: the same float operations in the same order (the solvers' answers do not change).
class FlatCorrections {
 public:
  FlatCorrections(const CorrectionTable& c, std::size_t n) : models_(n) {
    first_.assign(n + 1, 0);
    for (std::size_t m = 0; m < n; ++m) {
      const std::size_t loads = m < c.loads.size() ? c.loads[m].size() : 0;
      const std::size_t corrected = m < c.at.size() ? c.at[m].size() : 0;
      first_[m + 1] = first_[m] + std::max(loads, corrected);
    }
    cells_.resize(first_[n]);
    per_model_.resize(n);
    // A factor is the same at every load where `slope × du` and `du² × slope_var` are 0, which
    // needs a finite du: bounded loads (a NaN load makes apply() return NaN, a huge one
    // overflows du²).
    constexpr float kBoundedLoad = 1e12f;
    auto bounded = [&](float load) { return std::abs(load) < kBoundedLoad; };  // false for NaN
    bool bounded_loads = true;
    for (std::size_t m = 0; m < n; ++m) {
      for (std::size_t l = 0; l < count(m); ++l) {
        const float load = c.load(m, static_cast<std::int32_t>(l));
        cells_[first_[m] + l].load = load;
        bounded_loads = bounded_loads && bounded(load);
      }
    }
    for (std::size_t m = 0; m < n && m < c.at.size(); ++m) {
      if (c.at[m].empty()) continue;
      CORUN_CHECK(m < c.load_now.size() && m < c.slope.size() && m < c.slope_var.size() &&
                  m < c.z.size());
      bounded_loads = bounded_loads && bounded(c.load_now[m]);
    }
    for (std::size_t m = 0; m < n && m < c.at.size(); ++m) {
      if (c.at[m].empty()) continue;
      PerModel& pm = per_model_[m];
      pm.load_now = c.load_now[m];
      for (std::size_t k = 0; k < kTargetCount; ++k) {
        pm.slope[k] = c.slope[m][k];
        pm.slope_var[k] = c.slope_var[m][k];
        pm.z[k] = c.z[m][k];
      }
      for (std::size_t l = 0; l < c.at[m].size(); ++l) {
        Cell& cell = cells_[first_[m] + l];
        cell.corrected = true;
        for (std::size_t k = 0; k < kTargetCount; ++k) {
          const auto& here = c.at[m][l][k];
          const bool latency = surrogate::is_latency(static_cast<Target>(k));
          cell.log_mean[k] = here.log_mean;
          cell.var[k] = here.var;
          cell.sd[k] = std::sqrt(here.var);
          // log_mean + 0·du is log_mean; with no slope doubt either, the extrapolation charge
          // z·(√(var + du²·0) − √var) is 0: the factor is the same at every load.
          const bool fixed = bounded_loads && pm.slope[k] == 0 &&
                             (!latency || pm.slope_var[k] == 0) && std::isfinite(here.log_mean) &&
                             std::isfinite(here.var) && std::isfinite(pm.z[k]);
          cell.moving[k] = !fixed;
          cell.factor[k] = fixed ? std::exp(here.log_mean) : 1.0f;
          if (cell.moving[k] || cell.factor[k] != 1.0f) identity_ = false;
        }
      }
    }
  }

  // Whether no prediction changes (learning off: every correction is exp(0) at every load).
  [[nodiscard]] bool identity() const { return identity_; }

  // CorrectionTable::apply(m, l, u, p), from the flat cells.
  [[nodiscard]] Predicted apply(std::size_t m, std::int32_t l, float u, const Predicted& p) const {
    Predicted out = p;
    if (l < 0 || static_cast<std::size_t>(l) >= count(m)) return out;
    const Cell& cell = cells_[first_[m] + static_cast<std::size_t>(l)];
    if (cell.corrected) correct(cell, per_model_[m], u, out);
    return out;
  }

  // Corrects `rows` rows of base predictions in place, as correct_rows did one apply() at a time:
  // each model's co-runners' load is the row's total (summed in model order) minus its own.
  void apply_rows(std::span<const std::int32_t> configs, std::size_t rows,
                  std::span<Predicted> out) const {
    const std::size_t n = models_;
    for (std::size_t r = 0; r < rows; ++r) {
      const std::int32_t* row = configs.data() + r * n;
      float total = 0;
      for (std::size_t m = 0; m < n; ++m) {
        if (row[m] != kAbsent) total += load(m, row[m]);
      }
      for (std::size_t m = 0; m < n; ++m) {
        const std::int32_t l = row[m];
        if (l < 0 || static_cast<std::size_t>(l) >= count(m)) continue;  // absent, or no cell
        const Cell& cell = cells_[first_[m] + static_cast<std::size_t>(l)];
        if (cell.corrected) correct(cell, per_model_[m], total - cell.load, out[r * n + m]);
      }
    }
  }

 private:
  struct Cell {
    float load = 0;          // CorrectionTable::load(m, l)
    bool corrected = false;  // CorrectionTable::at has (m, l): apply() changes something
    std::array<bool, kTargetCount> moving{};  // the factor depends on the load
    std::array<float, kTargetCount> factor{};  // the factor where it does not
    std::array<float, kTargetCount> log_mean{}, var{}, sd{};
  };
  struct PerModel {
    float load_now = 0;
    std::array<float, kTargetCount> slope{}, slope_var{}, z{};
  };

  [[nodiscard]] std::size_t count(std::size_t m) const {
    return m < models_ ? first_[m + 1] - first_[m] : 0;
  }
  [[nodiscard]] float load(std::size_t m, std::int32_t l) const {
    return l >= 0 && static_cast<std::size_t>(l) < count(m)
               ? cells_[first_[m] + static_cast<std::size_t>(l)].load
               : 0.0f;
  }

  // The body of CorrectionTable::apply for a corrected cell at co-runners' load u.
  static void correct(const Cell& cell, const PerModel& pm, float u, Predicted& out) {
    const float du = u - pm.load_now;
    for (std::size_t k = 0; k < kTargetCount; ++k) {
      float& v = out.*kField[k];
      if (!usable_prediction(v)) continue;  // the unusable sentinel stays as it is
      if (!cell.moving[k]) {
        v *= cell.factor[k];
        continue;
      }
      float log_f = cell.log_mean[k] + pm.slope[k] * du;
      if (k != static_cast<std::size_t>(Target::kThroughput) && du > 0) {
        // Extrapolating to a load never measured: pay the bound's growth now.
        const float grown = cell.var[k] + du * du * pm.slope_var[k];
        log_f += pm.z[k] * (std::sqrt(grown) - cell.sd[k]);
      }
      v *= std::exp(log_f);
    }
  }

  std::size_t models_;
  std::vector<std::size_t> first_;  // [m]: m's first cell; [n]: the number of cells
  std::vector<Cell> cells_;
  std::vector<PerModel> per_model_;
  bool identity_ = true;
};

class Corrected final : public Predictor {
 public:
  Corrected(std::shared_ptr<const Predictor> base, std::shared_ptr<const CorrectionTable> c)
      : base_(std::move(base)), flat_(*c, base_->models()) {}
  [[nodiscard]] std::size_t models() const override { return base_->models(); }
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override {
    base_->predict(configs, rows, out);
    if (!flat_.identity()) flat_.apply_rows(configs, rows, out);
  }

 private:
  std::shared_ptr<const Predictor> base_;
  FlatCorrections flat_;
};

class CorrectedAggregate final : public AggregatePredictor {
 public:
  CorrectedAggregate(std::shared_ptr<const Predictor> base, std::shared_ptr<const CorrectionTable> c)
      : base_(std::move(base)),
        agg_(dynamic_cast<const AggregatePredictor*>(base_.get())),
        flat_(*c, base_->models()),
        c_(std::move(c)) {
    CORUN_CHECK(agg_ != nullptr);
  }
  [[nodiscard]] std::size_t models() const override { return base_->models(); }
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override {
    base_->predict(configs, rows, out);  // the base's batched path, not the default one
    if (!flat_.identity()) flat_.apply_rows(configs, rows, out);
  }
  // The aggregate is the base's plus one dimension: the co-runners' load the corrections
  // depend on.
  [[nodiscard]] bool monotone() const override { return agg_->monotone() && c_->monotone(); }
  [[nodiscard]] std::size_t aggregate_dims() const override { return agg_->aggregate_dims() + 1; }
  void contribution(std::size_t m, std::int32_t l, std::span<float> out) const override {
    const std::size_t d = agg_->aggregate_dims();
    agg_->contribution(m, l, out.first(d));
    out[d] = c_->load(m, l);
  }
  [[nodiscard]] Predicted predict_given(std::size_t m, std::int32_t l,
                                        std::span<const float> others) const override {
    const std::size_t d = agg_->aggregate_dims();
    return flat_.apply(m, l, others[d], agg_->predict_given(m, l, others.first(d)));
  }
  // A load outside the plan adds nothing to the co-runners' load the corrections were learned
  // on: they stay those of the plan's own co-runners.
  bool cotenant(double sm, double bw, std::span<float> out) const override {
    const std::size_t d = agg_->aggregate_dims();
    if (out.size() <= d || !agg_->cotenant(sm, bw, out.first(d))) return false;
    out[d] = 0;
    return true;
  }

 private:
  std::shared_ptr<const Predictor> base_;
  const AggregatePredictor* agg_;
  FlatCorrections flat_;
  std::shared_ptr<const CorrectionTable> c_;
};

}  // namespace

std::unique_ptr<Predictor> make_corrected(std::shared_ptr<const Predictor> base,
                                          std::shared_ptr<const CorrectionTable> corrections) {
  const auto* agg = dynamic_cast<const AggregatePredictor*>(base.get());
  if (agg != nullptr && agg->aggregate_dims() > 0) {
    return std::make_unique<CorrectedAggregate>(std::move(base), std::move(corrections));
  }
  return std::make_unique<Corrected>(std::move(base), std::move(corrections));
}

}  // namespace corun
