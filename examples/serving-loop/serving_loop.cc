// A serving stack's side of `corun serve`: registers three models, then in a loop applies the
// plan in force, "serves" one interval on the sim testbed (standing in for the real model
// servers), and reports what it observed as telemetry. Halfway through, the first camera's
// frame rate doubles; the stack reports the new demand and picks up the re-plan.
//
//   corun serve --state /tmp/corun-state --port 8080 &
//   build/dev/corun_serving_loop --port 8080 --token-file /tmp/corun-state/token
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "corun/catalog/catalog.h"
#include "corun/core/strings.h"
#include "corun/spec/workload.h"
#include "corun/testbed/testbed.h"

namespace {

using nlohmann::json;

// The models this stack hosts: the same entries a workload file's `models` list would hold.
const json kModels = json::parse(R"([
  {"name": "cam0", "model": "yolo11s", "knobs": {"imgsz": [320, 480, 640], "skip_rate": [0, 0.33, 0.5]},
   "demand": {"fps": 30}, "sla": {"latency_ms_p95": 60}},
  {"name": "cam1", "model": "yolo11n", "knobs": {"imgsz": [320, 480, 640], "skip_rate": [0, 0.33, 0.5]},
   "demand": {"fps": 30}, "sla": {"latency_ms_p95": 50}},
  {"name": "chat", "model": "qwen2.5-1.5b",
   "knobs": {"precision": ["fp16", "awq"], "request_concurrency": [1, 2, 4], "prefill_chunk": [512, 2048]},
   "demand": {"rps": 1.5, "prompt_tokens": 512, "output_tokens": 128},
   "sla": {"ttft_ms_p95": 800, "tpot_ms_p95": 60}, "weight": 2}
])");

int fail(const std::string& what) {
  std::fprintf(stderr, "serving-loop: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1", token_file;
  int port = 8080, steps = 12, interval_ms = 300;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--host")
      host = v;
    else if (a == "--port")
      port = std::atoi(v.c_str());
    else if (a == "--token-file")
      token_file = v;
    else if (a == "--steps")
      steps = std::atoi(v.c_str());
    else if (a == "--interval-ms")
      interval_ms = std::atoi(v.c_str());
    else
      return fail("unknown flag " + a);
  }
  std::string token;
  std::ifstream(token_file) >> token;
  if (token.empty()) return fail("usage: serving_loop --port P --token-file F [--steps N]");
  const httplib::Headers auth = {{"Authorization", "Bearer " + token}};
  httplib::Client c(host, port);
  c.set_read_timeout(30, 0);

  // 1. Register (a 409 means a previous run registered it: the server kept it).
  for (const auto& m : kModels) {
    auto r = c.Post("/v1/models", auth, m.dump(), "application/json");
    if (!r) return fail("server unreachable");
    if (r->status != 201 && r->status != 409) return fail("register: " + r->body);
    std::printf("register %-5s -> %d\n", m["name"].get<std::string>().c_str(), r->status);
  }

  // The stack's own view of its models, to run them on the sim testbed.
  auto health = c.Get("/healthz");
  if (!health || health->status != 200) return fail("healthz failed");
  const std::string device = json::parse(health->body).value("device", "rtx3090");
  json doc = {{"device", device}, {"models", kModels}};
  auto w = corun::parse_workload(doc.dump(), "serving-loop", corun::Catalog::default_catalog());
  if (!w) return fail(w.error().what());
  auto testbed = corun::make_testbed("sim");
  if (!testbed) return fail(testbed.error().what());

  for (int step = 0; step < steps; ++step) {
    if (step == steps / 2) {
      auto r = c.Put("/v1/models/cam0/demand", auth, R"({"fps": 60})", "application/json");
      if (!r || r->status != 200) return fail("demand update failed");
      w->models[0].demand.fps = 60;
      std::printf("step %2d: cam0 demand -> 60 fps\n", step);
    }
    // 2. The plan in force (wait for the first one).
    auto r = c.Get("/v1/plan");
    for (int tries = 0; r && r->status == 404 && tries < 100; ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      r = c.Get("/v1/plan");
    }
    if (!r || r->status != 200) return fail("no plan");
    const json plan = json::parse(r->body);
    // 3. Apply it: one local configuration per model, chosen by its knob settings.
    corun::JointConfig config(w->models.size(), corun::kAbsent);
    std::string applied;
    for (std::size_t m = 0; m < w->models.size(); ++m) {
      const auto& name = w->models[m].name;
      if (!plan["models"].contains(name)) continue;
      std::vector<std::pair<std::string, std::string>> kv;
      for (const auto& [k, v] : plan["models"][name]["config"].items()) {
        kv.emplace_back(
            k, v.is_string() ? v.get<std::string>() : corun::format_number(v.get<double>()));
      }
      auto l = w->models[m].find_config(kv);
      if (!l) return fail(l.error().what());
      config[m] = static_cast<std::int32_t>(*l);
      applied += " " + name + "[" + w->models[m].describe(*l) + "]";
    }
    // 4. Serve one interval (the sim testbed stands in for the model servers) and report.
    const auto measured =
        (*testbed)->measure(corun::Context{.seed = static_cast<std::uint64_t>(1000 + step)}, *w,
                            config, corun::MeasureOptions(1.0));
    json samples = json::array();
    std::string seen;
    for (const auto& mm : measured.models) {
      json s = {{"model", mm.name}, {"plan_id", plan["id"]}, {"throughput", mm.throughput}};
      if (mm.ttft_ms_p95) {
        s["ttft_ms_p95"] = *mm.ttft_ms_p95;
        s["tpot_ms_p95"] = mm.tpot_ms_p95.value_or(0);
        seen += " " + mm.name + " ttft " + corun::format_number(*mm.ttft_ms_p95) + " ms";
      } else {
        s["latency_ms_p95"] = mm.latency_ms_p95;
        seen += " " + mm.name + " p95 " + corun::format_number(mm.latency_ms_p95) + " ms";
      }
      samples.push_back(s);
    }
    auto t = c.Post("/v1/telemetry", auth, samples.dump(), "application/json");
    if (!t || t->status != 202)
      return fail("telemetry: " + (t ? t->body : std::string("no answer")));
    const json ack = json::parse(t->body);
    std::printf("step %2d: plan %lld (%s):%s |%s | breaches %d\n", step,
                static_cast<long long>(plan["id"].get<std::int64_t>()),
                plan.value("reason", "").c_str(), applied.c_str(), seen.c_str(),
                ack.value("breaches", 0));
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
  return 0;
}
