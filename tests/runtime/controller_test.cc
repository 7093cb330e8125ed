#include "corun/runtime/controller.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "corun/catalog/catalog.h"
#include "corun/runtime/online_run.h"
#include "corun/runtime/testbed_predictor.h"
#include "corun/testbed/sim.h"
#include "scaled_latencies.h"

namespace corun::controller_test {
namespace {

// Predictions straight from the simulator (another noise seed), scaled by `optimism`: 1 is an
// oracle, 0.5 predicts everything twice as fast as it is.
class SimSource final : public PredictorSource {
 public:
  SimSource(const Testbed& t, double optimism) : t_(&t), optimism_(optimism) {}
  [[nodiscard]] std::string describe() const override { return "scaled simulator"; }
  Result<std::unique_ptr<Predictor>> predictor_for(const Workload& current) override {
    current_ = std::make_unique<Workload>(current);
    return std::unique_ptr<Predictor>(std::make_unique<testing::ScaledLatencies>(
        std::make_unique<TestbedPredictor>(Context{.seed = 99}, *current_, *t_, 10), optimism_));
  }
  std::vector<double> margins(const Workload& current) override {
    return std::vector<double>(current.models.size(), 0.05);
  }
  ErrorPriors priors(const Workload& current) override {
    ErrorPriors p(current.models.size());
    for (auto& m : p) m.fill(ErrorPrior{0, 0.3, 0.3, 0.1, 0.1});
    return p;
  }
  LoadTable loads(const Workload& current) override {
    LoadTable t;
    for (const auto& m : current.models) t.emplace_back(m.local_config_count(), 0.5f);
    return t;
  }

