#pragma once

// The exact solver's branch and bound (exact.cc describes the method): its state, and the memo
// of loads borne and not borne (bears()) that answers most of its feasibility checks. Its steps
// are defined in exact_setup.cc (contributions, load directions and ceilings), exact_bounds.cc
// (the one-dimensional relaxations of can_beat()) and exact_search.cc (the depth-first search,
// on one thread or split over several).

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "search.h"

namespace corun::detail {

/// @brief The state of one branch and bound over a mean-field (aggregate) predictor.
struct ExactSearch {
  static constexpr std::uint64_t kNodeBudget = 200'000'000;

  const PlanProblem& p;
  const AggregatePredictor& agg;
  // Whether bears() may answer from its memo: a monotone predictor's (and not in the memo's
  // reference search, detail::bounded_search(..., recall = false)).
  bool recall;
  std::size_t dims;
  std::vector<std::size_t> order;                  // active models, branching order
  std::vector<std::vector<std::vector<float>>> c;  // contribution [m][l][k]
  std::vector<std::vector<float>> cmin;            // least contribution [m][k]
  std::vector<std::vector<std::int32_t>> cands;    // surviving local configs, best bound first
  std::vector<std::vector<double>> ub;             // utility bound [m][l]
  std::vector<std::vector<float>> rest_min;        // [depth][k]: min contribution of order[depth..]
  std::vector<double> rest_vram;                   // [depth]: min VRAM of order[depth..]
  // Load directions of the relaxation in can_beat(): each aggregate axis along which some
  // configuration adds more than the least, plus their typical mix (the diagonal).
  std::vector<std::vector<float>> dirs;
  std::vector<std::vector<std::vector<double>>> ext;    // [m][l][j]: see extent()
  std::vector<std::vector<std::vector<double>>> theta;  // [m][l][j]: see ceilings()
  // A configuration of an unassigned model in can_beat(): its extent along one direction,
  // its optimistic utility, and its ceiling there.
  struct Item {
    double w, v, theta;
  };
  double best_utility = -std::numeric_limits<double>::infinity();
  JointConfig best;
  JointConfig cur;
  std::uint64_t budget = kNodeBudget;  // nodes the search may visit
  std::uint64_t nodes = 0;
  std::uint64_t evaluated = 0;

  // Every bound predicts against a load shrunk by detail::kBoundSlack; complete plans are
  // judged by the predictor itself (evaluate_plan).
  std::vector<float> shrunk = std::vector<float>(dims);
  Predicted optimistic(std::size_t m, std::int32_t l, std::span<const float> load) {
    for (std::size_t k = 0; k < dims; ++k) shrunk[k] = load[k] * (1 - detail::kBoundSlack);
    return agg.predict_given(m, l, shrunk);
  }

