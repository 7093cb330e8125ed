#include "corun/serve/server.h"

#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>

namespace corun::serve {

namespace {

// Every request goes to the service, which routes it; httplib only needs patterns that accept
// every plain path. The patterns are bounded so that std::regex never recurses deeply.
constexpr const char* kAnyPath = R"(/[A-Za-z0-9_.~%/-]{0,512})";

// Headers httplib adds to every parsed request; the client did not send them.
bool is_added_by_httplib(const std::string& name) {
  return name == "REMOTE_ADDR" || name == "REMOTE_PORT" || name == "LOCAL_ADDR" ||
         name == "LOCAL_PORT";
}

// Why a request's framing is refused before its body is read, if it is.
struct Refusal {
  int status = 0;
  std::string reason;
  std::string field;
};

// httplib 0.11 bounds each header line (8 KiB, fixed when the library was built: a longer line
// gets its plain 400) but neither the number of header fields nor their total size, and it
// reads Content-Length with strtoull, so "-1" and 20-digit values become 2^64 - 1 and the
// request hangs until the read timeout. Those limits are enforced here, on the parsed headers,
// before any body is read.
std::optional<Refusal> check_framing(const httplib::Request& r, const ServerOptions& o) {
  std::size_t fields = 0;
  std::size_t bytes = 0;
  for (const auto& [name, value] : r.headers) {
    if (is_added_by_httplib(name)) continue;
    ++fields;
    bytes += name.size() + value.size() + 4;  // "name: value\r\n"
  }
  if (fields > o.max_header_fields) {
    return Refusal{431,
                   std::to_string(fields) + " request header fields (at most " +
                       std::to_string(o.max_header_fields) + ")",
                   ""};
  }
  if (bytes > o.max_header_bytes) {
    return Refusal{431,
                   "request header fields take " + std::to_string(bytes) + " bytes (at most " +
                       std::to_string(o.max_header_bytes) + ")",
                   ""};
  }
  // RFC 9110 §8.6: Content-Length = 1*DIGIT; RFC 9112 §6.3: an invalid or conflicting value is
  // an unrecoverable framing error, answered 400.
  std::optional<std::uint64_t> length;
  const auto range = r.headers.equal_range("Content-Length");
  for (auto it = range.first; it != range.second; ++it) {
    const std::string& v = it->second;
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    const bool digits = !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
    if (!digits) {
      return Refusal{400, "Content-Length must be a non-negative decimal integer, got '" +
                              v.substr(0, 32) + "'",
                     "Content-Length"};
    }
    if (ec != std::errc() || end != v.data() + v.size()) {
      return Refusal{400, "Content-Length " + v.substr(0, 32) + " does not fit in 64 bits",
                     "Content-Length"};
    }
    if (length && *length != n) {
      return Refusal{400, "conflicting Content-Length values", "Content-Length"};
    }
    length = n;
  }
  return std::nullopt;
}

HttpRequest to_request(const httplib::Request& r) {
  HttpRequest out;
  out.method = r.method;
  out.path = r.path;
  for (const auto& [k, v] : r.params) out.query.emplace(k, v);
  out.authorization = r.get_header_value("Authorization");
  out.content_type = r.get_header_value("Content-Type");
  out.body = r.body;
  return out;
}

void write(const HttpResponse& in, httplib::Response& out) {
  out.status = in.status;
  for (const auto& [k, v] : in.headers) out.set_header(k, v);
  out.set_content(in.body, in.content_type);
}

}  // namespace

HttpServer::HttpServer(HttpHandler& handler, ServerOptions options)
    : handler_(handler), options_(std::move(options)) {}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start() {
  server_ = std::make_unique<httplib::Server>();
  auto& s = *server_;
  const int threads = std::max(2, options_.threads);
  s.new_task_queue = [threads] {
    return new httplib::ThreadPool(static_cast<std::size_t>(threads));
  };
  s.set_payload_max_length(options_.max_body_bytes);
  s.set_read_timeout(options_.read_timeout_s, 0);
  s.set_write_timeout(options_.read_timeout_s, 0);
  s.set_keep_alive_max_count(1000000);
  s.set_keep_alive_timeout(5);
  // Small JSON answers: without TCP_NODELAY, Nagle's algorithm and delayed ACKs add ~40 ms.
  s.set_tcp_nodelay(true);
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const auto refusal = check_framing(req, options_);
    if (!refusal) return httplib::Server::HandlerResponse::Unhandled;
    write(handler_.transport_error(refusal->status, req.path.substr(0, 128), refusal->reason,
                                   refusal->field),
          res);
    // The body (if any) was not read, so nothing after it on this connection can be framed:
    // the client is told to close. httplib keeps its side open until the client closes or the
    // keep-alive timeout ends; bytes sent meanwhile are parsed as (malformed) requests.
    res.set_header("Connection", "close");
    return httplib::Server::HandlerResponse::Handled;
  });
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    write(handler_.handle(to_request(req)), res);
  };
  s.Get(kAnyPath, handler);
  s.Post(kAnyPath, handler);
  s.Put(kAnyPath, handler);
  s.Delete(kAnyPath, handler);
  s.Patch(kAnyPath, handler);
  s.Options(kAnyPath, handler);
  // Whatever the transport rejected before routing (no matching pattern, oversized body, bad
  // request line) still gets a JSON error.
  s.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        write(handler_.transport_error(res.status, req.path.substr(0, 128), "", ""), res);
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_exception_handler(
      [this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string cause = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          cause = e.what();
        } catch (...) {
        }
        std::fprintf(stderr, "corun: internal error in the HTTP transport on %s %s: %s\n",
                     req.method.substr(0, 16).c_str(), req.path.substr(0, 128).c_str(),
                     cause.c_str());
        write(handler_.transport_error(500, req.path.substr(0, 128), "internal error: " + cause,
                                       ""),
              res);
      });
  port_ = options_.port == 0 ? s.bind_to_any_port(options_.host)
                             : (s.bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port_ <= 0) {
    return Error("cannot listen on " + options_.host + ":" + std::to_string(options_.port),
                 Error::Kind::kIo);
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return {};
}

void HttpServer::stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace corun::serve
