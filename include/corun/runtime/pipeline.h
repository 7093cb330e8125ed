#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string_view>

#include "corun/core/context.h"
#include "corun/catalog/catalog.h"
#include "corun/core/result.h"
#include "corun/spec/workload.h"
#include "corun/surrogate/surrogate.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief How the main job obtains its surrogate: which campaigns, where they are cached, what
/// is fitted.
struct PipelineOptions {
  std::filesystem::path dataset;  ///< SQLite dataset: created, or resumed and reused
  std::filesystem::path model;    ///< surrogate file: reused when it matches, else (re)written
  std::string testbed = "sim";    ///< name recorded in the campaigns
  std::uint64_t corun_budget = 0;        ///< co-run samples; 0 = 20 x models
  std::uint64_t standalone_repeats = 3;  ///< passes over every local configuration alone
  double window_s = 10;
  surrogate::SurrogateKind kind = surrogate::SurrogateKind::kMeanField;
  /// The one default of `corun run`, `corun eval scheduler` and `corun fit` (chosen by
  /// docs/results/surrogate-choice.md).
  surrogate::RegressorKind regressor = surrogate::RegressorKind::kGbdt;
  bool monotone = false;  ///< FitOptions::monotone (gbdt or linear)
  const Catalog* catalog = nullptr;  ///< the workload's catalog (nullptr: the built-in one)
  std::FILE* log = nullptr;  ///< progress and step lines (nullptr: silent)
  bool terminal = false;     ///< draw progress bars in place
};

/// @brief What the pipeline measured and fitted.
struct PipelineStats {
  std::uint64_t standalone_total = 0, standalone_measured = 0;  ///< measured now, not cached
  std::uint64_t corun_total = 0, corun_measured = 0;
  bool model_reused = false;
  double fit_s = 0;
};

/// @brief What the pipeline did: the surrogate, and how it was obtained.
struct PipelineResult : PipelineStats {
  surrogate::Surrogate surrogate;
};

/// @brief Profiles `w` (standalone passes, then a MeanField co-run campaign; both resume from
/// the cached dataset, so a second run measures nothing), then fits the surrogate, or reuses
/// the model file when it was fitted on exactly these samples with these settings.
/// @param workload_text the workload file's text (stored with the campaigns).
/// @param ctx the campaigns' and the fit's seed (recorded in the campaigns and the model's
/// provenance: another seed profiles and fits anew)
Result<PipelineResult> profile_and_fit(const Context& ctx, const Workload& w,
                                       std::string_view workload_text, const Testbed& testbed,
                                       const PipelineOptions& options);

}  // namespace corun
