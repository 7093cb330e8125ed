// Exhaustive search: every joint configuration of the active models, predicted in batches and
// split across threads. The reference every other solver is measured against.
#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

#include "search.h"

namespace corun {
namespace {

class ExhaustiveSolver final : public Solver {
 public:
  [[nodiscard]] std::string_view name() const override { return "exhaustive"; }

  Result<PlanResult> solve(const Context& ctx, const PlanProblem& p,
                           const SolverOptions&) const override {
    const auto start = std::chrono::steady_clock::now();
    const auto& act = p.active_models();
    if (act.empty()) return Error("no active models to plan");
    const ConfigCount candidates = p.candidate_count();
    if (!candidates.exact()) {
      return Error("exhaustive search cannot enumerate " + candidates.to_string() +
                   " joint configurations (more than 2^64); use ga, exact, greedy or hillclimb");
    }
    const std::uint64_t total = candidates.value();
    const int threads = std::max(1, ctx.threads);
    struct Best {
      double fitness = -std::numeric_limits<double>::infinity();
      std::uint64_t index = 0;
      std::uint64_t evaluated = 0;
    };
    std::vector<Best> best(static_cast<std::size_t>(threads));
    auto work = [&](int t) {
      constexpr std::size_t kBatch = 512;
      const std::size_t n = p.models();
      std::vector<std::int32_t> rows(kBatch * n, kAbsent);
      std::vector<Predicted> pred(kBatch * n);
      const std::uint64_t lo = total * static_cast<std::uint64_t>(t) / static_cast<std::uint64_t>(threads);
      const std::uint64_t hi = total * static_cast<std::uint64_t>(t + 1) / static_cast<std::uint64_t>(threads);
      Best& b = best[static_cast<std::size_t>(t)];
      for (std::uint64_t i = lo; i < hi; i += kBatch) {
        const std::size_t count = static_cast<std::size_t>(std::min<std::uint64_t>(kBatch, hi - i));
        for (std::size_t r = 0; r < count; ++r) decode(p, i + r, std::span(rows).subspan(r * n, n));
        p.predictor().predict(std::span<const std::int32_t>(rows).first(count * n), count,
                              std::span(pred).first(count * n));
        for (std::size_t r = 0; r < count; ++r) {
          const double f = p.score(std::span<const std::int32_t>(rows).subspan(r * n, n),
                                   std::span<const Predicted>(pred).subspan(r * n, n))
                               .fitness();
          // Ties go to the lowest index so that the answer does not depend on threads.
          if (f > b.fitness) {
            b.fitness = f;
            b.index = i + r;
          }
        }
        b.evaluated += count;
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
    work(0);
    for (auto& th : pool) th.join();
    Best overall = best[0];
    std::uint64_t evaluated = 0;
    for (const auto& b : best) {
      evaluated += b.evaluated;
      if (b.fitness > overall.fitness) overall = b;
    }
    JointConfig c(p.models(), kAbsent);
    decode(p, overall.index, c);
    PlanResult r = evaluate_plan(p, c, "exhaustive");
    r.stats.evaluated = evaluated;
    r.stats.proved_optimal = true;
    r.stats.elapsed_ms = detail::ms_since(start);
    return r;
  }

 private:
  // Mixed-radix decoding over the active models only (inactive stay kAbsent).
  static void decode(const PlanProblem& p, std::uint64_t i, std::span<std::int32_t> out) {
    const auto& act = p.active_models();
    for (std::size_t k = act.size(); k-- > 0;) {
      const std::size_t m = act[k];
      const std::uint64_t radix = p.local_count(m);
      out[m] = static_cast<std::int32_t>(i % radix);
      i /= radix;
    }
  }
};

}  // namespace

std::unique_ptr<Solver> make_exhaustive_solver() { return std::make_unique<ExhaustiveSolver>(); }

}  // namespace corun
