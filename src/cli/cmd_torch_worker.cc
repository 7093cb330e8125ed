// The hidden verb `corun __torch-worker`: one torch testbed worker process (stdin/stdout
// protocol in src/torchbed/protocol.h). It also makes the torch testbeds known to
// make_testbed, with this executable as their worker.
#include <unistd.h>

#include <climits>

#include "command.h"
#include "corun/torchbed/torchbed.h"

namespace corun::cli {
namespace {

std::string self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("corun");
}

const bool testbeds_registered = [] {
  register_torch_testbeds(self_exe());
  return true;
}();

const bool registered = register_command({
    "__torch-worker",
    "",
    [](CLI::App& sub) {
      sub.group("");  // hidden from --help: only the torch testbed starts it
      return std::function<int()>([] { return torch_worker_main(0, 1); });
    },
});

}  // namespace
}  // namespace corun::cli
