#include "corun/eval/surrogate_eval.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "corun/core/rng.h"
#include "corun/core/strings.h"
#include "corun/core/svg.h"
#include "corun/core/version.h"
#include "corun/profile/campaign.h"

namespace corun::eval {

namespace {

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
constexpr double kR2Goal = 0.95;
constexpr double kMacroGoal = 0.90;

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

Result<SurrogateScores> fit_and_score(const Workload& w, const surrogate::StandaloneTable& table,
                                      const std::vector<profile::SampleRecord>& train,
                                      const std::vector<HeldOut>& heldout,
                                      const surrogate::FitOptions& fit,
                                      const std::string& testbed) {
  surrogate::Provenance prov;
  prov.testbed = testbed;
  prov.device = w.device.name;
  prov.seed = fit.seed;
  prov.workload_hash = w.hash;
  auto s = Surrogate::fit(w, table, train, fit, prov);
  if (!s) return s.error();
  auto c = CompiledSurrogate::compile(*s, w);
  if (!c) return c.error();
  return score(*c, w, heldout, fit.calibration_folds >= 2);
}

TaskResult run_task(const Workload& full, const Testbed& testbed, const SurrogateEvalOptions& o,
                    std::size_t n, int seed_index) {
  TaskResult r;
  const Workload w = full.prefix(n);
  const std::uint64_t seed = derive_seed(o.seed, {static_cast<std::uint64_t>(seed_index)});
  const int max_mult = *std::max_element(o.budget_multipliers.begin(), o.budget_multipliers.end());
  const std::size_t max_budget = static_cast<std::size_t>(max_mult) * n;

  const auto standalone = profile::measure_plan(
      w, testbed, profile::Plan::kStandalone, static_cast<std::uint64_t>(o.standalone_repeats),
      seed, o.standalone_window_s > 0 ? o.standalone_window_s : o.window_s);
  auto table = surrogate::StandaloneTable::from_samples(w, standalone);
  if (!table) {
    r.error = table.error().what();
    return r;
  }
  r.standalone_measurements = table->measurements();
  bool need_mf = o.onboarding, need_joint = false;
  for (const auto& s : o.surrogates) {
    (s.kind == SurrogateKind::kMeanField || s.kind == SurrogateKind::kCrossModel ? need_mf
                                                                                 : need_joint) =
        true;
  }
  std::vector<profile::SampleRecord> mf, joint;
  if (need_mf) {
    mf = profile::measure_plan(w, testbed, profile::Plan::kMeanField, max_budget, seed, o.window_s);
  }
  if (need_joint) {
    joint = profile::measure_plan(w, testbed, profile::Plan::kJoint, max_budget, seed, o.window_s);
  }
  // Held-out: uniform random feasible joint configurations from their own plan seed, each
  // measured `heldout_repeats` times with independent noise.
  std::vector<HeldOut> heldout;
  {
    const std::uint64_t hseed = derive_seed(seed, {kHeldOutStream});
    const ConfigSpace space(w);
    for (std::size_t i = 0; i < o.heldout; ++i) {
      HeldOut h;
      h.config = profile::plan_sample(w, space, profile::Plan::kJoint, hseed, i);
      for (int rep = 0; rep < o.heldout_repeats; ++rep) {
        const std::uint64_t mseed =
            derive_seed(profile::measurement_seed(profile::Plan::kJoint, hseed, i),
                        {static_cast<std::uint64_t>(rep)});
        h.repeats.push_back(testbed.measure(w, h.config, {o.window_s, mseed}));
      }
      heldout.push_back(std::move(h));
    }
  }
  if (o.heldout_repeats >= 2) r.retest = retest(w, heldout);

  for (std::size_t k = 0; k < o.surrogates.size(); ++k) {
    const SurrogateSpec& spec = o.surrogates[k];
    const bool uses_mf =
        spec.kind == SurrogateKind::kMeanField || spec.kind == SurrogateKind::kCrossModel;
    const auto& pool = uses_mf ? mf : joint;
    for (int mult : o.budget_multipliers) {
      const std::size_t budget = static_cast<std::size_t>(mult) * n;
      surrogate::FitOptions fit;
      fit.kind = spec.kind;
      fit.regressor = spec.regressor;
      fit.monotone = spec.monotone;
      fit.regressor_options = o.regressor_options;
      fit.seed = derive_seed(seed, {kFitStream, k, budget});
      fit.calibration_folds =
          spec.kind == SurrogateKind::kMeanField && mult == kCoverageMultiplier ? 5 : 0;
      auto s =
          fit_and_score(w, *table, take(pool, budget), heldout, fit, std::string(testbed.name()));
      if (!s) {
        r.error = s.error()
                      .wrap(std::string(surrogate::to_string(spec.kind)) + "/" +
                            spec.regressor_label() + " at budget " +
                            std::to_string(budget))
                      .what();
        return r;
      }
      r.scores[{k, mult}] = std::move(*s);
    }
  }

  if (o.onboarding && n >= 3) {
    // The last model never co-runs during training: the co-run plan runs without it.
    const std::size_t newcomer = n - 1;
    const std::size_t budget = static_cast<std::size_t>(o.onboarding_multiplier) * n;
    const ConfigSpace space(w);
    const std::uint64_t oseed = derive_seed(seed, {kOnboardStream});
    std::vector<profile::SampleRecord> train;
    for (std::size_t i = 0; i < budget; ++i) {
      profile::SampleRecord rec;
      rec.index = i;
      rec.config = profile::plan_sample(w, space, profile::Plan::kMeanField, oseed, i);
      rec.config[newcomer] = kAbsent;
      rec.measurement_seed = profile::measurement_seed(profile::Plan::kMeanField, oseed, i);
      rec.measurement = testbed.measure(w, rec.config, {o.window_s, rec.measurement_seed});
      train.push_back(std::move(rec));
    }
    surrogate::FitOptions fit;
    fit.kind = SurrogateKind::kCrossModel;
    fit.regressor = o.onboarding_regressor;
    fit.regressor_options = o.regressor_options;
    fit.seed = derive_seed(oseed, {kFitStream});
    fit.calibration_folds = 0;
    fit.withheld_models = {newcomer};
    auto s = fit_and_score(w, *table, train, heldout, fit, std::string(testbed.name()));
    if (!s) {
      r.error = s.error().wrap("onboarding").what();
      return r;
    }
    r.has_onboarding = true;
    r.onboard = std::move(*s);
    std::vector<float> naive(heldout.size() * n * kTargetCount, NAN);
    for (std::size_t i = 0; i < heldout.size(); ++i) {
      for (std::size_t m = 0; m < n; ++m) {
        if (heldout[i].config[m] == kAbsent) continue;
        const auto& p = table->at(m, static_cast<std::size_t>(heldout[i].config[m]));
        for (Target t : surrogate::kAllTargets) {
          naive[(i * n + m) * kTargetCount + static_cast<std::size_t>(t)] =
              static_cast<float>(p.target[static_cast<std::size_t>(t)]);
        }
      }
    }
    r.standalone_only = score_predictions(w, heldout, naive, nullptr, -1);
  }
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

nlohmann::json num(double v) {
  return std::isfinite(v) ? nlohmann::json(std::round(v * 1e4) / 1e4) : nlohmann::json(nullptr);
}

}  // namespace

std::vector<SurrogateSpec> default_surrogates() {
  return {{SurrogateKind::kMeanField, RegressorKind::kMlp},
          {SurrogateKind::kMeanField, RegressorKind::kGbdt},
          {SurrogateKind::kJoint, RegressorKind::kMlp},
          {SurrogateKind::kPairwise, RegressorKind::kLinear}};
}

Result<SurrogateEvalReport> evaluate_surrogates(const Workload& w, const Testbed& testbed,
                                                const SurrogateEvalOptions& o,
                                                profile::Progress* progress) {
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

  struct Task {
    std::size_t n;
    int seed;
  };
  std::vector<Task> tasks;
  for (std::size_t n = o.n_min; n <= o.n_max; ++n) {
    for (int s = 0; s < o.seeds; ++s) tasks.push_back({n, s});
  }
  std::vector<TaskResult> results(tasks.size());
  std::atomic<std::size_t> next{0}, done{0};
  const auto worker = [&] {
    for (std::size_t i = next++; i < tasks.size(); i = next++) {
      results[i] = run_task(w, testbed, o, tasks[i].n, tasks[i].seed);
      ++done;
    }
  };
  const int threads = std::clamp(o.threads, 1, static_cast<int>(tasks.size()));
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
  for (const auto& r : results) {
    if (!r.error.empty()) return Error("surrogate evaluation: " + r.error, Error::Kind::kInternal);
  }

  SurrogateEvalReport rep;
  rep.workload = std::filesystem::path(w.file).stem().string();
  rep.workload_hash = w.hash;
  rep.device = w.device.name;
  rep.testbed = std::string(testbed.name());
  rep.seed = o.seed;
  rep.heldout = o.heldout;
  rep.heldout_repeats = o.heldout_repeats;
  rep.onboarding_regressor = std::string(surrogate::to_string(o.onboarding_regressor));
  rep.standalone_repeats = o.standalone_repeats;
  for (const auto& m : w.models) rep.model_names.push_back(m.name);
  std::vector<int> mults = o.budget_multipliers;
  std::sort(mults.begin(), mults.end());
  for (std::size_t n = o.n_min; n <= o.n_max; ++n) {
    std::vector<const TaskResult*> mine;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].n == n) mine.push_back(&results[i]);
    }
    for (std::size_t k = 0; k < o.surrogates.size(); ++k) {
      const SurrogateSpec& spec = o.surrogates[k];
      BudgetNeeded need{n, std::string(surrogate::to_string(spec.kind)),
                        spec.regressor_label(), std::nullopt,
                        std::nullopt};
      for (int mult : mults) {
        SurrogateEvalRow row;
        row.n = n;
        row.surrogate = need.surrogate;
        row.regressor = need.regressor;
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
        if (!need.budget && row.r2_pooled >= kR2Goal) need.budget = row.budget;
        if (!need.budget_macro && row.r2_macro >= kMacroGoal) need.budget_macro = row.budget;
        rep.rows.push_back(std::move(row));
      }
      rep.needed.push_back(need);
    }
    if (o.heldout_repeats >= 2) {
      std::vector<double> pooled, macro;
      for (const TaskResult* r : mine) {
        pooled.push_back(r->retest.r2_pooled);
        macro.push_back(r->retest.r2_macro);
      }
      rep.ceilings.push_back({n, mean_finite(pooled), mean_finite(macro)});
    }
    if (o.onboarding && n >= 3) {
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
      rep.onboarding.push_back(ob);
    }
  }
  return rep;
}

