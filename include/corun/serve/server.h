#pragma once

#include <memory>
#include <string>
#include <thread>

#include "corun/core/result.h"
#include "corun/serve/http.h"
#include "corun/serve/service.h"

namespace httplib {
class Server;
}

namespace corun::serve {

/// @brief How the HTTP transport listens.
struct ServerOptions {
  std::string host = "127.0.0.1";  ///< loopback unless told otherwise
  int port = 8080;                 ///< 0 = any free port (see HttpServer::port())
  int threads = 8;                 ///< worker threads (one per open connection)
  int read_timeout_s = 5;          ///< a client that stops sending is dropped after this
  std::size_t max_body_bytes = 64 * 1024;
  /// More request header fields than this are answered 431 (RFC 6585 §5).
  std::size_t max_header_fields = 100;
  /// A header section (names, values, separators) larger than this is answered 431.
  std::size_t max_header_bytes = 16 * 1024;
};

/// @brief The HTTP/1.1 transport (cpp-httplib) in front of an HttpHandler (a Service, an
/// Extender). Translates requests to
/// HttpRequest and back; limits body size and request time; maps transport failures (oversized
/// body, malformed request line, a Content-Length that is not a length, too many or too large
/// header fields) to the handler's JSON errors.
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

 private:
  HttpHandler& handler_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace corun::serve
