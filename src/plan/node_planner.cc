// The node plan: assignment of models to GPUs and MIG slices by local search, with the per-unit
// MeanField plan as the inner evaluation (a cheap solver's while the search screens candidates,
// the full solver's for the starts and the best few found).
#include <algorithm>
#include <bit>
#include <chrono>
#include <functional>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "corun/core/check.h"
#include "corun/core/rng.h"
#include "corun/plan/node.h"

namespace corun {

std::unique_ptr<Solver> make_exhaustive_solver();

namespace {

// Excess charged for an active model no unit takes: worse than any SLA excess a set that fits
// its unit can have.
constexpr double kUnplacedExcess = 1e4;
// Excess of a unit whose models do not fit its memory together: none of them runs, so each
// costs what an unplaced model costs (then leaving one out, so that the others run, is better).
double vram_miss_excess(std::uint64_t mask) {
  return kUnplacedExcess * static_cast<double>(std::popcount(mask));
}

// One unit's plan for one set of models.
struct SubPlan {
  JointConfig config;  // over all models; kAbsent outside the set
  std::vector<Predicted> predicted;
  double utility = 0;
  double excess = 0;
  bool feasible = true;
};

std::uint64_t mask_of(std::span<const std::int32_t> assignment, std::size_t unit) {
  std::uint64_t mask = 0;
  for (std::size_t m = 0; m < assignment.size(); ++m) {
    if (assignment[m] == static_cast<std::int32_t>(unit)) mask |= std::uint64_t{1} << m;
  }
  return mask;
}

// Mean slowdown over the latency metrics a model reports (each relative to the model alone).
double slowdown(const Predicted& with, const Predicted& alone) {
  double sum = 0;
  int n = 0;
  for (auto [w, a] : {std::pair{with.latency_ms_p95, alone.latency_ms_p95},
                      std::pair{with.ttft_ms_p95, alone.ttft_ms_p95},
                      std::pair{with.tpot_ms_p95, alone.tpot_ms_p95}}) {
    if (a > 0) {
      sum += static_cast<double>(w) / static_cast<double>(a);
      ++n;
    }
  }
  return n == 0 ? 1.0 : sum / n;
}

}  // namespace

double NodePlan::fitness() const { return feasible ? utility : kInfeasibleFitness - excess; }

namespace {

// The utility no plan of `w` can exceed: every active model in its best configuration with all
// of its demand served (model_utility with unbounded throughput).
double utility_bound(const Workload& w) {
  Predicted unbounded;
  unbounded.throughput = std::numeric_limits<float>::infinity();
  double bound = 0;
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    if (!w.models[m].active) continue;
    double best = 0;
    for (std::size_t l = 0; l < w.models[m].local_config_count(); ++l) {
      best = std::max(best, model_utility(w, m, static_cast<std::int32_t>(l), unbounded));
    }
    bound += best;
  }
  return bound;
}

// Whether no plan can beat `p` (every comparison in the search asks for more than 1e-9 better).
bool at_bound(const NodePlan& p, double bound) { return p.feasible && p.utility >= bound - 1e-9; }

}  // namespace

struct NodePlanner::Cache {
  std::map<std::pair<std::string, std::uint64_t>, SubPlan> plans;
  std::map<std::pair<std::string, std::uint64_t>, SubPlan> screened_plans;
  std::vector<double> min_vram;  // per model: its smallest configuration's bytes
  std::vector<double> max_vram;  // per model: its largest configuration's bytes
  UnitPlanCache* shared = nullptr;
  std::vector<std::string> keys;  // per model: ModelSpec::plan_key() (when shared)
  std::uint64_t solved = 0;
  std::uint64_t screened = 0;
  std::uint64_t hits = 0;
};

