#pragma once

// The runtime monitor: everything an agent may know about a placement problem. It executes
// what the agent asks (proposals and reprobes), keeps running averages, and writes hints about
// what is unmeasured, stale or noisy. It never prescribes a mapping: the observation holds
// measurements and open questions, not a recommendation.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "corun/core/context.h"
#include "corun/mapping/policy.h"
#include "corun/mapping/profile.h"

namespace corun::mapping {

/// @brief A reprobe the agent may ask for, relative to the current mapping. kMove puts node
/// `node` on `to` (a symmetric reprobe: the current mapping and the moved one are measured
/// back to back under the same conditions); kSwap exchanges the placements of `node` and
/// `other` (a swap reprobe); kPair moves `node` to `to` and `other` to `other_to` together
/// (for changes that only pay off jointly, e.g. freeing VRAM so that another tool fits);
/// kVariant measures the complete mapping `variant` (any number of changes).
struct ProbeRequest {
  enum class Kind : std::uint8_t { kMove, kSwap, kPair, kVariant };
  Kind kind = Kind::kMove;
  std::size_t node = 0;
  Placement to = Placement::kCpu;
  std::size_t other = 0;
  Placement other_to = Placement::kCpu;
  Mapping variant;  ///< kVariant only

  static ProbeRequest move(std::size_t node, Placement to) {
    ProbeRequest p;
    p.node = node;
    p.to = to;
    return p;
  }
  static ProbeRequest swap(std::size_t node, std::size_t other) {
    ProbeRequest p = move(node, Placement::kCpu);
    p.kind = Kind::kSwap;
    p.other = other;
    return p;
  }
  static ProbeRequest pair(std::size_t node, Placement to, std::size_t other, Placement other_to) {
    ProbeRequest p = move(node, to);
    p.kind = Kind::kPair;
    p.other = other;
    p.other_to = other_to;
    return p;
  }
  static ProbeRequest of(Mapping variant) {
    ProbeRequest p;
    p.kind = Kind::kVariant;
    p.variant = std::move(variant);
    return p;
  }

  bool operator==(const ProbeRequest&) const = default;
};

/// @brief Running mean and variance (Welford).
struct RunningStat {
  std::uint64_t n = 0;
  double mean = 0;
  double m2 = 0;

  void add(double x);
  /// @brief Sample standard deviation (0 with fewer than two samples).
  [[nodiscard]] double stddev() const;
};

/// @brief Observed durations of one node in one placement and one context. Contexts:
/// "alone" (no other tool on the GPU during its run), "k=<n>" (at most n others on the GPU),
/// "vram_pressure" (it waited for VRAM or started with < 10 % free).
struct ToolStat {
  std::size_t node = 0;
  Placement placement = Placement::kCpu;
  std::string context;
  RunningStat duration_ms;
  int last_round = 0;
};

/// @brief Observed makespans of one complete mapping, over every run of it.
struct MappingStat {
  Mapping mapping;
  RunningStat makespan_ms;  ///< successful runs only
  std::uint64_t failures = 0;
  std::vector<std::size_t> failed_nodes;  ///< nodes that ran out of VRAM in some run of it
  std::uint64_t proposals = 0;            ///< times an agent proposed it (as opposed to probing it)
  int last_round = 0;
  /// Next to a co-running plan: the co-runners' SLAs its burst is PREDICTED to break (the
  /// guard's verdict on its worst run so far); empty when it is predicted to protect them.
  std::vector<SlaOutcome> predicted_breaches;

