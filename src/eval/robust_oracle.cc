#include "corun/eval/robust_oracle.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <thread>

#include "corun/core/check.h"
#include "corun/core/rng.h"
#include "corun/plan/objective.h"
#include "corun/runtime/testbed_predictor.h"

namespace corun {

namespace {

// Noise seed of the single-window oracle, and the root of the robust windows' seeds.
constexpr std::uint64_t kOracleSeed = 0x0A4C1E;
// Candidates that miss an SLA by more than this factor in the single window are not measured
// over the robust windows: the largest deviation of a p95 between windows is far smaller.
constexpr double kNearFeasible = 1.5;

double upper_utility(const Workload& w, const JointConfig& c) {
  double u = 0;
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    if (c[m] == kAbsent) continue;
    const ModelSpec& spec = w.models[m];
    const Settings s = spec.settings(static_cast<std::size_t>(c[m]));
    const double keep = spec.arch.family == ModelFamily::kVision ? 1 - s.skip_rate : 1.0;
    u += w.objective.maximize == "throughput" ? spec.weight * keep
                                              : spec.weight * config_quality(spec, s) * keep;
  }
  return u;
}

// Utility of one window and whether every SLA held in it.
std::pair<double, bool> window_utility(const Workload& w, const JointConfig& c,
                                       const Measurement& m) {
  double u = 0;
  bool held = true;
  for (const auto& mm : m.models) {
    if (c[mm.model] == kAbsent) continue;
    if (!measured_meets_sla(w.models[mm.model], mm)) held = false;
    if (mm.ok()) u += model_utility(w, mm.model, c[mm.model], as_predicted(mm));
  }
  if (!m.ok()) held = false;
  return {u, held};
}

bool near_feasible(const Workload& w, const Measurement& m) {
  if (!m.ok()) return false;
  for (const auto& mm : m.models) {
    if (!mm.ok()) return false;
    const Predicted p = as_predicted(mm);
    if (sla_excess(w.models[mm.model], p, Margin::uniform(1 / kNearFeasible - 1)) > 0) return false;
  }
  return true;
}

}  // namespace

std::string state_key(const Workload& w) {
  std::string k;
  char buf[192];
  for (const auto& m : w.models) {
    std::snprintf(buf, sizeof buf, "%d:%.9g:%.9g:%d:%d:%d:%.9g:%.9g:%.9g:%.9g;", m.active ? 1 : 0,
                  m.demand.fps, m.demand.rps, m.demand.prompt_tokens, m.demand.output_tokens,
                  m.demand.concurrency, m.sla.latency_ms_p95.value_or(0),
                  m.sla.ttft_ms_p95.value_or(0), m.sla.tpot_ms_p95.value_or(0),
                  m.sla.min_throughput.value_or(0));
    k += buf;
  }
  return k;
}

RobustOracle::RobustOracle(const Testbed& testbed, double window_s, int threads, int windows,
                           double hold, int candidates)
    : testbed_(testbed),
      window_s_(window_s),
      threads_(std::max(1, threads)),
      windows_(std::max(1, windows)),
      hold_(hold),
      candidates_(std::max(1, candidates)) {}

int RobustOracle::charged_windows() const { return std::min(windows_, 100); }

std::uint64_t RobustOracle::measurements() const {
  std::lock_guard lock(mutex_);
  return measurements_;
}

RobustScore RobustOracle::measure_windows(const Workload& now, const Workload& runs,
                                          const Conditions& c, const JointConfig& plan,
                                          int windows,
                                          const std::vector<TransitionCharge>& charges) {
  RobustScore s;
  for (int k = 0; k < windows; ++k) {
    MeasureOptions o{window_s_, c, true};
    o.transitions = charges;
    const Context window{.seed = derive_seed(kOracleSeed, {static_cast<std::uint64_t>(k)})};
    const auto [u, held] = window_utility(now, plan, testbed_.measure(window, runs, plan, o));
    s.utility += u;
    s.earned += held ? u : 0;
    if (!held) ++s.breaching_windows;
  }
  s.utility /= windows;
  s.earned /= windows;
  const auto allowed = static_cast<std::size_t>(std::floor((1 - hold_) * windows + 1e-9));
  s.holds = s.breaching_windows <= allowed;
  return s;
}

RobustScore RobustOracle::score(const Workload& now, const Conditions& c, const JointConfig& plan,
                                const Workload* admitted) {
  const Workload& runs = admitted != nullptr ? *admitted : now;
  std::string key = state_key(now) + "|" + c.key() + "|";
  if (admitted != nullptr) key += state_key(*admitted) + "|";
  for (auto l : plan) key += std::to_string(l) + ",";
  {
    std::lock_guard lock(mutex_);
    if (auto it = scores_.find(key); it != scores_.end()) return it->second;
  }
  const RobustScore s = measure_windows(now, runs, c, plan, windows_);
  std::lock_guard lock(mutex_);
  measurements_ += static_cast<std::uint64_t>(windows_);
  scores_.emplace(key, s);
  return s;
}