NodePlanner::NodePlanner(const Context& ctx, const Workload& w, UnitModels& models,
                         const Solver& solver, NodePlanOptions options, UnitPlanCache* shared)
    : ctx_(ctx),
      w_(&w),
      models_(&models),
      solver_(&solver),
      options_(options),
      exhaustive_(make_exhaustive_solver()),
      cache_(std::make_unique<Cache>()) {
  if (!options_.screen.empty()) {
    auto screen = make_solver(options_.screen);
    CORUN_CHECK(screen.ok());  // the option is set in code, never from input
    screen_ = std::move(*screen);
  }
  CORUN_CHECK(w.models.size() <= 64);  // model sets are 64-bit masks (the spec's limit)
  cache_->shared = shared;
  for (const auto& m : w.models) {
    if (shared != nullptr) cache_->keys.push_back(m.plan_key());
    double lo = 0, hi = 0;
    for (std::size_t l = 0; l < m.local_config_count(); ++l) {
      // Device-independent bounds: the full need of each configuration (a unit's own plan
      // may run a large LLM configuration KV-limited; space.h).
      const double v =
          model_vram_bytes(m, m.settings(l), std::numeric_limits<double>::infinity());
      lo = l == 0 ? v : std::min(lo, v);
      hi = std::max(hi, v);
    }
    cache_->min_vram.push_back(lo);
    cache_->max_vram.push_back(hi);
  }
}

NodePlanner::~NodePlanner() = default;

namespace {

// The per-unit plan of `mask` on `unit`, solved once per (device, set).
// With `screen` (not null) the set is planned by that cheap solver alone: its plans are cached
// apart from the full solver's and never shared.
Result<const SubPlan*> unit_plan(const Context& ctx, const Workload& w, UnitModels& models,
                                 const Solver& solver, const Solver& exhaustive,
                                 const Solver* screen, const NodePlanOptions& options,
                                 NodePlanner::Cache& cache, const GpuUnit& unit,
                                 std::uint64_t mask) {
  const auto key = std::make_pair(unit.device.name, mask);
  auto& plans = screen != nullptr ? cache.screened_plans : cache.plans;
  if (auto it = plans.find(key); it != plans.end()) {
    ++cache.hits;
    return &it->second;
  }
  UnitPlanCache* const shared = screen != nullptr ? nullptr : cache.shared;
  SubPlan sp;
  sp.config.assign(w.models.size(), kAbsent);
  sp.predicted.assign(w.models.size(), Predicted{});
  // The set in the shared cache's terms: its members in plan-key order (ties by position).
  std::vector<std::size_t> members;
  std::string shared_key;
  if (shared != nullptr) {
    for (std::size_t m = 0; m < w.models.size(); ++m) {
      if ((mask >> m) & 1) members.push_back(m);
    }
    std::stable_sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
      return cache.keys[a] < cache.keys[b];
    });
    shared_key = unit.device.name + '\n' + w.objective.maximize;
    for (const std::size_t m : members) shared_key += '\n' + cache.keys[m];
    if (const UnitPlan* up = shared->find(shared_key)) {
      ++cache.hits;
      for (std::size_t i = 0; i < members.size(); ++i) {
        sp.config[members[i]] = up->config[i];
        sp.predicted[members[i]] = up->predicted[i];
      }
      sp.utility = up->utility;
      sp.excess = up->excess;
      sp.feasible = up->feasible;
      return &plans.emplace(key, std::move(sp)).first->second;
    }
  }
  double min_bytes = 0;
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    if ((mask >> m) & 1) min_bytes += cache.min_vram[m];
  }
  if (mask != 0 && min_bytes > unit.device.vram_bytes()) {
    sp.feasible = false;
    sp.excess = vram_miss_excess(mask);
  } else if (mask != 0) {
    auto um = models.for_unit(unit);
    if (!um) return um.error();
    std::vector<bool> active(w.models.size(), false);
    for (std::size_t m = 0; m < w.models.size(); ++m) active[m] = (mask >> m) & 1;
    PlanProblem problem(*(*um)->workload, active, *(*um)->predictor, (*um)->margins);
    const ConfigCount count = problem.candidate_count();
    const bool small = count.exact() && count.value() <= options.exhaustive_up_to;
    // Screening solves tiny sets exactly too: exhaustive costs there what the greedy pass does.
    const bool tiny = count.exact() && count.value() <= options.screen_exhaustive_up_to;
    const Solver& by = screen != nullptr && !tiny ? *screen : small ? exhaustive : solver;
    SolverOptions so;
    if (screen == nullptr && !small) {
      // The full plan of a set the search screened starts from the screened plan.
      if (auto it = cache.screened_plans.find(key); it != cache.screened_plans.end()) {
        so.warm_start = it->second.config;
      }
    }
    auto r = by.solve(ctx, problem, so);
    if (!r) return r.error();
    const auto score = problem.score(r->config, r->predicted);
    sp.config = r->config;
    sp.predicted = r->predicted;
    sp.utility = score.utility;
    sp.excess = score.excess + (score.fits_vram ? 0.0 : vram_miss_excess(mask));
    sp.feasible = score.feasible();
    ++(screen != nullptr ? cache.screened : cache.solved);
  }
  if (shared != nullptr) {
    UnitPlan up{{}, {}, sp.utility, sp.excess, sp.feasible};
    for (const std::size_t m : members) {
      up.config.push_back(sp.config[m]);
      up.predicted.push_back(sp.predicted[m]);
    }
    shared->insert(std::move(shared_key), std::move(up));
  }
  return &plans.emplace(key, std::move(sp)).first->second;
}

}  // namespace