  /// @brief Whether no run of it is predicted to break a co-runner's SLA.
  [[nodiscard]] bool protects_corunners() const { return predicted_breaches.empty(); }
};

/// @brief Paired comparison of a variant against a baseline, each pair measured in one round
/// (same conditions): delta = variant - baseline makespan.
struct ProbeStat {
  Mapping baseline;
  Mapping variant;
  ProbeRequest probe;
  RunningStat delta_ms;
  double last_baseline_ms = 0;
  double last_variant_ms = 0;
  std::uint64_t failures = 0;  ///< variant runs that failed (out of VRAM)
  int last_round = 0;
};

/// @brief An open question about the current mapping.
struct Hint {
  enum class Kind : std::uint8_t { kUnmeasured, kStale, kNoisy };
  Kind kind = Kind::kUnmeasured;
  std::optional<ProbeRequest> probe;  ///< the reprobe that would answer it, if any
  std::string text;
};

std::string_view to_string(Hint::Kind k);

/// @brief One node as the agent sees it: identity, options and its static profile.
struct NodeView {
  std::string id;
  std::string tool;
  std::vector<std::size_t> after;
  std::vector<Placement> options;
  double cpu_ms = 0;             ///< standalone, noise-free profile
  std::optional<double> gpu_ms;  ///< standalone end to end (transfers included)
  double vram_gb = 0;
  Preference preference = Preference::kNeutral;
};

/// @brief Everything the agent may read. Built by Monitor::observe().
struct Observation {
  std::string scenario;
  std::string device;
  double vram_budget_gb = 0;
  std::vector<NodeView> nodes;
  int round = 0;
  std::uint64_t executions = 0;
  std::optional<Mapping> current;
  std::optional<MappingStat> current_stat;
  std::vector<MappingStat> mappings;  ///< every mapping run so far, fastest mean first
  std::vector<ToolStat> tool_stats;
  std::vector<ProbeStat> probes;  ///< paired comparisons against the current mapping
  std::vector<Hint> hints;
  double noise_cv = 0;     ///< the monitor's estimate of run-to-run makespan variation
  std::string last_error;  ///< why the last proposal or probe was rejected, if it was

  /// @brief Index of a node id.
  [[nodiscard]] std::optional<std::size_t> find(std::string_view id) const;
  /// @brief The variant a probe produces from the current mapping (nullopt if invalid).
  [[nodiscard]] std::optional<Mapping> apply(const ProbeRequest& probe) const;
  /// @brief The stat of a mapping, if it was run.
  [[nodiscard]] const MappingStat* find_mapping(const Mapping& m) const;
};

/// @brief Compact JSON of an observation (what the LLM agent is sent). Mappings are objects
/// {id: placement}.
nlohmann::json to_json(const Observation& o);
nlohmann::json to_json(const ProbeRequest& p, const Observation& o);
std::string describe(const ProbeRequest& p, const Observation& o);

/// @brief Tunables of the monitor.
struct MonitorOptions {
  int stale_rounds = 4;          ///< a comparison older than this many rounds is stale
  int max_repeats = 3;           ///< noisy comparisons are worth re-measuring up to this
  double prior_noise_cv = 0.02;  ///< makespan variation assumed before any repeat exists
};

/// @brief Runs proposals and reprobes through a TrialRunner and keeps what it saw.
/// A round is one set of conditions (one noise seed): a proposal opens a round; reprobes join
/// the round of the current mapping if it has not been probed yet, else open a new one with a
/// baseline re-run (so a paired comparison is always measured under one set of conditions).
class Monitor {
 public:
  /// @param ctx each round's noise seed derives from ctx.seed
  Monitor(TrialRunner& runner, const Context& ctx, MonitorOptions options = {});

  /// @brief Runs a validated proposal; it becomes the current mapping.
  RunResult execute(const Mapping& mapping);
  /// @brief Runs the requested reprobes against the current mapping. Invalid probes (bad
  /// node, placement not allowed, swap of equal placements) are skipped and reported in
  /// last_error. Requires a current mapping.
  void reprobe(std::span<const ProbeRequest> probes);
  /// @brief Records why an agent's proposal was rejected (shown as last_error).
  void reject(std::string reason) { last_error_ = std::move(reason); }
  [[nodiscard]] Observation observe() const;
  [[nodiscard]] const std::optional<Mapping>& current() const { return current_; }

 private:
  void record(const Mapping& m, const RunResult& r, bool proposal);
  ProbeStat& probe_stat(const Mapping& baseline, const Mapping& variant, const ProbeRequest& p);
  [[nodiscard]] std::optional<Mapping> apply(const ProbeRequest& p, std::string* why) const;
  [[nodiscard]] double noise_cv() const;

  TrialRunner* runner_;
  const PlacementProblem* problem_;
  Context ctx_;
  MonitorOptions options_;
  std::vector<NodeView> nodes_;
  int round_ = 0;
  Context round_ctx_;  ///< the current round's stream: every run of the round sees its noise
  bool round_probed_ = false;
  double round_baseline_ms_ = 0;
  bool round_baseline_failed_ = false;
  std::optional<Mapping> current_;
  std::vector<MappingStat> mappings_;
  std::vector<ToolStat> tool_stats_;
  std::vector<ProbeStat> probes_;
  std::string last_error_;
};

}  // namespace corun::mapping
