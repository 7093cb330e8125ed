// Makes the torch testbeds known to make_testbed. Their workers are the corun-torch-worker
// program installed next to the corun binary (a separate program, so that corun itself does
// not load libtorch).
#include <unistd.h>

#include <climits>
#include <filesystem>

#include "corun/torchbed/torchbed.h"

namespace corun::cli::cmd_torch_worker {
namespace {

std::string worker_exe() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "corun-torch-worker";
  return (std::filesystem::path(std::string(buf, static_cast<std::size_t>(n))).parent_path() /
          "corun-torch-worker")
      .string();
}

const bool testbeds_registered = [] {
  register_torch_testbeds(worker_exe());
  return true;
}();

}  // namespace
}  // namespace corun::cli::cmd_torch_worker
