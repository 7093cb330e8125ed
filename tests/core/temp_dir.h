#pragma once

// The one temporary directory of the tests: unique (mkdtemp), so that test processes running
// side by side (ctest -j, the dev, ASan and TSan trees, two checkouts) never share one, and
// removed with everything in it when it goes, so that a run leaves nothing behind.
#include <stdlib.h>

#include <cerrno>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace corun::testing {

/// @brief A fresh directory under the system's temporary directory, named `prefix-XXXXXX`,
/// removed recursively on destruction.
///
/// @code
///   TempDir dir("corun-export");
///   const auto path = dir.write("w.yaml", "device: l4\n...");
///   run_something(dir.file("out.json"));
/// @endcode
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "corun-test") {
    std::string templ =
        (std::filesystem::temp_directory_path() / (std::string(prefix) + "-XXXXXX")).string();
    if (::mkdtemp(templ.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + templ);
    }
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  /// @brief The path of `name` inside the directory, as a string.
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }
  /// @brief Writes `text` to `name` inside the directory (its parent directories too).
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    const std::filesystem::path p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace corun::testing
