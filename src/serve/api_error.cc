#include "corun/serve/api_error.h"

#include <vector>

#include "corun/core/strings.h"

namespace corun::serve {

HttpResponse json_response(int status, const nlohmann::json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  r.body += "\n";
  return r;
}

HttpResponse error_response(const ApiError& e) {
  nlohmann::json err = {{"code", e.code}, {"message", e.message}};
  if (!e.field.empty()) err["field"] = e.field;
  HttpResponse r = json_response(e.status, {{"error", err}});
  if (e.status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  if (e.retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(e.retry_after_s));
  return r;
}

ApiError storage_error(const Error& e) {
  if (e.kind() == Error::Kind::kDamaged) return {500, "storage_damaged", e.what(), ""};
  return {503, "storage_unavailable", e.what(), "", 5};
}

ApiError body_error(const JsonInputError& e) { return {400, e.code, e.message, e.field}; }

ApiError spec_error(const Diagnostics& diags) {
  std::vector<std::string> reasons;
  std::string field;
  for (const Diagnostic& d : diags.items()) {
    if (field.empty()) field = d.path;
    reasons.push_back(d.path.empty() ? d.reason : d.path + ": " + d.reason);
  }
  if (reasons.empty()) reasons.emplace_back("not a valid model entry");
  return {422, "invalid_spec", join(reasons, "; "), field};
}

}  // namespace corun::serve
