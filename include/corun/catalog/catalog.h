#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/catalog/device.h"
#include "corun/catalog/model.h"
#include "corun/core/result.h"
#include "corun/core/yaml.h"

namespace corun {

/// @brief Devices and models known by name. Loaded from the catalog YAML compiled into the
/// binary, or from a directory holding devices.yaml and models.yaml. Immutable after load;
/// safe to share between threads.
class Catalog {
 public:
  /// @brief The catalog compiled into the binary.
  static Result<Catalog> load_embedded();
  /// @brief The catalog in `dir` (devices.yaml, models.yaml; other files are kept as raw text).
  static Result<Catalog> load_dir(const std::filesystem::path& dir);
  /// @brief CORUN_CATALOG if set, else the embedded catalog. Cached after the first call. If
  /// CORUN_CATALOG cannot be loaded, prints the error to stderr and uses the embedded catalog;
  /// callers that must fail instead use load_default(). Thread-safe.
  static const Catalog& default_catalog();
  /// @brief CORUN_CATALOG if set, else the embedded catalog; not cached, errors returned.
  static Result<Catalog> load_default();

  [[nodiscard]] const Device* find_device(std::string_view name) const;
  [[nodiscard]] const ModelArch* find_model(std::string_view name) const;
  [[nodiscard]] std::vector<std::string> device_names() const;
  [[nodiscard]] std::vector<std::string> model_names() const;
  /// @brief The device used when a workload names none (devices.yaml `default`).
  [[nodiscard]] const std::string& default_device_name() const { return default_device_; }
  /// @brief Raw text of another catalog file (e.g. "tools.yaml"), if present.
  [[nodiscard]] std::optional<std::string> file(std::string_view name) const;

  /// @brief Parses one device mapping (as in devices.yaml, or inline in a workload).
  static std::optional<Device> parse_device(const YamlField& field, std::string_view name);

 private:
  std::map<std::string, Device, std::less<>> devices_;
  std::map<std::string, ModelArch, std::less<>> models_;
  std::map<std::string, std::string, std::less<>> files_;
  std::string default_device_;

  static Result<Catalog> load_texts(const std::map<std::string, std::string>& files);
  /// `origin` prefixes file names in diagnostics (a directory, or "<embedded catalog>").
  static Result<Catalog> load_texts(const std::map<std::string, std::string>& files,
                                    const std::string& origin);
};

}  // namespace corun
