// Hostile clients that hold connections instead of sending bad bytes: idle keep-alive
// connections, slowloris header sections, slow bodies, and more connections than the server
// takes. None of them may hold the worker threads: /healthz and GET /v1/plan keep answering.
// The latency bound (p99 under 100 ms over loopback) is generous on purpose: an answered request
// takes about a millisecond, a starved one waits for a client's timeout (seconds).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/server.h"
#include "corun/serve/service.h"
#include "serve_test_util.h"

namespace corun::serve::flood_test {
namespace {

using testing::kCam0;
using testing::raw_http;
using testing::request;
using testing::TempDir;

constexpr const char* kToken = "flood-token-0123456789abcdef";

// Sockets opened by a test, closed at scope exit.
class Sockets {
 public:
  ~Sockets() {
    for (int fd : fds_) ::close(fd);
  }
  // Opens `n` connections that send `prefix` (possibly nothing) and then stay silent.
  void open(int port, int n, const std::string& prefix) {
    for (int i = 0; i < n; ++i) {
      const int fd = testing::connect_loopback(port);
      ASSERT_GE(fd, 0) << "connection " << i;
      if (!prefix.empty()) {
        ASSERT_EQ(::send(fd, prefix.data(), prefix.size(), MSG_NOSIGNAL),
                  static_cast<ssize_t>(prefix.size()));
      }
      fds_.push_back(fd);
    }
  }
  [[nodiscard]] const std::vector<int>& fds() const { return fds_; }

