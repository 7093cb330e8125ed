// Surrogate accuracy evaluation: for each N and seed, profiles on the testbed, fits every
// surrogate at every budget, and scores it on held-out measured configurations.
#include "corun/eval/surrogate_eval.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <thread>

#include "corun/core/rng.h"
#include "corun/profile/campaign.h"
#include "surrogate_eval_internal.h"

namespace corun::eval {

namespace {

using detail::kMacroGoal;
using detail::kR2Goal;
using surrogate::CompiledSurrogate;
using surrogate::kTargetCount;
using surrogate::RegressorKind;
using surrogate::Surrogate;
using surrogate::SurrogateKind;
using surrogate::Target;

constexpr std::uint64_t kHeldOutStream = 0x48454c44ULL;  // "HELD"
constexpr std::uint64_t kFitStream = 0x464954ULL;        // "FIT"
constexpr std::uint64_t kOnboardStream = 0x4f4e424fULL;  // "ONBO"
constexpr int kCoverageMultiplier = 20;  // the budget at which the error model is calibrated

// One scored point: log of what the testbed measured and log of what was predicted.
struct Point {
  std::size_t model;
  Target target;
  double truth;  // log
  double pred;   // log
  bool covered;  // truth <= prediction x the error model's 95 % factor
};

double r2(const std::vector<double>& truth, const std::vector<double>& pred) {
  if (truth.size() < 2) return NAN;
  double mean = 0;
  for (double v : truth) mean += v;
  mean /= static_cast<double>(truth.size());
  double ss_tot = 0, ss_res = 0;
  for (std::size_t i = 0; i < truth.size(); ++i) {
    ss_tot += (truth[i] - mean) * (truth[i] - mean);
    ss_res += (truth[i] - pred[i]) * (truth[i] - pred[i]);
  }
  return ss_tot > 0 ? 1 - ss_res / ss_tot : NAN;
}

double r2_of(const std::vector<Point>& pts) {
  std::vector<double> t, p;
  for (const auto& x : pts) {
    t.push_back(x.truth);
    p.push_back(x.pred);
  }
  return r2(t, p);
}

struct Scores {
  double r2_pooled = NAN;
  double r2_macro = NAN;
  double mape = NAN;
  double r2_throughput = NAN;
  double coverage95 = NAN;
  std::vector<double> r2_model;    // per model (NaN when it has no points)
  std::vector<double> mape_model;  // per model, %
  std::size_t points = 0;
};

// A held-out configuration and its repeated testbed measurements (independent noise seeds).
struct HeldOut {
  JointConfig config;
  std::vector<Measurement> repeats;
};

// The value the surrogates are scored against: the geometric mean of the repeats (NaN when any
// repeat failed), or one repeat alone.
double truth_of(const HeldOut& h, std::size_t model, Target t, int only_repeat) {
  double log_sum = 0;
  int count = 0;
  for (std::size_t r = 0; r < h.repeats.size(); ++r) {
    if (only_repeat >= 0 && static_cast<int>(r) != only_repeat) continue;
    const Measurement& m = h.repeats[r];
    if (!m.ok()) return NAN;
    double v = NAN;
    for (const auto& mm : m.models) {
      if (mm.model == model) v = surrogate::metric_value(mm, t);
    }
    if (!std::isfinite(v)) return NAN;
    log_sum += std::log(v);
    ++count;
  }
  return count > 0 ? std::exp(log_sum / count) : NAN;
}

// Scores predictions `pred` (n configurations x models x kTargetCount) against the held-out
// truth: the latency targets (and throughput apart), optionally the coverage of the 95 % bound.
Scores score_predictions(const Workload& w, const std::vector<HeldOut>& heldout,
                         const std::vector<float>& pred, const std::vector<float>* upper95,
                         int only_repeat) {
  const std::size_t n = w.models.size();
  std::vector<Point> lat, thr;
  for (std::size_t i = 0; i < heldout.size(); ++i) {
    for (std::size_t m = 0; m < n; ++m) {
      if (heldout[i].config[m] == kAbsent) continue;
      for (Target t : surrogate::family_targets(w.models[m].arch.family)) {
        const double truth = truth_of(heldout[i], m, t, only_repeat);
        const std::size_t at = (i * n + m) * kTargetCount + static_cast<std::size_t>(t);
        const double p = static_cast<double>(pred[at]);
        if (!std::isfinite(truth) || !std::isfinite(p) || p <= 0) continue;
        const bool covered =
            upper95 != nullptr &&
            truth <=
                p * static_cast<double>((*upper95)[m * kTargetCount + static_cast<std::size_t>(t)]);
        (surrogate::is_latency(t) ? lat : thr)
            .push_back({m, t, std::log(truth), std::log(p), covered});
      }
    }
  }
  Scores s;
  s.points = lat.size();
  s.r2_pooled = r2_of(lat);
  s.r2_throughput = r2_of(thr);
  double ape = 0, covered = 0;
  for (const auto& p : lat) {
    ape += std::abs(std::exp(p.pred) - std::exp(p.truth)) / std::exp(p.truth);
    covered += p.covered ? 1 : 0;
  }
  if (!lat.empty()) {
    s.mape = 100 * ape / static_cast<double>(lat.size());
    if (upper95 != nullptr) s.coverage95 = covered / static_cast<double>(lat.size());
  }
  s.r2_model.assign(n, NAN);
  s.mape_model.assign(n, NAN);
  {
    std::vector<double> sum(n, 0.0), count(n, 0.0);
    for (const auto& p : lat) {
      sum[p.model] += std::abs(std::exp(p.pred) - std::exp(p.truth)) / std::exp(p.truth);
      count[p.model] += 1;
    }
    for (std::size_t m = 0; m < n; ++m) {
      if (count[m] > 0) s.mape_model[m] = 100 * sum[m] / count[m];
    }
  }
  double macro = 0;
  int models = 0;
  for (std::size_t m = 0; m < n; ++m) {
    double sum = 0;
    int targets = 0;
    for (Target t : surrogate::family_targets(w.models[m].arch.family)) {
      if (!surrogate::is_latency(t)) continue;
      std::vector<Point> mine;
      for (const auto& p : lat) {
        if (p.model == m && p.target == t) mine.push_back(p);
      }
      const double v = r2_of(mine);
      if (std::isfinite(v)) {
        sum += v;
        ++targets;
      }
    }
    if (targets > 0) {
      s.r2_model[m] = sum / targets;
      macro += s.r2_model[m];
      ++models;
    }
  }
  if (models > 0) s.r2_macro = macro / models;
  return s;
}

// Predicts every held-out configuration in one batch with the compiled surrogate.
std::vector<float> predict_all(const CompiledSurrogate& c, const std::vector<HeldOut>& heldout,
                               std::size_t models) {
  std::vector<std::int32_t> configs;
  configs.reserve(heldout.size() * models);
  for (const auto& h : heldout) configs.insert(configs.end(), h.config.begin(), h.config.end());
  std::vector<float> out(heldout.size() * models * kTargetCount);
  auto ws = c.make_workspace();
  c.predict(configs, out, ws);
  return out;
}

// The scores of a surrogate against the repeat-averaged truth, plus those against a single
// measurement (reported next to them).
struct SurrogateScores {
  Scores mean;
  Scores single;
};

SurrogateScores score(const CompiledSurrogate& c, const Workload& w,
                      const std::vector<HeldOut>& heldout, bool with_coverage) {
  const std::size_t n = w.models.size();
  const std::vector<float> pred = predict_all(c, heldout, n);
  std::vector<float> upper(n * kTargetCount, 1.0f);
  for (std::size_t m = 0; m < n; ++m) {
    for (Target t : surrogate::kAllTargets) {
      upper[m * kTargetCount + static_cast<std::size_t>(t)] = c.upper95_factor(m, t);
    }
  }
  return {score_predictions(w, heldout, pred, with_coverage ? &upper : nullptr, -1),
          score_predictions(w, heldout, pred, nullptr, 0)};
}

// Test-retest: one measurement predicting another of the same configuration. The R^2 a
// predictor scores against single measurements is bounded near this by the testbed's noise.
Scores retest(const Workload& w, const std::vector<HeldOut>& heldout) {
  const std::size_t n = w.models.size();
  std::vector<float> pred(heldout.size() * n * kTargetCount, NAN);
  for (std::size_t i = 0; i < heldout.size(); ++i) {
    for (std::size_t m = 0; m < n; ++m) {
      for (Target t : surrogate::kAllTargets) {
        pred[(i * n + m) * kTargetCount + static_cast<std::size_t>(t)] =
            static_cast<float>(truth_of(heldout[i], m, t, 1));
      }
    }
  }
  return score_predictions(w, heldout, pred, nullptr, 0);
}

// Results of one (N, seed) task.
struct TaskResult {
  std::map<std::tuple<std::size_t, int>, SurrogateScores> scores;  // (surrogate, multiplier)
  Scores retest;
  std::size_t standalone_measurements = 0;
  bool has_onboarding = false;
  SurrogateScores onboard;
  Scores standalone_only;  // prediction = the standalone profile (no interference at all)
  std::string error;
};

std::vector<profile::SampleRecord> take(const std::vector<profile::SampleRecord>& v,
                                        std::size_t n) {
  return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(n, v.size()))};
}

