#pragma once

// Helpers shared by the serve tests: temporary state directories (core/temp_dir.h) and a raw HTTP/1.1 client
// (a socket, so that tests can send what no well-behaved client library would).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>

#include "corun/serve/service.h"
#include "../core/temp_dir.h"

namespace corun::serve::testing {

using corun::testing::TempDir;

/// One request handled in process (no socket) by `s`, with `token` as its bearer when not
/// empty and a JSON content type when it has a body.
inline HttpResponse call_service(HttpHandler& s, const std::string& token,
                                 const std::string& method, const std::string& path,
                                 const std::string& body = "") {
  HttpRequest r;
  r.method = method;
  r.path = path;
  r.body = body;
  if (!token.empty()) r.authorization = "Bearer " + token;
  if (!body.empty()) r.content_type = "application/json";
  return s.handle(r);
}

/// Waits (up to 60 s) until `s`'s planner has nothing left to do and a plan is in force, so that
/// a test interleaves telemetry and plans deterministically; false if it never settles.
inline bool settle(Service& s, const std::string& token) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto h = nlohmann::json::parse(call_service(s, token, "GET", "/healthz").body);
    if (!h["replan_pending"].get<bool>() && !h["replanning"].get<bool>() &&
        h["plan_id"].get<std::int64_t>() > 0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

struct RawResponse {
  int status = 0;  ///< 0 = no answer (connection refused, closed or timed out)
  std::string head;
  std::string body;
  [[nodiscard]] nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

/// Sends `request` bytes as-is to 127.0.0.1:port and reads until the server closes or the
/// declared body is complete; every socket call times out after `timeout_s`.
/// A socket connected to 127.0.0.1:port (-1 when the connection failed); with timeout_s > 0,
/// every send and receive on it times out after that many seconds.
inline int connect_loopback(int port, int timeout_s = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (timeout_s > 0) {
    timeval tv{timeout_s, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline RawResponse raw_http(int port, const std::string& request, int timeout_s = 10) {
  RawResponse out;
  const int fd = connect_loopback(port, timeout_s);
  if (fd < 0) return out;
  std::size_t sent = 0;
  while (sent < request.size()) {
    const auto n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer (413) before reading everything
    sent += static_cast<std::size_t>(n);
  }
  std::string data;
  char buf[8192];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    data.append(buf, static_cast<std::size_t>(n));
    const auto end = data.find("\r\n\r\n");
    if (end != std::string::npos) {
      const auto cl = data.find("Content-Length: ");
      if (cl != std::string::npos && cl < end) {
        const auto len = std::strtoull(data.c_str() + cl + 16, nullptr, 10);
        if (data.size() >= end + 4 + len) break;
      }
    }
  }
  ::close(fd);
  const auto end = data.find("\r\n\r\n");
  if (data.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return out;
  out.status = std::atoi(data.c_str() + 9);
  out.head = data.substr(0, end);
  out.body = data.substr(end + 4);
  return out;
}

/// A well-formed request with Connection: close.
inline std::string request(const std::string& method, const std::string& target,
                           const std::string& body = "", const std::string& token = "",
                           const std::string& content_type = "application/json") {
  std::string r = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!token.empty()) r += "Authorization: Bearer " + token + "\r\n";
  if (!body.empty() && !content_type.empty()) r += "Content-Type: " + content_type + "\r\n";
  if (!body.empty() || method == "POST" || method == "PUT") {
    r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return r + "\r\n" + body;
}

#ifdef CORUN_BINARY
/// Why a test that starts the corun binary is skipped: in a sanitizer build (which builds the
/// in-process suites alone and covers them there) or when the binary is missing; false when it
/// runs.
inline bool binary_skip_reason(std::string& why) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  why = "starts the corun binary; the sanitizer build covers the in-process suite";
  return true;
#else
  if (!std::filesystem::exists(CORUN_BINARY)) {
    why = std::string("no binary at ") + CORUN_BINARY;
    return true;
  }
  return false;
#endif
}
#endif  // CORUN_BINARY

/// A 7B chat model at fp16: 15.2 GB of weights (7.6 B parameters x 2 bytes), so one fits an
/// RTX 3090's 24 GB and two do not, whatever their other knobs.
inline std::string big_llm(const std::string& name) {
  return nlohmann::json(
             {{"name", name},
              {"model", "qwen2.5-7b"},
              {"knobs", {{"precision", {"fp16"}}, {"request_concurrency", {1}}}},
              {"demand", {{"rps", 0.2}, {"prompt_tokens", 256}, {"output_tokens", 64}}},
              {"sla", {{"ttft_ms_p95", 30000}, {"tpot_ms_p95", 2000}}}})
      .dump();
}

/// POST /v1/models?if_fits=true with `entry`, in process: a reservation (the query as a
/// transport hands it over, apart from the path).
inline HttpResponse reserve(HttpHandler& h, const std::string& token, const std::string& entry,
                            const std::string& if_fits = "true") {
  HttpRequest r;
  r.method = "POST";
  r.path = "/v1/models";
  r.query = {{"if_fits", if_fits}};
  r.authorization = "Bearer " + token;
  r.content_type = "application/json";
  r.body = entry;
  return h.handle(r);
}

/// Model entries used across the tests (catalog models; SLAs the sim can meet).
inline const char* kCam0 =
    R"({"name":"cam0","model":"yolo11n","knobs":{"imgsz":[320,480,640],"skip_rate":[0,0.5]},)"
    R"("demand":{"fps":30},"sla":{"latency_ms_p95":50}})";
inline const char* kCam1 = R"({"name":"cam1","model":"yolo11s","knobs":{"imgsz":[320,640]},)"
                           R"("demand":{"fps":15},"sla":{"latency_ms_p95":80}})";
inline const char* kChat =
    R"({"name":"chat","model":"qwen2.5-0.5b","knobs":{"precision":["fp16","awq"],)"
    R"("request_concurrency":[1,2]},"demand":{"rps":1,"prompt_tokens":256,"output_tokens":64},)"
    R"("sla":{"ttft_ms_p95":800,"tpot_ms_p95":60}})";

}  // namespace corun::serve::testing