 private:
  std::vector<int> fds_;
};

// The answer a connection got, read until the server closes it or `timeout_s` passes.
testing::RawResponse read_answer(int fd, int timeout_s) {
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string data;
  char buf[4096];
  while (true) {
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    data.append(buf, static_cast<std::size_t>(n));
  }
  testing::RawResponse out;
  const auto end = data.find("\r\n\r\n");
  if (data.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return out;
  out.status = std::atoi(data.c_str() + 9);
  out.head = data.substr(0, end);
  out.body = data.substr(end + 4);
  return out;
}

// Nearest-rank percentile of latencies in ms.
double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::max<std::size_t>(rank, 1) - 1];
}

class ServeFloodTest : public ::testing::Test {
 protected:
  void start(ServerOptions so) {
    ServiceOptions o;
    o.state_dir = dir_.path();
    o.token = kToken;
    o.solver = "greedy";
    o.min_replan_interval_ms = 0;
    auto s =
        Service::open(Context{}, o, Catalog::default_catalog(), std::make_unique<TwinSource>());
    ASSERT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    service_ = std::move(*s);
    so.port = 0;
    server_ = std::make_unique<HttpServer>(*service_, so);
    ASSERT_TRUE(server_->start().ok());
    port_ = server_->port();
    ASSERT_EQ(raw_http(port_, request("POST", "/v1/models", kCam0, kToken)).status, 201);
    ASSERT_TRUE(service_->wait_for_plan(0, 30000));
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (service_) service_->stop();
  }
  // Latencies (ms) of `n` GET `path` requests, each on a new connection; stops at the first
  // that does not get a 200 within 2 s (a starved server fails in bounded time).
  std::vector<double> latencies(const std::string& path, int n) {
    std::vector<double> ms;
    for (int i = 0; i < n; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto r = raw_http(port_, request("GET", path), 2);
      const auto t1 = std::chrono::steady_clock::now();
      EXPECT_EQ(r.status, 200) << path << " request " << i << " while the flood is held";
      if (r.status != 200) break;
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    return ms;
  }

  TempDir dir_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(ServeFloodTest, IdleAndSlowConnectionsDoNotStarveHealthzOrThePlan) {
  start(ServerOptions{});  // production settings: 8 workers, 5 s idle, 10 s per request
  Sockets flood;
  flood.open(port_, 256, "");  // idle: connected, nothing sent
  // Slow bodies: a telemetry post whose body stops after 9 of its 1000 declared bytes.
  flood.open(port_, 64,
             std::string("POST /v1/telemetry HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") +
                 kToken + "\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n" +
                 R"({"model":)");
  // Slowloris: a header section that never ends.
  flood.open(port_, 64, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: a");
  if (HasFatalFailure()) return;

  const auto healthz = latencies("/healthz", 200);
  const auto plan = latencies("/v1/plan", 200);
  ASSERT_EQ(healthz.size(), 200U);
  ASSERT_EQ(plan.size(), 200U);
  const double healthz_p99 = percentile(healthz, 99);
  const double plan_p99 = percentile(plan, 99);
  std::printf("flood (256 idle, 64 slow bodies, 64 slow headers): GET /healthz p50 %.2f ms "
              "p99 %.2f ms; GET /v1/plan p50 %.2f ms p99 %.2f ms\n",
              percentile(healthz, 50), healthz_p99, percentile(plan, 50), plan_p99);
  EXPECT_LT(healthz_p99, 100.0);
  EXPECT_LT(plan_p99, 100.0);
  // The flood was held throughout: its connections are still open, none was dropped to make room.
  EXPECT_GE(server_->open_connections(), 384U);
}

TEST_F(ServeFloodTest, SlowRequestsAreAnswered408AndIdleConnectionsClosed) {
  ServerOptions so;
  so.idle_timeout_s = 1;
  so.request_timeout_s = 1;
  start(so);
  const int idle = testing::connect_loopback(port_);
  ASSERT_GE(idle, 0);
  const int slow = testing::connect_loopback(port_);
  ASSERT_GE(slow, 0);
  const std::string head =
      std::string("POST /v1/telemetry HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") + kToken +
      "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{";
  ASSERT_EQ(::send(slow, head.data(), head.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(head.size()));
  // The slow body gets a JSON 408 naming why; the idle connection is closed without a word.
  const auto r = read_answer(slow, 5);
  EXPECT_EQ(r.status, 408) << r.head;
  EXPECT_NE(r.head.find("Connection: close"), std::string::npos) << r.head;
  EXPECT_EQ(r.json()["error"]["code"], "request_timeout") << r.body;
  const auto silent = read_answer(idle, 5);
  EXPECT_EQ(silent.status, 0);
  char byte = 0;
  EXPECT_EQ(::recv(idle, &byte, 1, 0), 0) << "closed by the server";
  ::close(idle);
  ::close(slow);
  EXPECT_EQ(raw_http(port_, request("GET", "/healthz")).status, 200);
  // The refusal is counted like every transport error.
  const auto metrics = raw_http(port_, request("GET", "/metrics"));
  EXPECT_NE(metrics.body.find("corun_serve_requests_total{route=\"transport\",code=\"408\"}"),
            std::string::npos);
}

TEST_F(ServeFloodTest, ConnectionsBeyondTheCapGet503AndTheServerRecovers) {
  ServerOptions so;
  so.max_connections = 16;
  start(so);
  {
    Sockets held;
    held.open(port_, 16, "");
    if (HasFatalFailure()) return;
    const auto refused = raw_http(port_, request("GET", "/healthz"), 5);
    EXPECT_EQ(refused.status, 503) << refused.head;
    EXPECT_EQ(refused.json()["error"]["code"], "too_many_connections") << refused.body;
    EXPECT_NE(refused.head.find("Retry-After: 1"), std::string::npos) << refused.head;
  }
  // Once the held connections close, the server takes new ones again.
  bool recovered = false;
  for (int i = 0; i < 100 && !recovered; ++i) {
    recovered = raw_http(port_, request("GET", "/healthz"), 5).status == 200;
    if (!recovered) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(recovered);
}

TEST_F(ServeFloodTest, PipelinedAndContinuedRequestsAreAnsweredInOrder) {
  start(ServerOptions{});
  // Two requests in one write: both answered, in order, on the same connection.
  const int fd = testing::connect_loopback(port_);
  ASSERT_GE(fd, 0);
  const std::string two = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" +
                          request("GET", "/v1/models");  // the second one closes
  ASSERT_EQ(::send(fd, two.data(), two.size(), MSG_NOSIGNAL), static_cast<ssize_t>(two.size()));
  const auto r = read_answer(fd, 5);
  ::close(fd);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("HTTP/1.1 200"), std::string::npos) << "second answer";
  EXPECT_NE(r.body.find("\"cam0\""), std::string::npos) << r.body;
  // A client that waits for "100 Continue" before its body (RFC 9110 §10.1.1) gets it once.
  const int c = testing::connect_loopback(port_);
  ASSERT_GE(c, 0);
  const std::string body = R"({"model":"cam0","throughput":30})";
  const std::string head = std::string("POST /v1/telemetry HTTP/1.1\r\nHost: x\r\nConnection: "
                                       "close\r\nAuthorization: Bearer ") +
                           kToken +
                           "\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
                           "Content-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n";
  ASSERT_EQ(::send(c, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  char interim[64] = {};
  timeval tv{5, 0};
  ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const auto n = ::recv(c, interim, sizeof interim - 1, 0);
  ASSERT_GT(n, 0);
  EXPECT_STREQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_EQ(::send(c, body.data(), body.size(), MSG_NOSIGNAL), static_cast<ssize_t>(body.size()));
  const auto answer = read_answer(c, 5);
  ::close(c);
  EXPECT_EQ(answer.status, 202) << answer.head << answer.body;
  EXPECT_EQ(answer.body.find("100 Continue"), std::string::npos) << "one interim answer only";
}

}  // namespace
}  // namespace corun::serve::flood_test
