#pragma once

// What it costs a real serving stack to go from one local configuration of a model to another,
// and from one joint configuration to the next: the actuation class of each knob per stack
// (catalog/actuation.yaml), the downtime, the VRAM held during a make-before-break swap, and
// the order in which the models of a plan change. The planner prices transitions with it, the
// testbeds charge them, `corun run` and `corun serve` print them.
//
// @code
// const ActuationTable& table = ActuationTable::builtin();
// ModelTransition t = model_transition(table, w.device, w.models[0], old_settings, new_settings);
// if (t.action == Actuation::kRestart) ...  // t.downtime_s seconds without a server
// JointTransition j = joint_transition(table, w, plan_in_force, next_plan);
// @endcode

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "corun/catalog/catalog.h"
#include "corun/core/result.h"
#include "corun/space/space.h"
#include "corun/spec/knobs.h"
#include "corun/spec/workload.h"

namespace corun {

/// @brief What applying a knob change takes, cheapest first: the order is the cost order.
enum class Actuation { kNone, kLive, kReload, kRestart };

/// @brief "none", "live", "reload", "restart".
std::string_view to_string(Actuation a);

/// @brief A serving stack a model's configuration is applied to.
enum class Stack { kVllm, kTriton, kStream };

/// @brief "vllm", "triton", "stream".
std::string_view to_string(Stack s);

/// @brief One stack's declarations: the class of each knob it applies, and its cost model.
struct StackActuation {
  Stack stack = Stack::kVllm;
  std::vector<ModelFamily> serves;
  /// Per KnobId (in its order); none: the knob means nothing to the families it serves.
  std::array<std::optional<Actuation>, 7> knob;
  double process_start_s = 0;  ///< a new server process until it loads weights
  double compile_s = 0;        ///< compilation at start (torch.compile)
  double graph_capture_s = 0;  ///< CUDA graph capture at start
  double engine_load_s = 0;    ///< a model (re)load inside a running server, weights aside
  int warmup_requests = 0;     ///< requests after a (re)start that run slower
  double warmup_slowdown = 1;  ///< by this factor
  /// Seconds at the end of a (re)start during which the starting copy runs kernels (a
  /// profiling run, CUDA graph capture, warm-up inferences), and the share of the SMs and DRAM
  /// bandwidth it keeps busy then: what co-runners lose to a make-before-break swap.
  double start_gpu_s = 0;
  double start_gpu_share = 0;
};

/// @brief The actuation table of catalog/actuation.yaml. Immutable; thread-safe.
class ActuationTable {
 public:
  /// @brief Parses actuation.yaml text; errors name the file, the field path and the reason.
  static Result<ActuationTable> parse(std::string_view text, const std::string& file);
  /// @brief The catalog's actuation.yaml (the built-in one when the catalog has none).
  static Result<ActuationTable> from_catalog(const Catalog& catalog);
  /// @brief The table of Catalog::default_catalog(), parsed once. CHECKs that it parses (the
  /// built-in table is tested; an overlay's is validated by from_catalog where it is loaded).
  static const ActuationTable& builtin();

  [[nodiscard]] const StackActuation& stack(Stack s) const {
    return stacks_[static_cast<std::size_t>(s)];
  }
  /// @brief The stack that serves a family.
  [[nodiscard]] Stack stack_for(ModelFamily f) const {
    return defaults_[static_cast<std::size_t>(f)];
  }
  /// @brief The class of changing `knob` for a model of family `f` on its stack (kLive when
  /// the knob means nothing there: no stack reads it, so nothing stops).
  [[nodiscard]] Actuation knob_class(ModelFamily f, KnobId knob) const;

 private:
  std::array<StackActuation, 3> stacks_;
  std::array<Stack, 4> defaults_{};
};

/// @brief What one model's change from one local configuration to another takes.
struct ModelTransition {
  Actuation action = Actuation::kNone;
  Stack stack = Stack::kVllm;
  std::vector<KnobId> changed;  ///< knobs whose value changes
  double downtime_s = 0;  ///< a new copy starting, until it serves (0: none, or live)
  double load_s = 0;      ///< of which: weights over storage and PCIe
  int warmup_requests = 0;
  double warmup_slowdown = 1;
  double vram_old_bytes = 0;
  double vram_new_bytes = 0;
  double start_gpu_s = 0;      ///< StackActuation::start_gpu_s (reload, restart)
  double start_gpu_share = 0;  ///< StackActuation::start_gpu_share
  /// Make-before-break: the old copy serves until the new one is up (both held in VRAM for
  /// downtime_s); false: the model breaks first and serves nothing for downtime_s.
  bool make_before_break = false;
  /// @brief The seconds without service this transition costs (0 under make-before-break).
  [[nodiscard]] double outage_s() const { return make_before_break ? 0 : downtime_s; }
  /// @brief The GPU-seconds a make-before-break swap's new copy takes from the co-runners
  /// while the old copy still serves (0 after a break: the old copy's share is free then).
  [[nodiscard]] double swap_gpu_seconds() const { return swap_kernel_s() * start_gpu_share; }
  /// @brief Seconds at the end of a make-before-break swap during which the new copy runs its
  /// start-up kernels (0 after a break).
  [[nodiscard]] double swap_kernel_s() const {
    return make_before_break ? std::min(start_gpu_s, downtime_s) : 0;
  }
};

/// @brief The transition of model `m` from `from` to `to` on `device` (make_before_break not
/// decided here: false).
ModelTransition model_transition(const ActuationTable& table, const Device& device,
                                 const ModelSpec& m, const Settings& from, const Settings& to);

/// @brief One model's step in a joint transition.
struct TransitionStep {
  std::size_t model = 0;
  std::string name;
  std::int32_t from = kAbsent;  ///< local configuration before (kAbsent: not running)
  std::int32_t to = kAbsent;
  std::string from_config;  ///< ModelSpec::describe of each
  std::string to_config;
  ModelTransition change;
  int order = 0;  ///< 1, 2, ...: steps run one after the other in this order
};

/// @brief Every change between two joint configurations, with its order: make-before-break
/// where the VRAM of the old and new copy fits beside everyone else's, largest VRAM first;
/// the rest break first, the models that shrink before those that grow, so that no co-runner
/// is pushed out of memory during the swap.
struct JointTransition {
  std::vector<TransitionStep> steps;  ///< only models whose configuration changes, in order
  double vram_peak_bytes = 0;  ///< the most VRAM held at once during the transition
  double vram_bytes = 0;       ///< the device's

  [[nodiscard]] bool empty() const { return steps.empty(); }
  /// @brief Steps of class kRestart / kReload.
  [[nodiscard]] std::size_t count(Actuation a) const;
  /// @brief Seconds without service, summed over models.
  [[nodiscard]] double outage_s() const;
};

/// @brief The transition from `from` to `to` (models that start or stop count as restarts of
/// nothing; a model absent in both is skipped).
JointTransition joint_transition(const ActuationTable& table, const Workload& w,
                                 const JointConfig& from, const JointConfig& to);

/// @brief The JSON form (`corun run`'s report, serve's `GET /v1/plan`).
nlohmann::json to_json(const JointTransition& t);

}  // namespace corun
