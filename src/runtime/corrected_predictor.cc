#include "corun/runtime/corrected_predictor.h"

#include "corun/core/check.h"

namespace corun {

namespace {

void correct_rows(const CorrectionTable& c, std::span<const std::int32_t> configs, std::size_t rows,
                  std::size_t n, std::span<Predicted> out) {
  for (std::size_t r = 0; r < rows; ++r) {
    const auto row = configs.subspan(r * n, n);
    float total = 0;
    for (std::size_t m = 0; m < n; ++m) {
      if (row[m] != kAbsent) total += c.load(m, row[m]);
    }
    for (std::size_t m = 0; m < n; ++m) {
      const std::int32_t l = row[m];
      if (l == kAbsent) continue;
      Predicted& p = out[r * n + m];
      p = c.apply(m, l, total - c.load(m, l), p);
    }
  }
}

class Corrected final : public Predictor {
 public:
  Corrected(std::shared_ptr<const Predictor> base, std::shared_ptr<const CorrectionTable> c)
      : base_(std::move(base)), c_(std::move(c)) {}
  [[nodiscard]] std::size_t models() const override { return base_->models(); }
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override {
    base_->predict(configs, rows, out);
    correct_rows(*c_, configs, rows, models(), out);
  }

 private:
  std::shared_ptr<const Predictor> base_;
  std::shared_ptr<const CorrectionTable> c_;
};

class CorrectedAggregate final : public AggregatePredictor {
 public:
  CorrectedAggregate(std::shared_ptr<const Predictor> base, std::shared_ptr<const CorrectionTable> c)
      : base_(std::move(base)),
        agg_(dynamic_cast<const AggregatePredictor*>(base_.get())),
        c_(std::move(c)) {
    CORUN_CHECK(agg_ != nullptr);
  }
  [[nodiscard]] std::size_t models() const override { return base_->models(); }
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override {
    base_->predict(configs, rows, out);  // the base's batched path, not the default one
    correct_rows(*c_, configs, rows, models(), out);
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
    return c_->apply(m, l, others[d], agg_->predict_given(m, l, others.first(d)));
  }

 private:
  std::shared_ptr<const Predictor> base_;
  const AggregatePredictor* agg_;
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
