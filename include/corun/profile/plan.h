#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/core/context.h"
#include "corun/space/space.h"
#include "corun/spec/workload.h"

namespace corun::profile {

/// @brief What a profiling campaign measures.
/// kStandalone: every model alone in every local configuration (sum of the local counts: linear
///   in N), in `budget` passes (repeats: 0 means 1) whose measurements a StandaloneTable
///   averages, because one 10-second window of a p95 is noisy. kMeanField: K joint configurations,
///   stratified so that each model visits its local configurations evenly (on a node, a random
///   subset of the size one GPU of it holds). kJoint: K joint configurations drawn uniformly, as
///   the Abacus-style baseline samples. kOnline: not a sampling plan: what the online loop measured
///   (each interval of `corun run`), stored as it happens; refits of the surrogate train on it.
///   kCoTenant: K joint configurations drawn as kMeanField draws them (its own stream), each
///   measured next to a synthetic co-tenant (plan_cotenant()) of random SM share and bandwidth:
///   the loads a declared tool burst adds, which the workload's own co-runs never reach.
enum class Plan { kStandalone, kMeanField, kJoint, kOnline, kCoTenant };

std::string_view to_string(Plan p);
std::optional<Plan> parse_plan(std::string_view s);
/// @brief The sampling plans a campaign can run: {"standalone", "meanfield", "joint", "cotenant"}
/// (parse_plan also reads "online", the provenance of online samples).
const std::vector<std::string>& plan_names();

/// @brief Number of samples of a plan: the sum of local counts times the passes (`budget`, at
/// least 1) for kStandalone, else `budget`.
std::uint64_t plan_size(const Workload& w, Plan plan, std::uint64_t budget);

/// @brief Sample `index` of a plan: a pure function of (campaign seed `ctx.seed`, workload,
/// plan, index), so a resumed campaign recomputes exactly the samples it has not stored yet,
/// and the first b samples of a plan of budget K > b are the plan of budget b (budgets nest).
/// Co-run plans only draw configurations that fit in VRAM when the space holds any; a
/// standalone sample of a model too large for the device is kept (its failure is data).
///
/// @code
///   const ConfigSpace space(w);
///   const JointConfig c = plan_sample(Context{.seed = 7}, w, space, Plan::kMeanField, 0);
/// @endcode
JointConfig plan_sample(const Context& ctx, const Workload& w, const ConfigSpace& space, Plan plan,
                        std::uint64_t index);

/// @brief Samples [0, plan_size) of a plan.
std::vector<JointConfig> plan_samples(const Context& ctx, const Workload& w, Plan plan,
                                      std::uint64_t budget);

/// @brief The synthetic co-tenant sample `index` of a plan is measured next to: for kCoTenant
/// an SM share U(0, 1) and a bandwidth U(0, kMaxCoTenantBandwidth) of the achievable, a pure
/// function of (ctx.seed, index) so that a stored sample's co-tenant is recomputed, never stored;
/// none for every other plan.
Interference plan_cotenant(const Context& ctx, Plan plan, std::uint64_t index);

/// @brief Largest bandwidth share of a kCoTenant sample's co-tenant: a tool burst is mostly
/// compute, and a co-tenant that saturates DRAM alone teaches nothing about a plan.
inline constexpr double kMaxCoTenantBandwidth = 0.5;

/// @brief Seed of the testbed noise for sample `index`: independent per plan and sample, so a
/// resumed campaign measures exactly what an uninterrupted one would have.
std::uint64_t measurement_seed(const Context& ctx, Plan plan, std::uint64_t index);

}  // namespace corun::profile
