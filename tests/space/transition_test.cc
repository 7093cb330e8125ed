// What a knob change costs on a serving stack (catalog/actuation.yaml, space/transition.h).
// Golden classes come from the stacks' documentation as cited in actuation.yaml: vLLM's
// engine arguments are fixed at start, Triton reloads a model for any config change but the
// instance count, an MPS percentage is read when a process creates its context.
#include "corun/space/transition.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "corun/catalog/catalog.h"
#include "corun/spec/workload.h"

namespace corun::transition_test {
namespace {

Workload parse(const std::string& y) {
  auto w = parse_workload(y, "t.yaml", Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().what());
  return std::move(*w);
}

const char* kPair = R"(device: rtx3090
models:
  - name: chat
    model: qwen2.5-1.5b
    knobs: {precision: [fp16, awq], request_concurrency: [1, 4]}
    demand: {rps: 1, prompt_tokens: 512, output_tokens: 128}
  - name: cam
    model: yolo11n
    knobs: {imgsz: [320, 640], skip_rate: [0, 0.5]}
    demand: {fps: 30}
)";

TEST(Actuation, EveryKnobHasAClassOnEveryStackThatServesItsFamily) {
  const ActuationTable& t = ActuationTable::builtin();
  for (Stack s : {Stack::kVllm, Stack::kTriton, Stack::kStream}) {
    const StackActuation& a = t.stack(s);
    EXPECT_FALSE(a.serves.empty()) << to_string(s);
    for (const auto& d : knob_decls()) {
      for (ModelFamily f : a.serves) {
        const bool applies =
            std::find(d.families.begin(), d.families.end(), f) != d.families.end();
        if (applies) {
          EXPECT_TRUE(a.knob[static_cast<std::size_t>(d.id)].has_value())
              << to_string(s) << " has no class for " << d.name;
        }
      }
    }
  }
}

TEST(Actuation, ClassesFollowTheStacksDocumentation) {
  const ActuationTable& t = ActuationTable::builtin();
  EXPECT_EQ(t.stack_for(ModelFamily::kLlm), Stack::kVllm);
  EXPECT_EQ(t.knob_class(ModelFamily::kLlm, KnobId::kPrecision), Actuation::kRestart);
  EXPECT_EQ(t.knob_class(ModelFamily::kLlm, KnobId::kRequestConcurrency), Actuation::kRestart);
  EXPECT_EQ(t.knob_class(ModelFamily::kLlm, KnobId::kPrefillChunk), Actuation::kRestart);
  EXPECT_EQ(t.knob_class(ModelFamily::kVision, KnobId::kSkipRate), Actuation::kLive);
  EXPECT_EQ(t.knob_class(ModelFamily::kVision, KnobId::kImgsz), Actuation::kReload);
  EXPECT_EQ(t.knob_class(ModelFamily::kVision, KnobId::kSmShare), Actuation::kRestart);
  EXPECT_EQ(t.knob_class(ModelFamily::kEncoder, KnobId::kRequestConcurrency), Actuation::kLive);
}

TEST(Actuation, AMissingClassIsAnErrorThatNamesTheKnob) {
  const std::string text = R"(stacks:
  vllm:
    serves: [llm]
    knobs: {precision: restart, request_concurrency: restart, sm_share: restart}
    process_start_s: 1
    compile_s: 0
    graph_capture_s: 0
    engine_load_s: 0
    warmup_requests: 0
    warmup_slowdown: 1
)";
  auto t = ActuationTable::parse(text, "a.yaml");
  ASSERT_FALSE(t.ok());
  const std::string e = t.error().what();
  EXPECT_NE(e.find("prefill_chunk"), std::string::npos) << e;
  EXPECT_NE(e.find("a.yaml"), std::string::npos) << e;
  EXPECT_NE(e.find("missing stack 'triton'"), std::string::npos) << e;
  auto bad = ActuationTable::parse("stacks: {vllm: {knobs: {precision: sometimes}}}", "b.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.error().what()).find("unknown class 'sometimes'"), std::string::npos);
  auto share = ActuationTable::parse("stacks: {vllm: {start_gpu_share: 1.5}}", "c.yaml");
  ASSERT_FALSE(share.ok());
  const std::string se = share.error().what();
  EXPECT_NE(se.find("start_gpu_share"), std::string::npos) << se;
}

TEST(Transition, AQuantizationFlipRestartsVllmForItsStartUpAndItsWeights) {
  const Workload w = parse(kPair);
  const ModelSpec& chat = w.models[0];
  Settings fp16 = chat.settings(0);  // fp16, concurrency 1
  Settings awq = chat.settings(2);   // awq, concurrency 1
  ASSERT_EQ(awq.precision, Precision::kAwq);
  const ModelTransition t =
      model_transition(ActuationTable::builtin(), w.device, chat, fp16, awq);
  EXPECT_EQ(t.action, Actuation::kRestart);
  ASSERT_EQ(t.changed.size(), 1u);
  EXPECT_EQ(t.changed[0], KnobId::kPrecision);
  // By hand: 15 + 8 + 12 s of start-up (actuation.yaml), plus Qwen2.5-1.5B's weights: 1.31e9
  // in its layers at 4 bits (0.66 GB) and its 0.23e9 tied embedding kept in FP16 (0.47 GB),
  // 1.13 GB with a few % of AWQ scales, read at min(6.5 GB/s NVMe, 25 GB/s PCIe): 0.17-0.18 s.
  EXPECT_NEAR(t.load_s, 1.13e9 / 6.5e9, 0.01);
  EXPECT_NEAR(t.downtime_s, 35.0 + 1.13e9 / 6.5e9, 0.01);
  EXPECT_EQ(t.warmup_requests, 4);
  // Its new copy's kernels (actuation.yaml: graph capture's 12 s at 0.2 of the GPU) take 2.4
  // GPU-seconds from the co-runners under make-before-break, nothing after a break.
  EXPECT_EQ(t.start_gpu_s, 12);
  EXPECT_EQ(t.start_gpu_share, 0.2);
  EXPECT_EQ(t.swap_gpu_seconds(), 0);
  ModelTransition swap = t;
  swap.make_before_break = true;
  EXPECT_NEAR(swap.swap_gpu_seconds(), 2.4, 1e-12);
  // The same knobs back: the weights are FP16 now, 3.1 GB: 0.47 s.
  const ModelTransition back =
      model_transition(ActuationTable::builtin(), w.device, chat, awq, fp16);
  EXPECT_NEAR(back.load_s, 3.09e9 / 6.5e9, 0.05);
}

TEST(Transition, AFrameSkipChangeIsLiveAndAnImageSizeChangeReloadsTheEngine) {
  const Workload w = parse(kPair);
  const ModelSpec& cam = w.models[1];
  const auto& table = ActuationTable::builtin();
  const ModelTransition skip =
      model_transition(table, w.device, cam, cam.settings(0), cam.settings(1));
  EXPECT_EQ(skip.action, Actuation::kLive);
  EXPECT_EQ(skip.downtime_s, 0);
  const ModelTransition size =
      model_transition(table, w.device, cam, cam.settings(0), cam.settings(2));
  EXPECT_EQ(size.action, Actuation::kReload);
  EXPECT_GT(size.downtime_s, 1.0);  // engine_load_s 1 plus yolo11n's weights
  EXPECT_LT(size.downtime_s, 1.1);
  const ModelTransition none =
      model_transition(table, w.device, cam, cam.settings(3), cam.settings(3));
  EXPECT_EQ(none.action, Actuation::kNone);
}

TEST(Transition, SwapsMakeBeforeBreakOnlyWhereBothCopiesFit) {
  Workload w = parse(kPair);
  const auto& table = ActuationTable::builtin();
  const JointConfig from = {0, 0};
  const JointConfig to = {2, 1};  // chat fp16 -> awq (restart), cam skip 0 -> 0.5 (live)
  const JointTransition roomy = joint_transition(table, w, from, to);
  ASSERT_EQ(roomy.steps.size(), 2u);
  EXPECT_EQ(roomy.count(Actuation::kRestart), 1u);
  const TransitionStep* chat = nullptr;
  for (const auto& s : roomy.steps) {
    if (s.name == "chat") chat = &s;
  }
  ASSERT_NE(chat, nullptr);
  EXPECT_TRUE(chat->change.make_before_break);  // 24 GiB holds both copies
  EXPECT_EQ(roomy.outage_s(), 0);
  // Both copies together: the old plan's VRAM plus the new copy.
  const double device = w.device.vram_bytes();
  const double old_total = model_vram_bytes(w.models[0], w.models[0].settings(0), device) +
                           model_vram_bytes(w.models[1], w.models[1].settings(0), device);
  EXPECT_NEAR(roomy.vram_peak_bytes, old_total + chat->change.vram_new_bytes, 1e6);
  // On a device that holds only one copy, the chat model breaks first and is down.
  w.device.vram_gb = (old_total + 0.5 * chat->change.vram_new_bytes) / 1e9;
  const JointTransition tight = joint_transition(table, w, from, to);
  double outage = 0;
  for (const auto& s : tight.steps) {
    if (s.name == "chat") {
      EXPECT_FALSE(s.change.make_before_break);
      outage = s.change.outage_s();
    }
  }
  EXPECT_NEAR(outage, chat->change.downtime_s, 1e-9);
  EXPECT_LE(tight.vram_peak_bytes, w.device.vram_bytes());
  const auto j = to_json(tight);
  EXPECT_EQ(j["restarts"], 1);
  EXPECT_EQ(j["steps"].size(), 2u);
}

TEST(Transition, NoChangeIsAnEmptyTransition) {
  const Workload w = parse(kPair);
  const JointTransition t = joint_transition(ActuationTable::builtin(), w, {1, 3}, {1, 3});
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.outage_s(), 0);
}

}  // namespace
}  // namespace corun::transition_test
