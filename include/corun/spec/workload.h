#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/catalog/device.h"
#include "corun/catalog/mig.h"
#include "corun/catalog/model.h"
#include "corun/core/result.h"
#include "corun/core/yaml.h"
#include "corun/spec/demand_trace.h"
#include "corun/spec/knobs.h"
#include "corun/spec/telemetry_source.h"

namespace corun {

/// @brief The values a model may take for one knob (numeric encoding, see Settings::set).
struct KnobSpec {
  KnobId id;
  std::vector<double> values;
};

/// @brief Offered load, either a rate or a closed loop. Rate: frames per second (vision) or
/// requests per second (LLM, encoder, speech). Closed loop (benchmark mode, as perf_analyzer's
/// --concurrency-range): `concurrency` requests in flight, each sent when the previous answer
/// returns; a request is one full batch for batched models and one prompt plus generation for
/// an LLM. LLMs carry prompt and output lengths in both modes. The parser admits one mode only.
struct Demand {
  double fps = 0;
  double rps = 0;
  int prompt_tokens = 0;
  int output_tokens = 0;
  /// LLMs, optional: the longest prompt and the longest output a request may have (0: not
  /// given). They bound a request, not the mean load: the planner sizes the KV cache for the
  /// means, and `corun export` sets vLLM's --max-model-len to their sum (docs/export.md).
  /// When given, each is at least its mean.
  int max_prompt_tokens = 0;
  int max_output_tokens = 0;
  int concurrency = 0;  ///< requests in flight; 0 = rate demand (fps or rps)
  /// Burstiness of a rate demand's requests: the coefficient of variation of the gaps between
  /// arrivals. 1 = Poisson (what a written rate means); a trace demand (TraceDemand) measures it.
  /// LLM requests only: the sim's LLM queue waits scale with (cv² + cs²) / 2 (Allen-Cunneen).
  double arrival_cv = 1;

  /// @brief Whether the demand is a closed loop of `concurrency` requests in flight.
  [[nodiscard]] bool closed_loop() const { return concurrency > 0; }
  /// @brief Field-wise equality (a changed demand re-profiles a model).
  bool operator==(const Demand&) const = default;
};

/// @brief The most requests a closed-loop demand may keep in flight (perf_analyzer's sweeps
/// stop far below; a bound keeps the simulator's queues and a worker's bookkeeping small).
inline constexpr int kMaxConcurrency = 1024;

/// @brief The most camera streams one vision model takes (`streams:`).
inline constexpr std::size_t kMaxStreams = 256;

/// @brief An LLM's demand replayed from a request trace: `demand: {trace: FILE, scale: S,
/// start_s: T}` (docs/formats.md, "Demand from a trace"). Run time t is trace time start_s + t;
/// the demand of run interval [t, t + Δ) is what the trace's requests in that window show
/// (DemandTrace::window), its rate multiplied by `scale`. The demand the planner starts from is
/// that of the interval before start_s; after that, `corun run` tells the planner each interval's
/// demand once the interval has ended, as telemetry would.
struct TraceDemand {
  /// The smallest rate a window stands for: a window without requests offers (almost) nothing,
  /// and a rate of 0 would read as a closed loop. Equal to the least `rps` a workload may give.
  static constexpr double kMinRps = 1e-4;

  std::string file;   ///< as written in the workload
  std::filesystem::path path;  ///< resolved against the workload file's directory
  double scale = 1;   ///< multiplies every window's rate (as if the trace ran `scale` times as fast)
  double start_s = 0;  ///< trace seconds (after its first request) at the run's t = 0
  std::shared_ptr<const DemandTrace> trace;  ///< shared by copies of the workload; never null

