#include "corun/testbed/testbed.h"

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

void register_testbed(std::string name, Factory factory) {
  registered().emplace_back(std::move(name), std::move(factory));
}

std::vector<std::string> testbed_names() {
  std::vector<std::string> names = {"sim"};
  for (const auto& [n, f] : registered()) names.push_back(n);
  return names;
}

Result<std::unique_ptr<Testbed>> make_testbed(std::string_view name) {
  if (name == "sim") return std::unique_ptr<Testbed>(std::make_unique<SimTestbed>());
  for (const auto& [n, f] : registered()) {
    if (n == name) return f();
  }
  const std::vector<std::string> names = testbed_names();
  return Error("unknown testbed '" + std::string(name) + "'" + did_you_mean(name, names) +
                   " (known: " + join(names, ", ") + ")",
               Error::Kind::kInvalidInput);
}

}  // namespace corun
