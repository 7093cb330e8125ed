// The monitor (rounds, paired reprobes, hints) and the built-in agent, on hand-sized problems
// and on the 13 scenarios of workloads/tools plus 100 generated ones.
#include "corun/mapping/agent.h"

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <set>

#include "corun/catalog/catalog.h"
#include "corun/eval/placement_eval.h"
#include "test_util.h"

namespace corun::mapping::agent_test {
namespace {

using testing::make_problem;
constexpr auto kNow = Placement::kGpuNow;
constexpr auto kQueue = Placement::kGpuQueue;
constexpr auto kCpu = Placement::kCpu;

std::size_t count_hints(const Observation& o, Hint::Kind k) {
  std::size_t n = 0;
  for (const auto& h : o.hints) n += h.kind == k ? 1 : 0;
  return n;
}

TEST(Monitor, ProposalOpensARoundAndListsUnmeasuredMovesAndSwaps) {
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "small", {}, 0}}, 10);
  Executor ex(p);
  TrialRunner runner(ex);
  Monitor m(runner, Context{.seed = 3});
  EXPECT_FALSE(m.observe().current);
  m.execute(Mapping{kQueue, kCpu});
  const Observation o = m.observe();
  EXPECT_EQ(o.round, 1);
  EXPECT_EQ(o.executions, 1u);
  ASSERT_TRUE(o.current_stat);
  EXPECT_EQ(o.current_stat->proposals, 1u);
  // Moves: a -> gpu_now, a -> cpu, b -> gpu_now, b -> gpu_queue; swap a <-> b.
  EXPECT_EQ(count_hints(o, Hint::Kind::kUnmeasured), 5u);
  EXPECT_TRUE(o.probes.empty());
}

TEST(Monitor, SymmetricReprobeMeasuresBothSidesUnderOneCondition) {
  auto s = testing::make_scenario({{"a", "conv", {}, 0}, {"b", "small", {}, 0}}, 10);
  s.noise = 0.05;
  auto p = PlacementProblem::build(s, testing::round_catalog(), testing::round_device());
  ASSERT_TRUE(p.ok());
  Executor ex(*p);
  TrialRunner runner(ex);
  Monitor m(runner, Context{.seed = 3});
  m.execute(Mapping{kQueue, kCpu});
  // First reprobe joins the proposal's round: its run is the baseline (1 execution).
  const std::vector<ProbeRequest> probes = {ProbeRequest::move(0, kNow),
                                            ProbeRequest::move(1, kQueue)};
  m.reprobe(probes);
  EXPECT_EQ(runner.executions(), 3u);
  Observation o = m.observe();
  ASSERT_EQ(o.probes.size(), 2u);
  // gpu_now and gpu_queue behave identically when VRAM is ample, and the noise is keyed by
  // (tool, CPU or GPU side): under one condition the paired difference is exactly zero.
  EXPECT_EQ(o.probes[0].delta_ms.mean, 0.0);
  // Moving b (100 ms on the CPU) to the GPU (2.1 ms + a little sharing) saves ~98 ms; the
  // makespan becomes a's 32 ms (b's kernels overlap a's upload).
  EXPECT_LT(o.probes[1].delta_ms.mean, -60.0);
  // A zero difference is within noise: the monitor says so rather than deciding.
  EXPECT_GE(count_hints(o, Hint::Kind::kNoisy), 1u);
  // Asking again opens a new round and re-measures the baseline: 1 + 1 executions.
  m.reprobe(std::vector<ProbeRequest>{ProbeRequest::move(0, kNow)});
  EXPECT_EQ(runner.executions(), 5u);
  o = m.observe();
  EXPECT_EQ(o.round, 2);
  EXPECT_EQ(o.probes[0].delta_ms.n, 2u);
  EXPECT_EQ(o.current_stat->makespan_ms.n, 2u);
}