nlohmann::json to_json(const SurrogateEvalReport& r) {
  nlohmann::json j;
  j["workload"] = r.workload;
  j["workload_hash"] = r.workload_hash;
  j["device"] = r.device;
  j["testbed"] = r.testbed;
  j["seed"] = r.seed;
  j["heldout"] = r.heldout;
  j["heldout_repeats"] = r.heldout_repeats;
  j["onboarding_regressor"] = r.onboarding_regressor;
  j["standalone_repeats"] = r.standalone_repeats;
  j["noise_ceiling"] = nlohmann::json::array();
  for (const auto& c : r.ceilings) {
    j["noise_ceiling"].push_back(
        {{"n", c.n}, {"r2_pooled_retest", num(c.r2_pooled)}, {"r2_macro_retest", num(c.r2_macro)}});
  }
  j["corun_version"] = std::string(version());
  j["git_hash"] = std::string(git_hash());
  j["rows"] = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json per_model = nlohmann::json::object();
    for (std::size_t m = 0; m < row.r2_per_model.size(); ++m) {
      per_model[r.model_names[m]] = num(row.r2_per_model[m]);
    }
    j["rows"].push_back({{"n", row.n},
                         {"surrogate", row.surrogate},
                         {"regressor", row.regressor},
                         {"budget", row.budget},
                         {"standalone_measurements", row.standalone_measurements},
                         {"r2_pooled", num(row.r2_pooled)},
                         {"r2_macro", num(row.r2_macro)},
                         {"r2_pooled_single", num(row.r2_pooled_single)},
                         {"r2_macro_single", num(row.r2_macro_single)},
                         {"mape", num(row.mape)},
                         {"seeds", row.seeds},
                         {"r2_throughput", num(row.r2_throughput)},
                         {"coverage95", num(row.coverage95)},
                         {"r2_per_model", per_model},
                         {"heldout_points", row.heldout_points}});
  }
  j["budget_for_r2_095"] = nlohmann::json::array();
  for (const auto& b : r.needed) {
    j["budget_for_r2_095"].push_back(
        {{"n", b.n},
         {"surrogate", b.surrogate},
         {"regressor", b.regressor},
         {"budget_for_r2_095", b.budget ? nlohmann::json(*b.budget) : nlohmann::json(nullptr)},
         {"budget_for_r2_macro_090",
          b.budget_macro ? nlohmann::json(*b.budget_macro) : nlohmann::json(nullptr)}});
  }
  j["onboarding"] = nlohmann::json::array();
  for (const auto& o : r.onboarding) {
    j["onboarding"].push_back({{"n", o.n},
                               {"model", o.model},
                               {"budget", o.budget},
                               {"r2", num(o.r2)},
                               {"mape", num(o.mape)},
                               {"r2_reference_meanfield", num(o.r2_reference)},
                               {"r2_standalone_only", num(o.r2_standalone_only)},
                               {"mape_standalone_only", num(o.mape_standalone_only)},
                               {"r2_others", num(o.r2_others)},
                               {"seeds", o.seeds}});
  }
  return j;
}

