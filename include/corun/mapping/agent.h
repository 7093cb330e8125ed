#pragma once

// Agents read only the monitor's Observation and answer with an action: a mapping to run,
// reprobes to measure, or "done" with a final mapping. The executor keeps authority: every
// proposed mapping is validated (DAG, VRAM) before it runs.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/mapping/monitor.h"
#include "corun/mapping/policy.h"

namespace corun::mapping {

/// @brief One step of an agent.
struct AgentAction {
  std::optional<Mapping> mapping;    ///< run this next (becomes current); or the final one
  std::vector<ProbeRequest> probes;  ///< reprobes around the current mapping (after `mapping`)
  bool done = false;                 ///< stop; the final mapping is `mapping` or the current
  std::string reason;                ///< why, in the agent's words
  std::vector<std::string> log;      ///< retries, fallbacks and their reasons
};

/// @brief An agent: a function of the observation (it sees nothing else).
class Agent {
 public:
  virtual ~Agent() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// @brief The next action. Errors end the policy run (the LLM agent never returns one: it
  /// falls back to a deterministic agent instead).
  virtual Result<AgentAction> act(const Observation& observation) = 0;
};

/// @brief Settings of the built-in agent.
struct BuiltinAgentOptions {
  /// Smallest improvement worth a move, relative to the current makespan: below it two
  /// mappings are treated as equal (the evaluation calls 1 % "optimal").
  double min_gain = 0.002;
};

/// @brief A deterministic agent that reasons only from the observation: start from the
/// static profile (each tool on its faster side), then alternate probe -> propose: ask the
/// monitor for every useful single move and GPU<->CPU swap around the current mapping, re-ask
/// the ones it calls noisy, and move to the best significant improvement; stop when no move
/// or swap improves. It skips probes the observation already rules out: gpu_now vs gpu_queue
/// when every GPU footprint fits the budget at once (they behave identically), and moves that
/// put a tool where its standalone time alone exceeds the current makespan.
class BuiltinAgent final : public Agent {
 public:
  explicit BuiltinAgent(BuiltinAgentOptions options = {}) : options_(options) {}
  [[nodiscard]] std::string_view name() const override { return "builtin"; }
  Result<AgentAction> act(const Observation& observation) override;

  /// @brief The first mapping it proposes: each tool on its faster standalone side
  /// (gpu_queue for the GPU), cpu when it has no GPU option.
  static Mapping initial_mapping(const Observation& observation);

 private:
  BuiltinAgentOptions options_;
};

/// @brief The "agent" policy: a Monitor, an Agent, and the executor's validation between
/// them. Stops when the agent says done, or after max_steps actions (then keeps the current
/// mapping).
class AgentPolicy final : public Policy {
 public:
  explicit AgentPolicy(std::shared_ptr<Agent> agent, int max_steps = 60,
                       MonitorOptions monitor = {})
      : agent_(std::move(agent)), max_steps_(max_steps), monitor_(monitor) {}
  [[nodiscard]] std::string_view name() const override { return "agent"; }
  Result<PolicyResult> decide(TrialRunner& runner, const Context& ctx) override;

 private:
  std::shared_ptr<Agent> agent_;
  int max_steps_;
  MonitorOptions monitor_;
};

}  // namespace corun::mapping