  /// @brief The demand of run time [from_s, to_s): the window's rate times `scale` (at least
  /// kMinRps), its mean prompt and output lengths rounded (at least 1 token) and its arrival_cv.
  /// A window without requests keeps `before`'s lengths and burstiness: nothing was seen to
  /// change them.
  [[nodiscard]] Demand demand(double from_s, double to_s, const Demand& before) const;
  /// @brief The demand the planner knows at the run's start: the interval before start_s, with
  /// the lengths of all requests before start_s when that interval has none.
  [[nodiscard]] Demand initial(double interval_s) const;
  /// @brief The demands of run intervals [kΔ, (k + 1)Δ), k = 0 .. count - 1 (Δ = interval_s),
  /// each window without requests keeping the lengths of the one before (the first: initial()'s).
  [[nodiscard]] std::vector<Demand> intervals(double interval_s, std::size_t count) const;
};

/// @brief Service-level objectives, measured at the 95th percentile. Absent = unconstrained.
struct Sla {
  std::optional<double> latency_ms_p95;
  std::optional<double> ttft_ms_p95;
  std::optional<double> tpot_ms_p95;
  std::optional<double> min_throughput;  ///< frames/s (vision) or output tokens/s (LLM)
};

/// @brief One co-running model of a workload.
struct ModelSpec {
  std::string name;   ///< unique within the workload
  ModelArch arch;     ///< copied from the catalog
  std::vector<KnobSpec> knobs;  ///< searched knobs, in the order written
  Settings base;      ///< defaults for knobs that are not searched
  Demand demand;  ///< a trace demand's: what the planner knows at the start (TraceDemand::initial)
  std::optional<TraceDemand> trace;  ///< set when the demand is replayed from a trace
  Sla sla;
  double weight = 1;  ///< objective weight
  bool active = true;  ///< running at time 0 (false: arrives through the timeline)
  std::optional<std::size_t> gpu;  ///< the GPU it is pinned to (`gpu: K`); none = corun chooses
  /// Where its metrics are in Prometheus (`telemetry:`; corun serve --prometheus). Not part of
  /// plan_key(): where metrics come from changes no plan.
  TelemetrySource telemetry;
  /// Vision only (`streams: [cam0, cam1]`): the camera streams one served model takes, as one
  /// Triton model batches frames of every stream; `demand.fps` is their total. Empty: one
  /// stream. Their frames merge into a burstier arrival process than one camera's (sim).
  std::vector<std::string> streams;
  int line = 0;       ///< where it was declared

  /// @brief Number of local configurations: the product of the knobs' value counts.
  [[nodiscard]] std::size_t local_config_count() const;
  /// @brief Settings of local configuration `index` (mixed radix, last knob fastest).
  [[nodiscard]] Settings settings(std::size_t index) const;
  /// @brief "imgsz=640,skip_rate=0" for local configuration `index`.
  [[nodiscard]] std::string describe(std::size_t index) const;
  /// @brief The local index whose knob values match `assignments` ("knob" -> value text);
  /// unlisted knobs take their first value.
  [[nodiscard]] Result<std::size_t> find_config(
      const std::vector<std::pair<std::string, std::string>>& assignments) const;
  /// @brief What a plan of the model depends on, as text: its catalog model, searched knobs
  /// with their values, the other knobs' settings, demand, SLA, weight and whether it is
  /// active; not its name, line or pin. Two models with equal keys (from one catalog) are
  /// interchangeable on a GPU: a plan made for one holds for the other.
  [[nodiscard]] std::string plan_key() const;
};

/// @brief An unmanaged co-tenant on the GPU (another process corun does not plan): the share
/// of the SMs it keeps busy and of the achievable DRAM bandwidth it pulls, each in [0, 1].
struct Interference {
  double sm_util = 0;
  double bandwidth_util = 0;
  friend bool operator==(const Interference&, const Interference&) = default;
};

/// @brief One change at a point in time (see docs/formats.md, "timeline"). Workload events
/// (arrive, depart, demand, sla, context) change what the planner plans for. Drift events
/// (interference, power_cap) change only the testbed's truth: the planner is never told about
/// them, and has to notice them in what it measures.
struct TimelineEvent {
  enum class Kind {
    kArrive,
    kDepart,
    kDemand,
    kSla,
    kContext,
    kInterference,
    kPowerCap,
    kPerturb
  };
  double at_s = 0;
  Kind kind = Kind::kArrive;
  std::size_t model = 0;  ///< index into Workload::models (workload events only)
  Demand demand;          ///< kDemand: the new demand (unset fields keep their value)
  Sla sla;                ///< kSla: the SLA fields that change
  /// kInterference: the co-tenant from now on; none = the co-tenant leaves.
  std::optional<Interference> interference;
  /// kPowerCap: the board power limit from now on, in W; none = back to the device's TDP.
  std::optional<double> power_cap_w;
  /// kPerturb: the seed of the GPU's hidden physical parameters from now on (a GPU that
  /// differs from its catalog description, testbed/sim.h SimTruth); 0 = the catalog's values.
  std::uint64_t perturb_seed = 0;
  int line = 0;

