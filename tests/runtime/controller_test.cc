#include <gtest/gtest.h>

#include <algorithm>

#include "corun/catalog/catalog.h"
#include "corun/runtime/controller.h"
#include "corun/runtime/testbed_predictor.h"
#include "corun/testbed/sim.h"

namespace corun {
namespace {

// Predictions straight from the simulator (another noise seed), scaled by `optimism`: 1 is an
// oracle, 0.5 predicts everything twice as fast as it is.
class SimSource final : public PredictorSource {
 public:
  SimSource(const Testbed& t, double optimism) : t_(&t), optimism_(optimism) {}
  Result<std::unique_ptr<Predictor>> predictor_for(const Workload& current) override {
    current_ = std::make_unique<Workload>(current);
    return std::unique_ptr<Predictor>(
        std::make_unique<Scaled>(*current_, *t_, optimism_).release());
  }
  std::vector<double> margins(const Workload& current) override {
    return std::vector<double>(current.models.size(), 0.05);
  }

 private:
  class Scaled final : public Predictor {
   public:
    Scaled(const Workload& w, const Testbed& t, double k) : inner_(w, t, 10, 99), k_(k) {}
    [[nodiscard]] std::size_t models() const override { return inner_.models(); }
    void predict(std::span<const std::int32_t> c, std::size_t rows,
                 std::span<Predicted> out) const override {
      inner_.predict(c, rows, out);
      for (auto& p : out.first(rows * models())) {
        p.latency_ms_p95 *= static_cast<float>(k_);
        p.ttft_ms_p95 *= static_cast<float>(k_);
        p.tpot_ms_p95 *= static_cast<float>(k_);
      }
    }

   private:
    TestbedPredictor inner_;
    double k_;
  };
  const Testbed* t_;
  double optimism_;
  std::unique_ptr<Workload> current_;
};

Workload scenario() {
  auto w = parse_workload(R"(device: rtx3090
models:
  - name: chat
    model: qwen2.5-1.5b
    knobs: {precision: [fp16, awq], request_concurrency: [1, 2, 4]}
    demand: {rps: 1.5, prompt_tokens: 512, output_tokens: 128}
    sla: {ttft_ms_p95: 800, tpot_ms_p95: 60}
  - name: cam0
    model: yolo11s
    knobs: {imgsz: [320, 480, 640], skip_rate: [0, 0.5]}
    demand: {fps: 30}
    sla: {latency_ms_p95: 60}
  - name: cam1
    model: yolo11m
    active: false
    knobs: {imgsz: [320, 480, 640], skip_rate: [0, 0.5]}
    demand: {fps: 15}
    sla: {latency_ms_p95: 100}
timeline:
  duration_s: 60
  interval_s: 10
  events:
    - {at_s: 20, arrive: cam1}
    - {at_s: 40, demand: {model: chat, rps: 2.5}}
)", "scenario.yaml", Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << w.error().what();
  return std::move(w).value();
}

TEST(Controller, ReplansOnEventsAndKeepsAbsentModelsOff) {
  const Workload w = scenario();
  SimTestbed sim;
  SimSource source(sim, 1.0);
  ControllerOptions o;
  o.solver = "exhaustive";
  auto r = run_online(w, sim, source, o);
  ASSERT_TRUE(r.ok()) << r.error().what();
  ASSERT_EQ(r->intervals.size(), 6u);
  const auto& iv = r->intervals;
  EXPECT_TRUE(iv[0].replanned);
  EXPECT_EQ(iv[0].reason, "start");
  EXPECT_EQ(iv[0].plan[2], kAbsent);                  // cam1 not yet arrived
  EXPECT_EQ(iv[0].measured.models.size(), 2u);
  ASSERT_EQ(iv[2].events.size(), 1u);
  EXPECT_EQ(iv[2].events[0], "arrive cam1");
  EXPECT_TRUE(iv[2].replanned);
  EXPECT_NE(iv[2].plan[2], kAbsent);
  EXPECT_EQ(iv[2].measured.models.size(), 3u);
  EXPECT_EQ(iv[4].events[0], "demand chat");
  EXPECT_TRUE(iv[4].replanned);
  // Breaches are possible even with oracle predictions (measurement noise); each one makes
  // the next interval re-plan.
  for (std::size_t i = 0; i + 1 < iv.size(); ++i) {
    const bool any = std::find(iv[i].breach.begin(), iv[i].breach.end(), true) != iv[i].breach.end();
    if (any) {
      EXPECT_TRUE(iv[i + 1].replanned) << i;
    }
  }
  for (const auto& i : iv) {
    if (i.replanned) {
      EXPECT_GT(i.evaluated, 0u);
    }
    EXPECT_GT(i.measured_utility, 0);
  }
}

TEST(Controller, MeasuredBreachesTriggerReplansWithMoreHeadroom) {
  const Workload w = scenario();
  SimTestbed sim;
  SimSource source(sim, 0.4);  // wildly optimistic predictions
  ControllerOptions o;
  o.solver = "exhaustive";
  auto r = run_online(w, sim, source, o);
  ASSERT_TRUE(r.ok()) << r.error().what();
  bool breach_replan = false;
  for (const auto& i : r->intervals) breach_replan = breach_replan || i.reason == "breach";
  EXPECT_TRUE(breach_replan);
  EXPECT_GT(r->sla_violations(), 0u);
  // Breaches are counted on measurements: every counted breach fails the measured SLA.
  for (const auto& i : r->intervals) {
    for (const auto& mm : i.measured.models) {
      EXPECT_EQ(i.breach[mm.model], !measured_meets_sla(w.models[mm.model], mm));
    }
  }
}

TEST(Controller, DeterministicBySeed) {
  const Workload w = scenario();
  SimTestbed sim;
  SimSource a(sim, 1.0), b(sim, 1.0);
  ControllerOptions o;
  auto ra = run_online(w, sim, a, o);
  auto rb = run_online(w, sim, b, o);
  ASSERT_TRUE(ra.ok() && rb.ok());
  for (std::size_t i = 0; i < ra->intervals.size(); ++i) {
    EXPECT_EQ(ra->intervals[i].plan, rb->intervals[i].plan);
    EXPECT_EQ(ra->intervals[i].measured_utility, rb->intervals[i].measured_utility);
  }
}

}  // namespace
}  // namespace corun

