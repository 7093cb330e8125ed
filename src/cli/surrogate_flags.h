#pragma once

// The surrogate and solver flags that `corun run` and `corun eval scheduler` share, and the
// profiling pipeline they configure.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <string>

#include "common.h"
#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/core/strings.h"
#include "corun/runtime/learner.h"
#include "corun/runtime/pipeline.h"
#include "corun/surrogate/regressor.h"

namespace corun::cli {

/// @brief The regressor `corun run`, `corun eval scheduler` and `corun fit` use unless told
/// otherwise: PipelineOptions' default, its one declaration.
inline std::string default_regressor() {
  return std::string(surrogate::to_string(PipelineOptions{}.regressor));
}

/// @brief The value of a --regressor flag, or an error that names the flag and the nearest
/// regressor name.
inline Result<surrogate::RegressorKind> parse_regressor_flag(const std::string& name) {
  const auto r = surrogate::parse_regressor(name);
  if (!r) {
    return Error("--regressor: unknown '" + name + "'" +
                 did_you_mean(name, surrogate::regressor_names()));
  }
  return *r;
}

struct SurrogateFlags {
  std::string regressor = default_regressor();
  std::uint64_t seed = kDefaultSeed;
  std::uint64_t budget = 0;
  int threads = kDefaultThreads;
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
    add_seed_flag(sub, seed, "the profiling, the fit and the solver");
    sub.add_option("--confidence", confidence,
                   "one-sided confidence of the SLA margins (the error model's upper bound)")
        ->check(CLI::Range(0.5, 0.999999))
        ->capture_default_str();
    add_threads_flag(sub, threads, "the solver and the profiling");
  }

  /// @brief The run's Context: --seed and --threads.
  [[nodiscard]] Context context() const { return {seed, threads}; }

  /// @brief The regressor named by --regressor, or an error naming the flag.
  [[nodiscard]] Result<surrogate::RegressorKind> regressor_kind() const {
    return parse_regressor_flag(regressor);
  }

  /// @brief Pipeline settings from these flags (the caller sets dataset and model paths,
  /// standalone repeats and the catalog; the seed travels in context(), passed to
  /// profile_and_fit). Monotone unless the regressor is the MLP or --unconstrained was given.
  [[nodiscard]] PipelineOptions pipeline(surrogate::RegressorKind kind, std::string testbed,
                                         double window_s, std::FILE* log, bool terminal) const {
    PipelineOptions po;
    po.testbed = std::move(testbed);
    po.corun_budget = budget;
    po.window_s = window_s;
    po.regressor = kind;
    po.monotone = kind != surrogate::RegressorKind::kMlp && !unconstrained;
    po.log = log;
    po.terminal = terminal;
    return po;
  }
};

/// @brief The online-learning flags of `corun run`, `corun eval scheduler` and `corun serve`,
/// bound to LearningOptions (where each setting and its default are declared).
struct LearningFlags {
  LearningOptions options;
  std::string modes = "on";  ///< "on", "off", or a list ("off,on") where several runs are allowed

  /// @brief --learning, --breach-target, --explore. `list`: --learning takes a comma list.
  void add(CLI::App& sub, bool list) {
    sub.add_option("--learning", modes,
                   list ? "online learning modes to run, a comma list of on and off (one row each)"
                        : "online learning: on (corrections and calibrated margins) or off "
                          "(the fitted predictor and its error-model margins, never updated)")
        ->capture_default_str();
    sub.add_option("--breach-target", options.breach_target,
                   "target rate at which a measured latency exceeds its planned bound, per model "
                   "and metric (learning on)")
        ->check(CLI::Range(1e-4, 0.5))
        ->capture_default_str();
    sub.add_option("--explore", options.explore_sd,
                   "optimism of the objective, in standard deviations of what is not yet known "
                   "of a model's throughput (0: none; SLAs always keep their upper bounds)")
        ->check(CLI::Range(0.0, 4.0))
        ->capture_default_str();
  }

  /// @brief The modes asked for (true = on), or an error naming the flag.
  [[nodiscard]] Result<std::vector<bool>> parsed(bool list) const {
    std::vector<bool> out;
    for (const auto& m : split(modes, ',')) {
      if (m == "on") {
        out.push_back(true);
      } else if (m == "off") {
        out.push_back(false);
      } else {
        return Error("--learning: unknown mode '" + m + "' (on, off)");
      }
    }
    if (out.empty() || (!list && out.size() != 1)) {
      return Error(std::string("--learning: expected ") +
                   (list ? "a list of on and off" : "on or off"));
    }
    return out;
  }
};

/// @brief --degrade of `corun run`, `corun eval scheduler` and `corun serve`: what a model whose
/// SLA cannot be held does (ControllerOptions::admission).
struct DegradeFlag {
  std::string mode = "shed";

  void add(CLI::App& sub) {
    sub.add_option("--degrade", mode,
                   "a model whose SLA no plan holds: shed (admit the largest share of its demand "
                   "that holds it, refuse the rest; pause it when none does) or best-effort (run "
                   "it with all of its demand and let it breach)")
        ->check(CLI::IsMember({"shed", "best-effort"}))
        ->capture_default_str();
  }
  [[nodiscard]] bool shed() const { return mode == "shed"; }
};

}  // namespace corun::cli