// Fits on `train`, drawing from ctx.seed (recorded as the provenance's), and scores.
Result<SurrogateScores> fit_and_score(const Context& ctx, const Workload& w,
                                      const surrogate::StandaloneTable& table,
                                      const std::vector<profile::SampleRecord>& train,
                                      const std::vector<HeldOut>& heldout,
                                      const surrogate::FitOptions& fit,
                                      const std::string& testbed) {
  surrogate::Provenance prov;
  prov.testbed = testbed;
  prov.device = w.device.name;
  prov.context = ctx;
  prov.workload_hash = w.hash;
  auto s = Surrogate::fit(ctx, w, table, train, fit, prov);
  if (!s) return s.error();
  auto c = CompiledSurrogate::compile(*s, w);
  if (!c) return c.error();
  return score(*c, w, heldout, fit.calibration_folds >= 2);
}

// What every step of one (N, seed) task reads: the workload's first n models, the testbed,
// the options and the task's context (its seed derived from the run's and the seed index).
struct TaskContext {
  const Workload& w;
  const Testbed& testbed;
  const SurrogateEvalOptions& o;
  std::size_t n;
  const Context ctx;
};

// The co-run samples the surrogates of a task are fitted on: the MeanField plan's (MeanField
// and cross-model surrogates) and the joint plan's (the others), each at the largest budget.
struct CorunPools {
  std::vector<profile::SampleRecord> mf, joint;
};

