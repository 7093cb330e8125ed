#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/runtime/pipeline.h"
#include "corun/runtime/predictor_source.h"
#include "corun/spec/workload.h"
#include "corun/surrogate/surrogate.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief Where a run's predictions come from (corun run; docs/scheduler.md).
struct RunSourceOptions {
  /// A fitted surrogate file to plan with as given (corun run --surrogate); it must fit the
  /// workload. Empty: profile and fit, or the catalog twin.
  std::filesystem::path surrogate;
  /// Profile and fit when no surrogate is given. false (or a workload with `profiling: none`):
  /// plans start from the catalog twin and learn online.
  bool profile = true;
  /// The profiling and the fit: its dataset is the one refits read.
  PipelineOptions pipeline;
  /// One-sided confidence of the SLA margins (SurrogateSourceOptions::confidence).
  double confidence = 0.9999;
};

/// @brief What predicts a run, and how it was obtained.
struct RunSource {
  enum class Kind { kGiven, kProfiled, kTwin };
  std::unique_ptr<PredictorSource> source;
  Kind kind = Kind::kTwin;
  /// The dataset the surrogate was profiled into, which refits read (empty: no refits).
  std::filesystem::path refit_dataset;
  /// What profiling and the fit did (kProfiled; its surrogate is the source's now).
  PipelineStats profiled;
};

/// @brief The source a run plans with, given a fitted surrogate or none: the surrogate's
/// (SurrogateSource, re-profiling a changed model alone on `testbed`), else the catalog twin.
/// `window_s` is the workload's interval. Every run of `corun eval scheduler` gets one.
///
/// @code
///   auto source = source_for(ctx, fitted, testbed, 10, 0.9999);  // std::nullopt: the twin
///   auto report = run_online(ctx, w, testbed, std::move(source), RunOptions{});
/// @endcode
std::unique_ptr<PredictorSource> source_for(const Context& ctx,
                                            std::optional<surrogate::Surrogate> fitted,
                                            const Testbed& testbed, double window_s,
                                            double confidence);

/// @brief `corun run`'s source for `w`: the given surrogate (checked against `w`); else `w`
/// profiled and fitted (profile_and_fit, both cached in the pipeline's files); else the
/// catalog twin.
Result<RunSource> make_run_source(const Context& ctx, const Workload& w,
                                  std::string_view workload_text, const Testbed& testbed,
                                  const RunSourceOptions& options);

}  // namespace corun