  // Whether model m in configuration l meets its SLA (optimistically) under `load`, and then
  // its optimistic utility in `value` (when asked), with a memo of the loads it was last seen
  // to bear and not to bear. Under a monotone predictor a load below one it bears is borne,
  // and one above a load it does not bear is not; where the utility it had under a borne
  // load was its bound ub (that of the least load), the utility under any load between is ub
  // too (and always a valid bound). So the memo answers as a prediction would (the utility up
  // to the float rounding of the loads): the same search for fewer predictions (on
  // bench_plan's scale-n12, 0.50 M instead of 1.26 M, and the same 24.2k nodes).
  static constexpr std::size_t kMemo = 4;
  struct Memo {
    std::vector<float> ok, bad;  // kMemo loads each, dims floats a load
    std::uint8_t n_ok = 0, n_bad = 0, next_ok = 0, next_bad = 0;
    std::uint8_t at_ub = 0;  // bit s: the utility under ok load s was ub
  };
  std::vector<std::vector<Memo>> memo;  // [m][l]
  bool bears(std::size_t m, std::int32_t l, std::span<const float> load, double* value = nullptr) {
    const auto lu = static_cast<std::size_t>(l);
    Memo& e = memo[m][lu];
    if (recall) {
      for (std::size_t s = 0; s < e.n_ok; ++s) {
        if (value != nullptr && (e.at_ub >> s & 1) == 0) continue;
        const float* x = &e.ok[s * dims];
        std::size_t k = 0;
        while (k < dims && load[k] <= x[k]) ++k;
        if (k == dims) {
          if (value != nullptr) *value = ub[m][lu];
          return true;
        }
      }
      for (std::size_t s = 0; s < e.n_bad; ++s) {
        const float* x = &e.bad[s * dims];
        std::size_t k = 0;
        while (k < dims && load[k] >= x[k]) ++k;
        if (k == dims) {
          return false;
        }
      }
    }
    ++evaluated;
    const Predicted q = optimistic(m, l, load);
    const bool ok = p.excess(m, l, q) == 0;
    const double v = ok ? p.model_utility(m, l, q) : 0;
    if (value != nullptr) *value = v;
    auto& slots = ok ? e.ok : e.bad;
    auto& n = ok ? e.n_ok : e.n_bad;
    auto& next = ok ? e.next_ok : e.next_bad;
    if (slots.empty()) slots.resize(kMemo * dims);
    std::copy(load.begin(), load.end(), slots.begin() + static_cast<std::ptrdiff_t>(next * dims));
    if (ok) {
      const auto bit = static_cast<std::uint8_t>(1u << next);
      e.at_ub = static_cast<std::uint8_t>(v == ub[m][lu] ? e.at_ub | bit : e.at_ub & ~bit);
    }
    next = static_cast<std::uint8_t>((next + 1) % kMemo);
    n = static_cast<std::uint8_t>(std::min<std::size_t>(n + 1, kMemo));
    return ok;
  }

  ExactSearch(const PlanProblem& problem, const AggregatePredictor& a);

  /// @brief The least load the active models other than m can add up to.
  std::vector<float> least_others(std::size_t m) const;

  /// @brief Builds the load directions of can_beat() and their statistics.
  void directions();

  // Directions are tried in the order of the cuts they proved so far, and one that proved
  // under 0.5 % of its first kProbation tries is dropped: a direction that does not cut costs
  // a prediction per assigned model at every node. Deterministic: it depends only on the
  // search so far. Dropping a direction only weakens the bound. On scale-n12 (bench_plan)
  // this proof visits the 23.6k nodes of trying every direction with 0.53x the predictions;
  // after 512 tries it dropped directions that cut later on (59k nodes).
  static constexpr std::uint64_t kProbation = 2048;
  // A split search's workers each keep their own statistics: each judges a direction on
  // kProbation / workers tries, so that together they spend on probation what one search does
  // (each redoing all of it cost 1.48 M predictions at N = 12 against 1.28 M, 23.9k nodes
  // against 24.2k).
  std::uint64_t probation = kProbation;
  std::vector<std::uint64_t> dir_tried, dir_cut;  // per direction
  std::vector<std::size_t> active_dirs;
  std::uint64_t calls = 0;
  /// @brief Drops the directions that failed their probation and tries the best cutters first.
  void rank_directions();

  /// @brief The extent of configuration l of model m along direction j.
  double extent(std::size_t m, std::size_t l, std::size_t j) const;

  /// @brief Fills ext and theta: every configuration's extents and ceilings.
  void ceilings();

  /// @brief Whether the unassigned models can add more than `need` utility.
  bool can_beat(std::size_t depth, const std::vector<float>& sum, const std::vector<float>& rest,
                const std::vector<std::vector<std::int32_t>>& next,
                const std::vector<std::vector<double>>& value, double need);

