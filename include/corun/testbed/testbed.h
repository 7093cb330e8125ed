#pragma once

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
#include "corun/space/space.h"
#include "corun/space/transition.h"
#include "corun/spec/workload.h"

namespace corun {

/// @brief What a testbed observed for one model over a measurement window.
struct ModelMetrics {
  std::size_t model = 0;  ///< index into Workload::models
  std::string name;
  std::string config;  ///< ModelSpec::describe() of its local configuration
  double latency_ms_p50 = 0;  ///< vision/encoder: request latency; LLM: end-to-end request
  double latency_ms_p95 = 0;
  double throughput = 0;  ///< frames/s (vision), requests/s (encoder, speech), tokens/s (LLM)
  /// LLM only; none when the window saw no request arrive (a testbed that measures real
  /// arrivals can draw none): nothing observed, not a latency of zero or of the window.
  std::optional<double> ttft_ms_p95;
  /// LLM only; none when no request produced a second token inside the window.
  std::optional<double> tpot_ms_p95;
  /// Seconds of the window this model was without a server, measured by a testbed that runs
  /// its transitions for real (torch-cpu: from stopping the old copy to the new one being
  /// ready to serve; 0 when it served throughout); none from a testbed that models them (the
  /// sim: its charge is TransitionCharge::outage_s).
  std::optional<double> downtime_s;
  /// LLM only: preemptions per served request (vLLM's `vllm:num_preemptions_total` over its
  /// requests), from a testbed that knows them (the sim: a full KV cache); none otherwise.
  std::optional<double> preemptions_per_request;
  std::string error;                  ///< non-empty when the model could not run

  [[nodiscard]] bool ok() const { return error.empty(); }
};

/// @brief Aggregate state of the GPU over the window.
struct GpuState {
  double sm_util = 0;      ///< 0..1, fraction of SM-time busy
  double mem_bw_util = 0;  ///< 0..1, fraction of peak DRAM bandwidth
  double vram_used_gb = 0;
  double power_w = 0;
  double clock_mhz = 0;
};

/// @brief Everything a testbed observed for one joint configuration.
struct Measurement {
  std::string testbed;
  std::string device;
  std::vector<ModelMetrics> models;  ///< one per running model, in workload order
  GpuState gpu;
  std::string error;  ///< whole-run failure (e.g. out of VRAM); models carry it too

  [[nodiscard]] bool ok() const { return error.empty(); }
};

/// @brief What acts on a testbed besides the configuration it measures, and what the planner
/// is never told: an unmanaged co-tenant and an administrator's power limit. Drift events of a
/// workload's timeline change it (apply()); the online loop hands it to the testbed only.
struct Conditions {
  Interference interference;  ///< the co-tenant's share (zeros: none)
  double power_cap_w = 0;     ///< board power limit in W (0: the device's TDP)
  /// The GPU's hidden physical parameters are drawn from this seed (the simulator's
  /// SimTruth::perturbed; 0: the testbed's own truth). Real testbeds ignore it.
  std::uint64_t perturb_seed = 0;