/// Measures the co-run plans that the task's surrogates need, at the largest budget.
CorunPools measure_corun_pools(const TaskContext& t) {
  const Workload& w = t.w;
  const SurrogateEvalOptions& o = t.o;
  const int max_mult = *std::max_element(o.budget_multipliers.begin(), o.budget_multipliers.end());
  const std::size_t max_budget = static_cast<std::size_t>(max_mult) * t.n;
  bool need_mf = o.onboarding, need_joint = false;
  for (const auto& s : o.surrogates) {
    (s.kind == SurrogateKind::kMeanField || s.kind == SurrogateKind::kCrossModel ? need_mf
                                                                                 : need_joint) =
        true;
  }
  CorunPools pools;
  if (need_mf) {
    pools.mf = profile::measure_plan(t.ctx, w, t.testbed, profile::Plan::kMeanField, max_budget,
                                     o.window_s);
  }
  if (need_joint) {
    pools.joint =
        profile::measure_plan(t.ctx, w, t.testbed, profile::Plan::kJoint, max_budget, o.window_s);
  }
  return pools;
}

/// Draws and measures the held-out configurations of a task.
std::vector<HeldOut> measure_heldout(const TaskContext& t) {
  const Workload& w = t.w;
  const SurrogateEvalOptions& o = t.o;
  // Held-out: uniform random feasible joint configurations from their own plan seed, each
  // measured `heldout_repeats` times with independent noise.
  std::vector<HeldOut> heldout;
  const Context held_out = t.ctx.derived({kHeldOutStream});
  const ConfigSpace space(w);
  for (std::size_t i = 0; i < o.heldout; ++i) {
    HeldOut h;
    h.config = profile::plan_sample(held_out, w, space, profile::Plan::kJoint, i);
    for (int rep = 0; rep < o.heldout_repeats; ++rep) {
      const Context repeat{
          .seed = derive_seed(profile::measurement_seed(held_out, profile::Plan::kJoint, i),
                              {static_cast<std::uint64_t>(rep)})};
      h.repeats.push_back(t.testbed.measure(repeat, w, h.config, MeasureOptions(o.window_s)));
    }
    heldout.push_back(std::move(h));
  }
  return heldout;
}