TEST(Monitor, InvalidProbesAreReportedNotRun) {
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "small", {}, 0}}, 1);
  Executor ex(p);
  TrialRunner runner(ex);
  Monitor m(runner, Context{.seed = 3});
  m.execute(Mapping{kCpu, kQueue});
  // conv (2 GB) cannot go on the GPU under a 1 GB budget; a swap needs two different tools;
  // b is already on gpu_queue.
  m.reprobe(std::vector<ProbeRequest>{ProbeRequest::move(0, kQueue), ProbeRequest::swap(0, 0),
                                      ProbeRequest::move(1, kQueue)});
  EXPECT_EQ(runner.executions(), 1u);
  const std::string err = m.observe().last_error;
  EXPECT_NE(err.find("may not run on gpu_queue"), std::string::npos) << err;
  EXPECT_NE(err.find("already on gpu_queue"), std::string::npos) << err;
}

TEST(Monitor, KeepsRunningAveragesPerContext) {
  // Alone on the GPU, with one GPU co-runner, and waiting for VRAM.
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "conv", {}, 0}}, 3);
  Executor ex(p);
  TrialRunner runner(ex);
  Monitor m(runner, Context{.seed = 3});
  m.execute(Mapping{kQueue, kQueue});  // b waits for a: "vram_pressure"; a runs "alone"
  std::set<std::string> contexts;
  for (const auto& s : m.observe().tool_stats) contexts.insert(s.context);
  EXPECT_TRUE(contexts.count("alone"));
  EXPECT_TRUE(contexts.count("vram_pressure"));
  const auto p2 = make_problem({{"a", "conv", {}, 0}, {"b", "conv", {}, 0}}, 10);
  Executor ex2(p2);
  TrialRunner runner2(ex2);
  Monitor m2(runner2, Context{.seed = 3});
  m2.execute(Mapping{kQueue, kQueue});
  ASSERT_FALSE(m2.observe().tool_stats.empty());
  EXPECT_EQ(m2.observe().tool_stats[0].context, "k=1");
}

TEST(Monitor, ObservationHoldsMeasurementsNotARecommendation) {
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "small", {}, 0}}, 10);
  Executor ex(p);
  TrialRunner runner(ex);
  Monitor m(runner, Context{.seed = 3});
  m.execute(Mapping{kQueue, kCpu});
  const auto j = to_json(m.observe());
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  const std::set<std::string> expected = {
      "scenario", "device",  "vram_budget_gb",   "round",      "executions", "noise_cv",
      "tools",    "current", "fastest_measured", "tool_stats", "probes",     "hints"};
  EXPECT_EQ(keys, expected);
}

TEST(BuiltinAgent, StartsFromTheFasterStandaloneSide) {
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "small", {}, 0}}, 10);
  Executor ex(p);
  TrialRunner runner(ex);
  Monitor m(runner, Context{.seed = 3});
  BuiltinAgent agent;
  auto a = agent.act(m.observe());
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(a->mapping);
  // conv: 32 ms GPU vs 2 s CPU; small: 2.1 ms GPU vs 100 ms CPU.
  EXPECT_EQ(*a->mapping, (Mapping{kQueue, kQueue}));
  EXPECT_FALSE(a->done);
}

/// Replays scripted actions; used to check what AgentPolicy does with bad proposals.
class ScriptedAgent final : public Agent {
 public:
  explicit ScriptedAgent(std::deque<AgentAction> script) : script_(std::move(script)) {}
  [[nodiscard]] std::string_view name() const override { return "scripted"; }
  Result<AgentAction> act(const Observation& o) override {
    seen_errors.push_back(o.last_error);
    if (script_.empty()) return Error("script exhausted");
    AgentAction a = script_.front();
    script_.pop_front();
    return a;
  }
  std::vector<std::string> seen_errors;

 private:
  std::deque<AgentAction> script_;
};

TEST(AgentPolicy, ExecutorRejectsInvalidProposalsAndTellsTheAgent) {
  const auto p = make_problem({{"a", "conv", {}, 0}, {"b", "small", {}, 0}}, 1);
  AgentAction bad;
  bad.mapping = Mapping{kQueue, kQueue};  // conv needs 2 GB of a 1 GB budget
  AgentAction good;
  good.mapping = Mapping{kCpu, kQueue};
  AgentAction done;
  done.done = true;
  auto agent = std::make_shared<ScriptedAgent>(std::deque<AgentAction>{bad, good, done});
  AgentPolicy policy(agent);
  Executor ex(p);
  TrialRunner runner(ex);
  auto r = policy.decide(runner, Context{.seed = 1});
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->mapping, (Mapping{kCpu, kQueue}));
  EXPECT_EQ(r->executions, 1u);  // the rejected proposal never ran
  ASSERT_EQ(agent->seen_errors.size(), 3u);
  EXPECT_NE(agent->seen_errors[1].find("above the budget"), std::string::npos);
}

