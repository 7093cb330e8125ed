#pragma once

// The surrogate and solver flags that `corun run` and `corun eval scheduler` share, and the
// profiling pipeline they configure.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <string>

#include "corun/core/result.h"
#include "corun/core/strings.h"
#include "corun/runtime/pipeline.h"
#include "corun/surrogate/regressor.h"

namespace corun::cli {

struct SurrogateFlags {
  std::string regressor = "gbdt";
  std::uint64_t seed = 1;
  std::uint64_t budget = 0;
  int threads = 2;
  double confidence = 0.9999;
  bool unconstrained = false;

  /// @brief --regressor, --budget, --unconstrained, --seed, --confidence, --threads.
  void add(CLI::App& sub) {
    sub.add_option("--regressor", regressor, "surrogate regressor: mlp, gbdt or linear")
        ->capture_default_str();
    sub.add_option("--budget", budget, "co-run profiling samples (default 20 x models)");
    sub.add_flag("--unconstrained", unconstrained,
                 "do not constrain the gbdt or linear surrogate to be monotone in the "
                 "co-runners' demand (the exact solver's optimality proof needs the constraint)");
    sub.add_option("--seed", seed, "seed")->capture_default_str();
    sub.add_option("--confidence", confidence,
                   "one-sided confidence of the SLA margins (the error model's upper bound)")
        ->check(CLI::Range(0.5, 0.999999))
        ->capture_default_str();
    sub.add_option("--threads", threads, "solver threads")->capture_default_str();
  }

  /// @brief The regressor named by --regressor, or an error naming the flag.
  [[nodiscard]] Result<surrogate::RegressorKind> regressor_kind() const {
    const auto r = surrogate::parse_regressor(regressor);
    if (!r) {
      return Error("--regressor: unknown '" + regressor + "'" +
                   did_you_mean(regressor, surrogate::regressor_names()));
    }
    return *r;
  }

  /// @brief Pipeline settings from these flags (the caller sets dataset and model paths,
  /// standalone repeats and the catalog). Monotone unless the regressor is the MLP or
  /// --unconstrained was given.
  [[nodiscard]] PipelineOptions pipeline(surrogate::RegressorKind kind, std::string testbed,
                                         double window_s, std::FILE* log, bool terminal) const {
    PipelineOptions po;
    po.testbed = std::move(testbed);
    po.seed = seed;
    po.corun_budget = budget;
    po.window_s = window_s;
    po.regressor = kind;
    po.monotone = kind != surrogate::RegressorKind::kMlp && !unconstrained;
    po.log = log;
    po.terminal = terminal;
    return po;
  }
};

}  // namespace corun::cli