  /// @brief LP relaxation of the multiple-choice knapsack of can_beat().
  static double lp_knapsack(const std::vector<std::vector<Item>>& items, double level, double room,
                            double need, double& least_room,
                            std::vector<std::pair<double, double>>& pts,
                            std::vector<std::pair<double, double>>& hull,
                            std::vector<std::pair<double, double>>& segments);

  /// @brief Checks the configurations forward checking left unchecked at this depth.
  void settle(std::size_t depth, const std::vector<float>& sum, const std::vector<float>& rest);
  std::vector<float> settle_load = std::vector<float>(dims);
  /// @brief Whether forward checking left some configuration unchecked at this depth.
  bool has_stale(std::size_t depth) const;

  // Per depth: the surviving domains and optimistic utilities handed to the children.
  std::vector<std::vector<std::vector<std::int32_t>>> next_at;
  std::vector<std::vector<std::vector<double>>> value_at;
  std::vector<std::vector<std::vector<std::uint8_t>>> stale_at;  // [depth][m][x]: unchecked
  std::vector<std::vector<float>> sum_at;                        // assigned load at each depth

  /// @brief Runs the search from the root on this thread.
  void run();

  /// @brief Assigns order[depth] and searches the subtree below each of its configurations.
  void dfs(std::size_t depth, const std::vector<float>& parent_sum, double vram,
           const std::vector<std::vector<std::int32_t>>& domains,
           const std::vector<std::vector<double>>& values, double assigned);

  /// What dfs() hands visit() of the node whose children it tries.
  struct Frame {
    std::size_t depth;
    const std::vector<float>& parent_sum;
    double vram;
    const std::vector<std::vector<std::int32_t>>& domains;
    const std::vector<std::vector<double>>& values;
    double capacity;            // the device's VRAM
    std::vector<float> others;  // scratch: a load to check a model against
    std::vector<float> rest;    // scratch: the least the unassigned models can add
  };

  /// @brief One child: the configuration domains[m][x] of m, its bounds, and its subtree.
  void visit(Frame& f, std::size_t x);

  /// @brief Forward checking of a child: filters every unassigned model's domain; false when
  /// one is left empty.
  bool forward_check(Frame& f, double* bound);

  /// @brief Optimistic metrics of every assigned model: false on a certain SLA breach.
  bool assigned_models_bear(Frame& f, double* bound);

  // The split search (run_split): the subtrees of the nodes at depth `split->depth` are tasks,
  // dealt round robin to the workers. Each worker walks the levels above on its own copy, all
  // alike (with the seed incumbent and the direction statistics of those levels only), and
  // runs its tasks in order with its own incumbent and statistics carried from task to task.
  // What it finds and spends depends on the number of workers only, never on the timing.
  struct Split {
    std::size_t depth = 0;
    std::size_t workers = 1;
    struct Task {
      // The worker's incumbent after the task, where the task improved it (else -inf).
      double utility = -std::numeric_limits<double>::infinity();
      JointConfig best;
      std::uint64_t nodes = 0, evaluated = 0;
    };
    std::mutex mutex;                   // guards `tasks`
    std::map<std::size_t, Task> tasks;  // by task index
  };
  Split* split = nullptr;
  std::size_t worker = 0;
  std::size_t task = 0;                              // index of the next task this worker meets
  std::uint64_t task_nodes = 0, task_evaluated = 0;  // spent inside this worker's tasks
  // The worker's own state, swapped in for its tasks.
  struct Own {
    double utility = -std::numeric_limits<double>::infinity();
    JointConfig best;
    std::vector<std::uint64_t> tried, cut;
    std::vector<std::size_t> active;
    std::uint64_t calls = 0;
  } own;

  /// @brief Swaps the worker's own incumbent and direction statistics in or out.
  void swap_own();

  /// @brief Runs task k of the split search with the worker's own state, and records it.
  template <class Body>
  void task_run(std::size_t k, Body body);

  /// @brief The search split over `workers` threads (this one included) at depth 1.
  void run_split(int workers);
};

}  // namespace corun::detail