const ToolCatalog& catalog() {
  static const ToolCatalog c = std::move(default_tool_catalog()).value();
  return c;
}

TEST(BuiltinAgent, OptimalOnAllThirteenScenariosWithFewerExecutionsThanBandit) {
  auto scenarios = load_scenario_dir(std::string(CORUN_SOURCE_DIR) + "/workloads/tools", catalog());
  ASSERT_TRUE(scenarios.ok()) << scenarios.error().what();
  ASSERT_EQ(scenarios->size(), 13u);
  std::set<std::string> kinds;
  for (const auto& s : *scenarios) {
    auto p = PlacementProblem::build(s, catalog(), Catalog::default_catalog());
    ASSERT_TRUE(p.ok()) << p.error().what();
    auto oracle = brute_force_oracle(*p);
    ASSERT_TRUE(oracle.ok());
    AgentPolicy agent(std::make_shared<BuiltinAgent>());
    const PlacementRow row = judge(*p, *oracle, agent, 0.01);
    EXPECT_TRUE(row.optimal) << s.name << ": " << row.makespan_ms << " vs "
                             << row.oracle_makespan_ms;
    // UCB1 must pull every one of its arms at least once before it can exploit.
    EXPECT_LT(row.executions, p->mapping_count()) << s.name;
    kinds.insert(s.kind);
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"serial", "contention", "memory"}));
}

TEST(BuiltinAgent, OptimalOnAtLeast90PercentOf100GeneratedScenarios) {
  const Device& dev = *Catalog::default_catalog().find_device("rtx3090");
  std::vector<PlacementProblem> problems;
  for (std::uint64_t seed = 1000; seed < 1100; ++seed) {
    const Scenario s = generate_scenario(Context{.seed = seed}, catalog(), dev);
    ASSERT_GE(s.nodes.size(), 4u);
    ASSERT_LE(s.nodes.size(), 8u);
    problems.push_back(std::move(PlacementProblem::build(s, catalog(), dev)).value());
  }
  EvalOptions opts;
  opts.policies = {"agent", "all-gpu"};
  opts.threads = 2;
  auto rows = evaluate(problems, opts);
  ASSERT_TRUE(rows.ok()) << rows.error().what();
  int agent_optimal = 0, all_gpu_optimal = 0;
  for (const auto& r : *rows) {
    if (r.policy == "agent") agent_optimal += r.optimal ? 1 : 0;
    if (r.policy == "all-gpu") all_gpu_optimal += r.optimal ? 1 : 0;
  }
  RecordProperty("agent_optimal", agent_optimal);
  EXPECT_GE(agent_optimal, 90);
  // The generator must produce scenarios where placement matters.
  EXPECT_LT(all_gpu_optimal, 80);
}

TEST(Generator, IsDeterministicBySeed) {
  const Device& dev = *Catalog::default_catalog().find_device("rtx3090");
  EXPECT_EQ(to_yaml(generate_scenario(Context{.seed = 42}, catalog(), dev)),
            to_yaml(generate_scenario(Context{.seed = 42}, catalog(), dev)));
  EXPECT_NE(to_yaml(generate_scenario(Context{.seed = 42}, catalog(), dev)),
            to_yaml(generate_scenario(Context{.seed = 43}, catalog(), dev)));
  // What it writes, the scenario parser reads back.
  const Scenario s = generate_scenario(Context{.seed = 42}, catalog(), dev);
  auto back = parse_scenario(to_yaml(s), "generated.yaml", catalog());
  ASSERT_TRUE(back.ok()) << back.error().what();
  EXPECT_EQ(to_yaml(*back), to_yaml(s));
}

}  // namespace
}  // namespace corun::mapping::agent_test
