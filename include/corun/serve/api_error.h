#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "corun/core/result.h"
#include "corun/core/yaml.h"
#include "corun/serve/http.h"
#include "corun/serve/json_input.h"

namespace corun::serve {

/// @brief A refusal as the API answers it: HTTP status, a stable code (`invalid_spec`,
/// `bad_json`, ...), a message for people, and the field to blame (a path such as
/// `demand.fps`; empty when no single field is), and when a retry may succeed, after how long.
struct ApiError {
  int status = 400;
  std::string code;
  std::string message;
  std::string field;
  int retry_after_s = 0;  ///< > 0: a `Retry-After` header (RFC 9110 §10.2.3) with this many seconds
};

/// @brief A JSON answer: `body` serialised on one line (invalid UTF-8 in strings replaced),
/// newline-terminated. Thread-safety: pure function.
HttpResponse json_response(int status, const nlohmann::json& body);
/// @brief `{"error": {"code", "message", "field"?}}` with the error's status; a 401 also says
/// how to authenticate (RFC 6750 §3: `WWW-Authenticate: Bearer`), and one with retry_after_s
/// when to try again (`Retry-After`). Thread-safety: pure function.
HttpResponse error_response(const ApiError& e);

/// @brief Where input problems become statuses, one place for every route: a body that is not
/// acceptable JSON (serve/json_input.h) is a 400 carrying the reader's code and the path of
/// the value. Thread-safety: pure function.
ApiError body_error(const JsonInputError& e);
/// @brief A model entry the spec reader refused (spec/workload.h parse_model_entry): a 422
/// `invalid_spec` whose field is the first diagnostic's path and whose message lists every
/// diagnostic as "path: reason" (joined by "; "). Thread-safety: pure function.
ApiError spec_error(const Diagnostics& diags);

/// @brief A write to the state directory that failed, as the API answers it: a damaged file
/// (Error::Kind::kDamaged) is the server's fault, 500 `storage_damaged`; any other failure
/// (a full disk, an I/O error) is a 503 `storage_unavailable` that a client may retry once an
/// operator made room. Nothing was acknowledged in either case (the store writes whole or not
/// at all). The message names the file and the cause. Thread-safety: pure function.
ApiError storage_error(const Error& e);

}  // namespace corun::serve
