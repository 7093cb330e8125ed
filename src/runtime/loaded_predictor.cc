#include "corun/runtime/loaded_predictor.h"

#include <algorithm>
#include <vector>

#include "corun/core/check.h"
#include "corun/space/space.h"

namespace corun {

namespace {

// The base in the base's numbering and units, with `load_` (the load's contribution, in the
// units of contribution()) added to every model's co-runners.
class Loaded final : public AggregatePredictor {
 public:
  Loaded(std::shared_ptr<const Predictor> inner, const AggregatePredictor& agg,
         std::vector<float> load)
      : inner_(std::move(inner)), agg_(agg), load_(std::move(load)) {}
  [[nodiscard]] std::size_t models() const override { return agg_.models(); }
  [[nodiscard]] bool monotone() const override { return agg_.monotone(); }
  [[nodiscard]] std::size_t aggregate_dims() const override { return load_.size(); }
  void contribution(std::size_t m, std::int32_t l, std::span<float> out) const override {
    agg_.contribution(m, l, out);
  }
  [[nodiscard]] Predicted predict_given(std::size_t m, std::int32_t l,
                                        std::span<const float> others) const override {
    std::vector<float> loaded(load_.size());
    for (std::size_t k = 0; k < loaded.size(); ++k) loaded[k] = others[k] + load_[k];
    return agg_.predict_given(m, l, loaded);
  }
  bool cotenant(double sm, double bw, std::span<float> out) const override {
    return agg_.cotenant(sm, bw, out);
  }
  // AggregatePredictor::predict's loop with every row's total starting at the load.
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override {
    const std::size_t n = models();
    const std::size_t d = load_.size();
    std::vector<float> total(d), mine(d), others(d);
    for (std::size_t r = 0; r < rows; ++r) {
      const auto row = configs.subspan(r * n, n);
      std::copy(load_.begin(), load_.end(), total.begin());
      for (std::size_t m = 0; m < n; ++m) {
        if (row[m] == kAbsent) continue;
        agg_.contribution(m, row[m], mine);
        for (std::size_t k = 0; k < d; ++k) total[k] += mine[k];
      }
      for (std::size_t m = 0; m < n; ++m) {
        if (row[m] == kAbsent) {
          out[r * n + m] = Predicted{};
          continue;
        }
        agg_.contribution(m, row[m], mine);
        for (std::size_t k = 0; k < d; ++k) others[k] = total[k] - mine[k];
        out[r * n + m] = agg_.predict_given(m, row[m], others);
      }
    }
  }

 private:
  std::shared_ptr<const Predictor> inner_;  // owns agg_
  const AggregatePredictor& agg_;
  std::vector<float> load_;
};

}  // namespace

std::unique_ptr<Predictor> make_loaded(std::unique_ptr<Predictor> base, const Interference& load,
                                       bool* expressed) {
  CORUN_CHECK(base != nullptr);
  if (expressed) *expressed = !any_load(load);
  if (!any_load(load)) return base;
  const auto* agg = dynamic_cast<const AggregatePredictor*>(base.get());
  if (agg == nullptr) return base;
  std::vector<float> contribution(agg->aggregate_dims(), 0.0f);
  if (!agg->cotenant(load.sm_util, load.bandwidth_util, contribution)) return base;
  if (expressed) *expressed = true;
  return std::make_unique<Loaded>(std::shared_ptr<const Predictor>(std::move(base)), *agg,
                                  std::move(contribution));
}

}  // namespace corun