#include <filesystem>

#include "corun/core/atomic_file.h"
#include "corun/runtime/report.h"

namespace corun {
namespace {

TEST(Report, JsonAndHtmlCarryTheLedger) {
  const Workload w = scenario();
  SimTestbed sim;
  SimSource source(sim, 0.4);
  auto r = run_online(w, sim, source, ControllerOptions{});
  ASSERT_TRUE(r.ok());
  const auto dir = std::filesystem::temp_directory_path() / "corun_report_test";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(write_report(*r, w, dir).ok());
  const auto j = nlohmann::json::parse(*read_file(dir / "report.json"));
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["testbed"], "sim");
  EXPECT_EQ(j["intervals"].size(), r->intervals.size());
  EXPECT_EQ(j["summary"]["sla_violations"], r->sla_violations());
  const auto html = *read_file(dir / "report.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("cam1: latency p95"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);  // self-contained, static
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace corun

#include "corun/runtime/scheduler_eval.h"

namespace corun {
namespace {

TEST(SchedulerEval, ScoresEverySolverOnEveryScenario) {
  const Workload w = scenario();
  SimTestbed sim;
  SourceFactory factory = [&](const Workload&) -> Result<std::unique_ptr<PredictorSource>> {
    return std::unique_ptr<PredictorSource>(std::make_unique<SimSource>(sim, 1.0));
  };
  SchedulerEvalOptions o;
  o.solvers = {"exhaustive", "greedy"};
  auto rows = evaluate_scheduler({w}, sim, factory, o);
  ASSERT_TRUE(rows.ok()) << rows.error().what();
  ASSERT_EQ(rows->size(), 2u);
  const auto& ex = (*rows)[0];
  EXPECT_EQ(ex.solver, "exhaustive");
  EXPECT_EQ(ex.gap_to_exhaustive_pct, 0.0);
  EXPECT_GE(ex.decisions, 3u);  // start, arrival, demand change
  // The source predicts from the testbed with another seed: near the oracle, not beyond it.
  EXPECT_GE(ex.gap_to_oracle_pct, 0.0);
  EXPECT_LT(ex.gap_to_oracle_pct, 25.0);
  const auto& greedy = (*rows)[1];
  EXPECT_GE(greedy.gap_to_exhaustive_pct, 0.0);
  EXPECT_GT(greedy.decision_ms_p50, 0.0);
  const auto j = to_json(greedy);
  for (const char* k : {"scenario", "solver", "gap_to_exhaustive_pct", "gap_to_oracle_pct",
                        "sla_violations", "decision_ms_p50", "decision_ms_p99"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
}

}  // namespace
}  // namespace corun