/// Fits and scores every surrogate at every budget into r.scores; false, with r.error set,
/// when a fit fails.
bool score_budgets(const TaskContext& t, const surrogate::StandaloneTable& table,
                   const CorunPools& pools, const std::vector<HeldOut>& heldout, TaskResult& r) {
  const Workload& w = t.w;
  const SurrogateEvalOptions& o = t.o;
  for (std::size_t k = 0; k < o.surrogates.size(); ++k) {
    const SurrogateSpec& spec = o.surrogates[k];
    const bool uses_mf =
        spec.kind == SurrogateKind::kMeanField || spec.kind == SurrogateKind::kCrossModel;
    const auto& pool = uses_mf ? pools.mf : pools.joint;
    for (int mult : o.budget_multipliers) {
      const std::size_t budget = static_cast<std::size_t>(mult) * t.n;
      surrogate::FitOptions fit;
      fit.kind = spec.kind;
      fit.regressor = spec.regressor;
      fit.monotone = spec.monotone;
      fit.regressor_options = o.regressor_options;
      fit.calibration_folds =
          spec.kind == SurrogateKind::kMeanField && mult == kCoverageMultiplier ? 5 : 0;
      auto s = fit_and_score(t.ctx.derived({kFitStream, k, budget}), w, table, take(pool, budget),
                             heldout, fit, std::string(t.testbed.name()));
      if (!s) {
        r.error = s.error()
                      .wrap(std::string(surrogate::to_string(spec.kind)) + "/" +
                            spec.regressor_label() + " at budget " + std::to_string(budget))
                      .what();
        return false;
      }
      r.scores[{k, mult}] = std::move(*s);
    }
  }
  return true;
}

/// Measures the onboarding training samples: the MeanField plan with the newcomer left out.
std::vector<profile::SampleRecord> measure_onboarding_samples(const TaskContext& t,
                                                              std::size_t newcomer,
                                                              const Context& onboarding) {
  const Workload& w = t.w;
  const std::size_t budget = static_cast<std::size_t>(t.o.onboarding_multiplier) * t.n;
  const ConfigSpace space(w);
  std::vector<profile::SampleRecord> train;
  for (std::size_t i = 0; i < budget; ++i) {
    profile::SampleRecord rec;
    rec.index = i;
    rec.config = profile::plan_sample(onboarding, w, space, profile::Plan::kMeanField, i);
    rec.config[newcomer] = kAbsent;
    rec.measurement_seed = profile::measurement_seed(onboarding, profile::Plan::kMeanField, i);
    rec.measurement = t.testbed.measure(Context{.seed = rec.measurement_seed}, w, rec.config,
                                        MeasureOptions(t.o.window_s));
    train.push_back(std::move(rec));
  }
  return train;
}

/// The standalone profile of every held-out configuration taken as its prediction (no
/// interference at all).
std::vector<float> standalone_predictions(const surrogate::StandaloneTable& table,
                                          const std::vector<HeldOut>& heldout, std::size_t n) {
  std::vector<float> naive(heldout.size() * n * kTargetCount, NAN);
  for (std::size_t i = 0; i < heldout.size(); ++i) {
    for (std::size_t m = 0; m < n; ++m) {
      if (heldout[i].config[m] == kAbsent) continue;
      const auto& p = table.at(m, static_cast<std::size_t>(heldout[i].config[m]));
      for (Target t : surrogate::kAllTargets) {
        naive[(i * n + m) * kTargetCount + static_cast<std::size_t>(t)] =
            static_cast<float>(p.target[static_cast<std::size_t>(t)]);
      }
    }
  }
  return naive;
}

