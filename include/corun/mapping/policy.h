#pragma once

// Placement policies behind one interface. Each decides a final mapping for a problem; the
// exploring ones (bandit, brute-force, agent) run candidate mappings through a TrialRunner,
// which counts every DAG run and only ever returns noisy, observed times.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/mapping/executor.h"
#include "corun/mapping/heft.h"
#include "corun/mapping/problem.h"

namespace corun::mapping {

/// @brief The exploring policies' only access to the executor: noisy runs, each counted.
class TrialRunner {
 public:
  explicit TrialRunner(Executor& executor) : executor_(&executor) {}

  [[nodiscard]] const PlacementProblem& problem() const { return executor_->problem(); }
  /// @brief Runs a valid mapping with observation noise drawn from `ctx.seed`; counts one
  /// execution.
  RunResult run(const Context& ctx, std::span<const Placement> mapping);
  /// @brief Observed makespan in ms (+infinity when a tool failed); counts one execution.
  double makespan_ms(const Context& ctx, std::span<const Placement> mapping);
  /// @brief DAG runs so far.
  [[nodiscard]] std::uint64_t executions() const { return executions_; }

 private:
  Executor* executor_;
  std::uint64_t executions_ = 0;
};

/// @brief A mapping a policy ran and set aside because its burst is predicted to break a
/// co-running model's SLA.
struct Exclusion {
  Mapping mapping;
  std::vector<SlaOutcome> predicted;  ///< the SLAs predicted broken, and by how much
};

/// @brief What a policy decided and what it cost.
struct PolicyResult {
  Mapping mapping;
  std::uint64_t executions = 0;                 ///< DAG runs spent exploring
  std::optional<double> predicted_makespan_ms;  ///< the policy's own model, when it has one
  std::vector<std::string> log;                 ///< decisions and fallbacks, in order
  std::vector<Exclusion> excluded;  ///< set aside to protect the co-runners (agent), fastest first
};

/// @brief A placement policy. decide() may be called for many problems in turn; policies keep
/// no state between calls except configuration.
class Policy {
 public:
  virtual ~Policy() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// @brief Chooses a mapping for runner.problem(). `ctx.seed` drives every random choice.
  virtual Result<PolicyResult> decide(TrialRunner& runner, const Context& ctx) = 0;
};

/// @brief CPU "processors" that list schedulers (HEFT, dmda) see: host cores divided by the
/// mean thread count of the DAG's tools (at least one).
std::size_t cpu_slots(const PlacementProblem& problem);

/// @brief The HEFT instance of a placement problem: processor 0 is the GPU (standalone
/// end-to-end GPU time; +infinity where the GPU is not allowed), processors 1..cpu_slots are
/// CPU slots (standalone CPU time). Edge costs are zero: tool outputs return to host memory
/// whatever the placement, and the PCIe copies are inside the GPU time.
HeftProblem heft_instance(const PlacementProblem& problem);

/// @brief GPU-first, as agent frameworks default: every tool that may use the GPU goes to
/// gpu_queue (a framework that waits for memory instead of crashing), the rest to cpu.
class AllGpuPolicy final : public Policy {
 public:
  [[nodiscard]] std::string_view name() const override { return "all-gpu"; }
  Result<PolicyResult> decide(TrialRunner& runner, const Context& ctx) override;
};

/// @brief HEFT on heft_instance(); tasks on processor 0 go to gpu_queue, others to cpu.
/// Models neither VRAM nor co-execution on the GPU (the GPU is one exclusive processor).
class HeftPolicy final : public Policy {
 public:
  [[nodiscard]] std::string_view name() const override { return "heft"; }
  Result<PolicyResult> decide(TrialRunner& runner, const Context& ctx) override;
};

/// @brief StarPU 1.3.10's dmda rule. Tasks are pushed when ready in dmda's own expected-time
/// timeline; for each worker w: start = max(queue_free(w), now + T_xfer), end = start +
/// T_exec, fitness = alpha (end - best_end) + beta T_xfer + gamma energy with alpha = beta =
/// 1, gamma = 1000 and energy 0 (no energy model here). T_xfer = latency + 2 n_gpus size /
/// bandwidth for the inputs of a GPU worker, 0 for CPU workers; T_exec is the GPU compute
/// time without copies (StarPU's history model times the codelet alone). GPU -> gpu_queue.
class DmdaPolicy final : public Policy {
 public:
  [[nodiscard]] std::string_view name() const override { return "dmda"; }
  Result<PolicyResult> decide(TrialRunner& runner, const Context& ctx) override;
};

/// @brief UCB1 over complete mappings (one arm per valid mapping): pull every arm once, then
/// the arm maximising mean + sqrt(2 ln t / n). Reward = lower_bound / observed makespan in
/// (0, 1] (0 for a failed run), where lower_bound is the critical path with each tool at its
/// faster standalone time. After budget_factor x arms pulls, returns the best mean.
class BanditPolicy final : public Policy {
 public:
  explicit BanditPolicy(double budget_factor = 2.0, std::uint64_t max_arms = 100000)
      : budget_factor_(budget_factor), max_arms_(max_arms) {}
  [[nodiscard]] std::string_view name() const override { return "bandit"; }
  Result<PolicyResult> decide(TrialRunner& runner, const Context& ctx) override;

 private:
  double budget_factor_;
  std::uint64_t max_arms_;
};

/// @brief Executes every valid mapping once under the same conditions (one noise seed for all:
/// common random numbers) and keeps the fastest observed.
class BruteForcePolicy final : public Policy {
 public:
  explicit BruteForcePolicy(std::uint64_t max_mappings = 1000000) : max_(max_mappings) {}
  [[nodiscard]] std::string_view name() const override { return "brute-force"; }
  Result<PolicyResult> decide(TrialRunner& runner, const Context& ctx) override;

 private:
  std::uint64_t max_;
};

/// @brief Names accepted by make_policy: all-gpu, heft, dmda, bandit, brute-force, agent.
const std::vector<std::string>& policy_names();

class Agent;

/// @brief Creates a classical policy by name, or "agent" driving `agent` (required then).
/// Unknown names get a suggestion.
Result<std::unique_ptr<Policy>> make_policy(std::string_view name,
                                            std::shared_ptr<Agent> agent = nullptr);

}  // namespace corun::mapping
