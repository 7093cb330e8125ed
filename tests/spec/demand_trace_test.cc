// Request traces (Azure LLM inference trace format) and workloads whose LLM demand replays one.
// Every expected number below is worked out by hand from the rows written in the test.
#include "corun/spec/demand_trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "corun/catalog/catalog.h"
#include "corun/spec/workload.h"
#include "../core/temp_dir.h"

namespace corun::demand_trace_test {
namespace {

namespace fs = std::filesystem;
using corun::testing::TempDir;

const std::string kHeader = "TIMESTAMP,ContextTokens,GeneratedTokens\n";

std::optional<DemandTrace> parse(const std::string& text, Diagnostics& diags) {
  return DemandTrace::parse(text, "t.csv", diags);
}

std::string errors_of(const std::string& text) {
  Diagnostics diags;
  EXPECT_FALSE(parse(text, diags).has_value()) << "accepted:\n" << text;
  return diags.to_error().what();
}

TEST(DemandTrace, ReadsTheAzureFormatToTheHundredNanoseconds) {
  // The first rows of the committed excerpt: 37 µs apart, a day's timestamps at 100 ns.
  Diagnostics diags;
  const auto t = parse(kHeader +
                           "2023-11-16 18:35:06.1383340,1601,59\n"
                           "2023-11-16 18:35:06.1383710,6143,6\n"
                           "2023-11-16 18:35:07.5,10,1\n",
                       diags);
  ASSERT_TRUE(t.has_value()) << diags.to_error().what();
  ASSERT_EQ(t->requests().size(), 3u);
  EXPECT_EQ(t->requests()[0].t_s, 0.0);
  EXPECT_NEAR(t->requests()[1].t_s, 37e-6, 1e-12);
  EXPECT_EQ(t->requests()[1].context_tokens, 6143);
  EXPECT_EQ(t->requests()[1].generated_tokens, 6);
  // 07.5 - 06.138334 = 1.361666 s.
  EXPECT_NEAR(t->requests()[2].t_s, 1.361666, 1e-12);
  EXPECT_NEAR(t->span_s(), 1.361666, 1e-12);
}

TEST(DemandTrace, SortsRowsAcrossMidnightAndTakesColumnsByName) {
  Diagnostics diags;
  const auto t = parse(
      "GeneratedTokens,TIMESTAMP,ContextTokens\r\n"
      "20,2023-12-01 00:00:01,200\r\n"     // t = 3 s after 2023-11-30 23:59:58
      "10,2023-11-30 23:59:58.0,100\r\n"   // the first request
      "30,2023-11-30 23:59:59,300\r\n",    // t = 1
      diags);
  ASSERT_TRUE(t.has_value()) << diags.to_error().what();
  ASSERT_EQ(t->requests().size(), 3u);
  EXPECT_EQ(t->requests()[0].context_tokens, 100);
  EXPECT_EQ(t->requests()[1].t_s, 1.0);
  EXPECT_EQ(t->requests()[1].generated_tokens, 30);
  EXPECT_EQ(t->requests()[2].t_s, 3.0);
  EXPECT_EQ(t->requests()[2].context_tokens, 200);
}

TEST(DemandTrace, ABadTimestampNamesFileLineColumnAndValue) {
  const std::string msg = errors_of(kHeader +
                                    "2023-11-16 18:00:00,5,5\n"
                                    "2023-13-01 00:00:00,5,5\n"
                                    "yesterday,5,5\n"
                                    "2023-11-16 18:00:00.1234567890,5,5\n");
  EXPECT_NE(msg.find("t.csv:3: TIMESTAMP: no such time '2023-13-01 00:00:00'"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("t.csv:4: TIMESTAMP: not a timestamp 'yesterday' (expected YYYY-MM-DD "
                     "HH:MM:SS[.fraction])"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("t.csv:5: TIMESTAMP: not a timestamp"), std::string::npos) << msg;
}

TEST(DemandTrace, AMissingColumnNamesFileLineAndColumn) {
  EXPECT_NE(errors_of(kHeader + "2023-11-16 18:00:00,5,5\n2023-11-16 18:00:01,5\n")
                .find("t.csv:3: GeneratedTokens: missing field (the line has 2 of 3)"),
            std::string::npos);
  const std::string header = errors_of("TIMESTAMP,ContextTokens\n2023-11-16 18:00:00,5\n");
  EXPECT_NE(header.find("t.csv:1: GeneratedTokens: missing column"), std::string::npos) << header;
  const std::string misspelt = errors_of("Timestamp,ContextTokens,GeneratedTokens\n");
  EXPECT_NE(misspelt.find("t.csv:1: unknown column 'Timestamp' (did you mean 'TIMESTAMP'?)"),
            std::string::npos)
      << misspelt;
}

TEST(DemandTrace, BadTokenCountsAndEmptyFilesAreErrors) {
  const std::string msg = errors_of(kHeader + "2023-11-16 18:00:00,-3,5\n2023-11-16 18:00:01,7,x\n");
  EXPECT_NE(msg.find("t.csv:2: ContextTokens: value -3 is out of range [0, 1048576]"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("t.csv:3: GeneratedTokens: not a whole number 'x'"), std::string::npos) << msg;
  EXPECT_NE(errors_of("").find("t.csv:1: empty trace"), std::string::npos);
  EXPECT_NE(errors_of(kHeader).find("no requests after the header"), std::string::npos);
}

// Arrivals at 0, 1, 3, 7.5 and 9 s.
DemandTrace five_requests() {
  Diagnostics diags;
  auto t = parse(kHeader +
                     "2023-11-16 10:00:00,100,10\n"
                     "2023-11-16 10:00:01,300,30\n"
                     "2023-11-16 10:00:03,200,20\n"
                     "2023-11-16 10:00:07.5,400,41\n"
                     "2023-11-16 10:00:09,1000,5\n",
                 diags);
  EXPECT_TRUE(t.has_value()) << diags.to_error().what();
  return *t;
}

TEST(DemandTrace, AWindowsRateLengthsAndBurstinessAreWorkedOutByHand) {
  const DemandTrace t = five_requests();
  // [0, 4): arrivals 0, 1, 3. Rate 3 / 4 = 0.75; lengths (100+300+200)/3 = 200 and 20. Gaps 1
  // and 2: mean 1.5, population variance ((-0.5)² + 0.5²) / 2 = 0.25, sd 0.5, cv 1/3.
  const TraceWindow a = t.window(0, 4);
  EXPECT_EQ(a.requests, 3u);
  EXPECT_DOUBLE_EQ(a.rps, 0.75);
  EXPECT_DOUBLE_EQ(a.mean_context_tokens, 200);
  EXPECT_DOUBLE_EQ(a.mean_generated_tokens, 20);
  EXPECT_NEAR(a.arrival_cv, 1.0 / 3.0, 1e-12);
  // [4, 8): 7.5 only. One arrival has no gap: cv 1.
  const TraceWindow b = t.window(4, 8);
  EXPECT_EQ(b.requests, 1u);
  EXPECT_DOUBLE_EQ(b.rps, 0.25);
  EXPECT_DOUBLE_EQ(b.mean_context_tokens, 400);
  EXPECT_DOUBLE_EQ(b.mean_generated_tokens, 41);
  EXPECT_EQ(b.arrival_cv, 1);
  // [0, 10): all five. Gaps 1, 2, 4.5, 1.5: mean 2.25; mean square (1 + 4 + 20.25 + 2.25) / 4 =
  // 6.875; variance 6.875 - 2.25² = 1.8125; cv = sqrt(1.8125) / 2.25 = 0.598352.
  const TraceWindow c = t.window(0, 10);
  EXPECT_EQ(c.requests, 5u);
  EXPECT_DOUBLE_EQ(c.rps, 0.5);
  EXPECT_DOUBLE_EQ(c.mean_context_tokens, 400);  // 2000 / 5
  EXPECT_DOUBLE_EQ(c.mean_generated_tokens, 21.2);  // 106 / 5
  EXPECT_NEAR(c.arrival_cv, 0.598352, 1e-6);
  // [9.5, 20): nothing; the edges are half-open ([3, 7.5) holds 3, not 7.5).
  EXPECT_EQ(t.window(9.5, 20).requests, 0u);
  EXPECT_EQ(t.window(9.5, 20).rps, 0);
  EXPECT_EQ(t.window(3, 7.5).requests, 1u);
}

// A workload whose LLM replays `trace` (relative to the workload file), 1 s intervals.
std::string trace_workload(const std::string& demand, double duration_s = 4) {
  return "device: l4\n"
         "models:\n"
         "  - name: code\n"
         "    model: qwen2.5-0.5b\n"
         "    knobs: {request_concurrency: [1, 2]}\n"
         "    demand: " + demand + "\n"
         "    sla: {ttft_ms_p95: 2000}\n"
         "timeline:\n"
         "  duration_s: " + std::to_string(duration_s) + "\n"
         "  interval_s: 1\n";
}

// Trace seconds: [0, 1) two requests; [1, 2) three; [2, 3) none; [3, 4) four, evenly spaced;
// [4, 5) one; one more at 5.
const std::string kSmallTrace = kHeader +
                                "2023-11-16 10:00:00.00,100,10\n"
                                "2023-11-16 10:00:00.50,100,10\n"
                                "2023-11-16 10:00:01.00,200,20\n"
                                "2023-11-16 10:00:01.25,400,40\n"
                                "2023-11-16 10:00:01.75,300,30\n"
                                "2023-11-16 10:00:03.00,50,5\n"
                                "2023-11-16 10:00:03.25,50,5\n"
                                "2023-11-16 10:00:03.50,50,6\n"
                                "2023-11-16 10:00:03.75,50,6\n"
                                "2023-11-16 10:00:04.50,1000,100\n"
                                "2023-11-16 10:00:05.00,7,7\n";

TEST(TraceDemand, AWorkloadReplaysATraceRelativeToItsFile) {
  TempDir dir;
  dir.write("data/small.csv", kSmallTrace);
  const fs::path file = dir.write("w.yaml", trace_workload("{trace: data/small.csv, scale: 2}"));
  EXPECT_EQ(file, dir.path() / "w.yaml");
  auto w = load_workload(file, Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  const ModelSpec& m = w->models[0];
  ASSERT_TRUE(m.trace.has_value());
  EXPECT_EQ(m.trace->file, "data/small.csv");
  EXPECT_EQ(m.trace->scale, 2);
  EXPECT_EQ(m.trace->start_s, 1);  // one interval by default
  // The planner starts from [0, 1): 2 requests x scale 2 = 4 rps, lengths 100 and 10, and two
  // arrivals measure no burstiness (cv 1).
  EXPECT_DOUBLE_EQ(m.demand.rps, 4);
  EXPECT_EQ(m.demand.prompt_tokens, 100);
  EXPECT_EQ(m.demand.output_tokens, 10);
  EXPECT_EQ(m.demand.arrival_cv, 1);

  // Run intervals 0..3 are trace seconds [1, 2), [2, 3), [3, 4), [4, 5).
  const auto d = m.trace->intervals(1, 4);
  ASSERT_EQ(d.size(), 4u);
  // [1, 2): 3 requests x 2 = 6 rps; lengths (200+400+300)/3 = 300 and 30; gaps 0.25 and 0.5:
  // mean 0.375, sd 0.125, cv 1/3.
  EXPECT_DOUBLE_EQ(d[0].rps, 6);
  EXPECT_EQ(d[0].prompt_tokens, 300);
  EXPECT_EQ(d[0].output_tokens, 30);
  EXPECT_NEAR(d[0].arrival_cv, 1.0 / 3.0, 1e-12);
  // [2, 3): nothing arrives: the least rate, lengths and burstiness kept from before.
  EXPECT_DOUBLE_EQ(d[1].rps, TraceDemand::kMinRps);
  EXPECT_EQ(d[1].prompt_tokens, 300);
  EXPECT_EQ(d[1].output_tokens, 30);
  EXPECT_NEAR(d[1].arrival_cv, 1.0 / 3.0, 1e-12);
  // [3, 4): 4 x 2 = 8 rps; lengths 50 and 5.5, rounded to 6 (away from zero); even gaps: cv 0.
  EXPECT_DOUBLE_EQ(d[2].rps, 8);
  EXPECT_EQ(d[2].prompt_tokens, 50);
  EXPECT_EQ(d[2].output_tokens, 6);
  EXPECT_NEAR(d[2].arrival_cv, 0, 1e-9);
  // [4, 5): one request: 2 rps, its lengths, cv 1.
  EXPECT_DOUBLE_EQ(d[3].rps, 2);
  EXPECT_EQ(d[3].prompt_tokens, 1000);
  EXPECT_EQ(d[3].output_tokens, 100);
  EXPECT_EQ(d[3].arrival_cv, 1);
  for (const Demand& x : d) EXPECT_EQ(x.concurrency, 0);
}

TEST(TraceDemand, TheWorkloadHashFollowsTheTracesContent) {
  TempDir dir;
  dir.write("data/small.csv", kSmallTrace);
  const fs::path file = dir.write("w.yaml", trace_workload("{trace: data/small.csv}"));
  auto a = load_workload(file, Catalog::default_catalog());
  ASSERT_TRUE(a.ok()) << a.error().what();
  dir.write("data/small.csv", kSmallTrace + "2023-11-16 10:00:06,1,1\n");
  auto b = load_workload(file, Catalog::default_catalog());
  ASSERT_TRUE(b.ok()) << b.error().what();
  EXPECT_NE(a->hash, b->hash);
}

TEST(TraceDemand, WorkloadErrorsNameTheFieldOrTheTracesLine) {
  TempDir dir;
  dir.write("data/small.csv", kSmallTrace);
  dir.write("data/bad.csv", kHeader + "2023-11-16 10:00:00,1,1\n2023-11-16 25:00:00,1,1\n");
  auto error_of = [&](const std::string& demand, double duration_s = 4) {
    const fs::path file = dir.write("w.yaml", trace_workload(demand, duration_s));
    auto w = load_workload(file, Catalog::default_catalog());
    EXPECT_FALSE(w.ok()) << demand;
    if (w.ok()) return std::string();
    EXPECT_EQ(w.error().kind(), Error::Kind::kInvalidInput);
    return w.error().what();
  };
  const std::string bad_row = error_of("{trace: data/bad.csv}");
  EXPECT_NE(bad_row.find((dir.path() / "data/bad.csv").string() +
                         ":3: TIMESTAMP: no such time '2023-11-16 25:00:00'"),
            std::string::npos)
      << bad_row;
  const std::string missing = error_of("{trace: data/none.csv}");
  EXPECT_NE(missing.find("w.yaml:6:"), std::string::npos) << missing;
  EXPECT_NE(missing.find("models[0].demand.trace: cannot read the trace"), std::string::npos)
      << missing;
  EXPECT_NE(missing.find("none.csv"), std::string::npos) << missing;
  EXPECT_NE(error_of("{trace: data/small.csv, rps: 2}")
                .find("models[0].demand.rps: a trace demand takes its rate and lengths from the "
                      "trace: give either trace or rps, not both"),
            std::string::npos);
  EXPECT_NE(error_of("{trace: data/small.csv, start_s: 0.5}")
                .find("models[0].demand.start_s: must be at least one control interval (1 s)"),
            std::string::npos);
  // The trace's last request is at 5 s: start 1 + 4.5 s of run do not fit.
  EXPECT_NE(error_of("{trace: data/small.csv}", 4.5)
                .find("models[0].demand.trace: 'data/small.csv' covers 5 s from its first "
                      "request; the run needs start_s + duration_s = 5.5 s"),
            std::string::npos);
  EXPECT_NE(error_of("{trace: data/small.csv, scale: 0}").find("models[0].demand.scale"),
            std::string::npos);
  EXPECT_NE(error_of("{trace: data/small.csv, scael: 2}").find("did you mean 'scale'"),
            std::string::npos);
}

TEST(TraceDemand, OnlyLlmsReplayTracesAndTimelineDemandEventsDoNotApply) {
  TempDir dir;
  dir.write("data/small.csv", kSmallTrace);
  const fs::path vision = dir.write("v.yaml",
                                    "device: l4\n"
                                    "models:\n"
                                    "  - name: cam\n"
                                    "    model: yolo11n\n"
                                    "    demand: {trace: data/small.csv}\n");
  auto v = load_workload(vision, Catalog::default_catalog());
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().what().find("models[0].demand.trace: a trace replays LLM requests"),
            std::string::npos)
      << v.error().what();
  const fs::path event =
      dir.write("e.yaml", trace_workload("{trace: data/small.csv}") +
                              "  events:\n    - {at_s: 2, demand: {model: code, rps: 3}}\n");
  auto e = load_workload(event, Catalog::default_catalog());
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().what().find("model 'code' replays its demand from the trace "
                                  "'data/small.csv': demand events do not apply to it"),
            std::string::npos)
      << e.error().what();
}

TEST(TraceDemand, AModelEntryOnItsOwnRefusesATrace) {
  auto node = YAML::Load(
      "{name: code, model: qwen2.5-0.5b, demand: {trace: data/small.csv}}");
  Diagnostics diags;
  EXPECT_FALSE(parse_model_entry(node, "request", Catalog::default_catalog(), diags).has_value());
  EXPECT_NE(diags.to_error().what().find("demand.trace: a trace demand belongs to a workload "
                                         "file with a timeline"),
            std::string::npos)
      << diags.to_error().what();
}

TEST(TraceDemand, TheCommittedExcerptParsesWithTheRowsItsReadmeNames) {
  auto t = DemandTrace::load(fs::path(CORUN_SOURCE_DIR) /
                             "workloads/traces/data/azure-code-2023-excerpt.csv");
  ASSERT_TRUE(t.ok()) << t.error().what();
  // data/README.md: 3,240 requests from 18:35:06.1383340 to 18:50:03.8813400.
  EXPECT_EQ(t->requests().size(), 3240u);
  EXPECT_NEAR(t->span_s(), 14 * 60 + 57.743006, 1e-6);
}

TEST(TraceDemand, EveryScenarioOfTheTraceSetParsesAndStartsFromThePast) {
  std::size_t scenarios = 0;
  for (const auto& e : fs::directory_iterator(fs::path(CORUN_SOURCE_DIR) / "workloads/traces")) {
    if (e.path().extension() != ".yaml") continue;
    SCOPED_TRACE(e.path().string());
    auto w = load_workload(e.path(), Catalog::default_catalog());
    ASSERT_TRUE(w.ok()) << w.error().what();
    ++scenarios;
    std::size_t traced = 0;
    for (const ModelSpec& m : w->models) {
      if (!m.trace) continue;
      ++traced;
      // The planner's first demand is the trace's interval before start_s, nothing later.
      const double dt = w->timeline.interval_s;
      const TraceWindow before = m.trace->trace->window(m.trace->start_s - dt, m.trace->start_s);
      EXPECT_DOUBLE_EQ(m.demand.rps, std::max(TraceDemand::kMinRps, before.rps * m.trace->scale));
    }
    EXPECT_GE(traced, 1u);
  }
  EXPECT_GE(scenarios, 2u);
}

}  // namespace
}  // namespace corun::demand_trace_test