/// Scores the cross-model surrogate on the last model, never co-run in training, and the
/// standalone profile as the naive prediction; sets r.error when the fit fails.
void score_onboarding(const TaskContext& t, const surrogate::StandaloneTable& table,
                      const std::vector<HeldOut>& heldout, TaskResult& r) {
  const Workload& w = t.w;
  const SurrogateEvalOptions& o = t.o;
  // The last model never co-runs during training: the co-run plan runs without it.
  const std::size_t newcomer = t.n - 1;
  const Context onboard = t.ctx.derived({kOnboardStream});
  const std::vector<profile::SampleRecord> train = measure_onboarding_samples(t, newcomer, onboard);
  surrogate::FitOptions fit;
  fit.kind = SurrogateKind::kCrossModel;
  fit.regressor = o.onboarding_regressor;
  fit.regressor_options = o.regressor_options;
  fit.calibration_folds = 0;
  fit.withheld_models = {newcomer};
  auto s = fit_and_score(onboard.derived({kFitStream}), w, table, train, heldout, fit,
                         std::string(t.testbed.name()));
  if (!s) {
    r.error = s.error().wrap("onboarding").what();
    return;
  }
  r.has_onboarding = true;
  r.onboard = std::move(*s);
  const std::vector<float> naive = standalone_predictions(table, heldout, t.n);
  r.standalone_only = score_predictions(w, heldout, naive, nullptr, -1);
}

/// Runs one (N, seed) task of the run whose context is `ctx`.
TaskResult run_task(const Context& ctx, const Workload& full, const Testbed& testbed,
                    const SurrogateEvalOptions& o, std::size_t n, int seed_index) {
  TaskResult r;
  const Workload w = full.prefix(n);
  const TaskContext t{w, testbed, o, n, ctx.derived({static_cast<std::uint64_t>(seed_index)})};

  const auto standalone =
      profile::measure_plan(t.ctx, w, testbed, profile::Plan::kStandalone,
                            static_cast<std::uint64_t>(o.standalone_repeats),
                            o.standalone_window_s > 0 ? o.standalone_window_s : o.window_s);
  auto table = surrogate::StandaloneTable::from_samples(w, standalone);
  if (!table) {
    r.error = table.error().what();
    return r;
  }
  r.standalone_measurements = table->measurements();
  const CorunPools pools = measure_corun_pools(t);
  const std::vector<HeldOut> heldout = measure_heldout(t);
  if (o.heldout_repeats >= 2) r.retest = retest(w, heldout);

  if (!score_budgets(t, *table, pools, heldout, r)) return r;

  if (o.onboarding && n >= 3) score_onboarding(t, *table, heldout, r);
  return r;
}

double mean_finite(const std::vector<double>& v) {
  double s = 0;
  int k = 0;
  for (double x : v) {
    if (std::isfinite(x)) {
      s += x;
      ++k;
    }
  }
  return k > 0 ? s / k : NAN;
}

/// Refuses options the evaluation cannot run with.
Status check_options(const Workload& w, const SurrogateEvalOptions& o) {
  if (o.n_min < 1 || o.n_max < o.n_min) return Error("--n: expected a range such as 2..6");
  if (o.n_max > w.models.size()) {
    return Error("--n: the workload has " + std::to_string(w.models.size()) + " models, not " +
                 std::to_string(o.n_max));
  }
  if (o.seeds < 1) return Error("--seeds: at least 1");
  if (o.budget_multipliers.empty()) return Error("budgets: at least one");
  for (int m : o.budget_multipliers) {
    if (m < 1) return Error("budgets: multipliers of N must be >= 1");
  }
  if (o.heldout < 10) return Error("--heldout: at least 10 configurations");
  if (o.heldout_repeats < 1 || o.standalone_repeats < 1) return Error("repeats: at least 1");
  return {};
}

// One (N, seed) task.
struct Task {
  std::size_t n;
  int seed;
};

