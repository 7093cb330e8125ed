#include "corun/serve/server.h"

#include <httplib.h>

namespace corun::serve {

namespace {

// Every request goes to the service, which routes it; httplib only needs patterns that accept
// every plain path. The patterns are bounded so that std::regex never recurses deeply.
constexpr const char* kAnyPath = R"(/[A-Za-z0-9_.~%/-]{0,512})";

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

HttpServer::HttpServer(Service& service, ServerOptions options)
    : service_(service), options_(std::move(options)) {}

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
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    write(service_.handle(to_request(req)), res);
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
        write(service_.transport_error(res.status, req.path.substr(0, 128)), res);
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_exception_handler(
      [this](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
        write(service_.transport_error(500, req.path.substr(0, 128)), res);
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
