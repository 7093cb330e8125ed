#pragma once

#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "corun/core/result.h"

namespace corun::serve {

/// @brief One element of an instant query's result: a series' labels, the evaluation time and
/// its value (NaN and ±Inf as Prometheus sent them).
struct PromSample {
  std::map<std::string, std::string> labels;
  double time_s = 0;
  double value = 0;
};

/// @brief Why a query has no result.
struct PromError {
  enum class Kind {
    kUnreachable,  ///< no HTTP answer (connection refused, time-out)
    kRejected,     ///< Prometheus answered with an error (a bad query: errorType bad_data ...)
    kBadResponse,  ///< an answer that is not the HTTP API's JSON
  };
  Kind kind = Kind::kUnreachable;
  std::string message;
};

using PromResult = std::variant<std::vector<PromSample>, PromError>;

/// @brief Reads the body of an instant query's answer (`GET /api/v1/query`,
/// https://prometheus.io/docs/prometheus/latest/querying/api/#instant-queries): a `vector` or
/// `scalar` result as samples; an error answer (`"status": "error"`) as kRejected with its
/// errorType and error; anything else as kBadResponse. Thread-safety: pure function.
PromResult parse_query_response(int http_status, const std::string& body);

/// @brief A client of one Prometheus server's HTTP API (http only: put a TLS proxy in front of
/// one that serves https). Thread-safety: query() may be called from several threads.
class PrometheusClient {
 public:
  /// @brief `url`: http://host[:port][/path prefix] (a prefix when Prometheus runs with
  /// --web.route-prefix or behind a proxy path). An error names what is wrong with it.
  static Result<PrometheusClient> create(const std::string& url, int timeout_ms = 5000);

  /// @brief An instant query evaluated now (or at `at_s`, Unix seconds).
  [[nodiscard]] PromResult query(const std::string& promql,
                                 std::optional<double> at_s = std::nullopt) const;
  [[nodiscard]] const std::string& url() const { return url_; }

 private:
  std::string url_, host_, prefix_;
  int port_ = 80;
  int timeout_ms_ = 5000;
};

}  // namespace corun::serve