std::string svg_r2_vs_budget(const SurrogateEvalReport& r) {
  SvgPlot p;
  p.title = r.workload + " (" + r.device + "): macro R^2 on held-out configurations";
  p.x_label = "co-run measurements (budget)";
  p.y_label = "macro R^2 (log latency)";
  p.log_x = true;
  p.y_min = 0.5;
  p.y_max = 1.0;
  p.reference_y = kMacroGoal;
  std::map<std::pair<std::size_t, std::string>, SvgSeries> lines;
  for (const auto& row : r.rows) {
    if (row.surrogate != "meanfield" || row.regressor != "mlp") continue;
    auto& s = lines[{row.n, row.surrogate}];
    s.label = "MeanField MLP, N=" + std::to_string(row.n);
    s.x.push_back(static_cast<double>(row.budget));
    s.y.push_back(row.r2_macro);
  }
  for (const auto& row : r.rows) {
    if (row.surrogate != "joint") continue;
    auto& s = lines[{row.n, row.surrogate}];
    s.label = "Joint MLP, N=" + std::to_string(row.n);
    s.dashed = true;
    s.x.push_back(static_cast<double>(row.budget));
    s.y.push_back(row.r2_macro);
  }
  for (auto& [key, s] : lines) {
    if (key.second == "meanfield") p.series.push_back(s);
  }
  for (auto& [key, s] : lines) {
    if (key.second == "joint") p.series.push_back(s);
  }
  return p.render();
}