double RobustOracle::transition_penalty(const Workload& now, const Conditions& c,
                                        const JointConfig& plan,
                                        const std::vector<TransitionCharge>& charges,
                                        const Workload* admitted) {
  if (charges.empty()) return 0;
  const Workload& runs = admitted != nullptr ? *admitted : now;
  std::string key = state_key(now) + "|" + c.key() + "|";
  if (admitted != nullptr) key += state_key(*admitted) + "|";
  for (auto l : plan) key += std::to_string(l) + ",";
  char buf[128];
  for (const auto& ch : charges) {
    std::snprintf(buf, sizeof buf, "|%zu:%.9g:%d:%.9g:%.9g", ch.model, ch.outage_s,
                  ch.warmup_requests, ch.warmup_slowdown, ch.extra_vram_bytes);
    key += buf;
  }
  {
    std::lock_guard lock(mutex_);
    if (auto it = penalties_.find(key); it != penalties_.end()) return it->second;
  }
  const int k = charged_windows();
  const double charged = measure_windows(now, runs, c, plan, k, charges).earned;
  const double free = measure_windows(now, runs, c, plan, k).earned;
  std::lock_guard lock(mutex_);
  measurements_ += 2 * static_cast<std::uint64_t>(k);
  penalties_.emplace(key, charged - free);
  return charged - free;
}

double RobustOracle::score_1(const Workload& now, const Conditions& c, const JointConfig& plan,
                             const Workload* admitted) {
  const Workload& runs = admitted != nullptr ? *admitted : now;
  const auto [u, held] = window_utility(
      now, plan, testbed_.measure(Context{.seed = kOracleSeed}, runs, plan, {window_s_, c, true}));
  return held ? u : 0;
}

RobustOracle::Answer RobustOracle::best(const Workload& now, const Conditions& c) {
  const std::string key = state_key(now) + "|" + c.key();
  {
    std::lock_guard lock(mutex_);
    if (auto it = best_.find(key); it != best_.end()) return it->second;
  }
  const std::size_t n = now.models.size();
  std::vector<std::size_t> active;
  for (std::size_t m = 0; m < n; ++m) {
    if (now.models[m].active) active.push_back(m);
  }
  Answer a;
  if (active.empty()) return a;
  std::vector<std::size_t> local_counts;
  for (auto m : active) local_counts.push_back(now.models[m].local_config_count());
  const ConfigCount count = ConfigCount::product(local_counts);
  CORUN_CHECK_MSG(count.exact(), "the robust oracle cannot enumerate more than 2^64 plans");
  const std::uint64_t total = count.value();
  auto decode = [&](std::uint64_t i) {
    JointConfig cfg(n, kAbsent);
    for (std::size_t k = active.size(); k-- > 0;) {
      const std::size_t m = active[k];
      const std::uint64_t radix = now.models[m].local_config_count();
      cfg[m] = static_cast<std::int32_t>(i % radix);
      i /= radix;
    }
    return cfg;
  };
  // One window of every configuration (the single-window oracle), on the thread budget.
  std::vector<double> u1(total, -1), ub(total, 0);
  std::vector<std::uint8_t> feasible1(total, 0), near(total, 0);
  std::atomic<std::uint64_t> next{0};
  const Workload& w = now;
  const ConfigSpace space(w);
  auto work = [&] {
    constexpr std::uint64_t kChunk = 256;
    for (std::uint64_t lo = next.fetch_add(kChunk); lo < total; lo = next.fetch_add(kChunk)) {
      for (std::uint64_t i = lo; i < std::min(total, lo + kChunk); ++i) {
        const JointConfig cfg = decode(i);
        if (!space.fits_vram(cfg)) continue;
        const Measurement m =
            testbed_.measure(Context{.seed = kOracleSeed}, w, cfg, {window_s_, c, true});
        const auto [u, held] = window_utility(w, cfg, m);
        u1[i] = u;
        feasible1[i] = held ? 1 : 0;
        near[i] = near_feasible(w, m) ? 1 : 0;
        ub[i] = upper_utility(w, cfg);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads_; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (std::uint64_t i = 0; i < total; ++i) {
    if (feasible1[i] && u1[i] > a.utility_1) {
      a.feasible_1 = true;
      a.utility_1 = u1[i];
      a.config_1 = decode(i);
    }
  }
  // The robust oracle: candidates by decreasing utility bound, until the bound cannot win.
  std::vector<std::uint64_t> order;
  for (std::uint64_t i = 0; i < total; ++i) {
    if (near[i]) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint64_t x, std::uint64_t y) { return ub[x] > ub[y]; });
  std::uint64_t measured = total;
  const auto kept = static_cast<std::size_t>(candidates_);
  for (std::uint64_t i : order) {
    // Stop when the bound cannot beat the last candidate kept (with one kept: the best, the
    // exact oracle's rule); short of `candidates`, go on while it is above half the best.
    if (a.feasible) {
      if (a.candidates.size() >= kept && ub[i] <= a.candidates.back().second) break;
      if (a.candidates.size() < kept && ub[i] <= 0.5 * a.utility) break;
    }
    const JointConfig cfg = decode(i);
    const RobustScore s = measure_windows(w, w, c, cfg, windows_);
    measured += static_cast<std::uint64_t>(windows_);
    if (!s.holds) continue;
    if (!a.feasible || s.utility > a.utility) {
      a.feasible = true;
      a.utility = s.utility;
      a.config = cfg;
    }
    a.candidates.emplace_back(cfg, s.utility);
    std::stable_sort(a.candidates.begin(), a.candidates.end(),
                     [](const auto& x, const auto& y) { return x.second > y.second; });
    if (a.candidates.size() > kept) a.candidates.pop_back();
  }
  std::lock_guard lock(mutex_);
  measurements_ += measured;
  best_.emplace(key, a);
  return a;
}

}  // namespace corun
