#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "corun/core/result.h"
#include "corun/profile/dataset.h"
#include "corun/profile/plan.h"
#include "corun/profile/progress.h"
#include "corun/testbed/testbed.h"

namespace corun::profile {

/// @brief What one run of a campaign did.
struct CampaignReport {
  std::int64_t campaign = 0;
  std::uint64_t total = 0;           ///< plan size
  std::uint64_t already_stored = 0;  ///< samples found from an earlier (interrupted) run
  std::uint64_t measured = 0;        ///< samples measured by this run
  std::uint64_t failed = 0;          ///< of those, samples whose measurement failed (stored too)
};

/// @brief Measures sample `index` of a plan on a testbed (pure: same arguments, same record).
SampleRecord measure_sample(const Context& ctx, const Workload& w, const ConfigSpace& space,
                            const Testbed& testbed, Plan plan, double window_s,
                            std::uint64_t index);

/// @brief Measures samples [0, plan_size) of a plan without storing them (evaluations).
/// @code
///   // every model alone, once per local configuration, 10-second windows, campaign seed 1
///   auto alone = measure_plan(Context{}, w, testbed, Plan::kStandalone, 1, 10);
/// @endcode
std::vector<SampleRecord> measure_plan(const Context& ctx, const Workload& w,
                                       const Testbed& testbed, Plan plan, std::uint64_t budget,
                                       double window_s);

/// @brief Runs (or resumes) a campaign into a dataset: computes the plan from the seed, skips
/// the samples already stored, measures the others in index order and stores each in its own
/// transaction. A run killed at any point and rerun with the same arguments ends with exactly
/// the rows of an uninterrupted run. Failed measurements are stored with their reason.
/// @param workload_text the workload file's text, stored with the campaign.
/// @param progress optional reporter, updated after every sample.
Result<CampaignReport> run_campaign(Dataset& dataset, const Workload& w,
                                    std::string_view workload_text, const Testbed& testbed,
                                    const CampaignSpec& spec, std::uint64_t budget,
                                    Progress* progress);

}  // namespace corun::profile
