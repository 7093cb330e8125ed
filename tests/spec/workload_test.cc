#include <gtest/gtest.h>

#include "corun/catalog/catalog.h"
#include "corun/spec/workload.h"
#include "malformed_cases.h"

namespace corun::workload_test {
namespace {

const Catalog& catalog() { return Catalog::default_catalog(); }

Result<Workload> parse(const std::string& text) {
  return parse_workload(text, "w.yaml", catalog());
}

TEST(Malformed, EveryCaseIsRejectedWithItsFieldNamed) {
  const auto cases = testing::malformed_cases();
  ASSERT_GE(cases.size(), 25u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    auto w = parse(c.text);
    ASSERT_FALSE(w.ok()) << "accepted:\n" << c.text;
    EXPECT_EQ(w.error().kind(), Error::Kind::kInvalidInput);
    const std::string msg = w.error().what();
    EXPECT_EQ(msg.rfind("w.yaml:", 0), 0u) << msg;  // every error starts with the file
    for (const auto& frag : c.expect) {
      EXPECT_NE(msg.find(frag), std::string::npos) << "missing '" << frag << "' in:\n" << msg;
    }
  }
}

TEST(Malformed, ErrorsCarryTheLineOfTheOffendingField) {
  // Line 6 holds the misspelt knob (1-based).
  const std::string text =
      "device: rtx3090\n"
      "models:\n"
      "  - name: cam0\n"
      "    model: yolo11s\n"
      "    knobs:\n"
      "      imgsize: [320]\n"
      "    demand: {fps: 30}\n";
  auto w = parse(text);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().what().find("w.yaml:6:7: models[0].knobs.imgsize"), std::string::npos)
      << w.error().what();
}

TEST(Malformed, AllProblemsAreReportedAtOnce) {
  const std::string text =
      "device: rtx3090\n"
      "models:\n"
      "  - name: cam0\n"
      "    model: yolo11s\n"
      "    knobs: {imgsz: [333], skip_rate: [2]}\n"
      "    demand: {fps: -1}\n";
  auto w = parse(text);
  ASSERT_FALSE(w.ok());
  const std::string msg = w.error().what();
  EXPECT_NE(msg.find("imgsz"), std::string::npos);
  EXPECT_NE(msg.find("skip_rate"), std::string::npos);
  EXPECT_NE(msg.find("demand.fps"), std::string::npos);
}

TEST(Workload, PaperN5HasTheDocumentedLocalSpaces) {
  auto w = load_workload(CORUN_SOURCE_DIR "/workloads/paper-n5.yaml", catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  ASSERT_EQ(w->models.size(), 5u);
  EXPECT_EQ(w->device.name, "rtx3090");
  // 2 precisions x 3 concurrencies x 2 chunks; 3 image sizes x 3 skip rates.
  EXPECT_EQ(w->models[0].local_config_count(), 12u);
  for (std::size_t i = 1; i < 5; ++i) EXPECT_EQ(w->models[i].local_config_count(), 9u);
  EXPECT_EQ(w->models[0].sla.ttft_ms_p95.value_or(0), 800);
  EXPECT_EQ(w->models[0].weight, 2);
}

TEST(Workload, LocalConfigurationsAreMixedRadixWithTheLastKnobFastest) {
  auto w = parse("device: rtx3090\nmodels:\n" + testing::kGoodVision);
  ASSERT_TRUE(w.ok()) << w.error().what();
  const ModelSpec& m = w->models[0];
  ASSERT_EQ(m.local_config_count(), 4u);
  EXPECT_EQ(m.describe(0), "imgsz=320,skip_rate=0");
  EXPECT_EQ(m.describe(1), "imgsz=320,skip_rate=0.5");
  EXPECT_EQ(m.describe(2), "imgsz=640,skip_rate=0");
  EXPECT_EQ(m.settings(3).imgsz, 640);
  EXPECT_DOUBLE_EQ(m.settings(3).skip_rate, 0.5);
  auto idx = m.find_config({{"imgsz", "640"}, {"skip_rate", "0.5"}});
  ASSERT_TRUE(idx.ok()) << idx.error().what();
  EXPECT_EQ(*idx, 3u);
  EXPECT_FALSE(m.find_config({{"imgsz", "480"}}).ok());
  auto bad = m.find_config({{"imgsize", "320"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what().find("did you mean 'imgsz'"), std::string::npos);
}

// Plan keys: a model's name, pin and line do not change what a plan of it is; its demand, SLA
// and searched values do.
TEST(Workload, PlanKeysIgnoreNamesAndPinsButNotDemandOrSla) {
  const std::string cam = "model: yolo11s, knobs: {imgsz: [320, 640]}, demand: {fps: 30}";
  auto w = parse("device: a100-80gb\ngpus: 2\nmodels:\n"
                 "  - {name: a, " + cam + ", sla: {latency_ms_p95: 30}}\n"
                 "  - {name: b, " + cam + ", sla: {latency_ms_p95: 30}, gpu: 1}\n"
                 "  - {name: c, model: yolo11s, knobs: {imgsz: [320, 640]}, demand: {fps: 60},"
                 " sla: {latency_ms_p95: 30}}\n"
                 "  - {name: d, " + cam + "}\n"
                 "  - {name: e, " + cam + ", sla: {latency_ms_p95: 40}}\n"
                 "  - {name: f, model: yolo11s, knobs: {imgsz: [320, 960]}, demand: {fps: 30},"
                 " sla: {latency_ms_p95: 30}}\n");
  ASSERT_TRUE(w.ok()) << w.error().what();
  const auto& m = w->models;
  EXPECT_EQ(m[0].plan_key(), m[1].plan_key());
  for (std::size_t i = 2; i < m.size(); ++i) {
    SCOPED_TRACE(m[i].name);
    EXPECT_NE(m[0].plan_key(), m[i].plan_key());
  }
}

TEST(Workload, SingleValuedKnobsAreFixedNotSearched) {
  auto w = parse(
      "device: l4\nmodels:\n  - name: chat\n    model: qwen2.5-0.5b\n"
      "    knobs: {precision: awq, request_concurrency: [1, 4]}\n"
      "    demand: {rps: 2, prompt_tokens: 256, output_tokens: 64}\n");
  ASSERT_TRUE(w.ok()) << w.error().what();
  const ModelSpec& m = w->models[0];
  EXPECT_EQ(m.local_config_count(), 2u);
  EXPECT_EQ(m.settings(0).precision, Precision::kAwq);
  EXPECT_EQ(m.settings(1).request_concurrency, 4);
  EXPECT_EQ(m.demand.prompt_tokens, 256);
}

TEST(Workload, LlmDemandTakesOptionalMaximumLengths) {
  auto w = parse(
      "device: l4\nmodels:\n  - name: chat\n    model: qwen2.5-0.5b\n"
      "    demand: {rps: 2, prompt_tokens: 256, output_tokens: 64, max_prompt_tokens: 4096,\n"
      "             max_output_tokens: 64}\n"
      "  - name: plain\n    model: qwen2.5-0.5b\n"
      "    demand: {rps: 2, prompt_tokens: 256, output_tokens: 64}\n");
  ASSERT_TRUE(w.ok()) << w.error().what();
  EXPECT_EQ(w->models[0].demand.max_prompt_tokens, 4096);
  EXPECT_EQ(w->models[0].demand.max_output_tokens, 64);  // equal to the mean is allowed
  EXPECT_EQ(w->models[1].demand.max_prompt_tokens, 0);   // absent
  EXPECT_EQ(w->models[1].demand.max_output_tokens, 0);
}

TEST(Workload, AVisionModelNamesTheCameraStreamsItTakes) {
  auto w = parse(
      "device: l4\nmodels:\n  - name: cams\n    model: yolo11s\n    streams: [gate, dock, lot]\n"
      "    demand: {fps: 90}\n  - name: cam\n    model: yolo11s\n    demand: {fps: 90}\n");
  ASSERT_TRUE(w.ok()) << w.error().what();
  EXPECT_EQ(w->models[0].streams, (std::vector<std::string>{"gate", "dock", "lot"}));
  EXPECT_TRUE(w->models[1].streams.empty());
  // Streams change the arrival process, so the plan: the keys differ.
  EXPECT_NE(w->models[0].plan_key(), w->models[1].plan_key());
}

TEST(Workload, AModelEntryOnItsOwnTakesTheMaximumLengthsToo) {
  // corun serve's registration entries go through parse_model_entry (JSON read as YAML).
  Diagnostics diags;
  auto m = parse_model_entry(
      YAML::Load("{name: chat, model: qwen2.5-0.5b, demand: {rps: 1, prompt_tokens: 256, "
                 "output_tokens: 64, max_prompt_tokens: 2048, max_output_tokens: 512}}"),
      "request", Catalog::default_catalog(), diags);
  ASSERT_TRUE(m.has_value()) << diags.to_error().what();
  EXPECT_EQ(m->demand.max_prompt_tokens, 2048);
  EXPECT_EQ(m->demand.max_output_tokens, 512);
  Diagnostics bad;
  EXPECT_FALSE(parse_model_entry(YAML::Load("{name: chat, model: qwen2.5-0.5b, demand: {rps: 1, "
                                            "prompt_tokens: 256, output_tokens: 64, "
                                            "max_output_tokens: 32}}"),
                                 "request", Catalog::default_catalog(), bad)
                   .has_value());
  EXPECT_NE(bad.to_error().what().find("demand.max_output_tokens: value 32 is below the mean"),
            std::string::npos)
      << bad.to_error().what();
}

TEST(Workload, VisionDefaultsToTheModelsReferenceImageSize) {
  auto w = parse(
      "device: v100\nmodels:\n  - name: cls\n    model: resnet50\n    demand: {fps: 100}\n");
  ASSERT_TRUE(w.ok()) << w.error().what();
  EXPECT_EQ(w->models[0].base.imgsz, 224);
  EXPECT_EQ(w->models[0].local_config_count(), 1u);
}

TEST(Workload, PrefixKeepsTheFirstModels) {
  auto w = load_workload(CORUN_SOURCE_DIR "/workloads/paper-n6.yaml", catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  const Workload p = w->prefix(3);
  ASSERT_EQ(p.models.size(), 3u);
  EXPECT_EQ(p.models[2].name, w->models[2].name);
  EXPECT_EQ(p.device.name, w->device.name);
}

TEST(Workload, HashIdentifiesTheText) {
  auto a = parse("device: rtx3090\nmodels:\n" + testing::kGoodVision);
  auto b = parse("device: rtx3090\nmodels:\n" + testing::kGoodVision + "# comment\n");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->hash.size(), 16u);
  EXPECT_NE(a->hash, b->hash);
}

TEST(Timeline, EventsAreParsedAndSortedByTime) {
  auto w = parse(R"(device: rtx3090
models:
  - {name: cam0, model: yolo11s, demand: {fps: 30}, sla: {latency_ms_p95: 60}}
  - {name: chat, model: qwen2.5-0.5b, active: false,
     demand: {rps: 1, prompt_tokens: 128, output_tokens: 32}, sla: {tpot_ms_p95: 50}}
timeline:
  duration_s: 120
  interval_s: 5
  events:
    - {at_s: 60, context: {model: chat, prompt_tokens: 2048}}
    - {at_s: 10, arrive: chat}
    - {at_s: 30, demand: {model: chat, rps: 3}}
    - {at_s: 40, sla: {model: cam0, latency_ms_p95: 40}}
    - {at_s: 90, depart: cam0}
)");
  ASSERT_TRUE(w.ok()) << w.error().what();
  EXPECT_FALSE(w->models[1].active);
  const Timeline& t = w->timeline;
  EXPECT_EQ(t.duration_s, 120);
  EXPECT_EQ(t.interval_s, 5);
  ASSERT_EQ(t.events.size(), 5u);
  EXPECT_EQ(t.events[0].kind, TimelineEvent::Kind::kArrive);
  EXPECT_EQ(t.events[0].model, 1u);
  EXPECT_EQ(t.events[1].kind, TimelineEvent::Kind::kDemand);
  EXPECT_EQ(t.events[1].demand.rps, 3);
  EXPECT_EQ(t.events[1].demand.prompt_tokens, 128);  // unchanged fields carry over
  EXPECT_EQ(t.events[2].sla.latency_ms_p95.value_or(0), 40);
  EXPECT_EQ(t.events[3].demand.prompt_tokens, 2048);
  EXPECT_EQ(t.events[4].kind, TimelineEvent::Kind::kDepart);
}

TEST(Demand, ConcurrencyIsAClosedLoopThatReplacesTheRate) {
  auto w = parse(R"(device: v100
models:
  - {name: r50, model: resnet50, knobs: {batch: 32}, demand: {concurrency: 1}}
  - {name: chat, model: qwen2.5-0.5b,
     demand: {concurrency: 8, prompt_tokens: 256, output_tokens: 64}}
  - {name: cam, model: yolo11n, demand: {fps: 30}}
)");
  ASSERT_TRUE(w.ok()) << w.error().what();
  const Demand& r50 = w->models[0].demand;
  EXPECT_TRUE(r50.closed_loop());
  EXPECT_EQ(r50.concurrency, 1);
  EXPECT_EQ(r50.fps, 0);
  const Demand& chat = w->models[1].demand;
  EXPECT_EQ(chat.concurrency, 8);
  EXPECT_EQ(chat.rps, 0);
  // The lengths still say what one request is.
  EXPECT_EQ(chat.prompt_tokens, 256);
  EXPECT_EQ(chat.output_tokens, 64);
  EXPECT_FALSE(w->models[2].demand.closed_loop());
  EXPECT_EQ(w->models[2].demand.fps, 30);
}

TEST(Demand, BoundsOfConcurrencyAreInclusive) {
  for (int n : {1, kMaxConcurrency}) {
    auto w = parse(
        "device: rtx3090\nmodels:\n  - {name: e, model: bert-base, demand: "
        "{concurrency: " +
        std::to_string(n) + "}}\n");
    ASSERT_TRUE(w.ok()) << n << ": " << w.error().what();
    EXPECT_EQ(w->models[0].demand.concurrency, n);
  }
}

TEST(Timeline, DemandEventsSwitchBetweenRateAndConcurrency) {
  auto w = parse(R"(device: rtx3090
models:
  - {name: enc, model: bert-base, demand: {rps: 50}}
timeline:
  duration_s: 60
  events:
    - {at_s: 10, demand: {model: enc, concurrency: 4}}
    - {at_s: 20, demand: {model: enc, rps: 20}}
)");
  ASSERT_TRUE(w.ok()) << w.error().what();
  const auto& e = w->timeline.events;
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].demand.concurrency, 4);
  EXPECT_EQ(e[0].demand.rps, 0);  // a closed loop has no rate
  EXPECT_EQ(e[1].demand.concurrency, 0);
  EXPECT_EQ(e[1].demand.rps, 20);
}

TEST(Workload, DriftEventsActOnTheTestbedAndAreNotForThePlanner) {
  auto w = parse(R"(device: rtx3090
profiling: none
models:
  - {name: cam0, model: yolo11n, demand: {fps: 30}}
timeline:
  duration_s: 300
  events:
    - {at_s: 0, perturb: 11}
    - {at_s: 100, interference: {sm_util: 0.3, bandwidth_util: 0.4}}
    - {at_s: 150, power_cap_w: 250}
    - {at_s: 200, interference: null}
    - {at_s: 250, power_cap_w: null}
    - {at_s: 260, depart: cam0}
)");
  ASSERT_TRUE(w.ok()) << w.error().what();
  EXPECT_EQ(w->profiling, Profiling::kNone);
  const auto& e = w->timeline.events;
  ASSERT_EQ(e.size(), 6u);
  EXPECT_EQ(e[0].kind, TimelineEvent::Kind::kPerturb);
  EXPECT_EQ(e[0].perturb_seed, 11u);
  EXPECT_EQ(e[1].kind, TimelineEvent::Kind::kInterference);
  ASSERT_TRUE(e[1].interference.has_value());
  EXPECT_EQ(e[1].interference->sm_util, 0.3);
  EXPECT_EQ(e[1].interference->bandwidth_util, 0.4);
  EXPECT_EQ(e[2].kind, TimelineEvent::Kind::kPowerCap);
  EXPECT_EQ(e[2].power_cap_w.value_or(0), 250);
  EXPECT_FALSE(e[3].interference.has_value());  // the co-tenant leaves
  EXPECT_FALSE(e[4].power_cap_w.has_value());   // back to TDP
  for (std::size_t i = 0; i < 5; ++i) EXPECT_FALSE(e[i].planner_visible()) << i;
  EXPECT_TRUE(e[5].planner_visible());
}

}  // namespace
}  // namespace corun::workload_test