std::string svg_budget_vs_n(const SurrogateEvalReport& r) {
  SvgPlot p;
  p.title = r.workload + " (" + r.device + "): co-run budget needed";
  p.x_label = "co-running models N";
  p.y_label = "co-run measurements needed";
  p.y_min = 0;
  std::map<std::string, SvgSeries> macro, pooled;
  std::vector<std::size_t> ns;
  for (const auto& b : r.needed) {
    const std::string key = b.surrogate + " " + b.regressor;
    auto& m = macro[key];
    m.label = key + ": macro R^2 >= 0.90";
    m.x.push_back(static_cast<double>(b.n));
    m.y.push_back(b.budget_macro ? static_cast<double>(*b.budget_macro) : NAN);
    if (b.surrogate == "meanfield" && b.regressor == "mlp") {
      auto& q = pooled[key];
      q.label = key + ": pooled R^2 >= 0.95";
      q.dashed = true;
      q.x.push_back(static_cast<double>(b.n));
      q.y.push_back(b.budget ? static_cast<double>(*b.budget) : NAN);
    }
    if (std::find(ns.begin(), ns.end(), b.n) == ns.end()) ns.push_back(b.n);
  }
  for (auto& [k, s] : macro) p.series.push_back(s);
  for (auto& [k, s] : pooled) p.series.push_back(s);
  SvgSeries ref;
  ref.label = "20 N (paper)";
  ref.dashed = true;
  for (auto n : ns) {
    ref.x.push_back(static_cast<double>(n));
    ref.y.push_back(20.0 * static_cast<double>(n));
  }
  p.series.push_back(ref);
  return p.render();
}

