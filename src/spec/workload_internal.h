#pragma once

// Private to src/spec: the pieces of the workload parser (workload.cc, workload_models.cc,
// workload_node.cc, workload_timeline.cc) and the input limits they share.

#include <cstddef>
#include <optional>
#include <string>

#include "corun/core/yaml.h"
#include "corun/spec/workload.h"

namespace corun::workload_detail {

// Input limits: generous for real deployments, small enough that nothing downstream overflows.
inline constexpr std::size_t kMaxModels = 64;
inline constexpr std::size_t kMaxKnobValues = 64;
inline constexpr double kMaxLocalConfigs = 1e6;
inline constexpr double kMaxRate = 1e5;           // frames or requests per second
inline constexpr long long kMaxTokens = 1 << 20;  // prompt or output tokens per request
inline constexpr double kMaxSlaMs = 1e7;
inline constexpr double kMaxWeight = 1e6;
inline constexpr long long kMaxGpus = 64;             // GPUs of one node (DGX-class nodes hold 8)
inline constexpr std::size_t kMaxMigCandidates = 32;  // partitionings offered to the planner
// Partitionings of the whole node the planner enumerates.
inline constexpr std::size_t kMaxNodeLayouts = 256;

inline constexpr double kMaxDurationS = 30 * 24 * 3600.0;
// A trace's rate may be thinned or multiplied: up to a thousand times its recorded load.
inline constexpr double kMaxTraceScale = 1e3;

// Whether a map has `key`, also when its value is null (`interference: null`).
inline bool has_key(const YamlField& f, const std::string& key) {
  const YAML::Node& n = f.node();
  return n.IsMap() && n[key].IsDefined();
}

// The rate key of a family's demand: frames for vision, requests for everything else.
inline const char* rate_key(ModelFamily fam) { return fam == ModelFamily::kVision ? "fps" : "rps"; }

// Rate or closed loop, never both: `fps`/`rps` offers a rate, `concurrency` keeps N requests
// in flight. Returns false (after reporting) when both are given.
bool parse_demand_mode(const YamlField& d, ModelFamily fam, Demand& out, bool rate_required);

// One entry of `models` (workload_models.cc); reports what is wrong and returns the model it
// could build. `gpus`: the node's GPU count, which a `gpu` pin must stay below.
std::optional<ModelSpec> parse_model(const YamlField& f, const Catalog& catalog, std::size_t gpus);

// `gpus: N` or `gpus: [{mig: [...]}, {}]`, and the node's candidate partitionings
// `mig: [[...], ...]`, which every GPU the workload does not partition itself may take
// (workload_node.cc).
void parse_node(const YamlField& gpus, const YamlField& mig, const Catalog& catalog, Workload& w);

// `timeline: {duration_s, interval_s, events}` (workload_timeline.cc).
void parse_timeline(const YamlField& t, Workload& w);

}  // namespace corun::workload_detail
