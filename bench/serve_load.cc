// corun_serve_load: drives a running `corun serve` with telemetry posts and plan queries over
// loopback and reports sustained requests/s and latency percentiles (docs/results/serve.md).
// Open loop: each connection sends on a fixed schedule, and latency is measured from the
// scheduled send time, so a stalled server shows up in the percentiles instead of slowing the
// client down.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string token;
  std::vector<std::string> models;
  int connections = 4;
  double rate = 5000;  // requests/s over all connections; 0 = as fast as possible
  double seconds = 10;
  int plan_every = 10;  // every n-th request is GET /v1/plan instead of a telemetry post
  int replan_ms = 100;  // POST /v1/replan this often, so a re-plan is always running
};

void usage() {
  std::fprintf(stderr,
               "usage: corun_serve_load --port P --token-file F --models a,b,c [--host H]\n"
               "       [--connections 4] [--rate 5000] [--seconds 10] [--plan-every 10]\n"
               "       [--replan-ms 100]\n");
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (a == "--host") {
      o.host = v;
    } else if (a == "--port") {
      o.port = std::atoi(v.c_str());
    } else if (a == "--token-file") {
      std::ifstream in(v);
      std::getline(in, o.token);
    } else if (a == "--models") {
      std::size_t p = 0;
      while (p <= v.size()) {
        const auto q = v.find(',', p);
        o.models.push_back(v.substr(p, q == std::string::npos ? std::string::npos : q - p));
        if (q == std::string::npos) break;
        p = q + 1;
      }
    } else if (a == "--connections") {
      o.connections = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--rate") {
      o.rate = std::atof(v.c_str());
    } else if (a == "--seconds") {
      o.seconds = std::atof(v.c_str());
    } else if (a == "--plan-every") {
      o.plan_every = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--replan-ms") {
      o.replan_ms = std::atoi(v.c_str());
    } else {
      return false;
    }
  }
  return o.port > 0 && !o.token.empty() && !o.models.empty();
}

struct WorkerResult {
  std::vector<double> latency_ms;
  std::uint64_t telemetry = 0, plans = 0, errors = 0;
};

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

std::int64_t plan_id(httplib::Client& c) {
  auto r = c.Get("/healthz");
  if (!r || r->status != 200) return -1;
  const auto p = r->body.find("\"plan_id\":");
  return p == std::string::npos ? -1 : std::atoll(r->body.c_str() + p + 10);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    usage();
    return 2;
  }
  const httplib::Headers auth = {{"Authorization", "Bearer " + o.token}};
  httplib::Client probe(o.host, o.port);
  probe.set_read_timeout(10, 0);
  const std::int64_t first_plan = plan_id(probe);
  if (first_plan < 0) {
    std::fprintf(stderr, "corun_serve_load: no server at %s:%d\n", o.host.c_str(), o.port);
    return 3;
  }

  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> replans_requested{0};
  std::thread replanner([&] {
    if (o.replan_ms <= 0) return;
    httplib::Client c(o.host, o.port);
    c.set_read_timeout(10, 0);
    while (!done.load()) {
      if (auto r = c.Post("/v1/replan", auth, "", "application/json"); r && r->status == 202) {
        replans_requested.fetch_add(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(o.replan_ms));
    }
  });

  std::vector<WorkerResult> results(static_cast<std::size_t>(o.connections));
  std::vector<std::thread> workers;
  const auto start = Clock::now();
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  for (int w = 0; w < o.connections; ++w) {
    workers.emplace_back([&, w] {
      WorkerResult& res = results[static_cast<std::size_t>(w)];
      httplib::Client c(o.host, o.port);
      c.set_keep_alive(true);
      c.set_tcp_nodelay(true);
      c.set_read_timeout(10, 0);
      const double per_conn = o.rate > 0 ? o.rate / o.connections : 0;
      const auto period = per_conn > 0 ? std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(1.0 / per_conn))
                                       : Clock::duration::zero();
      // Stagger the connections across one period.
      auto next = start + period * w / o.connections;
      std::uint64_t i = 0;
      char body[256];
      while (true) {
        const auto now = Clock::now();
        if (now >= end) break;
        if (per_conn > 0 && now < next) std::this_thread::sleep_until(next);
        const auto scheduled = per_conn > 0 ? next : Clock::now();
        bool ok = false;
        if (++i % static_cast<std::uint64_t>(o.plan_every) == 0) {
          auto r = c.Get("/v1/plan");
          ok = r && (r->status == 200 || r->status == 404);
          ++res.plans;
        } else {
          const std::string& m = o.models[i % o.models.size()];
          const double lat = 20.0 + static_cast<double>(i % 7);
          std::snprintf(body, sizeof body,
                        "{\"model\":\"%s\",\"latency_ms_p95\":%.1f,\"throughput\":%.1f}", m.c_str(),
                        lat, 30.0);
          auto r = c.Post("/v1/telemetry", auth, body, "application/json");
          ok = r && r->status == 202;
          ++res.telemetry;
        }
        res.latency_ms.push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - scheduled).count());
        if (!ok) ++res.errors;
        next += period;
      }
    });
  }
  for (auto& t : workers) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  done = true;
  replanner.join();
  const std::int64_t last_plan = plan_id(probe);

  std::vector<double> all;
  std::uint64_t telemetry = 0, plans = 0, errors = 0;
  for (auto& r : results) {
    all.insert(all.end(), r.latency_ms.begin(), r.latency_ms.end());
    telemetry += r.telemetry;
    plans += r.plans;
    errors += r.errors;
  }
  const double p50 = percentile(all, 0.50);
  const double p99 = percentile(all, 0.99);
  const double p999 = percentile(all, 0.999);
  const double max = all.empty() ? 0 : *std::max_element(all.begin(), all.end());
  std::printf(
      "{\"connections\":%d,\"target_rate\":%.0f,\"seconds\":%.2f,\"requests\":%zu,"
      "\"requests_per_s\":%.0f,\"telemetry_posts\":%llu,\"telemetry_per_s\":%.0f,"
      "\"plan_queries\":%llu,\"errors\":%llu,\"latency_ms\":{\"p50\":%.3f,\"p99\":%.3f,"
      "\"p999\":%.3f,\"max\":%.3f},\"replans_requested\":%llu,\"plans_made\":%lld}\n",
      o.connections, o.rate, elapsed, all.size(), static_cast<double>(all.size()) / elapsed,
      static_cast<unsigned long long>(telemetry), static_cast<double>(telemetry) / elapsed,
      static_cast<unsigned long long>(plans), static_cast<unsigned long long>(errors), p50, p99,
      p999, max, static_cast<unsigned long long>(replans_requested.load()),
      static_cast<long long>(last_plan - first_plan));
  return errors == 0 ? 0 : 1;
}
