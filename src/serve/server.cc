#include "corun/serve/server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>

#include "connection_gate.h"

namespace corun::serve {

/// cpp-httplib's server with its connection loop replaced: each accepted socket goes to the
/// gate, and a worker parses a request only once the gate has buffered it whole (answer()).
class GatedServer final : public httplib::Server {
 public:
  explicit GatedServer(ConnectionGate& gate) : gate_(gate) {}

  /// Parses and answers the request in `stream`; whether the connection may carry another.
  bool answer(httplib::Stream& stream, bool closing) {
    bool connection_closed = false;
    refused_framing() = false;
    // httplib calls this once the request line and headers parsed; a request that did not parse
    // (a garbage request line, an unknown version) was answered 400, and what follows it on the
    // connection cannot be framed: the connection closes.
    bool parsed = false;
    const bool ok = process_request(stream, closing, connection_closed,
                                    [&parsed](httplib::Request&) { parsed = true; });
    return ok && parsed && !connection_closed && !closing && !refused_framing();
  }

  /// Set by the pre-routing handler when a request's framing is refused: its body was not
  /// read, so nothing after it on the connection can be framed. Per worker thread: the handler
  /// runs inside answer(), on the thread that reads it.
  /// Lets the kernel queue as many pending connections as it allows (httplib asks for 5): a
  /// burst of connections waits in the queue instead of being retried by the clients' TCP
  /// stacks a second or more later.
  void widen_backlog() { ::listen(svr_sock_, SOMAXCONN); }

  static bool& refused_framing() {
    thread_local bool refused = false;
    return refused;
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    gate_.admit(sock);
    return true;
  }

  ConnectionGate& gate_;
};

namespace {

// What the gate buffered for one connection, then the socket itself (non-blocking: every wait
// is a poll bounded by the timeouts).
class BufferedStream final : public httplib::Stream {
 public:
  BufferedStream(int fd, std::string buffered, int timeout_ms)
      : fd_(fd), buffer_(std::move(buffered)), timeout_ms_(timeout_ms) {}

  bool is_readable() const override { return pos_ < buffer_.size() || wait(POLLIN); }
  bool is_writable() const override { return wait(POLLOUT); }
  ssize_t read(char* ptr, size_t size) override {
    if (pos_ < buffer_.size()) {
      const std::size_t n = std::min(size, buffer_.size() - pos_);
      std::memcpy(ptr, buffer_.data() + pos_, n);
      pos_ += n;
      return static_cast<ssize_t>(n);
    }
    // Past the buffered request: only a request the gate could not frame gets here.
    if (!wait(POLLIN)) return -1;
    while (true) {
      const ssize_t n = ::recv(fd_, ptr, size, 0);
      if (n < 0 && errno == EINTR) continue;
      return n;
    }
  }
  ssize_t write(const char* ptr, size_t size) override {
    std::size_t sent = 0;
    while (sent < size) {
      const ssize_t n = ::send(fd_, ptr + sent, size - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait(POLLOUT)) {
        continue;
      } else {
        return sent > 0 ? static_cast<ssize_t>(sent) : -1;
      }
    }
    return static_cast<ssize_t>(sent);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(::getsockname, ip, port);
  }
  socket_t socket() const override { return fd_; }

  /// The buffered bytes the parser did not consume (a pipelined next request).
  std::string rest() const { return buffer_.substr(pos_); }

 private:
  bool wait(short events) const {
    pollfd p{fd_, events, 0};
    int n = 0;
    do {
      n = ::poll(&p, 1, timeout_ms_);
    } while (n < 0 && errno == EINTR);
    return n > 0;
  }
  void address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    ip.clear();
    port = 0;
    if (get(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
      ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
      port = ntohs(v4->sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
      ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
      port = ntohs(v6->sin6_port);
    }
    ip = text;
  }

  int fd_;
  std::string buffer_;
  std::size_t pos_ = 0;
  int timeout_ms_;
};

const char* reason_phrase(int status) {
  switch (status) {
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

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

void HttpServer::serve(int fd, std::string buffered) {
  BufferedStream stream(fd, std::move(buffered), options_.read_timeout_s * 1000);
  const bool keep_open = server_->answer(stream, stopping_.load());
  gate_->finish(fd, keep_open, keep_open ? stream.rest() : std::string());
}

Status HttpServer::start() {
  GateOptions go;
  go.idle_timeout = std::chrono::seconds(options_.idle_timeout_s);
  go.request_timeout = std::chrono::seconds(options_.request_timeout_s);
  go.max_connections = options_.max_connections;
  // The header section the parser judges exactly (check_framing) plus the request line (httplib
  // bounds each line to 8 KiB): a section still open past this cannot be accepted.
  go.max_head_bytes = options_.max_header_bytes + 8 * 1024;
  go.max_body_bytes = options_.max_body_bytes;
  const int threads = std::max(2, options_.threads);
  workers_ = std::make_unique<httplib::ThreadPool>(static_cast<std::size_t>(threads));
  gate_ = std::make_unique<ConnectionGate>(
      go,
      [this](int fd, std::string buffered) {
        workers_->enqueue([this, fd, b = std::move(buffered)]() mutable { serve(fd, std::move(b)); });
      },
      [this](int status, const std::string& reason) {
        const HttpResponse r = handler_.transport_error(status, "", reason, "");
        std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
                          "\r\nContent-Type: " + r.content_type +
                          "\r\nContent-Length: " + std::to_string(r.body.size()) +
                          "\r\nConnection: close\r\n";
        for (const auto& [k, v] : r.headers) out += k + ": " + v + "\r\n";
        return out + "\r\n" + r.body;
      });
  if (auto ok = gate_->start(); !ok) return ok;
  server_ = std::make_unique<GatedServer>(*gate_);
  auto& s = *server_;
  // The accept loop only hands sockets to the gate: one thread is plenty.
  s.new_task_queue = [] { return new httplib::ThreadPool(1); };
  s.set_payload_max_length(options_.max_body_bytes);
  s.set_read_timeout(options_.read_timeout_s, 0);
  s.set_write_timeout(options_.read_timeout_s, 0);
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const auto refusal = check_framing(req, options_);
    if (!refusal) return httplib::Server::HandlerResponse::Unhandled;
    write(handler_.transport_error(refusal->status, req.path.substr(0, 128), refusal->reason,
                                   refusal->field),
          res);
    // The body (if any) was not read, so nothing after it on this connection can be framed:
    // the client is told to close, and the connection is closed after the answer.
    res.set_header("Connection", "close");
    GatedServer::refused_framing() = true;
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
  server_->widen_backlog();
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return {};
}

std::size_t HttpServer::open_connections() const {
  return gate_ ? gate_->open_connections() : 0;
}

void HttpServer::stop() {
  stopping_ = true;
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
  // Connections the gate holds close now; those with a worker close when it has answered.
  if (gate_) gate_->stop();
  if (workers_) {
    workers_->shutdown();
    workers_.reset();
  }
}

}  // namespace corun::serve