 private:
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

// A run of `w` with a scaled simulator as the predictor source.
Result<RunReport> run(const Workload& w, const Testbed& t, double optimism, bool learning,
                      const std::string& solver = "exhaustive", OnlineLog* log = nullptr) {
  RunOptions o;
  o.controller.solver = solver;
  o.controller.learning.enabled = learning;
  o.log = log;
  return run_online(Context{}, w, t, std::make_unique<SimSource>(t, optimism), o);
}

// A second controller `b` that replays `taught` (through JSON, as serve stores samples) learns
// what `a` learned from observing them.
void expect_replay_matches(const Controller& a, Controller& b,
                           const std::vector<LearningSample>& taught) {
  std::vector<LearningSample> stored;
  for (const auto& s : taught) {
    auto back = learning_sample_from_json(nlohmann::json::parse(to_json(s).dump()));
    ASSERT_TRUE(back.ok()) << back.error().what();
    stored.push_back(*back);
  }
  ASSERT_TRUE(b.replay(stored).ok());
  const auto sa = a.learning_state(), sb = b.learning_state();
  ASSERT_EQ(sa.size(), sb.size());
  for (std::size_t m = 0; m < sa.size(); ++m) {
    EXPECT_EQ(sa[m].observations, sb[m].observations);
    EXPECT_NEAR(sa[m].shared_error, sb[m].shared_error, 1e-9);
    EXPECT_NEAR(sa[m].noise_sd, sb[m].noise_sd, 1e-9);
  }
}

TEST(Controller, ReplansOnEventsAndKeepsAbsentModelsOff) {
  const Workload w = scenario();
  SimTestbed sim;
  auto r = run(w, sim, 1.0, false);
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
  // the next interval re-plan, unless a make-before-break swap's new copy ran its start-up
  // kernels in that window: that breach is the swap's and ends with it (counted, not acted on).
  for (std::size_t i = 0; i + 1 < iv.size(); ++i) {
    const bool any = std::find(iv[i].breach.begin(), iv[i].breach.end(), true) != iv[i].breach.end();
    if (any && iv[i].feasible && iv[i].swap_gpu_s == 0) {
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

TEST(Controller, WithoutLearningBreachesGrowTheMarginOfTheModel) {
  const Workload w = scenario();
  SimTestbed sim;
  auto r = run(w, sim, 0.4, false);  // wildly optimistic predictions
  ASSERT_TRUE(r.ok()) << r.error().what();
  bool breach_replan = false;
  for (const auto& i : r->intervals) breach_replan = breach_replan || i.reason.rfind("breach", 0) == 0;
  EXPECT_TRUE(breach_replan);
  EXPECT_GT(r->sla_violations(), 0u);
  // Breaches are counted on measurements: every counted breach fails the measured SLA.
  for (const auto& i : r->intervals) {
    for (const auto& mm : i.measured.models) {
      EXPECT_EQ(i.breach[mm.model], !measured_meets_sla(w.models[mm.model], mm));
    }
  }
  // The static rule only ever grows a breaching model's margin.
  double chat_margin = 0;
  for (const auto& i : r->intervals) {
    EXPECT_GE(i.margins[0].max(), chat_margin - 1e-12);
    chat_margin = i.margins[0].max();
  }
}

TEST(Controller, LearningCorrectsABiasedPredictorAndHoldsTheSla) {
  // The source predicts every latency 40 % of what the testbed measures. Learning off repeats
  // breaches; learning on learns the bias from the first windows and stops breaching (where a
  // plan can hold every SLA at all: from 40 s the chat's demand exceeds what it can serve).
  const Workload w = scenario();
  SimTestbed sim;
  auto off = run(w, sim, 0.4, false);
  auto on = run(w, sim, 0.4, true);
  ASSERT_TRUE(off.ok() && on.ok());
  // Late breaches (from the third interval), all of them and those outside the windows in
  // which a make-before-break swap's new copy ran its start-up kernels: such a swap can breach a
  // co-runner whatever the predictions (the swap's GPU work, not the bias).
  std::size_t late_on = 0, late_off = 0, late_on_steady = 0;
  for (std::size_t k = 2; k < on->intervals.size(); ++k) {
    const auto& a = on->intervals[k];
    const auto& b = off->intervals[k];
    for (bool x : a.breach) {
      late_on += a.feasible && x ? 1 : 0;
      late_on_steady += a.feasible && x && a.swap_gpu_s == 0 ? 1 : 0;
    }
    for (bool x : b.breach) late_off += b.feasible && x ? 1 : 0;
  }
  EXPECT_EQ(late_on_steady, 0u);
  EXPECT_GT(late_off, late_on);
  // What it predicts for the plan in force is now close to what is measured (cam0's p95).
  const auto& last = on->intervals.back();
  const double predicted = last.predicted[1].latency_ms_p95;
  const double measured = last.measured.models[1].latency_ms_p95;
  EXPECT_NEAR(predicted / measured, 1.0, 0.2);
}

TEST(Controller, DriftActsOnTheTestbedOnly) {
  auto w = parse_workload(R"(device: rtx3090
models:
  - name: cam0
    model: yolo11m
    knobs: {imgsz: [320, 480, 640]}
    demand: {fps: 30}
    sla: {latency_ms_p95: 60}
timeline:
  duration_s: 40
  interval_s: 10
  events:
    - {at_s: 20, interference: {sm_util: 0.6, bandwidth_util: 0.6}}
)",
                          "drift.yaml", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  SimTestbed sim;
  // The controller never sees a drift event, only its effect in what it measures.
  Controller c(Context{}, *w, std::make_unique<SimSource>(sim, 1.0), ControllerOptions{});
  EXPECT_EQ(c.workload().models.size(), 1u);
  auto r = run(*w, sim, 1.0, true);
  ASSERT_TRUE(r.ok()) << r.error().what();
  ASSERT_EQ(r->intervals[2].drift.size(), 1u);
  EXPECT_EQ(r->intervals[2].drift[0], "interference sm 0.6 bw 0.6");
  EXPECT_TRUE(r->intervals[2].events.empty());
  EXPECT_EQ(r->intervals[2].conditions.interference.sm_util, 0.6);
  EXPECT_EQ(r->intervals[1].conditions.interference.sm_util, 0.0);
  // The same configuration measures slower next to the co-tenant.
  Workload now = *w;
  const Measurement quiet = sim.measure(Context{}, now, JointConfig{0}, MeasureOptions(10));
  const Measurement crowded =
      sim.measure(Context{}, now, JointConfig{0}, MeasureOptions(10, r->intervals[2].conditions));
  EXPECT_GT(crowded.models[0].latency_ms_p95, 1.1 * quiet.models[0].latency_ms_p95);
}

TEST(Controller, ObservationsOfAnotherPlanAreStale) {
  const Workload w = scenario();
  SimTestbed sim;
  Controller c(Context{}, w, std::make_unique<SimSource>(sim, 1.0), ControllerOptions{});
  auto d = c.replan("start");
  ASSERT_TRUE(d.ok() && *d);
  ModelObservation o;
  o.model = 1;
  o.local = (**d).config[1];
  o.measured[0] = 10;
  EXPECT_EQ(c.observe(std::span(&o, 1), (**d).id + 7).stale, 1u);
  o.local = (**d).config[1] + 1;  // not the configuration in force
  EXPECT_EQ(c.observe(std::span(&o, 1), (**d).id).stale, 1u);
  o.local = (**d).config[1];
  EXPECT_EQ(c.observe(std::span(&o, 1), (**d).id).learned, 1u);
}

TEST(Controller, AModelsFirstJumpIsNotBlamedOnItsConfigurationAlone) {
  // The chat measures e^2 times its base prediction in its first window, the camera as
  // predicted. A jump of one model alone is a change of its configuration when the model was
  // measured before; in its first window nothing says which part is its configuration's, so
  // the jump is split. SimSource's priors: shared sd 0.3, configuration sd 0.1, noise sd 0.1;
  // opening both halves by 2²/2 gives the shared error a gain of (0.09 + 2) / (0.09 + 2 + 0.01
  // + 2 + 0.01) ≈ 0.51 of the innovation 2: ≈ 1.0. Blamed on the configuration alone, it
  // would be 0.09 / (0.09 + 4.02) x 2 ≈ 0.04.
  const Workload w = scenario();
  SimTestbed sim;
  Controller c(Context{}, w, std::make_unique<SimSource>(sim, 1.0), ControllerOptions{});
  auto d = c.replan("start");
  ASSERT_TRUE(d.ok() && *d);
  std::vector<ModelObservation> obs(2);
  for (std::size_t m = 0; m < 2; ++m) {
    obs[m].model = m;
    obs[m].local = (**d).config[m];
    const Predicted& b = (**d).base[m];
    const double k = m == 0 ? std::exp(2.0) : 1.0;
    obs[m].measured[static_cast<std::size_t>(Target::kLatencyP95)] = b.latency_ms_p95 * k;
    obs[m].measured[static_cast<std::size_t>(Target::kTtftP95)] = b.ttft_ms_p95 * k;
    obs[m].measured[static_cast<std::size_t>(Target::kTpotP95)] = b.tpot_ms_p95 * k;
    obs[m].measured[static_cast<std::size_t>(Target::kThroughput)] = b.throughput;
  }
  ASSERT_EQ(c.observe(obs, (**d).id).learned, 2u);
  EXPECT_NEAR(c.learning_state()[0].shared_error, 1.0, 0.15);
}

TEST(Controller, ReplayRebuildsWhatObservationsTaught) {
  const Workload w = scenario();
  SimTestbed sim;
  Controller a(Context{}, w, std::make_unique<SimSource>(sim, 0.5), ControllerOptions{});
  auto d = a.replan("start");
  ASSERT_TRUE(d.ok() && *d);
  std::vector<LearningSample> taught;
  for (int k = 0; k < 6; ++k) {
    const Measurement m = sim.measure(Context{.seed = static_cast<std::uint64_t>(k + 1)}, w,
                                      (**d).config, MeasureOptions(10));
    a.observe(observations(m, (**d).config), (**d).id, &taught);
  }
  ASSERT_FALSE(taught.empty());
  Controller b(Context{}, w, std::make_unique<SimSource>(sim, 0.5), ControllerOptions{});
  expect_replay_matches(a, b, taught);
}

// A what-if plans a hypothetical workload with what was learned and publishes nothing: the
// plan in force, the workload, the learners and the next decision id are untouched.
TEST(Controller, ALearningSampleKeepsItsShareAndWhatWasMeasured) {
  LearningSample s;
  s.model = "chat";
  s.model_key = "qwen2.5-1.5b";
  s.share = 0.375;
  s.measured[static_cast<std::size_t>(Target::kTtftP95)] = 812.5;
  auto back = learning_sample_from_json(nlohmann::json::parse(to_json(s).dump()));
  ASSERT_TRUE(back.ok()) << back.error().what();
  EXPECT_EQ(back->share, 0.375);
  EXPECT_EQ(back->measured[static_cast<std::size_t>(Target::kTtftP95)], 812.5);
  EXPECT_TRUE(std::isnan(back->measured[static_cast<std::size_t>(Target::kTpotP95)]));
  // Stored before either field existed: served whole, nothing measured.
  nlohmann::json old = to_json(s);
  old.erase("share");
  old.erase("measured");
  back = learning_sample_from_json(old);
  ASSERT_TRUE(back.ok()) << back.error().what();
  EXPECT_EQ(back->share, 1.0);
  EXPECT_TRUE(std::isnan(back->measured[static_cast<std::size_t>(Target::kTtftP95)]));
  nlohmann::json bad = to_json(s);
  bad["share"] = 1.5;
  back = learning_sample_from_json(bad);
  ASSERT_FALSE(back.ok());
  EXPECT_NE(std::string(back.error().what()).find("share"), std::string::npos);
  bad = to_json(s);
  bad["measured"][1] = -3;
  back = learning_sample_from_json(bad);
  ASSERT_FALSE(back.ok());
  EXPECT_NE(std::string(back.error().what()).find("measured[1]"), std::string::npos);
}

TEST(Controller, PlanForAHypotheticalWorkloadChangesNothing) {
  const Workload w = scenario();
  SimTestbed sim;
  ControllerOptions o;
  o.solver = "greedy";
  Controller c(Context{}, w, std::make_unique<SimSource>(sim, 0.5), o);
  auto d = c.replan("start");
  ASSERT_TRUE(d.ok() && *d);
  for (int k = 0; k < 4; ++k) {
    const Measurement m = sim.measure(Context{.seed = static_cast<std::uint64_t>(k + 1)}, w,
                                      (**d).config, MeasureOptions(10));
    c.observe(observations(m, (**d).config), (**d).id);
  }
  const auto plan = c.plan();
  const auto learned = c.learning_state();
  const bool due = c.replan_due();

  Workload with = w;
  with.models[2].active = true;  // cam1 arrives, hypothetically
  auto hypo = c.plan_for(with, "whatif cam1");
  ASSERT_TRUE(hypo.ok()) << hypo.error().what();
  ASSERT_EQ(hypo->config.size(), 3u);
  EXPECT_NE(hypo->config[2], kAbsent);
  EXPECT_EQ(hypo->id, plan->id + 1);  // the id the next plan that changes anything gets
  EXPECT_GT(hypo->predicted_utility, 0);

  EXPECT_EQ(c.plan(), plan);
  EXPECT_FALSE(c.workload().models[2].active);
  EXPECT_EQ(c.replan_due(), due);
  const auto after = c.learning_state();
  ASSERT_EQ(after.size(), learned.size());
  for (std::size_t m = 0; m < after.size(); ++m) {
    EXPECT_EQ(after[m].observations, learned[m].observations);
    EXPECT_EQ(after[m].shared_error, learned[m].shared_error);
    EXPECT_EQ(after[m].z, learned[m].z);
  }
  // The next real decision continues the decision count; its plan id moves only if it changed.
  auto next = c.replan("requested");
  ASSERT_TRUE(next.ok() && *next);
  EXPECT_EQ((**next).decision, plan->decision + 1);
  EXPECT_EQ((**next).id, (**next).config == plan->config ? plan->id : plan->id + 1);
}

// A decision that keeps what runs keeps the plan's id (a deployer keyed on it applies nothing)
// and still counts as a decision; one that changes a configuration gets the next id.
TEST(Controller, ADecisionThatKeepsWhatRunsKeepsThePlanId) {
  const Workload w = scenario();
  SimTestbed sim;
  ControllerOptions o;
  o.solver = "exhaustive";
  o.learning.enabled = false;
  Controller c(Context{}, w, std::make_unique<SimSource>(sim, 1.0), o);
  auto first = c.replan("start");
  ASSERT_TRUE(first.ok() && *first);
  EXPECT_EQ((**first).id, 1);
  EXPECT_EQ((**first).decision, 1);
  // Nothing changed: an exact solver over the same predictions finds the same plan.
  auto again = c.replan("requested");
  ASSERT_TRUE(again.ok() && *again);
  ASSERT_EQ((**again).config, (**first).config);
  EXPECT_EQ((**again).id, 1);
  EXPECT_EQ((**again).decision, 2);
  EXPECT_EQ(c.plan()->id, 1);
  // Observations of the plan in force are still its own (not stale).
  ModelObservation ob;
  ob.model = 1;
  ob.local = (**again).config[1];
  ob.measured[0] = 10;
  EXPECT_EQ(c.observe(std::span(&ob, 1), (**first).id).stale, 0u);
  // A model arrives: what runs changes, and the plan gets the next id.
  Workload with = w;
  with.models[2].active = true;
  c.set_workload(with);
  auto arrived = c.replan("event");
  ASSERT_TRUE(arrived.ok() && *arrived);
  EXPECT_NE((**arrived).config[2], kAbsent);
  EXPECT_EQ((**arrived).id, 2);
  EXPECT_EQ((**arrived).decision, 3);
}

// A demand change reopens the model's learners: the bound widens at once (before any window at
// the new demand), and a replay of the stored samples, which say where it happened, rebuilds the
// same state as the live controller, a serve that restarts after the change included.
TEST(Controller, ADemandChangeWidensTheBoundAndReplaysTheSame) {
  Workload w = scenario();
  SimTestbed sim;
  Controller a(Context{}, w, std::make_unique<SimSource>(sim, 0.5), ControllerOptions{});
  std::vector<LearningSample> taught;
  auto learn = [&](int windows) {
    auto d = a.replan("learning");
    ASSERT_TRUE(d.ok() && *d);
    for (int k = 0; k < windows; ++k) {
      const Measurement m =
          sim.measure(Context{.seed = static_cast<std::uint64_t>(taught.size() + 1)}, a.workload(),
                      (**d).config, MeasureOptions(10));
      a.observe(observations(m, (**d).config), (**d).id, &taught);
    }
  };
  learn(8);
  auto narrowed = a.what_if(a.plan()->config);
  ASSERT_TRUE(narrowed.ok());
  TimelineEvent e;
  e.kind = TimelineEvent::Kind::kDemand;
  e.model = 0;
  e.demand = w.models[0].demand;
  e.demand.rps = 2.5;
  a.apply(e);
  auto reopened = a.what_if(a.plan()->config);
  ASSERT_TRUE(reopened.ok());
  EXPECT_GT(reopened->margins[0].ttft, narrowed->margins[0].ttft);
  EXPECT_NEAR(reopened->margins[1].latency, narrowed->margins[1].latency, 1e-9);  // cam0 stays
  learn(3);
  bool marked = false;
  for (const auto& s : taught) marked = marked || (s.model == "chat" && s.reopen);
  EXPECT_TRUE(marked);

  Workload now = w;
  now.models[0].demand = e.demand;
  Controller b(Context{}, now, std::make_unique<SimSource>(sim, 0.5), ControllerOptions{});
  expect_replay_matches(a, b, taught);
  b.restore(*a.plan());
  auto replayed = b.what_if(a.plan()->config);
  auto live = a.what_if(a.plan()->config);
  ASSERT_TRUE(replayed.ok() && live.ok());
  EXPECT_NEAR(replayed->margins[0].ttft, live->margins[0].ttft, 1e-6);
}

// Exploration (LearningOptions::explore_sd) is optimism of the objective only: a configuration
// never measured is ranked with a higher throughput by explore_sd standard deviations of what
// is not known of it, one measured for a while hardly at all; its SLA latencies and margins are
// those it would have without exploring, and a min_throughput floor is never relaxed.
TEST(Controller, ExplorationRaisesOnlyTheThroughputOfWhatIsNotKnownYet) {
  Workload w = scenario();
  w.models[1].sla.min_throughput = 20;  // cam0: a throughput floor
  SimTestbed sim;
  auto controller = [&](double explore) {
    ControllerOptions o;
    o.solver = "greedy";
    o.learning.explore_sd = explore;
    return std::make_unique<Controller>(Context{}, w, std::make_unique<SimSource>(sim, 0.8), o);
  };
  auto calm = controller(0);
  auto bold = controller(1);
  auto d0 = calm->replan("start");
  auto d1 = bold->replan("start");
  ASSERT_TRUE(d0.ok() && *d0 && d1.ok() && *d1);
  // Both learn the same windows of one plan.
  const JointConfig ran = (**d0).config;
  for (int k = 0; k < 6; ++k) {
    const Measurement m =
        sim.measure(Context{.seed = static_cast<std::uint64_t>(k + 1)}, w, ran, MeasureOptions(10));
    calm->observe(observations(m, ran), (**d0).id);
    if ((**d1).config == ran) bold->observe(observations(m, ran), (**d1).id);
  }
  if ((**d1).config != ran) GTEST_SKIP() << "the two controllers planned differently";
  JointConfig other = ran;  // chat in a configuration never run
  other[0] = ran[0] == 0 ? 1 : 0;
  std::vector<double> lifts;
  for (const JointConfig& c : {ran, other}) {
    auto a = calm->what_if(c);
    auto b = bold->what_if(c);
    ASSERT_TRUE(a.ok() && b.ok());
    lifts.push_back(b->predicted[0].throughput / a->predicted[0].throughput);
    EXPECT_EQ(b->predicted[0].ttft_ms_p95, a->predicted[0].ttft_ms_p95);
    EXPECT_EQ(b->margins[0].ttft, a->margins[0].ttft);
    EXPECT_EQ(b->predicted[1].throughput, a->predicted[1].throughput);  // cam0's floor
  }
  // Measured six times, a little is still unknown (exp(sd) − 1 of a few %); never measured,
  // its configuration's own doubt (the prior sd of 0.1 and more) adds to it.
  EXPECT_GT(lifts[0], 1.0);
  EXPECT_LT(lifts[0], 1.08);
  EXPECT_GT(lifts[1], lifts[0] + 0.05);
}

TEST(Controller, DeterministicBySeed) {
  const Workload w = scenario();
  SimTestbed sim;
  auto ra = run(w, sim, 0.7, true, "ga");
  auto rb = run(w, sim, 0.7, true, "ga");
  ASSERT_TRUE(ra.ok() && rb.ok());
  for (std::size_t i = 0; i < ra->intervals.size(); ++i) {
    EXPECT_EQ(ra->intervals[i].plan, rb->intervals[i].plan);
    EXPECT_EQ(ra->intervals[i].measured_utility, rb->intervals[i].measured_utility);
  }
}

}  // namespace
}  // namespace corun::controller_test

#include <cmath>
#include <filesystem>

#include "corun/core/atomic_file.h"
#include "corun/runtime/report.h"
#include "../core/temp_dir.h"

namespace corun::controller_test {
namespace {

TEST(Report, JsonAndHtmlCarryTheLedger) {
  const Workload w = scenario();
  SimTestbed sim;
  auto r = run(w, sim, 0.4, true);
  ASSERT_TRUE(r.ok());
  const testing::TempDir scratch("corun-report-test");
  const std::filesystem::path dir = scratch.path() / "report";
  ASSERT_TRUE(write_report(*r, w, dir).ok());
  const auto j = nlohmann::json::parse(*read_file(dir / "report.json"));
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["testbed"], "sim");
  EXPECT_EQ(j["learning"], true);
  EXPECT_EQ(j["intervals"].size(), r->intervals.size());
  EXPECT_EQ(j["summary"]["sla_violations"], r->sla_violations());
  EXPECT_TRUE(j["intervals"][1]["models"][0].contains("margin"));
  EXPECT_TRUE(j["intervals"][1]["models"][0].contains("learning"));
  const auto html = *read_file(dir / "report.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("cam1: latency p95"), std::string::npos);
  EXPECT_NE(html.find("chat: TTFT p95"), std::string::npos);
  EXPECT_NE(html.find("chat: TPOT p95"), std::string::npos);
  EXPECT_NE(html.find("planned bound"), std::string::npos);
  EXPECT_NE(html.find("Prediction error"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);  // self-contained, static
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace corun::controller_test

#include "corun/eval/scheduler_eval.h"

namespace corun::controller_test {
namespace {

TEST(SchedulerEval, ScoresEverySolverAndLearningModeOnEveryScenario) {
  const Workload w = scenario();
  SimTestbed sim;
  SourceFactory factory = [&](const Workload&) -> Result<std::unique_ptr<PredictorSource>> {
    return std::unique_ptr<PredictorSource>(std::make_unique<SimSource>(sim, 1.0));
  };
  SchedulerEvalOptions o;
  o.solvers = {"exhaustive", "greedy"};
  o.learning = {false, true};
  auto rows = evaluate_scheduler(Context{}, {w}, sim, factory, o);
  ASSERT_TRUE(rows.ok()) << rows.error().what();
  ASSERT_EQ(rows->size(), 4u);
  const auto& ex = (*rows)[0];
  EXPECT_EQ(ex.solver, "exhaustive");
  EXPECT_FALSE(ex.learning);
  EXPECT_TRUE((*rows)[2].learning);
  EXPECT_EQ(ex.gap_to_exhaustive_pct, 0.0);
  EXPECT_GE(ex.decisions, 3u);  // start, arrival, demand change
  // The source predicts from the testbed with another seed: near the oracle, not beyond it.
  EXPECT_GE(ex.gap_to_oracle_pct, 0.0);
  EXPECT_LT(ex.gap_to_oracle_pct, 25.0);
  EXPECT_GE(ex.gap_to_oracle_1_pct, 0.0);
  const auto& greedy = (*rows)[1];
  EXPECT_GE(greedy.gap_to_exhaustive_pct, 0.0);
  EXPECT_GT(greedy.decision_ms_p50, 0.0);
  const auto j = to_json(greedy);
  for (const char* k :
       {"scenario", "solver", "learning", "gap_to_exhaustive_pct", "gap_to_oracle_pct",
        "gap_to_oracle_1_pct", "sla_violations", "breach_rate", "drift", "decision_ms_p50",
        "decision_ms_p99", "interval_gap_to_oracle_pct"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["learning"], "off");
  // One gap per interval; the median is the row's gap_to_oracle_pct.
  ASSERT_EQ(ex.interval_gap_pct.size(), ex.intervals);
  std::vector<double> gaps;
  for (const double g : ex.interval_gap_pct) {
    if (std::isfinite(g)) gaps.push_back(g);
  }
  ASSERT_FALSE(gaps.empty());
  std::sort(gaps.begin(), gaps.end());
  const std::size_t h = gaps.size() / 2;
  const double mid = gaps.size() % 2 == 1 ? gaps[h] : 0.5 * (gaps[h - 1] + gaps[h]);
  EXPECT_NEAR(mid, ex.gap_to_oracle_pct, 1e-9);
  EXPECT_EQ(j["interval_gap_to_oracle_pct"].size(), ex.intervals);
}

TEST(SchedulerEval, RunsEachTransitionModeAsARowAndCountsWhatTheTestbedCharged) {
  const Workload w = scenario();
  SimTestbed sim;
  SourceFactory factory = [&](const Workload&) -> Result<std::unique_ptr<PredictorSource>> {
    return std::unique_ptr<PredictorSource>(std::make_unique<SimSource>(sim, 1.0));
  };
  SchedulerEvalOptions o;
  o.solvers = {"exhaustive"};
  o.transitions = {true, false};
  o.oracle = false;
  o.exhaustive_gap = false;
  auto rows = evaluate_scheduler(Context{}, {w}, sim, factory, o);
  ASSERT_TRUE(rows.ok()) << rows.error().what();
  ASSERT_EQ(rows->size(), 2u);
  const auto& aware = (*rows)[0];
  const auto& ignore = (*rows)[1];
  EXPECT_TRUE(aware.transitions_aware);
  EXPECT_FALSE(ignore.transitions_aware);
  EXPECT_EQ(to_json(aware)["transitions"], "aware");
  EXPECT_EQ(to_json(ignore)["transitions"], "ignore");
  for (const char* k : {"restarts", "reloads", "downtime_s"}) {
    EXPECT_TRUE(to_json(ignore).contains(k)) << k;
  }
  // Priced, the planner changes no more than when every change is free to it.
  EXPECT_LE(aware.restarts + aware.reloads, ignore.restarts + ignore.reloads);
  EXPECT_GE(aware.downtime_s, 0.0);
}

}  // namespace
}  // namespace corun::controller_test
