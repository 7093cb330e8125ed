#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "corun/core/yaml.h"
#include "corun/serve/http.h"
#include "corun/serve/json_input.h"

namespace corun::serve {

/// @brief A refusal as the API answers it: HTTP status, a stable code (`invalid_spec`,
/// `bad_json`, ...), a message for people, and the field to blame (a path such as
/// `demand.fps`; empty when no single field is).
struct ApiError {
  int status = 400;
  std::string code;
  std::string message;
  std::string field;
};

/// @brief A JSON answer: `body` serialised on one line (invalid UTF-8 in strings replaced),
/// newline-terminated. Thread-safety: pure function.
HttpResponse json_response(int status, const nlohmann::json& body);
/// @brief `{"error": {"code", "message", "field"?}}` with the error's status; a 401 also says
/// how to authenticate (RFC 6750 §3: `WWW-Authenticate: Bearer`). Thread-safety: pure function.
HttpResponse error_response(const ApiError& e);

/// @brief Where input problems become statuses, one place for every route: a body that is not
/// acceptable JSON (serve/json_input.h) is a 400 carrying the reader's code and the path of
/// the value. Thread-safety: pure function.
ApiError body_error(const JsonInputError& e);
/// @brief A model entry the spec reader refused (spec/workload.h parse_model_entry): a 422
/// `invalid_spec` whose field is the first diagnostic's path and whose message lists every
/// diagnostic as "path: reason" (joined by "; "). Thread-safety: pure function.
ApiError spec_error(const Diagnostics& diags);

}  // namespace corun::serve