/// Runs every task on ctx.threads threads (the calling one included), reporting progress.
std::vector<TaskResult> run_tasks(const Context& ctx, const Workload& w, const Testbed& testbed,
                                  const SurrogateEvalOptions& o, const std::vector<Task>& tasks,
                                  profile::Progress* progress) {
  std::vector<TaskResult> results(tasks.size());
  std::atomic<std::size_t> next{0}, done{0};
  const auto worker = [&] {
    for (std::size_t i = next++; i < tasks.size(); i = next++) {
      results[i] = run_task(ctx, w, testbed, o, tasks[i].n, tasks[i].seed);
      ++done;
    }
  };
  const int threads = std::clamp(ctx.threads, 1, static_cast<int>(tasks.size()));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  if (threads == 1) {
    worker();
  } else {
    while (done.load() < tasks.size()) {
      if (progress != nullptr) progress->update(done.load());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  for (auto& t : pool) t.join();
  if (progress != nullptr) {
    progress->update(tasks.size());
    progress->finish();
  }
  return results;
}

/// The report with its header filled in (workload, testbed, settings) and no rows yet.
SurrogateEvalReport report_header(const Context& ctx, const Workload& w, const Testbed& testbed,
                                  const SurrogateEvalOptions& o) {
  SurrogateEvalReport rep;
  rep.workload = std::filesystem::path(w.file).stem().string();
  rep.workload_hash = w.hash;
  rep.device = w.device.name;
  rep.testbed = std::string(testbed.name());
  rep.context = ctx;
  rep.heldout = o.heldout;
  rep.heldout_repeats = o.heldout_repeats;
  rep.onboarding_regressor = std::string(surrogate::to_string(o.onboarding_regressor));
  rep.standalone_repeats = o.standalone_repeats;
  for (const auto& m : w.models) rep.model_names.push_back(m.name);
  return rep;
}

// The finished tasks of one N, one per seed.
struct TasksOfN {
  std::size_t n;
  std::vector<const TaskResult*> mine;
};

/// The row of surrogate k (`spec`) at budget mult x N: its scores, averaged over the seeds.
SurrogateEvalRow budget_row(const SurrogateSpec& spec, std::size_t k, int mult, const TasksOfN& g) {
  const std::size_t n = g.n;
  const std::vector<const TaskResult*>& mine = g.mine;
  SurrogateEvalRow row;
  row.n = n;
  row.surrogate = std::string(surrogate::to_string(spec.kind));
  row.regressor = spec.regressor_label();
  row.budget = static_cast<std::size_t>(mult) * n;
  row.budget_multiplier = mult;
  row.standalone_measurements =
      spec.kind == SurrogateKind::kJoint ? 0 : mine.front()->standalone_measurements;
  std::vector<double> pooled, macro, mape, thr, cov, pts, pooled1, macro1;
  std::vector<std::vector<double>> per_model(n);
  for (const TaskResult* r : mine) {
    const Scores& s = r->scores.at({k, mult}).mean;
    pooled1.push_back(r->scores.at({k, mult}).single.r2_pooled);
    macro1.push_back(r->scores.at({k, mult}).single.r2_macro);
    pooled.push_back(s.r2_pooled);
    macro.push_back(s.r2_macro);
    mape.push_back(s.mape);
    thr.push_back(s.r2_throughput);
    cov.push_back(s.coverage95);
    pts.push_back(static_cast<double>(s.points));
    for (std::size_t m = 0; m < n; ++m) per_model[m].push_back(s.r2_model[m]);
  }
  row.r2_pooled = mean_finite(pooled);
  row.r2_macro = mean_finite(macro);
  row.r2_pooled_single = mean_finite(pooled1);
  row.r2_macro_single = mean_finite(macro1);
  row.mape = mean_finite(mape);
  row.r2_throughput = mean_finite(thr);
  row.coverage95 = mean_finite(cov);
  row.heldout_points = static_cast<std::size_t>(std::llround(mean_finite(pts)));
  for (const auto& v : per_model) row.r2_per_model.push_back(mean_finite(v));
  row.seeds = static_cast<int>(mine.size());
  return row;
}

/// Appends surrogate k's rows at every budget (`mults`, ascending) for one N, and the smallest
/// budgets that reach the goals.
void add_budget_rows(const SurrogateSpec& spec, std::size_t k, const std::vector<int>& mults,
                     const TasksOfN& g, SurrogateEvalReport& rep) {
  BudgetNeeded need{g.n, std::string(surrogate::to_string(spec.kind)), spec.regressor_label(),
                    std::nullopt, std::nullopt};
  for (int mult : mults) {
    SurrogateEvalRow row = budget_row(spec, k, mult, g);
    if (!need.budget && row.r2_pooled >= kR2Goal) need.budget = row.budget;
    if (!need.budget_macro && row.r2_macro >= kMacroGoal) need.budget_macro = row.budget;
    rep.rows.push_back(std::move(row));
  }
  rep.needed.push_back(need);
}

/// The test-retest ceiling of one N, averaged over the seeds.
NoiseCeiling noise_ceiling(const TasksOfN& g) {
  std::vector<double> pooled, macro;
  for (const TaskResult* r : g.mine) {
    pooled.push_back(r->retest.r2_pooled);
    macro.push_back(r->retest.r2_macro);
  }
  return {g.n, mean_finite(pooled), mean_finite(macro)};
}

/// The onboarding row of one N: the last model, predicted by the cross-model surrogate without
/// having been co-run, against the naive and the per-model references.
OnboardingRow onboarding_row(const Workload& w, const SurrogateEvalOptions& o, const TasksOfN& g) {
  const std::size_t n = g.n;
  const std::vector<const TaskResult*>& mine = g.mine;
  OnboardingRow ob;
  ob.n = n;
  ob.model = w.models[n - 1].name;
  ob.budget = static_cast<std::size_t>(o.onboarding_multiplier) * n;
  std::vector<double> r2v, mape, others, ref, naive_r2, naive_mape;
  for (const TaskResult* r : mine) {
    if (!r->has_onboarding) continue;
    const Scores& sc = r->onboard.mean;
    r2v.push_back(sc.r2_model[n - 1]);
    mape.push_back(sc.mape_model[n - 1]);
    naive_r2.push_back(r->standalone_only.r2_model[n - 1]);
    naive_mape.push_back(r->standalone_only.mape_model[n - 1]);
    double sum = 0;
    int count = 0;
    for (std::size_t m = 0; m + 1 < n; ++m) {
      if (std::isfinite(sc.r2_model[m])) {
        sum += sc.r2_model[m];
        ++count;
      }
    }
    others.push_back(count > 0 ? sum / count : NAN);
    for (std::size_t k = 0; k < o.surrogates.size(); ++k) {
      if (o.surrogates[k].kind == SurrogateKind::kMeanField &&
          o.surrogates[k].regressor == RegressorKind::kMlp) {
        const auto it = r->scores.find({k, o.onboarding_multiplier});
        if (it != r->scores.end()) ref.push_back(it->second.mean.r2_model[n - 1]);
      }
    }
    ++ob.seeds;
  }
  ob.r2 = mean_finite(r2v);
  ob.mape = mean_finite(mape);
  ob.r2_standalone_only = mean_finite(naive_r2);
  ob.mape_standalone_only = mean_finite(naive_mape);
  ob.r2_others = mean_finite(others);
  ob.r2_reference = mean_finite(ref);
  return ob;
}

/// Averages the tasks' results over the seeds, per N, into the report's rows.
void summarise_tasks(const Workload& w, const SurrogateEvalOptions& o,
                     const std::vector<Task>& tasks, const std::vector<TaskResult>& results,
                     SurrogateEvalReport& rep) {
  std::vector<int> mults = o.budget_multipliers;
  std::sort(mults.begin(), mults.end());
  for (std::size_t n = o.n_min; n <= o.n_max; ++n) {
    std::vector<const TaskResult*> mine;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].n == n) mine.push_back(&results[i]);
    }
    const TasksOfN g{n, std::move(mine)};
    for (std::size_t k = 0; k < o.surrogates.size(); ++k) {
      add_budget_rows(o.surrogates[k], k, mults, g, rep);
    }
    if (o.heldout_repeats >= 2) rep.ceilings.push_back(noise_ceiling(g));
    if (o.onboarding && n >= 3) rep.onboarding.push_back(onboarding_row(w, o, g));
  }
}

}  // namespace

