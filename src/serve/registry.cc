#include "corun/serve/registry.h"

#include "corun/serve/json_input.h"

namespace corun::serve {

std::optional<ApiError> check_pod_ref(const nlohmann::json& pod) {
  const std::string field = kPodField;
  if (!pod.is_object()) {
    return ApiError{422, "bad_type", "pod must be an object (namespace, name, uid)", field};
  }
  for (const auto& [k, v] : pod.items()) {
    const std::string f = field + "." + k;
    if (k == "namespace" || k == "name" || k == "uid" || k == "scheduler") {
      if (!v.is_string()) return ApiError{422, "bad_type", f + " must be a string", f};
      if (v.get<std::string>().empty() && k != "scheduler") {
        return ApiError{422, "bad_value", f + " must not be empty", f};
      }
    } else if (k == "reserved_unix_ms") {
      if (!v.is_number_integer()) return ApiError{422, "bad_type", f + " must be an integer", f};
    } else if (k == "checked") {
      if (!v.is_boolean()) return ApiError{422, "bad_type", f + " must be true or false", f};
    } else {
      return ApiError{422, "unknown_field",
                      "unknown field '" + k +
                          "' (known: namespace, name, uid, scheduler, checked, reserved_unix_ms)",
                      f};
    }
  }
  for (const char* k : {"namespace", "name", "uid"}) {
    if (!pod.contains(k)) {
      return ApiError{422, "missing_field", field + "." + k + " is required", field + "." + k};
    }
  }
  return std::nullopt;
}

std::variant<ModelSpec, ApiError> parse_model_json(const nlohmann::json& entry,
                                                   const Catalog& catalog) {
  if (!entry.is_object()) {
    return ApiError{400, "bad_type", "a model must be a JSON object (a workload 'models' entry)",
                    ""};
  }
  nlohmann::json model = entry;
  if (const auto pod = entry.find(kPodField); pod != entry.end()) {
    if (auto bad = check_pod_ref(*pod)) return *bad;
    model.erase(kPodField);  // where the model runs, not what it is: no part of its spec
  }
  Diagnostics diags;
  auto m = parse_model_entry(to_yaml_node(model), "request", catalog, diags);
  if (!m) return spec_error(diags);
  m->active = true;
  return std::move(*m);
}

void ModelRegistry::restore(std::vector<Entry> entries) {
  entries_ = std::move(entries);
  generation_ = 0;
  reindex();
}

std::optional<ApiError> ModelRegistry::admission_error(const std::string& name) const {
  if (index_.count(name) != 0) {
    return ApiError{409, "duplicate_model", "model '" + name + "' is already registered", "name"};
  }
  if (entries_.size() >= kMaxModels) {
    return ApiError{422, "too_many_models",
                    "at most " + std::to_string(kMaxModels) + " models are served", ""};
  }
  return std::nullopt;
}

const ModelRegistry::Entry* ModelRegistry::find(std::string_view name) const {
  const auto i = index_of(name);
  return i ? &entries_[*i] : nullptr;
}

std::optional<std::size_t> ModelRegistry::index_of(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

void ModelRegistry::add(Entry entry) {
  index_[entry.name] = entries_.size();
  entries_.push_back(std::move(entry));
  ++generation_;
}

void ModelRegistry::remove(std::string_view name) {
  const auto i = index_of(name);
  if (!i) return;
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(*i));
  reindex();
  ++generation_;
}

void ModelRegistry::update(std::string_view name, nlohmann::json spec, ModelSpec model) {
  const auto i = index_of(name);
  if (!i) return;
  entries_[*i].spec = std::move(spec);
  entries_[*i].model = std::move(model);
  ++generation_;
}

Workload ModelRegistry::workload(const Device& device) const {
  Workload w;
  w.file = "<serve>";
  w.device = device;
  for (const auto& e : entries_) w.models.push_back(e.model);
  return w;
}

void ModelRegistry::reindex() {
  index_.clear();
  for (std::size_t i = 0; i < entries_.size(); ++i) index_[entries_[i].name] = i;
}

}  // namespace corun::serve