  /// @brief Whether the planner is told about the event (false for drift events).
  [[nodiscard]] bool planner_visible() const {
    return kind != Kind::kInterference && kind != Kind::kPowerCap && kind != Kind::kPerturb;
  }
};

std::string_view to_string(TimelineEvent::Kind k);

/// @brief How a workload evolves: its events, the run length and the control interval.
struct Timeline {
  double duration_s = 0;   ///< 0 = no timeline
  double interval_s = 10;  ///< measurement window of the online loop
  std::vector<TimelineEvent> events;  ///< sorted by time
};

/// @brief What a plan maximises.
struct Objective {
  std::string maximize = "utility";
};

/// @brief How `corun run` learns the workload before it runs it. kMeanField: standalone
/// passes and 20·N co-runs, then a fitted MeanField surrogate; kNone: nothing is measured
/// beforehand: plans start from the catalog twin and improve online.
enum class Profiling { kMeanField, kNone };

/// @brief How one GPU is cut: its MIG slices, in the order written; empty = the whole GPU.
using MigPartition = std::vector<MigProfile>;

/// @brief The GPUs of the node a workload runs on, all of the workload's `device`.
struct NodeSpec {
  /// Per GPU, the partitionings it may take: one entry when the workload fixes it (`gpus:
  /// [{mig: [...]}, {}]`), the node's candidates (`mig: [[...], ...]`) when it does not, and a
  /// single whole GPU (an empty partition) when the workload has no MIG at all.
  std::vector<std::vector<MigPartition>> options{{MigPartition{}}};

  /// @brief Number of GPUs.
  [[nodiscard]] std::size_t gpus() const { return options.size(); }
  /// @brief Whether the node is one whole GPU (the single-GPU workload every verb plans).
  [[nodiscard]] bool single_gpu() const {
    return options.size() == 1 && options[0].size() == 1 && options[0][0].empty();
  }
  /// @brief Number of ways to partition the node: the product of each GPU's option count.
  [[nodiscard]] std::size_t layout_count() const;
};

/// @brief An agent's tool calls expected on the GPU again and again (`tools: {scenario: ...,
/// every_s: 30}`): a tool-DAG scenario (corun map's format) that arrives every `every_s`
/// seconds. The configuration planner leaves room for its burst: a plan must hold every SLA
/// while the tools compute, not only between bursts.
struct ToolBurstSpec {
  std::string scenario;  ///< as written; relative paths resolve against the workload's directory
  double every_s = 0;    ///< seconds from one burst's start to the next
  int line = 0;          ///< line of `tools:` in the workload file (for diagnostics)
};

/// @brief A whole workload file: device, models, objective.
struct Workload {
  std::string file;   ///< where it was read from ("<string>" for text)
  std::string hash;   ///< FNV-1a of the file's text, hex: identifies the workload in datasets
  Device device;  ///< every GPU of the node (whole; MIG slices derive from it)
  NodeSpec node;  ///< `gpus` and `mig`: one whole GPU unless the workload says otherwise
  std::vector<ModelSpec> models;
  Objective objective;
  Timeline timeline;
  Profiling profiling = Profiling::kMeanField;
  std::optional<ToolBurstSpec> tools;  ///< a declared recurring tool burst, if any

  /// @brief Index of the model called `name`.
  [[nodiscard]] std::optional<std::size_t> find_model(std::string_view name) const;
  /// @brief A workload holding only the first `n` models (same device and objective).
  [[nodiscard]] Workload prefix(std::size_t n) const;
};

/// @brief Parses workload YAML. All problems are reported at once, each with file, line,
/// field path, reason and, for misspellings, the nearest known name.
Result<Workload> parse_workload(std::string_view text, const std::string& file,
                                const Catalog& catalog);
/// @brief Parses one `models` entry on its own: a node of a workload file, or a request body
/// that serve/json_input.h turned into a node (to_yaml_node keeps JSON's types as YAML tags).
/// The checks are exactly those of an entry inside parse_workload(); field paths are relative to
/// the entry (`demand.fps`, `knobs.imgsz`), and `file` names the source in each diagnostic.
/// @return the model, or none with every problem added to `diags` (at least one).
/// Thread-safety: reentrant; `catalog` is only read.
std::optional<ModelSpec> parse_model_entry(const YAML::Node& entry, const std::string& file,
                                           const Catalog& catalog, Diagnostics& diags);
/// @brief Reads and parses a workload file.
Result<Workload> load_workload(const std::filesystem::path& path, const Catalog& catalog);

}  // namespace corun