std::vector<SurrogateSpec> default_surrogates() {
  return {{SurrogateKind::kMeanField, RegressorKind::kMlp},
          {SurrogateKind::kMeanField, RegressorKind::kGbdt},
          {SurrogateKind::kJoint, RegressorKind::kMlp},
          {SurrogateKind::kPairwise, RegressorKind::kLinear}};
}

Result<SurrogateEvalReport> evaluate_surrogates(const Context& ctx, const Workload& w,
                                                const Testbed& testbed,
                                                const SurrogateEvalOptions& o,
                                                profile::Progress* progress) {
  if (Status st = check_options(w, o); !st.ok()) return st.error();
  std::vector<Task> tasks;
  for (std::size_t n = o.n_min; n <= o.n_max; ++n) {
    for (int s = 0; s < o.seeds; ++s) tasks.push_back({n, s});
  }
  const std::vector<TaskResult> results = run_tasks(ctx, w, testbed, o, tasks, progress);
  for (const auto& r : results) {
    if (!r.error.empty()) return Error("surrogate evaluation: " + r.error, Error::Kind::kInternal);
  }

  SurrogateEvalReport rep = report_header(ctx, w, testbed, o);
  summarise_tasks(w, o, tasks, results, rep);
  return rep;
}

}  // namespace corun::eval