Result<NodePlan> NodePlanner::plan_assignment(const NodeLayout& layout,
                                              std::span<const std::int32_t> assignment,
                                              std::string strategy) {
  return plan_with(layout, assignment, std::move(strategy), false);
}

Result<NodePlan> NodePlanner::plan_with(const NodeLayout& layout,
                                        std::span<const std::int32_t> assignment,
                                        std::string strategy, bool screening) {
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t solved0 = cache_->solved, hits0 = cache_->hits;
  const std::uint64_t screened0 = cache_->screened;
  const Solver* screen = screening ? screen_.get() : nullptr;
  const std::size_t n = w_->models.size();
  CORUN_CHECK(assignment.size() == n);
  NodePlan p;
  p.strategy = std::move(strategy);
  p.layout = layout;
  p.assignment.assign(assignment.begin(), assignment.end());
  p.config.assign(n, kAbsent);
  p.predicted.assign(n, Predicted{});
  p.placed = true;
  for (std::size_t m = 0; m < n; ++m) {
    if (w_->models[m].active && assignment[m] == kNotPlaced) {
      p.placed = false;
      p.excess += kUnplacedExcess;
    }
  }
  bool units_ok = true;
  for (std::size_t u = 0; u < layout.units.size(); ++u) {
    const std::uint64_t mask = mask_of(assignment, u);
    auto sp = unit_plan(ctx_, *w_, *models_, *solver_, *exhaustive_, screen, options_,
                        *cache_, layout.units[u], mask);
    if (!sp) return sp.error();
    const SubPlan& s = **sp;
    p.utility += s.utility;
    p.excess += s.excess;
    units_ok = units_ok && s.feasible;
    for (std::size_t m = 0; m < n; ++m) {
      if ((mask >> m) & 1) {
        p.config[m] = s.config[m];
        p.predicted[m] = s.predicted[m];
      }
    }
  }
  p.feasible = p.placed && units_ok;
  p.subplans = cache_->solved - solved0;
  p.screened = cache_->screened - screened0;
  p.cache_hits = cache_->hits - hits0;
  p.elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return p;
}

Result<PlacementInput> NodePlanner::placement_input(const NodeLayout& layout) {
  const std::size_t n = w_->models.size();
  const std::size_t units = layout.units.size();
  PlacementInput in;
  in.vram_request_bytes = cache_->max_vram;
  for (const auto& u : layout.units) in.unit_vram_bytes.push_back(u.device.vram_bytes());
  in.allowed.assign(n, std::vector<bool>(units, false));
  for (std::size_t m = 0; m < n; ++m) {
    for (std::size_t u = 0; u < units; ++u) {
      in.allowed[m][u] = w_->models[m].active && pin_allows(*w_, m, layout.units[u]);
    }
  }
  if (units == 0) return in;
  // Demand (iGniter's ordering): what the model loads a whole unit of the first kind with,
  // alone, in its first configuration.
  auto first = models_->for_unit(layout.units[0]);
  if (!first) return first.error();
  for (std::size_t m = 0; m < n; ++m) {
    const auto& loads = (*first)->loads;
    in.demand.push_back(m < loads.size() && !loads[m].empty() ? loads[m][0] : 0.0);
  }
  std::vector<const UnitModel*> per_unit;
  for (const auto& u : layout.units) {
    auto um = models_->for_unit(u);
    if (!um) return um.error();
    per_unit.push_back(*um);
  }
  // Predicted interference, iGniter's criterion: how much the slowdowns of the unit's models
  // (each against itself alone, every model in its first configuration) grow when `model`
  // joins them.
  in.interference = [per_unit, n](std::size_t u, std::span<const std::size_t> residents,
                                  std::size_t model) {
    const Predictor& pred = *per_unit[u]->predictor;
    auto predict_set = [&](std::span<const std::size_t> set) {
      JointConfig c(n, kAbsent);
      for (std::size_t m : set) c[m] = 0;
      std::vector<Predicted> out(n);
      pred.predict(c, 1, out);
      return out;
    };
    auto total_slowdown = [&](std::span<const std::size_t> set) {
      const auto together = predict_set(set);
      double s = 0;
      for (std::size_t m : set) {
        const std::size_t one[] = {m};
        s += slowdown(together[m], predict_set(one)[m]);
      }
      return s;
    };
    std::vector<std::size_t> with(residents.begin(), residents.end());
    with.push_back(model);
    return total_slowdown(with) - total_slowdown(residents);
  };
  return in;
}

