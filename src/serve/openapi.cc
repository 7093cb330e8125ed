#include "corun/serve/openapi.h"

#include <string>

namespace corun::serve {

const nlohmann::json& openapi_json() {
  static const nlohmann::json doc = yaml_to_json(YAML::Load(std::string(openapi_yaml())));
  return doc;
}

}  // namespace corun::serve