  /// @brief Whether anything acts on the testbed.
  [[nodiscard]] bool any() const {
    return interference.sm_util > 0 || interference.bandwidth_util > 0 || power_cap_w > 0 ||
           perturb_seed != 0;
  }
  /// @brief Applies a drift event (kInterference, kPowerCap, kPerturb; others are ignored) and
  /// returns its description ("interference sm 0.3 bw 0.4", "power cap 250 W", ...).
  std::string apply(const TimelineEvent& e);
  /// @brief A key that identifies the conditions (for caches of measurements).
  [[nodiscard]] std::string key() const;
};

/// @brief A transition of one model that overlaps a measurement window, as the serving stack
/// really pays it (space/transition.h): seconds without a server, slower first requests, and
/// the VRAM of a second copy held during a make-before-break swap.
struct TransitionCharge {
  std::size_t model = 0;     ///< index into Workload::models
  double outage_s = 0;       ///< seconds of the window without a server, from its start
  int warmup_requests = 0;   ///< requests in this window served by a copy still warming up
  double warmup_slowdown = 1;
  double extra_vram_bytes = 0;  ///< a second copy's memory held during the window
  /// Seconds of the window during which a make-before-break swap's new copy runs kernels
  /// beside everyone (its profiling run, graph capture, warm-up inferences), keeping
  /// swap_gpu_share of the SMs and DRAM bandwidth busy: the co-runners, the old copy
  /// included, run slower then. The sim measures the window with and without that load.
  double swap_gpu_s = 0;
  double swap_gpu_share = 0;
  /// The class of a change that begins at this window's start (kReload: the model reloaded in
  /// its server; kRestart: a new server process; make-before-break when outage_s is 0), or
  /// kNone when the window pays what a change begun earlier still owes. A testbed that runs
  /// real servers (torch-cpu) carries the change out; the sim charges the fields above.
  Actuation begins = Actuation::kNone;
};

/// @brief What a charge does to a model's metrics over a window (the same rule for every
/// testbed that does not run a real restart): requests of an LLM, encoder or speech model
/// that arrive during an outage queue at the gateway in front of it (as Envoy or an
/// ingress holds a request while no endpoint is ready) and are served when it is back, so
/// the waiting of the arrivals of the outage enters the window's p95s; frames of a vision
/// stream are dropped while no server runs (a live stream does not wait), so its throughput
/// falls. The first requests after a (re)start run warmup_slowdown times slower: they raise a
/// p95 in proportion to the share of the window's requests they are, up to 5 %.
void charge_transition(const ModelSpec& m, const TransitionCharge& c, double window_s,
                       ModelMetrics& mm);

/// @brief How to measure: window length and the conditions the testbed runs under (the seed
/// of a measurement's noise is its Context's).
struct MeasureOptions {
  MeasureOptions(double window = 10, Conditions c = {}, bool with_noise = true)
      : window_s(window), conditions(c), noise(with_noise) {}

  double window_s = 10;
  Conditions conditions;
  /// Transitions under way in this window (corun run, from the plan in force before it).
  std::vector<TransitionCharge> transitions;
  /// false: report the expected values, without measurement noise (a digital twin's view; a
  /// real testbed ignores it and always measures).
  bool noise = true;
};

/// @brief A source of ground truth: runs a joint configuration and reports what it observed.
/// Implementations never consult a surrogate. measure() is const and thread-safe for the
/// simulator (it may be called from several threads at once).
///
/// @code
///   Result<std::unique_ptr<Testbed>> tb = make_testbed("sim");  // or "sim:perturb=7"
///   if (!tb) return tb.error();                        // unknown names get a suggestion
///   const JointConfig c(w.models.size(), 0);           // local configuration 0 of every model
///   const MeasureOptions quiet(10, {}, false);         // 10 s window, no noise
///   const Measurement m = (*tb)->measure(Context{.seed = 1}, w, c, quiet);
///   for (const ModelMetrics& mm : m.models) {
///     if (mm.ok()) std::printf("%s: p95 %.1f ms\n", mm.name.c_str(), mm.latency_ms_p95);
///   }
/// @endcode
class Testbed {
 public:
  virtual ~Testbed() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// @brief Measures `config` (one local index per model of `w`; kAbsent = not running),
  /// with measurement noise drawn from `ctx.seed` (the same seed, the same numbers).
  virtual Measurement measure(const Context& ctx, const Workload& w,
                              std::span<const std::int32_t> config,
                              const MeasureOptions& options) const = 0;
};

/// @brief The conditions at time 0 of a workload's timeline (its drift events at 0 s): what the
/// testbed runs under while corun profiles it before the timeline starts.
Conditions initial_conditions(const Workload& w);

/// @brief Names accepted by make_testbed.
std::vector<std::string> testbed_names();
/// @brief Makes a testbed built outside this layer (e.g. `torch-cpu`, which needs libtorch)
/// available to make_testbed under `name`. Call before make_testbed; not thread-safe.
void register_testbed(std::string name, std::function<std::unique_ptr<Testbed>()> factory);
/// @brief Creates a testbed by name: "sim", "sim:perturb=SEED" (the simulator with hidden
/// physical parameters drawn from SEED: a GPU that differs from its catalog description, see
/// SimTruth), or a registered name; unknown names get a suggestion.
Result<std::unique_ptr<Testbed>> make_testbed(std::string_view name);

}  // namespace corun
