#include "corun/runtime/renumbered_predictor.h"

#include "corun/core/check.h"
#include "corun/space/space.h"

namespace corun {

namespace {

class Map {
 public:
  explicit Map(std::vector<std::vector<std::int32_t>> map) : map_(std::move(map)) {}
  [[nodiscard]] std::int32_t operator()(std::size_t m, std::int32_t l) const {
    return l == kAbsent ? kAbsent : map_[m][static_cast<std::size_t>(l)];
  }
  void rows(std::span<const std::int32_t> configs, std::size_t n, std::vector<std::int32_t>& out) const {
    out.assign(configs.begin(), configs.end());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = (*this)(i % n, out[i]);
  }

 private:
  std::vector<std::vector<std::int32_t>> map_;
};

class Renumbered final : public Predictor {
 public:
  Renumbered(std::shared_ptr<const Predictor> inner, Map map)
      : inner_(std::move(inner)), map_(std::move(map)) {}
  [[nodiscard]] std::size_t models() const override { return inner_->models(); }
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override {
    std::vector<std::int32_t> mapped;
    map_.rows(configs.first(rows * models()), models(), mapped);
    inner_->predict(mapped, rows, out);
  }

 private:
  std::shared_ptr<const Predictor> inner_;
  Map map_;
};

class RenumberedAggregate final : public AggregatePredictor {
 public:
  RenumberedAggregate(std::shared_ptr<const Predictor> inner, Map map)
      : inner_(std::move(inner)),
        agg_(dynamic_cast<const AggregatePredictor*>(inner_.get())),
        map_(std::move(map)) {
    CORUN_CHECK(agg_ != nullptr);
  }
  [[nodiscard]] std::size_t models() const override { return inner_->models(); }
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override {
    std::vector<std::int32_t> mapped;
    map_.rows(configs.first(rows * models()), models(), mapped);
    inner_->predict(mapped, rows, out);  // the inner's batched path
  }
  [[nodiscard]] bool monotone() const override { return agg_->monotone(); }
  [[nodiscard]] std::size_t aggregate_dims() const override { return agg_->aggregate_dims(); }
  void contribution(std::size_t m, std::int32_t l, std::span<float> out) const override {
    agg_->contribution(m, map_(m, l), out);
  }
  [[nodiscard]] Predicted predict_given(std::size_t m, std::int32_t l,
                                        std::span<const float> others) const override {
    return agg_->predict_given(m, map_(m, l), others);
  }
  bool cotenant(double sm, double bw, std::span<float> out) const override {
    return agg_->cotenant(sm, bw, out);
  }

 private:
  std::shared_ptr<const Predictor> inner_;
  const AggregatePredictor* agg_;
  Map map_;
};

}  // namespace

std::unique_ptr<Predictor> make_renumbered(std::shared_ptr<const Predictor> inner,
                                           std::vector<std::vector<std::int32_t>> map) {
  const auto* agg = dynamic_cast<const AggregatePredictor*>(inner.get());
  if (agg != nullptr && agg->aggregate_dims() > 0) {
    return std::make_unique<RenumberedAggregate>(std::move(inner), Map(std::move(map)));
  }
  return std::make_unique<Renumbered>(std::move(inner), Map(std::move(map)));
}

}  // namespace corun
