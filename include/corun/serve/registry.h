#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/serve/api_error.h"
#include "corun/spec/workload.h"

namespace corun::serve {

/// @brief Parses one model entry of a request body (the JSON form of a workload `models`
/// entry) with the spec reader, so that its errors (field path, reason, nearest known name)
/// are exactly those of a workload file; they come back as a 422 naming the field
/// (api_error.h). The model is active: a registered model runs.
/// Thread-safety: pure function; `catalog` is only read.
/// An entry may carry `pod`, the Kubernetes pod that runs the model (serve/kube_registrar.h):
/// it is checked (check_pod_ref) and kept with the registration, and is no part of the spec.
std::variant<ModelSpec, ApiError> parse_model_json(const nlohmann::json& entry,
                                                   const Catalog& catalog);

/// @brief The member of a model entry that names the pod running it.
inline constexpr const char* kPodField = "pod";
/// @brief Checks a model entry's `pod`: an object with the strings `namespace`, `name` and
/// `uid` (not empty), and optionally `scheduler` (the scheduler that placed it), `checked`
/// (true when a fit check reserved its place before it was bound) and `reserved_unix_ms` (when
/// that reservation was made). A 422 naming the field, or none.
std::optional<ApiError> check_pod_ref(const nlohmann::json& pod);

/// @brief The models `corun serve` plans for: each with the JSON it was registered with (demand
/// updates applied) and the parsed spec, in registration order, and a generation that every
/// change bumps. Thread-safety: none; the service guards it with its state lock.
class ModelRegistry {
 public:
  /// The most models one service plans for (the spec allows no more in one workload either).
  static constexpr std::size_t kMaxModels = 64;

  /// @brief One registered model.
  struct Entry {
    std::string name;
    nlohmann::json spec;  ///< the registration JSON, demand updates applied
    ModelSpec model;
  };

  /// @brief Installs the models of a stored state, in order, at generation 0.
  void restore(std::vector<Entry> entries);
  /// @brief Why a model named `name` cannot join (already registered: 409; full: 422), for
  /// registration and what-if alike; none when it can.
  [[nodiscard]] std::optional<ApiError> admission_error(const std::string& name) const;
  /// @brief The model called `name`, or null.
  [[nodiscard]] const Entry* find(std::string_view name) const;
  /// @brief Its position in entries() (the controller's model index), or none.
  [[nodiscard]] std::optional<std::size_t> index_of(std::string_view name) const;
  /// @brief Appends a model that admission_error() admitted. Bumps the generation.
  void add(Entry entry);
  /// @brief Removes a registered model. Bumps the generation.
  void remove(std::string_view name);
  /// @brief Replaces a registered model's JSON and spec. Bumps the generation.
  void update(std::string_view name, nlohmann::json spec, ModelSpec model);

  [[nodiscard]] const std::vector<Entry>& entries() const { return entries_; }
  [[nodiscard]] std::size_t size() const { return entries_.size(); }
  [[nodiscard]] bool empty() const { return entries_.empty(); }
  /// @brief Version of the model set: 0 after restore(), +1 per change.
  [[nodiscard]] std::uint64_t generation() const { return generation_; }
  /// @brief The registered models as a workload on `device`.
  [[nodiscard]] Workload workload(const Device& device) const;

 private:
  void reindex();

  std::vector<Entry> entries_;
  std::unordered_map<std::string, std::size_t> index_;
  std::uint64_t generation_ = 0;
};

}  // namespace corun::serve
