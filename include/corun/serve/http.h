#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace corun::serve {

/// @brief A transport-independent HTTP request: what the server adapter hands a handler.
struct HttpRequest {
  std::string method;  ///< "GET", "POST", ...
  std::string path;    ///< decoded path, no query
  std::map<std::string, std::string> query;
  std::string authorization;  ///< the Authorization header ("" when absent)
  std::string content_type;   ///< the Content-Type header ("" when absent)
  std::string body;
};

/// @brief What a handler answers.
struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

/// @brief What an HttpServer (serve/server.h) serves: `corun serve`'s Service and `corun
/// extender`'s Extender. Thread-safety: both methods may be called from many threads at once.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  /// @brief Answers one request. Never throws; malformed input gets a 4xx with a JSON error.
  virtual HttpResponse handle(const HttpRequest& req) = 0;
  /// @brief A JSON error for a failure the transport detected before handle() (400, 413, 414,
  /// 431, ...). `reason` (when not empty) replaces the generic message; `field` names the
  /// header or part of the request to blame.
  virtual HttpResponse transport_error(int status, const std::string& path,
                                       const std::string& reason, const std::string& field) = 0;
};

}  // namespace corun::serve
