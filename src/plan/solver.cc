#include "corun/plan/solver.h"

#include <algorithm>
#include <limits>
#include <thread>

#include "corun/core/strings.h"
#include "search.h"

namespace corun {

std::unique_ptr<Solver> make_exhaustive_solver();
std::unique_ptr<Solver> make_ga_solver();
std::unique_ptr<Solver> make_exact_solver();
std::unique_ptr<Solver> make_greedy_solver();
std::unique_ptr<Solver> make_hillclimb_solver();

std::vector<std::string> solver_names() {
  return {"exhaustive", "ga", "exact", "greedy", "hillclimb"};
}

Result<std::unique_ptr<Solver>> make_solver(std::string_view name) {
  if (name == "exhaustive") return make_exhaustive_solver();
  if (name == "ga") return make_ga_solver();
  if (name == "exact") return make_exact_solver();
  if (name == "greedy") return make_greedy_solver();
  if (name == "hillclimb") return make_hillclimb_solver();
  const auto names = solver_names();
  return Error("unknown solver '" + std::string(name) + "'" + did_you_mean(name, names) +
               " (known: " + join(names, ", ") + ")");
}

PlanResult evaluate_plan(const PlanProblem& problem, const JointConfig& config,
                         std::string solver) {
  PlanResult r;
  r.solver = std::move(solver);
  r.config = detail::normalise(problem, config);
  r.predicted.resize(problem.models());
  problem.predictor().predict(r.config, 1, r.predicted);
  const auto s = problem.score(r.config, r.predicted);
  r.utility = s.utility;
  r.feasible = s.feasible();
  return r;
}

namespace detail {

std::optional<std::vector<std::vector<double>>> utility_bounds(const PlanProblem& p,
                                                               std::uint64_t* evaluated) {
  const auto* agg = dynamic_cast<const AggregatePredictor*>(&p.predictor());
  if (agg == nullptr) return std::nullopt;
  const std::size_t dims = agg->aggregate_dims();
  std::vector<std::vector<float>> least(p.models());  // [m][k]: m's least contribution
  std::vector<float> c(dims);
  for (auto m : p.active_models()) {
    for (std::size_t l = 0; l < p.local_count(m); ++l) {
      agg->contribution(m, static_cast<std::int32_t>(l), c);
      if (l == 0) least[m] = c;
      for (std::size_t k = 0; k < dims; ++k) least[m][k] = std::min(least[m][k], c[k]);
    }
  }
  std::vector<std::vector<double>> ub(p.models());
  std::vector<float> others(dims);
  for (auto m : p.active_models()) {
    std::fill(others.begin(), others.end(), 0.0f);
    for (auto k : p.active_models()) {
      if (k == m) continue;
      for (std::size_t d = 0; d < dims; ++d) others[d] += least[k][d];
    }
    for (auto& o : others) o *= 1 - kBoundSlack;
    ub[m].assign(p.local_count(m), -std::numeric_limits<double>::infinity());
    for (std::size_t l = 0; l < p.local_count(m); ++l) {
      const auto li = static_cast<std::int32_t>(l);
      const Predicted q = agg->predict_given(m, li, others);
      if (evaluated != nullptr) ++*evaluated;
      if (p.excess(m, li, q) == 0) ub[m][l] = p.model_utility(m, li, q);
    }
  }
  return ub;
}

Evaluator::Evaluator(const PlanProblem& p, std::size_t batch, int threads)
    : p_(&p), n_(p.models()), threads_(std::max(1, threads)), predicted_(batch * p.models()) {
  pending_.reserve(batch * n_);
}

double Evaluator::fitness(std::span<const std::int32_t> config) {
  double f = 0;
  fitness(config, 1, std::span<double>(&f, 1));
  return f;
}

void Evaluator::fitness(std::span<const std::int32_t> configs, std::size_t rows,
                        std::span<double> out) {
  const std::size_t batch = predicted_.size() / std::max<std::size_t>(1, n_);
  std::vector<std::size_t> miss;
  std::vector<std::uint64_t> keys(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto row = configs.subspan(r * n_, n_);
    std::uint64_t key = 1469598103934665603ULL;
    for (auto v : row) key = (key ^ static_cast<std::uint64_t>(v + 2)) * 1099511628211ULL;
    keys[r] = key;
    const auto it = memo_.find(key);
    if (it != memo_.end()) {
      out[r] = it->second;
    } else {
      miss.push_back(r);
    }
  }
  for (std::size_t start = 0; start < miss.size(); start += batch) {
    const std::size_t count = std::min(batch, miss.size() - start);
    pending_.clear();
    for (std::size_t i = 0; i < count; ++i) {
      const auto row = configs.subspan(miss[start + i] * n_, n_);
      pending_.insert(pending_.end(), row.begin(), row.end());
    }
    const std::span<Predicted> out_rows = std::span<Predicted>(predicted_).first(count * n_);
    if (threads_ > 1 && count >= kParallelRows) {
      // Two halves, one on a helper thread: solvers that search sequentially (GA, greedy,
      // hill climbing) get the same thread budget as the exhaustive sweep.
      const std::size_t half = count / 2;
      const std::span<const std::int32_t> all(pending_);
      std::thread helper([&] {
        p_->predictor().predict(all.first(half * n_), half, out_rows.first(half * n_));
      });
      p_->predictor().predict(all.subspan(half * n_), count - half, out_rows.subspan(half * n_));
      helper.join();
    } else {
      p_->predictor().predict(pending_, count, out_rows);
    }
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t r = miss[start + i];
      const auto s = p_->score(std::span<const std::int32_t>(pending_).subspan(i * n_, n_),
                               std::span<const Predicted>(predicted_).subspan(i * n_, n_));
      out[r] = s.fitness();
      memo_.emplace(keys[r], out[r]);
    }
    evaluated_ += count;
  }
}

JointConfig normalise(const PlanProblem& p, const JointConfig& c) {
  JointConfig out(p.models(), kAbsent);
  for (auto m : p.active_models()) {
    const bool valid = m < c.size() && c[m] >= 0 &&
                       static_cast<std::size_t>(c[m]) < p.local_count(m);
    out[m] = valid ? c[m] : 0;
  }
  return out;
}

}  // namespace detail
}  // namespace corun
