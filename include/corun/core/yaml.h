#pragma once

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/core/result.h"

namespace corun {

/// @brief One problem found in an input file: where (file, 1-based line and column, field
/// path such as `models[1].knobs.imgsz`) and why.
struct Diagnostic {
  std::string file;
  int line = 0;
  int column = 0;
  std::string path;
  std::string reason;

  /// @brief "file:line:col: path: reason".
  [[nodiscard]] std::string to_string() const;
};

/// @brief Diagnostics collected while reading one file. Reading goes on after an error so that
/// a user sees every problem at once.
class Diagnostics {
 public:
  void add(Diagnostic d) { items_.push_back(std::move(d)); }
  [[nodiscard]] bool empty() const { return items_.empty(); }
  [[nodiscard]] const std::vector<Diagnostic>& items() const { return items_; }
  /// @brief All diagnostics as one Error (one line each), kind kInvalidInput.
  [[nodiscard]] Error to_error() const;

 private:
  std::vector<Diagnostic> items_;
};

/// @brief Parses YAML text; syntax errors become a Diagnostic with the parser's line.
Result<YAML::Node> parse_yaml(std::string_view text, const std::string& file);

/// @brief A cursor into a YAML document that knows its file and field path and reports typed,
/// range-checked reads into a Diagnostics sink. Cheap to copy.
class YamlField {
 public:
  YamlField(YAML::Node node, std::string file, std::string path, Diagnostics* diags);

  [[nodiscard]] const YAML::Node& node() const { return node_; }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const std::string& file() const { return file_; }
  [[nodiscard]] bool present() const { return node_.IsDefined() && !node_.IsNull(); }
  [[nodiscard]] bool is_map() const { return node_.IsMap(); }
  [[nodiscard]] bool is_sequence() const { return node_.IsSequence(); }
  [[nodiscard]] bool is_scalar() const { return node_.IsScalar(); }

  /// @brief The child at `key` (may be absent: check present()).
  [[nodiscard]] YamlField operator[](std::string_view key) const;
  /// @brief The i-th element of a sequence.
  [[nodiscard]] YamlField at(std::size_t i) const;
  [[nodiscard]] std::size_t size() const { return node_.size(); }
  /// @brief Keys of a map, in document order.
  [[nodiscard]] std::vector<std::string> keys() const;

  /// @brief Reports an error at this field.
  void error(std::string reason) const;

  /// @brief Requires a map; reports a type error otherwise. Returns whether it is one.
  bool expect_map() const;
  /// @brief Requires a non-empty sequence.
  bool expect_sequence(bool allow_empty = false) const;
  /// @brief Reports every key not in `known`, suggesting the nearest known key.
  void check_keys(std::initializer_list<std::string_view> known) const;
  void check_keys(const std::vector<std::string>& known) const;

  /// @brief A required or optional finite number in [min, max]; reports type/range errors.
  std::optional<double> number(double min, double max) const;
  /// @brief An integer in [min, max].
  std::optional<long long> integer(long long min, long long max) const;
  /// @brief A non-empty string scalar.
  std::optional<std::string> string() const;
  /// @brief A boolean scalar (true/false).
  std::optional<bool> boolean() const;

  /// @brief Helpers for a child key: required ones report "missing required field".
  std::optional<double> number_at(std::string_view key, double min, double max,
                                  bool required) const;
  std::optional<long long> integer_at(std::string_view key, long long min, long long max,
                                      bool required) const;
  std::optional<std::string> string_at(std::string_view key, bool required) const;

  [[nodiscard]] int line() const;
  [[nodiscard]] int column() const;
  [[nodiscard]] Diagnostics* diagnostics() const { return diags_; }

 private:
  YAML::Node node_;
  std::string file_;
  std::string path_;
  Diagnostics* diags_;
  int parent_line_ = 0;
  int parent_column_ = 0;
};

}  // namespace corun
