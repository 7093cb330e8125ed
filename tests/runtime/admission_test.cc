// One model's admission state machine (runtime/admission.h) and its declared options: the
// golden values are hand calculations of the AIMD rule written next to each expectation.

#include "corun/runtime/admission.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "corun/catalog/catalog.h"

namespace corun::admission_test {
namespace {

TEST(Admission, DefaultsPassTheirOwnCheckAndABadFieldIsNamed) {
  EXPECT_TRUE(check(AdmissionOptions{}).ok());
  AdmissionOptions o;
  o.backoff = 1;  // a backoff of 1 never lowers the ceiling: out of (0, 1)
  const Status s = check(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("admission.backoff"), std::string::npos)
      << s.error().message();
  o = {};
  o.bisection_steps = 0;
  ASSERT_FALSE(check(o).ok());
  EXPECT_NE(check(o).error().message().find("bisection_steps"), std::string::npos);
  o = {};
  o.probe_max_s = 30;  // below probe_after_s (600): the wait could not double
  ASSERT_FALSE(check(o).ok());
  EXPECT_NE(check(o).error().message().find("admission.probe_max_s"), std::string::npos);
}

TEST(Admission, PhasesFollowTheDecidedShare) {
  AdmissionState a;
  EXPECT_EQ(a.phase(), AdmissionPhase::kWhole);
  a.decided(0.5, false);
  EXPECT_EQ(a.phase(), AdmissionPhase::kShed);
  a.decided(0, false);
  EXPECT_EQ(a.phase(), AdmissionPhase::kPaused);
  a.decided(1, false);
  EXPECT_EQ(a.phase(), AdmissionPhase::kWhole);
  EXPECT_EQ(to_string(AdmissionPhase::kProbing), "probing");
}

TEST(Admission, ABreachHalvesTheCeilingAndCleanWindowsClimbBelowTheBreach) {
  const AdmissionOptions o;  // backoff 0.5, step 1/32, 3 clean windows, retry 0.9
  AdmissionState a;
  a.decided(0.5, false);
  EXPECT_FALSE(a.measured(0.5, /*breached=*/true, false, o));
  // min(1, 0.5) x 0.5 = 0.25; the smallest breach is 0.5.
  EXPECT_DOUBLE_EQ(a.ceiling(), 0.25);
  EXPECT_DOUBLE_EQ(a.smallest_breach(), 0.5);
  a.decided(0.25, false);
  a.measured(0.25, false, false, o);
  a.measured(0.25, false, false, o);
  EXPECT_DOUBLE_EQ(a.ceiling(), 0.25);  // two clean windows: not yet
  a.measured(0.25, false, false, o);
  // Third clean window: max(0.25, min(0.25 + 1/32, 0.9 x 0.5)) = 0.28125.
  EXPECT_DOUBLE_EQ(a.ceiling(), 0.28125);
  // Climbing stops at 0.9 x 0.5 = 0.45 however many windows hold.
  for (int i = 0; i < 300; ++i) a.measured(0.28, false, false, o);
  EXPECT_DOUBLE_EQ(a.ceiling(), 0.45);
  // A window the planner's own test refuses counts as a breach: min(0.45, 0.4) x 0.5 = 0.2.
  a.measured(0.4, false, /*failed_test=*/true, o);
  EXPECT_DOUBLE_EQ(a.ceiling(), 0.2);
  EXPECT_DOUBLE_EQ(a.smallest_breach(), 0.4);
  // A demand change lifts what was measured before.
  a.demand_changed();
  EXPECT_DOUBLE_EQ(a.ceiling(), 1);
  EXPECT_DOUBLE_EQ(a.smallest_breach(), 1);
}

TEST(Admission, AFasterGpuGivesAPausedModelOneProbeWindow) {
  const AdmissionOptions o;
  AdmissionState a;
  a.decided(0, false);
  a.gpu_faster();
  EXPECT_TRUE(a.probe_due());
  EXPECT_EQ(a.phase(), AdmissionPhase::kProbing);
  a.decided(1.0 / 32, /*probe=*/true);
  EXPECT_FALSE(a.probe_due());
  EXPECT_EQ(a.phase(), AdmissionPhase::kProbing);
  // The probe window: its failing the planner's test is not a breach of an admission the test
  // made (a probe runs best effort), and it ends probing.
  EXPECT_TRUE(a.measured(1.0 / 32, false, /*failed_test=*/true, o));
  EXPECT_DOUBLE_EQ(a.ceiling(), 1);
  EXPECT_EQ(a.phase(), AdmissionPhase::kShed);
  EXPECT_FALSE(a.measured(1.0 / 32, false, false, o));
  // A model that runs a share is not probed by a faster GPU: its ceiling is lifted.
  AdmissionState shed;
  shed.decided(0.5, false);
  shed.measured(0.5, true, false, o);
  shed.gpu_faster();
  EXPECT_FALSE(shed.probe_due());
  EXPECT_DOUBLE_EQ(shed.ceiling(), 1);
}

TEST(Admission, APausedModelIsProbedAfterItsWaitWhichEachFailedProbeDoubles) {
  AdmissionOptions o;
  o.probe_after_s = 60;
  o.probe_max_s = 960;
  AdmissionState a;
  a.decided(0, false);
  EXPECT_FALSE(a.paused_at(100, o));  // first seen paused at 100 s
  EXPECT_FALSE(a.paused_at(159, o));  // 59 s < 60 s
  EXPECT_TRUE(a.paused_at(160, o));   // 60 s: one probe window is due
  EXPECT_EQ(a.phase(), AdmissionPhase::kProbing);
  EXPECT_FALSE(a.paused_at(170, o));  // due already: not again
  a.decided(1.0 / 32, /*probe=*/true);
  // The probe breaches: the wait doubles to 120 s, counted from the pause that follows.
  EXPECT_TRUE(a.measured(1.0 / 32, /*breached=*/true, true, o));
  EXPECT_DOUBLE_EQ(a.probe_wait_s(), 120);
  a.decided(0, false);
  EXPECT_FALSE(a.paused_at(180, o));
  EXPECT_FALSE(a.paused_at(299, o));
  EXPECT_TRUE(a.paused_at(300, o));
  // Each failed probe doubles it, up to probe_max_s: 240, 480, 960, 960.
  for (const double want : {240.0, 480.0, 960.0, 960.0}) {
    a.decided(1.0 / 32, true);
    a.measured(1.0 / 32, false, /*failed_test=*/true, o);
    EXPECT_DOUBLE_EQ(a.probe_wait_s(), want);
  }
  // A probe that holds restores it.
  a.decided(1.0 / 32, true);
  a.measured(1.0 / 32, false, false, o);
  EXPECT_DOUBLE_EQ(a.probe_wait_s(), 60);
  // A model that runs a share is not waiting: its pause starts again from the next one.
  a.decided(0.25, false);
  EXPECT_FALSE(a.paused_at(1000, o));
  a.decided(0, false);
  EXPECT_FALSE(a.paused_at(1010, o));
  EXPECT_FALSE(a.paused_at(1069, o));
  EXPECT_TRUE(a.paused_at(1070, o));
  // probe_after_s 0: only a faster GPU probes a paused model.
  AdmissionOptions off;
  off.probe_after_s = 0;
  AdmissionState b;
  b.decided(0, false);
  EXPECT_FALSE(b.paused_at(0, off));
  EXPECT_FALSE(b.paused_at(1e5, off));
}

TEST(Admission, EvidenceKeepsTheLastWindowsOnly) {
  AdmissionOptions o;
  o.evidence_windows = 2;
  AdmissionState a;
  for (int i = 0; i < 5; ++i) a.remember({i, 0.5, 1.0, Predicted{}}, o);
  ASSERT_EQ(a.evidence().size(), 2u);
  EXPECT_EQ(a.evidence().front().local, 3);
  EXPECT_EQ(a.evidence().back().local, 4);
}

// The keep-up test of a share reads the source's throughput at that share, not the corrected
// one: a correction learned at the shares that ran (here 0.7: windows of a few requests that
// counted 30 % fewer tokens than predicted) is no capacity, and carried to every share it would
// refuse them all. A search stands in for the controller's: the chat model's TTFT holds as
// predicted up to half of its demand (best effort above), the source predicts it serving all
// of what it admits, and the corrections 70 % of it. Bisection from 1/2: 1/2 holds; 3/4, 5/8,
// 9/16 and 17/32 do not: 1/2 is admitted.
TEST(Admission, AThroughputCorrectionIsNoCapacity) {
  auto parsed = parse_workload(R"(device: a100-80gb
models:
  - name: chat
    model: qwen2.5-7b
    knobs: {precision: [fp16]}
    demand: {rps: 2, prompt_tokens: 512, output_tokens: 128}
    sla: {ttft_ms_p95: 1500}
)", "chat.yaml", Catalog::default_catalog());
  ASSERT_TRUE(parsed.ok()) << parsed.error().what();
  const Workload w = *parsed;
  const double tokens_s = 2.0 * 128;  // what all of its demand asks
  auto decision_at = [&](double share) {
    AdmissionCandidate a;
    Decision& d = a.decision;
    d.config = {0};
    d.best_effort = {share > 0.5 + 1e-9};
    d.margins = {Margin{}};
    d.base = {Predicted{}};
    d.base[0].throughput = static_cast<float>(tokens_s * share);
    d.base[0].ttft_ms_p95 = 500;
    d.predicted = d.base;
    d.predicted[0].throughput = static_cast<float>(0.7 * tokens_s * share);
    return a;
  };
  const AdmissionSearch search = [&](const Workload& candidate, const JointConfig&) {
    const double share = candidate.models[0].demand.rps / w.models[0].demand.rps;
    return Result<std::optional<AdmissionCandidate>>(
        std::optional<AdmissionCandidate>(decision_at(share)));
  };
  const std::vector<AdmissionState> states(1);
  auto admitted = admit(w, decision_at(1.0), states, AdmissionOptions{}, search);
  ASSERT_TRUE(admitted.ok()) << admitted.error().what();
  ASSERT_TRUE(admitted->has_value());
  ASSERT_EQ((*admitted)->chosen.decision.admitted.size(), 1u);
  EXPECT_DOUBLE_EQ((*admitted)->chosen.decision.admitted[0], 0.5);
}

}  // namespace
}  // namespace corun::admission_test
