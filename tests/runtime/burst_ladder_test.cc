// Whether a plan made beside a declared tool burst leaves the burst room (runtime/burst_ladder.h),
// on hand-made decisions: the rule reads only which SLAs each plan gave up and the point
// predictions.
#include "corun/runtime/burst_ladder.h"

#include <gtest/gtest.h>

#include "corun/catalog/catalog.h"

namespace corun::burst_ladder_test {
namespace {

Workload camera_and_chat() {
  auto w = parse_workload(R"(device: rtx3090
models:
  - {name: cam, model: yolo11n, demand: {fps: 30}, sla: {latency_ms_p95: 50}}
  - {name: chat, model: qwen2.5-0.5b, demand: {rps: 1, prompt_tokens: 256, output_tokens: 64},
     sla: {ttft_ms_p95: 400}}
)",
                          "burst.yaml", Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << w.error().what();
  return *w;
}

// A decision that held every SLA (`gave_up` empty) or gave up the SLAs of `gave_up`, with
// the camera's latency `cam_ms` as predicted.
BurstAttempt decided(std::vector<bool> gave_up, float cam_ms) {
  BurstAttempt a;
  a.degraded.result.feasible = true;
  a.degraded.result.config = {0, 0};
  a.degraded.result.predicted = {Predicted{cam_ms, 0, 0, 30}, Predicted{0, 200, 10, 64}};
  a.degraded.best_effort = gave_up;
  if (!gave_up.empty()) a.degraded.why.resize(1);
  return a;
}

TEST(BurstLadder, ABurstLeavesRoomWhenItGivesUpNothingTheSteadyPlanHeld) {
  const Workload w = camera_and_chat();
  const BurstAttempt steady_holds = decided({}, 20);
  const BurstAttempt steady_gives_up_cam = decided({true, false}, 60);
  // Every SLA held beside the burst: room.
  EXPECT_TRUE(leaves_room(w, decided({}, 20), steady_holds));
  // The burst gives up the camera, which the steady plan held: no room.
  EXPECT_FALSE(leaves_room(w, decided({true, false}, 45), steady_holds));
  // The steady plan gave the camera up too, and during the burst its point prediction (45 ms)
  // is still within its 50 ms: the burst costs nothing the steady plan had.
  EXPECT_TRUE(leaves_room(w, decided({true, false}, 45), steady_gives_up_cam));
  // ... but not at 55 ms.
  EXPECT_FALSE(leaves_room(w, decided({true, false}, 55), steady_gives_up_cam));
  // A plan that is not feasible at all (VRAM) leaves no room.
  BurstAttempt none = decided({true, false}, 45);
  none.degraded.result.feasible = false;
  EXPECT_FALSE(leaves_room(w, none, steady_gives_up_cam));
}

}  // namespace
}  // namespace corun::burst_ladder_test
