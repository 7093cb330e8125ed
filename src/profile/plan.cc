#include "corun/profile/plan.h"

#include <algorithm>
#include <numeric>

#include "corun/core/check.h"
#include "corun/core/enum_names.h"
#include "corun/core/rng.h"

namespace corun::profile {

namespace {

constexpr EnumNames<Plan, 5> kPlanNames{{{{Plan::kStandalone, "standalone"},
                                          {Plan::kMeanField, "meanfield"},
                                          {Plan::kJoint, "joint"},
                                          {Plan::kOnline, "online"},
                                          {Plan::kCoTenant, "cotenant"}}}};

// Stream identifiers keep the plans' random choices independent of each other.
constexpr std::uint64_t kStreamStratified = 0x5354524154ULL;
constexpr std::uint64_t kStreamUniform = 0x554e49464fULL;
constexpr std::uint64_t kStreamMeasure = 0x4d45415355ULL;
constexpr std::uint64_t kStreamCoTenant = 0x434f54454eULL;
constexpr std::uint64_t kStreamSubset = 0x5355425345ULL;

// Redraws allowed for a co-run sample that does not fit in VRAM before keeping the last draw
// (whose failure is then recorded as data).
constexpr int kMaxFeasibilityDraws = 1000;

// Above this many local configurations a model's stratified permutation would cost more than
// it buys (each sample recomputes its block's permutation); such models draw uniformly.
constexpr std::size_t kMaxStratifiedLocal = 4096;

std::uint64_t plan_code(Plan p) { return static_cast<std::uint64_t>(p) + 1; }

void draw_uniform(const ConfigSpace& space, Rng& rng, JointConfig& c) {
  for (std::size_t m = 0; m < c.size(); ++m) {
    c[m] = static_cast<std::int32_t>(rng.below(space.local_counts()[m]));
  }
}

// Position `pos` of a seeded permutation of [0, n): a Fisher-Yates shuffle of the block.
std::int32_t permuted(std::size_t n, std::uint64_t seed, std::size_t pos) {
  std::vector<std::int32_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  Rng rng(seed);
  for (std::size_t i = n; i > 1; --i) {
    const std::size_t j = rng.below(i);
    std::swap(perm[i - 1], perm[j]);
  }
  return perm[pos];
}

// Which models a co-run sample of a node workload runs. A node's models share its GPUs, so one
// GPU holds a few of them, never all: a sample that ran all N together would teach the
// surrogate only aggregates far above any a node plan asks about (and, monotone, it would
// carry them down to the light loads it never saw). Each sample runs a seeded random subset of
// 2 to 2 x ceil(N / G) models (at most N), the rest absent; one-GPU workloads run every model.
std::vector<bool> node_subset(const Workload& w, std::uint64_t seed, std::uint64_t index) {
  const std::size_t n = w.models.size();
  std::vector<bool> present(n, true);
  const std::size_t gpus = w.node.gpus();
  if (gpus <= 1 || n <= 2) return present;
  const std::size_t largest = std::min(n, 2 * ((n + gpus - 1) / gpus));
  Rng rng(derive_seed(seed, {kStreamSubset, index}));
  const std::size_t k = 2 + static_cast<std::size_t>(rng.below(largest - 1));
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  for (std::size_t i = 0; i < k; ++i) {  // partial Fisher-Yates: the first k are the subset
    std::swap(order[i], order[i + static_cast<std::size_t>(rng.below(n - i))]);
  }
  present.assign(n, false);
  for (std::size_t i = 0; i < k; ++i) present[order[i]] = true;
  return present;
}

void keep_only(const std::vector<bool>& present, JointConfig& c) {
  for (std::size_t m = 0; m < c.size(); ++m) {
    if (!present[m]) c[m] = kAbsent;
  }
}

}  // namespace

std::string_view to_string(Plan p) { return kPlanNames.name(p); }

std::optional<Plan> parse_plan(std::string_view s) { return kPlanNames.parse(s); }

const std::vector<std::string>& plan_names() {
  // kOnline is no sampling plan a campaign runs: parse_plan reads it, the list leaves it out.
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& e : kPlanNames.table) {
      if (e.value != Plan::kOnline) out.emplace_back(e.name);
    }
    return out;
  }();
  return names;
}

