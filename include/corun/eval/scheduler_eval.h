#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/runtime/online_run.h"

namespace corun {

/// @brief What happened around one drift event of a scenario (unseen by the planner).
struct DriftOutcome {
  double t_s = 0;
  std::string event;
  /// Measured breaches in the two intervals starting at the event (allowed: nobody told the
  /// planner) and in the intervals after them until the next drift event.
  std::size_t breaches_within_2 = 0;
  std::size_t breaches_after_2 = 0;
  /// Intervals from the event until the plan in force is within 3 % of the robust oracle
  /// (-1: never before the next drift event or the end).
  int recovery_intervals = -1;
  /// The largest gap to the robust oracle from the 10th interval after the event until the
  /// next drift event (NaN when that span is empty).
  double max_gap_from_10th_pct = NAN;
};

/// @brief One row of `corun eval scheduler`: a scenario run online with one solver, learning on
/// or off.
struct SchedulerEvalRow {
  std::string scenario;
  std::string solver;
  bool learning = true;
  /// The planner priced transitions (TransitionOptions::aware); either way the testbed charged
  /// them, and the utility below is net of what they cost.
  bool transitions_aware = true;
  std::size_t restarts = 0;   ///< restart-class changes over the run, all models
  std::size_t reloads = 0;    ///< reload-class changes
  double downtime_s = 0;      ///< seconds without service that transitions cost, all models
  std::size_t intervals = 0;
  std::size_t decisions = 0;
  /// Median over decisions of (exhaustive − chosen) / exhaustive predicted utility, under the
  /// same predictions, margins and constraints, in %.
  double gap_to_exhaustive_pct = 0;
  /// Median over intervals of (B − E) / B in %, where B is the robust oracle's mean measured
  /// utility and E the plan in force's mean utility over the same windows, a window breaching an
  /// SLA earning nothing (RobustOracle).
  double gap_to_oracle_pct = NAN;
  /// The same against the single-window oracle, the plan scored in that one window.
  double gap_to_oracle_1_pct = NAN;
  /// (H − R) / H in %, clamped at 0, where H is the hindsight oracle's value (the best schedule
  /// over the whole run that pays the same transition costs: eval/hindsight_oracle.h) and R
  /// the run's plans scored by the same function, over the intervals where some plan holds.
  double gap_to_hindsight_pct = NAN;
  double hindsight_value = NAN;  ///< H (utility × intervals)
  double run_value = NAN;        ///< R
  std::size_t hindsight_restarts = 0;  ///< restart-class changes of the hindsight schedule
  /// Per interval, the gap of the plan in force to the robust oracle (%; NaN where no plan holds
  /// every SLA on the testbed or nothing ran).
  std::vector<double> interval_gap_pct;
  std::size_t sla_violations = 0;  ///< measured model-intervals breaching
  std::size_t violations_after_3 = 0;  ///< of them, after the first 3 intervals
  /// Of them, in intervals where the robust oracle holds every SLA: where no plan can, a breach
  /// is unavoidable whatever the scheduler (the planner then says which SLA cannot be met).
  std::size_t violations_where_feasible = 0;
  std::size_t infeasible_truth_intervals = 0;  ///< intervals where no plan holds every SLA
  double breach_rate = 0;          ///< violations / model-intervals that ran
  std::size_t infeasible_intervals = 0;  ///< intervals whose plan could not hold every SLA
  /// Model-intervals that refused part or all of their demand (ControllerOptions::admission).
  std::size_t shed_model_intervals = 0;
  std::vector<DriftOutcome> drift;
  double decision_ms_p50 = 0;
  double decision_ms_p99 = 0;
  double mean_measured_utility = 0;
  std::size_t refits = 0;
};

/// @brief Makes a fresh predictor source for a scenario (each run gets its own).
using SourceFactory = std::function<Result<std::unique_ptr<PredictorSource>>(const Workload&)>;

/// @brief What to evaluate.
struct SchedulerEvalOptions {
  std::vector<std::string> solvers = {"ga", "exhaustive", "greedy", "hillclimb"};
  std::vector<bool> learning = {true};  ///< modes to run, each a row
  /// Transition modes to run, each a row: true prices them (aware), false plans as if every
  /// change were free (ignore); the testbed charges both the same.
  std::vector<bool> transitions = {true};
  LearningOptions learning_options;     ///< when learning is on (enabled is set per row)
  bool shed = true;                     ///< ControllerOptions::admission.enabled
  bool oracle = true;  ///< compute the references (exhaustive sweeps on the testbed)
  /// Independent windows behind the robust oracle: a 1 % breach rate is only told apart from
  /// 2 % with hundreds of them (with 20, the oracle picks plans that passed by luck).
  int oracle_windows = 1000;
  /// Robust candidates per interval behind the hindsight oracle (RobustOracle's `candidates`);
  /// 0 turns the hindsight oracle off.
  int hindsight_candidates = 3;
  /// Solve every decision's problem exhaustively too (gap_to_exhaustive_pct; costs a full sweep
  /// of the surrogate per decision).
  bool exhaustive_gap = true;
  /// Per scenario file: the dataset its surrogate was profiled into (refits); absent: none.
  std::map<std::string, std::filesystem::path> refit_datasets;
  std::function<void(const std::string&)> progress;
};

/// @brief Whether `w` can be evaluated with `options`: the robust oracle, the exhaustive gap and
/// the exhaustive solver enumerate every joint configuration, so a scenario with more than 2^64
/// of them is refused (naming what to turn off) when any of them is on.
Status check_enumerable(const Workload& w, const SchedulerEvalOptions& options);

/// @brief Runs every scenario with every solver and learning mode and scores the runs. Refuses
/// a scenario check_enumerable() refuses, before running any.
/// `ctx`: every run's seed, and the threads of its solver, its exhaustive gap and the oracles.
Result<std::vector<SchedulerEvalRow>> evaluate_scheduler(
    const Context& ctx, const std::vector<Workload>& scenarios, const Testbed& testbed,
    const SourceFactory& sources, const SchedulerEvalOptions& options);

nlohmann::json to_json(const SchedulerEvalRow& r);

}  // namespace corun
