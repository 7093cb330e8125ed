// The risk of a make-before-break swap, priced by the transition-aware planner: while the new
// copy starts, its kernels share the GPU with the plan in force (catalog/actuation.yaml:
// start_gpu_s, start_gpu_share). When that load, as predicted, pushes a model of the plan in
// force past its SLA, the swap costs every model's utility over each window its kernels touch
// (a window that breaches earns nothing), not just their GPU-seconds. A closed-form predictor
// whose numbers are worked out by hand below.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "corun/catalog/catalog.h"
#include "corun/plan/objective.h"
#include "corun/plan/predictor.h"
#include "corun/runtime/controller.h"
#include "corun/space/transition.h"
#include "corun/spec/workload.h"
#include "two_cameras.h"

namespace corun::swap_risk_test {
namespace {

// What cam at 640 instead of 320 earns per window, and what every model earns now.
struct Values {
  double gain = 0;
  double serving = 0;
};
Values values(const Workload& w) {
  const ModelSpec& cam = w.models[0];
  Settings small = cam.settings(0), large = cam.settings(1);
  if (small.imgsz != 320) std::swap(small, large);
  Values v;
  v.gain = cam.weight * (config_quality(cam, large) - config_quality(cam, small));
  for (const ModelSpec& m : w.models) v.serving += m.weight * config_quality(m, small);
  return v;
}

// The imgsz cam runs at after its SLA is relaxed to 50 ms (then 640 takes 24 ms, and cam2
// 10 x (1 + 2 x 0.3) = 16 ms beside it: the better plan holds).
int relaxed_imgsz(bool expresses, double horizon_s, const std::string& cam2_sla = "20") {
  const Workload w = cameras(cam2_sla);
  ControllerOptions o;
  o.solver = "exhaustive";
  o.learning.enabled = false;
  o.admission.enabled = false;
  o.transitions.horizon_s = horizon_s;
  o.transitions.window_s = 10;
  o.transitions.hysteresis_sd = 0;  // no band: the change is judged at its predicted throughput
  Controller c(Context{}, w, std::make_unique<TwoCamerasSource>(expresses), o);
  auto first = c.replan("start");
  EXPECT_TRUE(first.ok() && first->has_value());
  if (!first.ok() || !first->has_value()) return 0;
  EXPECT_EQ(w.models[0].settings(static_cast<std::size_t>((*first)->config[0])).imgsz, 320);
  c.advance_to(600);
  TimelineEvent relax;
  relax.kind = TimelineEvent::Kind::kSla;
  relax.model = 0;
  relax.sla.latency_ms_p95 = 50;
  c.apply(relax);
  auto next = c.replan("event");
  EXPECT_TRUE(next.ok()) << (next.ok() ? "" : next.error().what());
  const auto plan = c.plan();
  return plan ? w.models[0].settings(static_cast<std::size_t>(plan->config[0])).imgsz : 0;
}

TEST(SwapRisk, ASwapWhoseKernelsWouldBreachACoRunnerPaysItsWindows) {
  const Workload w = cameras();
  // cam's change is a Triton reload, made before the old copy breaks (both fit in 24 GB): its
  // new copy's kernels run for start_gpu_s at start_gpu_share of the GPU.
  const ModelSpec& cam = w.models[0];
  Settings small = cam.settings(0), large = cam.settings(1);
  if (small.imgsz != 320) std::swap(small, large);
  const ModelTransition t =
      model_transition(ActuationTable::builtin(), w.device, cam, small, large);
  ASSERT_EQ(t.action, Actuation::kReload);
  const double share = t.start_gpu_share;
  const double kernel_s = std::min(t.start_gpu_s, t.downtime_s);
  ASSERT_GT(share, 0.25);  // cam2 during the swap: 10 x (1 + 2 x (0.1 + share)) > 20 ms
  ASSERT_GT(kernel_s, 0.0);
  ASSERT_LE(kernel_s, 10.0);  // one window
  // The swap's price, in utility seconds: its GPU-seconds x serving when nobody breaches, one
  // whole window x serving when cam2 would. A horizon between the two, on a log scale, makes
  // the change worth its GPU-seconds but not the window it would lose.
  const Values v = values(w);
  ASSERT_GT(v.gain, 0.0);
  const double cheap = kernel_s * share * v.serving;
  const double window = 10 * v.serving;
  const double horizon_s = std::sqrt(cheap * window) / v.gain;
  EXPECT_EQ(relaxed_imgsz(false, horizon_s), 640);  // the load is invisible: the change is made
  EXPECT_EQ(relaxed_imgsz(true, horizon_s), 320);   // it would breach cam2: kept
  // cam2 held to 11 ms misses it at 12 ms already, swap or not: the swap is not charged for it.
  EXPECT_EQ(relaxed_imgsz(true, horizon_s, "11"), 640);
}

TEST(SwapRisk, TransitionOptionsDefaultsPassTheirOwnCheckAndABadFieldIsNamed) {
  EXPECT_TRUE(check(TransitionOptions{}).ok());
  TransitionOptions o;
  o.window_s = 0;  // a swap's windows would be infinitely many
  ASSERT_FALSE(check(o).ok());
  EXPECT_NE(check(o).error().message().find("transitions.window_s"), std::string::npos);
  o = {};
  o.hysteresis_sd = -1;
  ASSERT_FALSE(check(o).ok());
  EXPECT_NE(check(o).error().message().find("hysteresis_sd"), std::string::npos);
}

}  // namespace
}  // namespace corun::swap_risk_test
