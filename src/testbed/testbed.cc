#include "corun/testbed/testbed.h"

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
    return std::unique_ptr<Testbed>(std::make_unique<SimTestbed>(SimTruth::perturbed(seed)));
  }
  for (const auto& [n, f] : registered()) {
    if (n == name) return f();
  }
  const std::vector<std::string> names = testbed_names();
  return Error("unknown testbed '" + std::string(name) + "'" + did_you_mean(name, names) +
                   " (known: " + join(names, ", ") + ")",
               Error::Kind::kInvalidInput);
}

}  // namespace corun
