#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "corun/core/result.h"
#include "corun/serve/http.h"
#include "corun/serve/service.h"

namespace httplib {
class ThreadPool;
}

namespace corun::serve {

class ConnectionGate;
class GatedServer;

/// @brief How the HTTP transport listens.
struct ServerOptions {
  std::string host = "127.0.0.1";  ///< loopback unless told otherwise
  int port = 8080;                 ///< 0 = any free port (see HttpServer::port())
  /// Worker threads: they run handlers on whole requests only (idle and slow connections wait
  /// in the connection gate, which costs no thread).
  int threads = 8;
  /// Bound on one socket read or write a worker makes past what the gate buffered (a request
  /// whose framing the parser refuses) and on writing an answer.
  int read_timeout_s = 5;
  /// A connection that starts no request for this long (kept alive or fresh) is closed.
  int idle_timeout_s = 5;
  /// A request must arrive whole (headers and body) within this time of its first byte;
  /// a slower one is answered 408 and closed (slowloris headers or bodies).
  int request_timeout_s = 10;
  /// Open connections beyond this are answered 503 and closed at once.
  std::size_t max_connections = 1024;
  std::size_t max_body_bytes = 64 * 1024;
  /// More request header fields than this are answered 431 (RFC 6585 §5).
  std::size_t max_header_fields = 100;
  /// A header section (names, values, separators) larger than this is answered 431.
  std::size_t max_header_bytes = 16 * 1024;
};

/// @brief The HTTP/1.1 transport in front of an HttpHandler (a Service, an Extender). An
/// event-driven gate (one epoll thread) holds every connection until its next request has
/// arrived whole, within the limits above; only then does a worker thread parse it
/// (cpp-httplib's parser), translate it to HttpRequest, call the handler and write the answer.
/// So idle keep-alive connections, slowloris headers and slow bodies hold no worker, and
/// /healthz keeps answering while they are open. Transport failures (oversized body, malformed
/// request line, a Content-Length that is not a length, too many or too large header fields, a
/// request too slow to arrive, too many connections) get the handler's JSON errors.
/// Thread-safety: start() and stop() from one thread; requests are served on worker threads.
class HttpServer {
 public:
  HttpServer(HttpHandler& handler, ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// @brief Binds (the port is known when this returns) and serves on a background thread.
  Status start();
  /// @brief The bound port.
  [[nodiscard]] int port() const { return port_; }
  /// @brief Stops listening and joins the serving thread.
  void stop();
  /// @brief Connections open now (held by the gate, with a worker, or closing).
  [[nodiscard]] std::size_t open_connections() const;

 private:
  /// Answers one whole request of connection `fd` on a worker, then hands the connection back.
  void serve(int fd, std::string buffered);

  HttpHandler& handler_;
  ServerOptions options_;
  std::unique_ptr<GatedServer> server_;
  std::unique_ptr<ConnectionGate> gate_;
  std::unique_ptr<httplib::ThreadPool> workers_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  int port_ = 0;
};

}  // namespace corun::serve
