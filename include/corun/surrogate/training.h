#pragma once

#include <string_view>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/core/result.h"
#include "corun/profile/dataset.h"
#include "corun/spec/workload.h"
#include "corun/surrogate/standalone.h"
#include "corun/surrogate/surrogate.h"

namespace corun::surrogate {

/// @brief Everything a fit needs, read back from a dataset.
struct TrainingData {
  Workload workload;
  StandaloneTable standalone;
  /// samples of every meanfield, joint and cotenant campaign (and online ones when asked)
  std::vector<profile::SampleRecord> corun;
  /// Empty when no sample was measured next to a synthetic co-tenant; else one entry per
  /// `corun` sample: the co-tenant's load in aggregate units (surrogate::cotenant_totals;
  /// zeros for samples without one), as Surrogate::fit takes it.
  std::vector<Totals> cotenants;
  std::size_t online = 0;  ///< of them, samples the online loop measured (include_online)
  Provenance provenance;
};

/// @brief Reads the training data of one workload from a dataset: the workload text stored
/// with its campaigns, the most complete standalone campaign, and the samples of every co-run
/// campaign. `workload_hash` may be empty when the dataset holds one workload.
/// @param need_standalone when false (joint surrogate) a missing standalone campaign is allowed.
/// @param include_online also train on what the online loop measured (a refit): samples of the
/// "online" campaigns of this workload, whatever run wrote them.
Result<TrainingData> load_training_data(const profile::Dataset& dataset, const Catalog& catalog,
                                        std::string_view workload_hash, bool need_standalone,
                                        bool include_online = false);

}  // namespace corun::surrogate