Result<NodePlan> NodePlanner::plan_baseline(const NodeLayout& layout, std::string_view name) {
  auto in = placement_input(layout);
  if (!in) return in.error();
  const auto assignment = place_by_rule(name, *in);
  return plan_assignment(layout, assignment, std::string(name));
}

namespace {

// A swap with model b is the move (a, kSwapMark + b): no unit index comes near it (a node
// may have more units than models, so the model count cannot mark swaps).
constexpr std::size_t kSwapMark = std::size_t{1} << 40;
// Leaving a model out is the move (m, kLeaveOut): tried only while the plan is infeasible,
// where running the others may be the best a node too small for all of them can do.
constexpr std::size_t kLeaveOut = kSwapMark - 1;

/// @brief Where each model may go: its pin, and a unit whose memory holds its smallest
/// configuration.
std::vector<std::vector<std::size_t>> allowed_units(const PlacementInput& in,
                                                    const std::vector<double>& min_vram,
                                                    std::size_t n, std::size_t units) {
  std::vector<std::vector<std::size_t>> allowed(n);
  for (std::size_t m = 0; m < n; ++m) {
    for (std::size_t u = 0; u < units; ++u) {
      if (in.allowed[m][u] && min_vram[m] <= in.unit_vram_bytes[u]) {
        allowed[m].push_back(u);
      }
    }
  }
  return allowed;
}

/// Plans one assignment of a layout: with the full solver, or (`screening`) the cheap one.
using AssignmentPlanner =
    std::function<Result<NodePlan>(std::span<const std::int32_t> assignment, bool screening)>;

/// @brief The search over one layout's assignments: its starts, its local search with
/// restarts, and the best plans it met.
class LayoutSearch {
 public:
  LayoutSearch(const Context& ctx, const Workload& w, const NodePlanOptions& options,
               std::vector<std::vector<std::size_t>> allowed, bool screening,
               AssignmentPlanner plan)
      : n_(w.models.size()),
        options_(options),
        allowed_(std::move(allowed)),
        screening_(screening),
        plan_(std::move(plan)),
        rng_(derive_seed(ctx.seed, {0x6e6f6465ULL})),
        // A plan at the utility bound ends the search: nothing after it could replace it (each
        // replacement must be better), so stopping returns the plan the whole search would.
        bound_(utility_bound(w)) {}

  /// @brief Plans every start: every baseline's placement, a model it left out going to its
  /// first allowed unit.
  Status plan_starts(const Workload& w, const PlacementInput& in) {
    // Starts: every baseline's placement, a model it left out going to its first allowed unit.
    // Each is planned with the full solver (the plan returned is never worse than one of them)
    // and, when the search screens, priced by the screening solver to choose where it starts.
    for (const auto& rule : placement_rule_names()) {
      auto a = place_by_rule(rule, in);
      for (std::size_t m = 0; m < n_; ++m) {
        if (a[m] == kNotPlaced && w.models[m].active && !allowed_[m].empty()) {
          a[m] = static_cast<std::int32_t>(allowed_[m][0]);
        }
      }
      if (const Status s = plan_start(a); !s.ok()) return s;
    }
    CORUN_CHECK(best_.has_value() && found_.has_value());
    return {};
  }

