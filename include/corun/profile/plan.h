#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/space/space.h"
#include "corun/spec/workload.h"

namespace corun::profile {

/// @brief What a profiling campaign measures.
/// kStandalone: every model alone in every local configuration (sum of the local counts: linear
///   in N), in `budget` passes (repeats: 0 means 1) whose measurements a StandaloneTable
///   averages, because one 10-second window of a p95 is noisy. kMeanField: K joint configurations,
///   stratified so that each model visits its local configurations evenly (each sample yields one
///   row per model). kJoint: K joint configurations drawn uniformly, the sampling of the
///   Abacus-style joint baseline. kOnline: not a sampling plan: what the online loop measured
///   (each interval of `corun run`), stored as it happens; refits of the surrogate train on it.
enum class Plan { kStandalone, kMeanField, kJoint, kOnline };

std::string_view to_string(Plan p);
std::optional<Plan> parse_plan(std::string_view s);
/// @brief The sampling plans a campaign can run: {"standalone", "meanfield", "joint"}
/// (parse_plan also reads "online", the provenance of online samples).
const std::vector<std::string>& plan_names();

/// @brief Number of samples of a plan: the sum of local counts times the passes (`budget`, at
/// least 1) for kStandalone, else `budget`.
std::uint64_t plan_size(const Workload& w, Plan plan, std::uint64_t budget);

/// @brief Sample `index` of a plan: a pure function of (workload, plan, seed, index), so a
/// resumed campaign recomputes exactly the samples it has not stored yet, and the first b
/// samples of a plan of budget K > b are the plan of budget b (budgets nest).
/// Co-run plans only draw configurations that fit in VRAM when the space holds any; a
/// standalone sample of a model too large for the device is kept (its failure is data).
JointConfig plan_sample(const Workload& w, const ConfigSpace& space, Plan plan, std::uint64_t seed,
                        std::uint64_t index);

/// @brief Samples [0, plan_size) of a plan.
std::vector<JointConfig> plan_samples(const Workload& w, Plan plan, std::uint64_t budget,
                                      std::uint64_t seed);

/// @brief Seed of the testbed noise for sample `index`: independent per plan and sample, so a
/// resumed campaign measures exactly what an uninterrupted one would have.
std::uint64_t measurement_seed(Plan plan, std::uint64_t seed, std::uint64_t index);

}  // namespace corun::profile
