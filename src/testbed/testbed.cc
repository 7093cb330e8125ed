#include "corun/testbed/testbed.h"

#include <algorithm>
#include <charconv>

#include "corun/core/strings.h"
#include "corun/testbed/sim.h"

namespace corun {

namespace {

using Factory = std::function<std::unique_ptr<Testbed>()>;

std::vector<std::pair<std::string, Factory>>& registered() {
  static std::vector<std::pair<std::string, Factory>> factories;
  return factories;
}

}  // namespace

std::string Conditions::apply(const TimelineEvent& e) {
  switch (e.kind) {
    case TimelineEvent::Kind::kInterference:
      interference = e.interference.value_or(Interference{});
      return e.interference ? "interference sm " + format_number(interference.sm_util) + " bw " +
                                  format_number(interference.bandwidth_util)
                            : std::string("interference leaves");
    case TimelineEvent::Kind::kPowerCap:
      power_cap_w = e.power_cap_w.value_or(0);
      return e.power_cap_w ? "power cap " + format_number(power_cap_w) + " W"
                           : std::string("power cap lifted");
    case TimelineEvent::Kind::kPerturb:
      perturb_seed = e.perturb_seed;
      return perturb_seed != 0 ? "truth perturbed (seed " + std::to_string(perturb_seed) + ")"
                               : std::string("truth back to the catalog");
    default:
      return {};
  }
}

Conditions initial_conditions(const Workload& w) {
  Conditions c;
  for (const auto& e : w.timeline.events) {
    if (e.at_s <= 0 && !e.planner_visible()) c.apply(e);
  }
  return c;
}

std::string Conditions::key() const {
  return format_number(interference.sm_util) + "/" + format_number(interference.bandwidth_util) +
         "/" + format_number(power_cap_w) + "/" + std::to_string(perturb_seed);
}

void register_testbed(std::string name, Factory factory) {
  registered().emplace_back(std::move(name), std::move(factory));
}

std::vector<std::string> testbed_names() {
  std::vector<std::string> names = {"sim", "sim:perturb=SEED"};
  for (const auto& [n, f] : registered()) names.push_back(n);
  return names;
}

Result<std::unique_ptr<Testbed>> make_testbed(std::string_view name) {
  if (name == "sim") return std::unique_ptr<Testbed>(std::make_unique<SimTestbed>());
  constexpr std::string_view kPerturb = "sim:perturb=";
  if (name.substr(0, kPerturb.size()) == kPerturb) {
    const std::string_view digits = name.substr(kPerturb.size());
    std::uint64_t seed = 0;
    const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), seed);
    if (ec != std::errc() || p != digits.data() + digits.size() || seed == 0) {
      return Error("testbed '" + std::string(name) +
                       "': the perturbation seed must be a positive integer (sim:perturb=7)",
                   Error::Kind::kInvalidInput);
    }
    return std::unique_ptr<Testbed>(
        std::make_unique<SimTestbed>(SimTruth::perturbed(Context{.seed = seed})));
  }
  for (const auto& [n, f] : registered()) {
    if (n == name) return f();
  }
  const std::vector<std::string> names = testbed_names();
  return Error("unknown testbed '" + std::string(name) + "'" + did_you_mean(name, names) +
                   " (known: " + join(names, ", ") + ")",
               Error::Kind::kInvalidInput);
}

void charge_transition(const ModelSpec& m, const TransitionCharge& c, double window_s,
                       ModelMetrics& mm) {
  if (!mm.ok() || window_s <= 0) return;
  const double down = std::clamp(c.outage_s, 0.0, window_s);
  const double up = window_s - down;
  const bool stream = m.arch.family == ModelFamily::kVision;
  if (down > 0) {
    if (stream) {
      mm.throughput *= up / window_s;  // frames of the outage are lost
    } else {
      // Arrivals are uniform over the window; those of the outage wait for its end, the one
      // that came at t waiting down − t. A share f = down / window of the requests waited:
      // the window's p95 is the wait of the (1 − 0.05 / f) quantile of them, when f > 5 %.
      const double f = down / window_s;
      const double extra_ms = f > 0.05 ? 1e3 * down * (1 - 0.05 / f) : 0;
      mm.latency_ms_p95 += extra_ms;
      mm.latency_ms_p50 += f > 0.5 ? 1e3 * down * (1 - 0.5 / f) : 0;
      if (mm.ttft_ms_p95) *mm.ttft_ms_p95 += extra_ms;
      // The backlog is served after the outage: the window's completions are those of its
      // requests (the engine catches up), so throughput keeps its value when up > 0.
      if (up <= 0) {
        mm.throughput = 0;
        mm.tpot_ms_p95.reset();
      }
    }
  }
  if (c.warmup_requests > 0 && c.warmup_slowdown > 1) {
    const double rate = m.demand.rps > 0 ? m.demand.rps : m.demand.fps;
    const double requests = std::max(1.0, rate * std::max(up, 1e-9));
    const double share = std::min(1.0, c.warmup_requests / requests / 0.05);
    const double factor = 1 + (c.warmup_slowdown - 1) * share;
    mm.latency_ms_p95 *= factor;
    if (mm.ttft_ms_p95) *mm.ttft_ms_p95 *= factor;
    if (mm.tpot_ms_p95) *mm.tpot_ms_p95 *= factor;
  }
}

}  // namespace corun
