// Placement rules that ignore knobs: the baselines a node plan is compared with.
#include "corun/plan/node_placement.h"

#include <algorithm>
#include <numeric>

#include "corun/core/check.h"

namespace corun {

namespace {

// Requested memory per unit, and where a model's request fits.
class MemoryLedger {
 public:
  explicit MemoryLedger(const PlacementInput& in)
      : in_(&in), used_(in.unit_vram_bytes.size(), 0.0) {}

  [[nodiscard]] bool fits(std::size_t m, std::size_t u) const {
    return in_->allowed[m][u] && used_[u] + in_->vram_request_bytes[m] <= in_->unit_vram_bytes[u];
  }
  [[nodiscard]] double used(std::size_t u) const { return used_[u]; }
  [[nodiscard]] double used_fraction(std::size_t u) const {
    return in_->unit_vram_bytes[u] > 0 ? used_[u] / in_->unit_vram_bytes[u] : 1.0;
  }
  void take(std::size_t m, std::size_t u) { used_[u] += in_->vram_request_bytes[m]; }

 private:
  const PlacementInput* in_;
  std::vector<double> used_;
};

// Models in workload order, each on the fitting unit that `better(a, b)` ranks first.
template <typename Better>
std::vector<std::int32_t> place_in_order(const PlacementInput& in, Better better) {
  const std::size_t units = in.unit_vram_bytes.size();
  MemoryLedger ledger(in);
  std::vector<std::int32_t> out(in.vram_request_bytes.size(), kNotPlaced);
  for (std::size_t m = 0; m < out.size(); ++m) {
    std::int32_t best = kNotPlaced;
    for (std::size_t u = 0; u < units; ++u) {
      if (!ledger.fits(m, u)) continue;
      if (best == kNotPlaced || better(ledger, u, static_cast<std::size_t>(best))) {
        best = static_cast<std::int32_t>(u);
      }
    }
    if (best != kNotPlaced) ledger.take(m, static_cast<std::size_t>(best));
    out[m] = best;
  }
  return out;
}

void check_input(const PlacementInput& in) {
  CORUN_CHECK(in.allowed.size() == in.vram_request_bytes.size());
  for (const auto& a : in.allowed) CORUN_CHECK(a.size() == in.unit_vram_bytes.size());
}

}  // namespace

std::vector<std::int32_t> place_binpack(const PlacementInput& in) {
  check_input(in);
  return place_in_order(in, [](const MemoryLedger& l, std::size_t a, std::size_t b) {
    return l.used(a) > l.used(b);
  });
}

std::vector<std::int32_t> place_spread(const PlacementInput& in) {
  check_input(in);
  return place_in_order(in, [](const MemoryLedger& l, std::size_t a, std::size_t b) {
    return l.used_fraction(a) < l.used_fraction(b);
  });
}

std::vector<std::int32_t> place_round_robin(const PlacementInput& in) {
  check_input(in);
  const std::size_t units = in.unit_vram_bytes.size();
  MemoryLedger ledger(in);
  std::vector<std::int32_t> out(in.vram_request_bytes.size(), kNotPlaced);
  std::size_t next = 0;
  for (std::size_t m = 0; m < out.size(); ++m) {
    for (std::size_t k = 0; k < units; ++k) {
      const std::size_t u = (next + k) % units;
      if (!ledger.fits(m, u)) continue;
      ledger.take(m, u);
      out[m] = static_cast<std::int32_t>(u);
      next = u + 1;
      break;
    }
  }
  return out;
}

std::vector<std::int32_t> place_igniter(const PlacementInput& in) {
  check_input(in);
  CORUN_CHECK(in.demand.size() == in.vram_request_bytes.size());
  CORUN_CHECK(static_cast<bool>(in.interference));
  const std::size_t units = in.unit_vram_bytes.size();
  std::vector<std::size_t> order(in.vram_request_bytes.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return in.demand[a] > in.demand[b]; });
  MemoryLedger ledger(in);
  std::vector<std::vector<std::size_t>> residents(units);
  std::vector<std::int32_t> out(order.size(), kNotPlaced);
  for (std::size_t m : order) {
    std::int32_t best = kNotPlaced;
    double best_cost = 0;
    for (std::size_t u = 0; u < units; ++u) {
      if (!ledger.fits(m, u)) continue;
      const double cost = in.interference(u, residents[u], m);
      if (best == kNotPlaced || cost < best_cost) {
        best = static_cast<std::int32_t>(u);
        best_cost = cost;
      }
    }
    if (best == kNotPlaced) continue;
    ledger.take(m, static_cast<std::size_t>(best));
    residents[static_cast<std::size_t>(best)].push_back(m);
    out[m] = best;
  }
  return out;
}

std::vector<std::string> placement_rule_names() {
  return {"binpack", "spread", "round-robin", "igniter"};
}

std::vector<std::int32_t> place_by_rule(std::string_view name, const PlacementInput& in) {
  if (name == "binpack") return place_binpack(in);
  if (name == "spread") return place_spread(in);
  if (name == "round-robin") return place_round_robin(in);
  CORUN_CHECK_MSG(name == "igniter", "unknown placement rule");
  return place_igniter(in);
}

}  // namespace corun
