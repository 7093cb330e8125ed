#include "corun/serve/prometheus_client.h"

#include <httplib.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace corun::serve {

using nlohmann::json;

namespace {

PromError bad(std::string why) { return PromError{PromError::Kind::kBadResponse, std::move(why)}; }

// A sample value as the API writes it: a string ("1.5", "NaN", "+Inf", "-Inf").
std::optional<double> parse_value(const json& v) {
  if (!v.is_string()) return std::nullopt;
  const std::string& s = v.get_ref<const std::string&>();
  if (s == "NaN") return NAN;
  if (s == "+Inf") return INFINITY;
  if (s == "-Inf") return -INFINITY;
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || errno == ERANGE) return std::nullopt;
  return x;
}

// [time, "value"] of a vector element or a scalar result.
std::optional<PromSample> parse_pair(const json& pair) {
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number()) return std::nullopt;
  const auto v = parse_value(pair[1]);
  if (!v) return std::nullopt;
  PromSample s;
  s.time_s = pair[0].get<double>();
  s.value = *v;
  return s;
}

}  // namespace

PromResult parse_query_response(int http_status, const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return bad("HTTP " + std::to_string(http_status) + ", not a JSON object: " +
               body.substr(0, 120));
  }
  const std::string status = j.value("status", std::string());
  if (status == "error") {
    return PromError{PromError::Kind::kRejected,
                     j.value("errorType", std::string("error")) + ": " +
                         j.value("error", std::string("(no message)"))};
  }
  if (status != "success" || http_status != 200) {
    return bad("HTTP " + std::to_string(http_status) + " with status '" + status + "'");
  }
  const json* data = j.contains("data") && j["data"].is_object() ? &j["data"] : nullptr;
  if (data == nullptr) return bad("no 'data' object");
  const std::string type = data->value("resultType", std::string());
  const json& result = data->contains("result") ? (*data)["result"] : json();
  std::vector<PromSample> out;
  if (type == "scalar") {
    auto s = parse_pair(result);
    if (!s) return bad("a scalar result that is not [time, \"value\"]");
    out.push_back(std::move(*s));
    return out;
  }
  if (type != "vector") {
    return bad("result type '" + type + "' (an instant query of a range vector? wrap it in a "
               "function such as rate())");
  }
  if (!result.is_array()) return bad("a vector result that is not an array");
  for (const json& e : result) {
    if (!e.is_object() || !e.contains("value")) return bad("a vector element without 'value'");
    auto s = parse_pair(e["value"]);
    if (!s) return bad("a vector element whose value is not [time, \"value\"]");
    if (e.contains("metric") && e["metric"].is_object()) {
      for (const auto& [k, v] : e["metric"].items()) {
        if (v.is_string()) s->labels[k] = v.get<std::string>();
      }
    }
    out.push_back(std::move(*s));
  }
  return out;
}

Result<PrometheusClient> PrometheusClient::create(const std::string& url, int timeout_ms) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0) {
    return Error("--prometheus " + url +
                     ": https is not supported; reach Prometheus over http (in the cluster, or "
                     "through a TLS-terminating proxy)",
                 Error::Kind::kInvalidInput);
  }
  if (url.rfind(scheme, 0) != 0) {
    return Error("--prometheus " + url + ": expected http://host[:port][/prefix]",
                 Error::Kind::kInvalidInput);
  }
  PrometheusClient c;
  c.url_ = url;
  c.timeout_ms_ = timeout_ms;
  std::string rest = url.substr(scheme.size());
  if (const auto slash = rest.find('/'); slash != std::string::npos) {
    c.prefix_ = rest.substr(slash);
    rest = rest.substr(0, slash);
    while (!c.prefix_.empty() && c.prefix_.back() == '/') c.prefix_.pop_back();
  }
  if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
    const std::string port = rest.substr(colon + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 65535) {
      return Error("--prometheus " + url + ": port '" + port + "' is not in [1, 65535]",
                   Error::Kind::kInvalidInput);
    }
    c.port_ = static_cast<int>(p);
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) {
    return Error("--prometheus " + url + ": no host", Error::Kind::kInvalidInput);
  }
  c.host_ = rest;
  return c;
}

PromResult PrometheusClient::query(const std::string& promql, std::optional<double> at_s) const {
  httplib::Client client(host_, port_);
  client.set_connection_timeout(timeout_ms_ / 1000, (timeout_ms_ % 1000) * 1000);
  client.set_read_timeout(timeout_ms_ / 1000, (timeout_ms_ % 1000) * 1000);
  httplib::Params params{{"query", promql}};
  if (at_s) {
    char t[64];
    std::snprintf(t, sizeof t, "%.3f", *at_s);
    params.emplace("time", t);
  }
  const auto res = client.Get(prefix_ + "/api/v1/query", params, httplib::Headers{});
  if (!res) {
    return PromError{PromError::Kind::kUnreachable,
                     "Prometheus at " + url_ + " did not answer (" +
                         httplib::to_string(res.error()) + ")"};
  }
  return parse_query_response(res->status, res->body);
}

}  // namespace corun::serve