std::uint64_t plan_size(const Workload& w, Plan plan, std::uint64_t budget) {
  if (plan != Plan::kStandalone) return budget;
  std::uint64_t n = 0;
  for (const auto& m : w.models) n += m.local_config_count();
  return n * std::max<std::uint64_t>(budget, 1);
}

JointConfig plan_sample(const Context& ctx, const Workload& w, const ConfigSpace& space, Plan plan,
                        std::uint64_t index) {
  std::uint64_t seed = ctx.seed;
  const std::size_t n = w.models.size();
  JointConfig c(n, kAbsent);
  if (plan == Plan::kStandalone) {
    std::uint64_t pass_size = 0;
    for (std::size_t m = 0; m < n; ++m) pass_size += space.local_counts()[m];
    // Passes repeat the same order; each sample still has its own measurement seed.
    std::uint64_t rest = index % std::max<std::uint64_t>(pass_size, 1);
    for (std::size_t m = 0; m < n; ++m) {
      const std::uint64_t count = space.local_counts()[m];
      if (rest < count) {
        c[m] = static_cast<std::int32_t>(rest);
        return c;
      }
      rest -= count;
    }
    CORUN_CHECK_MSG(false, "standalone sample index past the end of the plan");
  }
  std::vector<bool> present(n, true);
  if (plan == Plan::kMeanField || plan == Plan::kCoTenant) {
    // A co-tenant campaign strides the configurations as MeanField does, on its own stream.
    if (plan == Plan::kCoTenant) seed = derive_seed(seed, {kStreamCoTenant});
    present = node_subset(w, seed, index);
    for (std::size_t m = 0; m < n; ++m) {
      const std::size_t count = space.local_counts()[m];
      if (count > kMaxStratifiedLocal) {
        Rng rng(derive_seed(seed, {kStreamStratified, index, m}));
        c[m] = static_cast<std::int32_t>(rng.below(count));
        continue;
      }
      const std::uint64_t block = index / count;
      const std::size_t pos = static_cast<std::size_t>(index % count);
      c[m] = permuted(count, derive_seed(seed, {kStreamStratified, m, block}), pos);
    }
    keep_only(present, c);
    if (space.fits_vram(c)) return c;
    // The stratified draw does not fit: fall back to a uniform feasible draw for this sample.
  }
  for (int attempt = 0; attempt < kMaxFeasibilityDraws; ++attempt) {
    Rng rng(derive_seed(
        seed, {kStreamUniform, plan_code(plan), index, static_cast<std::uint64_t>(attempt)}));
    draw_uniform(space, rng, c);
    keep_only(present, c);
    if (space.fits_vram(c)) break;
  }
  return c;
}

std::vector<JointConfig> plan_samples(const Context& ctx, const Workload& w, Plan plan,
                                      std::uint64_t budget) {
  const ConfigSpace space(w);
  const std::uint64_t size = plan_size(w, plan, budget);
  std::vector<JointConfig> out;
  out.reserve(size);
  for (std::uint64_t i = 0; i < size; ++i) out.push_back(plan_sample(ctx, w, space, plan, i));
  return out;
}

Interference plan_cotenant(const Context& ctx, Plan plan, std::uint64_t index) {
  Interference i;
  if (plan != Plan::kCoTenant) return i;
  Rng rng(derive_seed(ctx.seed, {kStreamCoTenant, index}));
  i.sm_util = rng.uniform();
  i.bandwidth_util = kMaxCoTenantBandwidth * rng.uniform();
  return i;
}

std::uint64_t measurement_seed(const Context& ctx, Plan plan, std::uint64_t index) {
  return derive_seed(ctx.seed, {kStreamMeasure, plan_code(plan), index});
}

}  // namespace corun::profile