namespace {

std::string f3(double v) {
  if (!std::isfinite(v)) return "–";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

std::string f1(double v) {
  if (!std::isfinite(v)) return "–";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

std::string to_markdown(const std::vector<SurrogateEvalReport>& reports, const std::string& command,
                        const std::string& svg_prefix) {
  std::string md;
  md += "# Surrogate accuracy: MeanField vs joint and pairwise baselines\n\n";
  md += "<!-- Generated by `" + command + "` (corun " + std::string(version()) + ", " +
        std::string(git_hash()) + "). Do not edit: rerun `make eval`. -->\n\n";
  md +=
      "Every score below compares a prediction with **testbed measurements** of held-out joint "
      "configurations, never with another prediction. For each N (the first N models of the "
      "workload) and seed, corun measures\n\n"
      "1. the standalone profile: every model alone in every local configuration, in several "
      "passes that are averaged (geometric means) — linear in N;\n"
      "2. a co-run campaign: MeanField draws stratified random joint configurations (each model "
      "visits its local configurations evenly); the joint and pairwise baselines draw uniform "
      "random ones;\n"
      "3. a held-out set of uniform random feasible joint configurations from a separate seed, "
      "each measured several times with independent noise.\n\n"
      "Each surrogate is fitted on the first `budget` co-run samples (budgets nest) and scored "
      "on the held-out set. The truth is the geometric mean of a configuration's repeated "
      "measurements; the `_1` columns score the same predictions against its first measurement "
      "alone, and the noise-ceiling table says how well one measurement predicts another of the "
      "same configuration (test-retest), which bounds any predictor scored against single "
      "measurements.\n\n"
      "* `r2_pooled`: R² of log latency over every (configuration, model, latency target) "
      "point — vision latency p95, LLM TTFT p95 and TPOT p95 (prefill and decode predicted "
      "separately). Pooling across models with latencies from milliseconds to seconds makes "
      "this high almost regardless of the surrogate; `r2_macro` does not pool.\n"
      "* `r2_macro`: per model, the mean R² over its latency targets, then the mean over "
      "models. Per-model values are in the last column.\n"
      "* `mape`: mean absolute percentage error of the latency predictions, in %.\n"
      "* `r2_thr`: pooled R² of log throughput, reported apart (throughput is mostly set by "
      "the offered load, so it would flatter the latency scores).\n"
      "* `cov95`: fraction of held-out latencies at or below prediction × the error model's "
      "95 % factor (MeanField at 20·N; residual quantiles from 5-fold cross-validation). About "
      "0.95 means calibrated; more is conservative.\n"
      "* `standalone`: standalone measurements behind the MeanField and pairwise features (the "
      "joint surrogate uses none). Budgets count co-run measurements only.\n\n"
      "The baselines use the same regressor settings as MeanField and are reported as "
      "measured, not tuned.\n\n";
  for (const auto& r : reports) {
    const std::string stem = svg_prefix + "-" + r.workload;
    md += "## " + r.workload + " (" + r.device + ", testbed " + r.testbed + ")\n\n";
    md += "Models: " + join(r.model_names, ", ") + ". Per (N, seed): " + std::to_string(r.heldout) +
          " held-out configurations × " + std::to_string(r.heldout_repeats) +
          " measurements; standalone profile in " + std::to_string(r.standalone_repeats) +
          " passes. Workload hash " + r.workload_hash + ", base seed " + std::to_string(r.seed) +
          ".\n\n";
    // The acceptance summary is computed from the rows below, not written by hand.
    {
      double min_pooled = 1, min_macro = 1;
      std::size_t worst_n = 0;
      bool any = false;
      for (const auto& row : r.rows) {
        if (row.surrogate != "meanfield" || row.regressor != "mlp" || row.budget_multiplier != 20) {
          continue;
        }
        any = true;
        min_pooled = std::min(min_pooled, row.r2_pooled);
        if (row.r2_macro < min_macro) {
          min_macro = row.r2_macro;
          worst_n = row.n;
        }
      }
      if (any) {
        md += "**MeanField MLP at 20·N co-run measurements:** lowest pooled R² over N = " +
              f3(min_pooled) + ", lowest macro R² = " + f3(min_macro) +
              " (N = " + std::to_string(worst_n) + ").\n\n";
      }
    }
    if (!r.ceilings.empty()) {
      md += "Noise ceiling (test-retest R² of single measurements): ";
      std::vector<std::string> parts;
      for (const auto& c : r.ceilings) {
        parts.push_back("N=" + std::to_string(c.n) + " pooled " + f3(c.r2_pooled) + ", macro " +
                        f3(c.r2_macro));
      }
      md += join(parts, "; ") + ".\n\n";
    }
    std::vector<std::string> kinds;
    std::vector<std::size_t> ns;
    for (const auto& b : r.needed) {
      const std::string k = b.surrogate + " " + b.regressor;
      if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
      if (std::find(ns.begin(), ns.end(), b.n) == ns.end()) ns.push_back(b.n);
    }
    const auto budget_table = [&](bool use_macro) {
      std::string t = "| surrogate |";
      for (auto n : ns) t += " N=" + std::to_string(n) + " |";
      t += "\n|---|";
      for (std::size_t i = 0; i < ns.size(); ++i) t += "---:|";
      t += "\n";
      for (const auto& k : kinds) {
        t += "| " + k + " |";
        for (auto n : ns) {
          for (const auto& b : r.needed) {
            if (b.n != n || b.surrogate + " " + b.regressor != k) continue;
            const auto& v = use_macro ? b.budget_macro : b.budget;
            t += " " +
                 (v ? std::to_string(*v) + " (" +
                          f1(static_cast<double>(*v) / static_cast<double>(n)) + "·N)"
                    : std::string("not reached")) +
                 " |";
          }
        }
        t += "\n";
      }
      return t;
    };
    md += "### Co-run budget needed (smallest evaluated budget reaching the goal)\n\n";
    md += "`budget_for_r2_095` — pooled R² ≥ 0.95:\n\n" + budget_table(false) + "\n";
    md += "Macro R² ≥ 0.90 (the stricter criterion):\n\n" + budget_table(true);
    md += "\n![budget needed vs N](" + stem + "-budget.svg)\n\n";
    md += "![R² vs budget](" + stem + "-r2.svg)\n\n";
    md += "### All rows (mean over seeds)\n\n";
    md +=
        "| N | surrogate | regressor | budget | standalone | r2_pooled | r2_macro | "
        "r2_pooled_1 | r2_macro_1 | mape % | r2_thr | cov95 | per-model R² |\n";
    md += "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for (const auto& row : r.rows) {
      std::vector<std::string> pm;
      for (std::size_t m = 0; m < row.r2_per_model.size(); ++m) {
        pm.push_back(r.model_names[m] + " " + f3(row.r2_per_model[m]));
      }
      md += "| " + std::to_string(row.n) + " | " + row.surrogate + " | " + row.regressor + " | " +
            std::to_string(row.budget) + " (" + std::to_string(row.budget_multiplier) + "·N) | " +
            std::to_string(row.standalone_measurements) + " | " + f3(row.r2_pooled) + " | " +
            f3(row.r2_macro) + " | " + f3(row.r2_pooled_single) + " | " + f3(row.r2_macro_single) +
            " | " + f1(row.mape) + " | " + f3(row.r2_throughput) + " | " + f3(row.coverage95) +
            " | " + join(pm, ", ") + " |\n";
    }
    if (!r.onboarding.empty()) {
      md += "\n### Onboarding a model profiled only standalone\n\n";
      md +=
          "The last model of each prefix is never co-run during training (the co-run "
          "campaign runs without it); the cross-model MeanField variant — one shared " +
          r.onboarding_regressor +
          " over every model and target, with model descriptors (family, parameters, weight "
          "bytes) and standalone-profile features instead of knobs — predicts it from its "
          "standalone profile. Reference: the per-model MeanField MLP trained with that model "
          "co-run "
          "at the same budget. Naive: the standalone profile itself as the prediction (no "
          "interference), the floor a cross-model variant must beat.\n\n";
      md +=
          "| N | new model | co-run budget | R² new model | MAPE % | R² naive | MAPE % naive | "
          "R² reference | R² others (macro) |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n";
      for (const auto& o : r.onboarding) {
        md += "| " + std::to_string(o.n) + " | " + o.model + " | " + std::to_string(o.budget) +
              " | " + f3(o.r2) + " | " + f1(o.mape) + " | " + f3(o.r2_standalone_only) + " | " +
              f1(o.mape_standalone_only) + " | " + f3(o.r2_reference) + " | " + f3(o.r2_others) +
              " |\n";
      }
    }
    md += "\n";
  }
  return md;
}

}  // namespace corun::eval
