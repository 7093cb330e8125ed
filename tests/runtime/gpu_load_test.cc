// A load outside the plan (serve's unexplained GPU load, measured by DCGM): the planner
// predicts every model beside it (runtime/loaded_predictor.h, Controller::set_gpu_load). The
// closed-form predictor of two_cameras.h, whose numbers are worked out by hand below.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "corun/runtime/controller.h"
#include "corun/runtime/loaded_predictor.h"
#include "corun/runtime/twin_source.h"
#include "two_cameras.h"

namespace corun::gpu_load_test {
namespace {

// The local configuration of `m` at `imgsz`.
std::int32_t at(const Workload& w, std::size_t m, int imgsz) {
  for (std::size_t l = 0; l < w.models[m].local_config_count(); ++l) {
    if (w.models[m].settings(l).imgsz == imgsz) return static_cast<std::int32_t>(l);
  }
  ADD_FAILURE() << "no imgsz " << imgsz;
  return 0;
}

// The exhaustive solver on predictions alone: no learning, admission or transition pricing.
ControllerOptions plain() {
  ControllerOptions o;
  o.solver = "exhaustive";
  o.learning.enabled = false;
  o.admission.enabled = false;
  o.transitions.aware = false;
  return o;
}

TEST(LoadedPredictor, AddsTheLoadToEveryModelsCoRunners) {
  const Workload w = cameras();
  const std::vector<std::int32_t> row = {at(w, 0, 640), at(w, 1, 320)};
  bool expressed = false;
  auto loaded = make_loaded(std::make_unique<TwoCameras>(w, true), {0.3, 0.3}, &expressed);
  ASSERT_TRUE(expressed);
  std::vector<Predicted> out(2);
  loaded->predict(row, 1, out);
  // cam at 640 beside cam2 at 320 (0.1) and the load (0.3): 20 x (1 + 2 x 0.4) = 36 ms.
  EXPECT_FLOAT_EQ(out[0].latency_ms_p95, 36.0f);
  // cam2 at 320 beside cam at 640 (0.3) and the load: 10 x (1 + 2 x 0.6) = 22 ms.
  EXPECT_FLOAT_EQ(out[1].latency_ms_p95, 22.0f);
  // Still an aggregate predictor, with the base's contributions: the exact solver's view.
  const auto* agg = dynamic_cast<const AggregatePredictor*>(loaded.get());
  ASSERT_NE(agg, nullptr);
  EXPECT_TRUE(agg->monotone());
  float c = 0;
  agg->contribution(0, row[0], {&c, 1});
  EXPECT_FLOAT_EQ(c, 0.3f);
  const float others = 0.1f;
  EXPECT_FLOAT_EQ(agg->predict_given(0, row[0], {&others, 1}).latency_ms_p95, 36.0f);
}

TEST(LoadedPredictor, NoLoadOrOneTheBaseCannotExpressLeavesTheBase) {
  const Workload w = cameras();
  bool expressed = false;
  auto base = std::make_unique<TwoCameras>(w, false);
  const Predictor* raw = base.get();
  auto same = make_loaded(std::move(base), {0.3, 0.3}, &expressed);
  EXPECT_FALSE(expressed);
  EXPECT_EQ(same.get(), raw);
  auto none = make_loaded(std::make_unique<TwoCameras>(w, true), {}, &expressed);
  EXPECT_TRUE(expressed);  // nothing to express
  std::vector<Predicted> out(2);
  none->predict(std::vector<std::int32_t>{at(w, 0, 640), at(w, 1, 320)}, 1, out);
  EXPECT_FLOAT_EQ(out[0].latency_ms_p95, 24.0f);  // 20 x (1 + 2 x 0.1)
}

// cam may take 50 ms, cam2 20 ms. Without a load: cam at 640 takes 24 ms, cam2 at 320 beside
// it 10 x (1 + 2 x 0.3) = 16 ms: the better plan holds. With a third of the SMs busy (0.3):
// cam2 beside cam at 640 would take 22 ms, so cam runs at 320 (cam2: 10 x (1 + 2 x 0.4) =
// 18 ms; cam 18 ms). The load gone, cam goes back to 640.
TEST(GpuLoad, TheControllerPlansBesideTheLoadAndBackWhenItIsGone) {
  const Workload w = cameras("20", "50");
  const ControllerOptions o = plain();
  Controller c(Context{}, w, std::make_unique<TwoCamerasSource>(true), o);
  auto imgsz = [&] {
    const auto plan = c.plan();
    return plan ? w.models[0].settings(static_cast<std::size_t>(plan->config[0])).imgsz : 0;
  };
  ASSERT_TRUE(c.replan("start").ok());
  EXPECT_EQ(imgsz(), 640);
  EXPECT_FALSE(c.replan_due());

  c.set_gpu_load({0.3, 0.3});
  EXPECT_TRUE(c.replan_due());
  EXPECT_EQ(c.due_reason(), "gpu load");
  ASSERT_TRUE(c.replan(c.due_reason()).ok());
  EXPECT_EQ(imgsz(), 320);
  EXPECT_FLOAT_EQ(c.plan()->predicted[1].latency_ms_p95, 18.0f);
  c.set_gpu_load({0.3, 0.3});  // the same load: nothing to do
  EXPECT_FALSE(c.replan_due());

  c.set_gpu_load({});
  EXPECT_TRUE(c.replan_due());
  ASSERT_TRUE(c.replan(c.due_reason()).ok());
  EXPECT_EQ(imgsz(), 640);
}

// A source that cannot express a load plans without it.
TEST(GpuLoad, ASourceThatCannotExpressALoadPlansWithoutIt) {
  const Workload w = cameras("20", "50");
  const ControllerOptions o = plain();
  Controller c(Context{}, w, std::make_unique<TwoCamerasSource>(false), o);
  c.set_gpu_load({0.3, 0.3});
  ASSERT_TRUE(c.replan("start").ok());
  EXPECT_EQ(w.models[0].settings(static_cast<std::size_t>(c.plan()->config[0])).imgsz, 640);
}

// The catalog twin measures every candidate beside a co-tenant of the load (the simulator's
// interference): each camera is predicted slower, and no faster than without it.
TEST(GpuLoad, TheTwinPredictsUnderTheLoad) {
  const Workload w = cameras();
  TwinSource twin;
  auto calm = twin.predictor_for(w);
  auto busy = twin.predictor_under(w, {0.5, 0.5});
  ASSERT_TRUE(calm.ok() && busy.ok());
  const std::vector<std::int32_t> row = {at(w, 0, 640), at(w, 1, 320)};
  std::vector<Predicted> a(2), b(2);
  (*calm)->predict(row, 1, a);
  (*busy)->predict(row, 1, b);
  for (std::size_t m = 0; m < 2; ++m) {
    EXPECT_GT(a[m].latency_ms_p95, 0.0f);
    EXPECT_GT(b[m].latency_ms_p95, a[m].latency_ms_p95 * 1.05f) << m;
  }
}

}  // namespace
}  // namespace corun::gpu_load_test
