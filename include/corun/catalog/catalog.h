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

/// @brief Where a catalog overlay came from: the directory laid over the built-in catalog and
/// a hash of what it held, so that a file written with it (a run's report.json, a plan) can
/// find it again and tell when it changed.
struct CatalogOverlay {
  std::string dir;   ///< absolute path of the overlay directory
  std::string hash;  ///< FNV-1a (16 hex digits) of the overlay's *.yaml names and contents
};

/// @brief Devices and models known by name. Loaded from the catalog YAML compiled into the
/// binary, optionally with an overlay directory laid over it. Immutable after load; safe to
/// share between threads.
///
/// An overlay adds or overrides entries by name: a device under `devices:` of its devices.yaml,
/// a model under `models:` and a CNN template under `cnn_templates:` of its models.yaml
/// replace the built-in entry of the same name as a whole (no field-by-field merge) or add a
/// new one; `default:` in its devices.yaml replaces the default device. Any other *.yaml file
/// in the overlay (mig.yaml, actuation.yaml, tools.yaml) replaces the built-in file as a
/// whole. Files the overlay lacks keep the built-in ones. docs/catalog.md has the schemas.
///
/// @code
///   Result<Catalog> c = Catalog::load_overlay("my-catalog");  // built-in + my-catalog/*.yaml
///   if (!c) return c.error();           // file:line:col: models.my-llm.decoder.heads: reason
///   const ModelArch* m = c->find_model("my-llm");
///   const std::optional<CatalogOverlay>& o = c->overlay();  // {abs path, hash}
/// @endcode
class Catalog {
 public:
  /// @brief The catalog compiled into the binary.
  static Result<Catalog> load_embedded();
  /// @brief The embedded catalog with the *.yaml files of `dir` laid over it (see the class
  /// comment). Errors name the overlay file, line, field path and reason (kInvalidInput), or
  /// say that `dir` is not a directory (kNotFound).
  static Result<Catalog> load_overlay(const std::filesystem::path& dir);
  /// @brief The overlay CORUN_CATALOG names if set, else the embedded catalog. Cached after the
  /// first call. If CORUN_CATALOG cannot be loaded, prints the error to stderr and uses the
  /// embedded catalog; callers that must fail instead use load_default(). Thread-safe.
  static const Catalog& default_catalog();
  /// @brief The overlay CORUN_CATALOG names if set, else the embedded catalog; not cached,
  /// errors returned.
  static Result<Catalog> load_default();

  [[nodiscard]] const Device* find_device(std::string_view name) const;
  [[nodiscard]] const ModelArch* find_model(std::string_view name) const;
  [[nodiscard]] std::vector<std::string> device_names() const;
  [[nodiscard]] std::vector<std::string> model_names() const;
  /// @brief The device used when a workload names none (devices.yaml `default`).
  [[nodiscard]] const std::string& default_device_name() const { return default_device_; }
  /// @brief Raw text of another catalog file (e.g. "tools.yaml"), if present.
  [[nodiscard]] std::optional<std::string> file(std::string_view name) const;

  /// @brief The overlay this catalog was loaded with; empty for the built-in catalog alone.
  [[nodiscard]] const std::optional<CatalogOverlay>& overlay() const { return overlay_; }

  /// @brief Parses one device mapping (as in devices.yaml, or inline in a workload).
  static std::optional<Device> parse_device(const YamlField& field, std::string_view name);

 private:
  /// One source of catalog files: the embedded catalog or an overlay directory.
  struct Layer {
    std::map<std::string, std::string> files;  ///< file name -> text
    std::string origin;  ///< prefixes file names in diagnostics: a directory or "<embedded>"
  };

  std::map<std::string, Device, std::less<>> devices_;
  std::map<std::string, ModelArch, std::less<>> models_;
  std::map<std::string, std::string, std::less<>> files_;
  std::string default_device_;
  std::optional<CatalogOverlay> overlay_;

  static Layer embedded_layer();
  /// Reads `layers` in order, each later one laid over the earlier ones. The first layer must
  /// hold devices.yaml and models.yaml, with a default device.
  static Result<Catalog> load_layers(const std::vector<Layer>& layers);
};

}  // namespace corun
