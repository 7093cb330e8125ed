// A hand-worked test fixture of the runtime tests: two cameras and a closed-form
// AggregatePredictor for them (with its PredictorSource), whose numbers the tests work out by
// hand.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "corun/catalog/catalog.h"
#include "corun/plan/predictor.h"
#include "corun/runtime/predictor_source.h"
#include "corun/spec/workload.h"

namespace corun {

// Two cameras, each at imgsz 320 or 640. The aggregate is one number, the SM share the others
// keep busy: a camera adds 0.1 at 320 and 0.3 at 640. Latency = 10 ms (320) or 20 ms (640)
// times 1 + 2 x others. A load outside the plan adds its SM share (when `expresses`).
class TwoCameras final : public AggregatePredictor {
 public:
  TwoCameras(const Workload& w, bool expresses) : w_(w), expresses_(expresses) {}
  [[nodiscard]] std::size_t models() const override { return w_.models.size(); }
  [[nodiscard]] std::size_t aggregate_dims() const override { return 1; }
  void contribution(std::size_t m, std::int32_t l, std::span<float> out) const override {
    out[0] = big(m, l) ? 0.3f : 0.1f;
  }
  [[nodiscard]] Predicted predict_given(std::size_t m, std::int32_t l,
                                        std::span<const float> others) const override {
    Predicted p;
    p.latency_ms_p95 = (big(m, l) ? 20.0f : 10.0f) * (1 + 2 * others[0]);
    p.throughput = static_cast<float>(w_.models[m].demand.fps);
    return p;
  }
  bool cotenant(double sm, double, std::span<float> out) const override {
    if (!expresses_) return false;
    out[0] = static_cast<float>(sm);
    return true;
  }

 private:
  [[nodiscard]] bool big(std::size_t m, std::int32_t l) const {
    return w_.models[m].settings(static_cast<std::size_t>(l)).imgsz == 640;
  }
  Workload w_;
  bool expresses_;
};

class TwoCamerasSource final : public PredictorSource {
 public:
  explicit TwoCamerasSource(bool expresses) : expresses_(expresses) {}
  [[nodiscard]] std::string describe() const override { return "two cameras"; }
  Result<std::unique_ptr<Predictor>> predictor_for(const Workload& current) override {
    return std::unique_ptr<Predictor>(std::make_unique<TwoCameras>(current, expresses_));
  }
  std::vector<double> margins(const Workload& current) override {
    return std::vector<double>(current.models.size(), 0.0);
  }
  ErrorPriors priors(const Workload& current) override {
    ErrorPriors p(current.models.size());
    for (auto& m : p) m.fill(ErrorPrior{0, 0.01, 0.01, 0.01, 0.01});
    return p;
  }
  LoadTable loads(const Workload& current) override {
    LoadTable t;
    for (const auto& m : current.models) t.emplace_back(m.local_config_count(), 0.0f);
    return t;
  }

 private:
  bool expresses_;
};

// cam's SLA (`cam_sla`) starts at 20 ms: at 640 it would take 20 x (1 + 2 x 0.1) = 24 ms, so
// both run at 320 (12 ms each). cam2's SLA is 20 ms throughout: at 640 it would take 32 ms.
inline Workload cameras(const std::string& cam2_sla = "20", const std::string& cam_sla = "20") {
  auto w = parse_workload(R"(device: rtx3090
models:
  - name: cam
    model: yolo11n
    knobs: {imgsz: [320, 640]}
    demand: {fps: 30}
    sla: {latency_ms_p95: )" + cam_sla + R"(}
  - name: cam2
    model: yolo11n
    knobs: {imgsz: [320, 640]}
    demand: {fps: 30}
    sla: {latency_ms_p95: )" + cam2_sla + R"(}
)", "cameras.yaml", Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << w.error().what();
  return std::move(w).value();
}

}  // namespace corun
