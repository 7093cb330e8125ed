#include "corun/runtime/loaded_predictor.h"

#include <array>
#include <span>
#include <vector>

#include "corun/core/check.h"

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
    // Solvers call this per model and candidate: no allocation for an aggregate of usual size.
    constexpr std::size_t kInline = 16;
    std::array<float, kInline> inline_buffer{};
    std::vector<float> heap_buffer(load_.size() > kInline ? load_.size() : 0);
    const std::span<float> loaded = load_.size() > kInline
                                        ? std::span<float>(heap_buffer)
                                        : std::span<float>(inline_buffer).first(load_.size());
    for (std::size_t k = 0; k < loaded.size(); ++k) loaded[k] = others[k] + load_[k];
    return agg_.predict_given(m, l, loaded);
  }
  bool cotenant(double sm, double bw, std::span<float> out) const override {
    return agg_.cotenant(sm, bw, out);
  }
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override {
    agg_.predict_beside(configs, rows, load_, out);
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