  /// @brief Climbs from the search's best start, then from kicked copies of its best plan.
  Status climb_with_restarts() {
    auto climbed = climb(*found_);
    if (!climbed) return climbed.error();
    found_ = std::move(*climbed);
    for (int r = 0; r < options_.restarts && keep_searching(); ++r) {
      auto start_plan = evaluate(kicked(found_->assignment));
      if (!start_plan) return start_plan.error();
      auto c = climb(std::move(*start_plan));
      if (!c) return c.error();
      if (c->fitness() > found_->fitness() + 1e-9) found_ = std::move(*c);
    }
    return {};
  }

  /// @brief The best full plan: the search's own best where it did not screen, else the best
  /// of the starts and of the polished screened assignments.
  Result<NodePlan> best_plan() {
    if (!screening_) {
      if (found_->fitness() > best_->fitness() + 1e-9) best_ = std::move(*found_);
    } else {
      // Polish: the best few assignments the screened search met, planned with the full solver.
      for (const auto& t : top_) {
        auto full = plan_(t.assignment, false);
        if (!full) return full.error();
        if (full->fitness() > best_->fitness() + 1e-9) best_ = std::move(*full);
      }
    }
    return std::move(*best_);
  }

 private:
  // The best distinct assignments the screened search met, best first (polished at the end).
  // Only what the polish needs: each assignment and its screened fitness.
  struct Seen {
    double fitness;
    std::vector<std::int32_t> assignment;
  };

  /// @brief Keeps p's assignment among the best few distinct ones met, for the polish.
  void remember(const NodePlan& p) {
    if (!screening_ || options_.polish <= 0) return;
    for (const auto& t : top_) {
      if (t.assignment == p.assignment) return;
    }
    const double f = p.fitness();
    const auto at =
        std::find_if(top_.begin(), top_.end(), [&](const Seen& t) { return f > t.fitness + 1e-9; });
    if (at == top_.end() && top_.size() >= static_cast<std::size_t>(options_.polish)) return;
    top_.insert(at, Seen{f, p.assignment});
    if (top_.size() > static_cast<std::size_t>(options_.polish)) top_.pop_back();
  }

  /// @brief One assignment planned in the search's own pricing, counted and remembered.
  Result<NodePlan> evaluate(std::span<const std::int32_t> a) {
    ++evaluated_;
    auto p = plan_(a, screening_);
    if (p) remember(*p);
    return p;
  }

  /// @brief The search goes on while assignments are left in the budget and no plan is at the
  /// bound.
  bool keep_searching() const {
    return evaluated_ < options_.max_assignments && !at_bound(*best_, bound_) &&
           !at_bound(*found_, bound_);
  }

  /// @brief Plans start `a` with the full solver (screened first when the search screens) and
  /// keeps it where it beats the best so far.
  Status plan_start(std::span<const std::int32_t> a) {
    // Screened first: the full plan of each GPU's set then starts from the screened one.
    std::optional<NodePlan> screened;
    if (screening_) {
      auto p = evaluate(a);
      if (!p) return p.error();
      screened = std::move(*p);
    } else {
      ++evaluated_;
    }
    auto full = plan_(a, false);
    if (!full) return full.error();
    auto priced = screened ? std::move(*screened) : *full;
    if (!best_ || full->fitness() > best_->fitness()) best_ = std::move(*full);
    if (!found_ || priced.fitness() > found_->fitness()) found_ = std::move(priced);
    return {};
  }

  /// @brief Every move from `current`: each model to another allowed unit (or left out while
  /// the plan is infeasible), and each swap of two models on different units that each allow
  /// the other's.
  std::vector<std::pair<std::size_t, std::size_t>> moves_from(const NodePlan& current) const {
    std::vector<std::pair<std::size_t, std::size_t>> moves;  // (model, unit) or swap pairs
    for (std::size_t m = 0; m < n_; ++m) {
      for (std::size_t u : allowed_[m]) {
        if (current.assignment[m] != static_cast<std::int32_t>(u)) moves.emplace_back(m, u);
      }
      if (!current.feasible && current.assignment[m] != kNotPlaced) {
        moves.emplace_back(m, kLeaveOut);
      }
    }
    for (std::size_t a = 0; a < n_; ++a) {
      for (std::size_t b = a + 1; b < n_; ++b) {
        const auto ua = current.assignment[a], ub = current.assignment[b];
        if (ua == kNotPlaced || ub == kNotPlaced || ua == ub) continue;
        const auto& aa = allowed_[a];
        const auto& ab = allowed_[b];
        if (std::find(aa.begin(), aa.end(), static_cast<std::size_t>(ub)) == aa.end()) continue;
        if (std::find(ab.begin(), ab.end(), static_cast<std::size_t>(ua)) == ab.end()) continue;
        moves.emplace_back(a, kSwapMark + b);
      }
    }
    return moves;
  }

