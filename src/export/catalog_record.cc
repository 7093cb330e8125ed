// The `catalog` member of plan files: which catalog overlay a plan was made with.

#include "corun/export/catalog_record.h"

namespace corun::exporting {

nlohmann::json catalog_record_json(const Catalog& catalog) {
  const auto& overlay = catalog.overlay();
  if (!overlay) return {{"overlay", nullptr}};
  return {{"overlay", overlay->dir}, {"hash", overlay->hash}};
}

Result<std::optional<CatalogOverlay>> read_catalog_record(std::string_view plan_text,
                                                          const std::string& plan_file) {
  const nlohmann::json j = nlohmann::json::parse(plan_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::optional<CatalogOverlay>();
  const auto it = j.find("catalog");
  if (it == j.end() || it->is_null()) return std::optional<CatalogOverlay>();
  const auto bad = [&](const std::string& field, const std::string& reason) {
    return Error(plan_file + ": " + field + ": " + reason, Error::Kind::kInvalidInput);
  };
  if (!it->is_object()) {
    return bad("catalog", std::string("expected an object, got ") + it->type_name());
  }
  const auto dir = it->find("overlay");
  if (dir == it->end() || dir->is_null()) return std::optional<CatalogOverlay>();
  if (!dir->is_string() || dir->get<std::string>().empty()) {
    return bad("catalog.overlay", "expected a directory path or null");
  }
  const auto hash = it->find("hash");
  if (hash == it->end() || !hash->is_string()) {
    return bad("catalog.hash", "expected the overlay's content hash (a string)");
  }
  return std::optional<CatalogOverlay>(
      CatalogOverlay{dir->get<std::string>(), hash->get<std::string>()});
}

std::string overlay_change_warning(const CatalogOverlay& recorded, const Catalog& loaded,
                                   const std::string& plan_file) {
  const std::string now = loaded.overlay() ? loaded.overlay()->hash : std::string("none");
  if (now == recorded.hash) return "";
  return plan_file + ": the catalog overlay " + recorded.dir +
         " changed since the plan was written (hash " + recorded.hash + ", now " + now +
         "); reading the plan against it as it is now";
}

}  // namespace corun::exporting
