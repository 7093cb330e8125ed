#include "corun/testbed/testbed.h"

#include "corun/core/strings.h"
#include "corun/testbed/sim.h"

namespace corun {

std::vector<std::string> testbed_names() { return {"sim"}; }

Result<std::unique_ptr<Testbed>> make_testbed(std::string_view name) {
  if (name == "sim") return std::unique_ptr<Testbed>(std::make_unique<SimTestbed>());
  const std::vector<std::string> names = testbed_names();
  return Error("unknown testbed '" + std::string(name) + "'" + did_you_mean(name, names) +
                   " (known: " + join(names, ", ") + ")",
               Error::Kind::kInvalidInput);
}

}  // namespace corun