  /// @brief First-improvement local search: move one model to another allowed unit, or swap two
  /// models on different units (each allowed on the other's), in a seeded random order.
  Result<NodePlan> climb(NodePlan current) {
    bool improved = true;
    while (improved && keep_searching()) {
      improved = false;
      std::vector<std::pair<std::size_t, std::size_t>> moves = moves_from(current);
      std::shuffle(moves.begin(), moves.end(), rng_);
      for (const auto& [m, target] : moves) {
        if (!keep_searching()) break;
        std::vector<std::int32_t> next = current.assignment;
        if (target >= kSwapMark) {
          std::swap(next[m], next[target - kSwapMark]);
        } else if (target == kLeaveOut) {
          next[m] = kNotPlaced;
        } else {
          next[m] = static_cast<std::int32_t>(target);
        }
        auto p = evaluate(next);
        if (!p) return p.error();
        if (p->fitness() > current.fitness() + 1e-9) {
          current = std::move(*p);
          improved = !at_bound(current, bound_);
          break;
        }
      }
    }
    return current;
  }

  /// @brief `kick` after three random moves: out of the local optimum's basin.
  std::vector<std::int32_t> kicked(std::vector<std::int32_t> kick) {
    for (int k = 0; k < 3; ++k) {  // three random moves: out of the local optimum's basin
      const std::size_t m = rng_.below(n_);
      if (allowed_[m].empty() || kick[m] == kNotPlaced) continue;
      kick[m] = static_cast<std::int32_t>(allowed_[m][rng_.below(allowed_[m].size())]);
    }
    return kick;
  }

  const std::size_t n_;
  const NodePlanOptions& options_;
  const std::vector<std::vector<std::size_t>> allowed_;
  const bool screening_;
  const AssignmentPlanner plan_;
  Rng rng_;
  const double bound_;
  std::vector<Seen> top_;
  std::uint64_t evaluated_ = 0;
  std::optional<NodePlan> best_;   // full solver
  std::optional<NodePlan> found_;  // the search's best, in the search's own pricing
};

}  // namespace

Result<NodePlan> NodePlanner::plan(const NodeLayout& layout) {
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t solved0 = cache_->solved, hits0 = cache_->hits;
  const std::uint64_t screened0 = cache_->screened;
  auto in = placement_input(layout);
  if (!in) return in.error();
  const std::size_t n = w_->models.size();
  const std::size_t units = layout.units.size();
  LayoutSearch search(ctx_, *w_, options_, allowed_units(*in, cache_->min_vram, n, units),
                      screen_ != nullptr, [&](std::span<const std::int32_t> a, bool screening) {
                        return plan_with(layout, a, "corun", screening);
                      });
  if (const Status s = search.plan_starts(*w_, *in); !s.ok()) return s.error();
  if (const Status s = search.climb_with_restarts(); !s.ok()) return s.error();
  auto best = search.best_plan();
  if (!best) return best.error();
  best->strategy = "corun";
  best->subplans = cache_->solved - solved0;
  best->screened = cache_->screened - screened0;
  best->cache_hits = cache_->hits - hits0;
  best->elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return *best;
}

Result<NodePlan> NodePlanner::plan() {
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t solved0 = cache_->solved, hits0 = cache_->hits;
  const std::uint64_t screened0 = cache_->screened;
  std::optional<NodePlan> best;
  const double bound = utility_bound(*w_);
  for (const auto& layout : node_layouts(*w_)) {
    auto p = plan(layout);
    if (!p) return p.error();
    if (!best || p->fitness() > best->fitness() + 1e-9) best = std::move(*p);
    if (at_bound(*best, bound)) break;  // no later layout could replace it
  }
  CORUN_CHECK(best.has_value());
  best->subplans = cache_->solved - solved0;
  best->screened = cache_->screened - screened0;
  best->cache_hits = cache_->hits - hits0;
  best->elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return *best;
}

}  // namespace corun
