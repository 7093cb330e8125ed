// POST /v1/tools/place: the decision time of one placement request, handled in process (no
// socket), for a 6-tool DAG next to the 5-model plan of workloads/paper-n5.yaml in force on a
// service (twin predictor). One iteration = parse the body, read the plan in force, measure its
// load on the catalog twin, decide with the policy, run the mapping, predict the co-runners'
// SLAs during the burst, write the answer. Next to it, the same decision through `corun map`'s
// path from files (plan, workload and DAG read and parsed each time), and the placement alone
// on an already built problem: the share of the request that is the policy's own search.
// The route is measured in steady state: the service fits the co-runners' guard (a MeanField
// surrogate, about a second) on the first placement after a plan change and reuses it while the
// plan, the served models, the seed and the device stay; the fixture makes that first call
// before any benchmark and every route benchmark reports its decision time as `first_call_ms`.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "corun/catalog/catalog.h"
#include "corun/mapping/corunners.h"
#include "corun/mapping/place.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/openapi.h"
#include "corun/serve/service.h"
#include "corun/testbed/testbed.h"

namespace corun::serve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Six tool calls: a voice note and a photo (the DAG of tests/serve/tools_place_test.cc).
const fs::path kDagFile =
    fs::path(CORUN_SOURCE_DIR) / "workloads" / "tools-serve" / "voice-and-photo.yaml";

const fs::path kWorkload = fs::path(CORUN_SOURCE_DIR) / "workloads" / "paper-n5.yaml";

// One service with paper-n5's plan in force, its plan and the DAG as files; kept for the
// program's life (the planner thread idles once the plan is made).
struct Fixture {
  fs::path dir;
  std::unique_ptr<Service> service;
  double first_call_ms = 0;  ///< decision_ms of the first placement on the plan (the guard's fit)

  Fixture() {
    dir = fs::temp_directory_path() / ("corun-bench-place-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    ServiceOptions o;
    o.state_dir = dir / "state";
    o.token = "bench-place-token-0123456789";
    o.workload_file = kWorkload.string();
    auto s =
        Service::open(Context{}, o, Catalog::default_catalog(), std::make_unique<TwinSource>());
    if (!s || !(*s)->wait_for_plan(0, 120000)) std::abort();
    service = std::move(*s);
    HttpRequest r;
    r.method = "GET";
    r.path = "/v1/plan";
    std::ofstream(dir / "plan.json") << service->handle(r).body;
    const HttpResponse first = service->handle(place_request("agent"));
    if (first.status != 200) std::abort();
    first_call_ms = json::parse(first.body)["decision_ms"].get<double>();
  }

  // POST /v1/tools/place with the DAG and `policy`.
  static HttpRequest place_request(const char* policy) {
    HttpRequest r;
    r.method = "POST";
    r.path = "/v1/tools/place";
    r.content_type = "application/json";
    r.body =
        json{{"scenario", yaml_to_json(YAML::LoadFile(kDagFile.string()))}, {"policy", policy}}
            .dump();
    return r;
  }
  ~Fixture() {
    service->stop();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void BM_RoutePlace(benchmark::State& state, const char* policy) {
  Fixture& f = fixture();
  const HttpRequest r = Fixture::place_request(policy);
  double decision_ms = 0;
  double executions = 0;
  double corunners = 0;
  for (auto _ : state) {
    const HttpResponse a = f.service->handle(r);
    if (a.status != 200) {
      state.SkipWithError(a.body.c_str());
      return;
    }
    const json j = json::parse(a.body);
    decision_ms += j["decision_ms"].get<double>();
    executions = j["executions"].get<double>();
    corunners = j["corunners"]["models"].get<double>();
    benchmark::DoNotOptimize(j);
  }
  state.counters["decision_ms"] = benchmark::Counter(decision_ms, benchmark::Counter::kAvgIterations);
  state.counters["executions"] = executions;
  state.counters["corunners"] = corunners;  // models the plan in force runs
  state.counters["first_call_ms"] = f.first_call_ms;
}

// What `corun map voice-and-photo.yaml --plan plan.json --workload paper-n5.yaml --no-oracle` computes
// before it prints, files read each time.
void BM_MapFromFiles(benchmark::State& state, const char* policy) {
  Fixture& f = fixture();
  const Catalog& cat = Catalog::default_catalog();
  auto sim = make_testbed("sim");
  if (!sim) std::abort();
  for (auto _ : state) {
    auto tools = mapping::tool_catalog(cat);
    auto scenario = mapping::load_scenario(kDagFile, *tools);
    const Context ctx = scenario->context;
    auto co = mapping::load_corunners(ctx, f.dir / "plan.json", kWorkload.string(), cat, **sim);
    auto problem = mapping::PlacementProblem::build(*scenario, *tools, cat, *co);
    auto placed = mapping::place(*problem, {policy, "builtin", std::nullopt}, ctx);
    if (!placed) std::abort();
    benchmark::DoNotOptimize(placed->truth.makespan_ms);
  }
}

// The policy's decision and the mapping's two runs alone, on a problem built once.
void BM_PlaceOnly(benchmark::State& state, const char* policy) {
  Fixture& f = fixture();
  const Catalog& cat = Catalog::default_catalog();
  auto sim = make_testbed("sim");
  auto tools = mapping::tool_catalog(cat);
  auto scenario = mapping::load_scenario(kDagFile, *tools);
  const Context ctx = scenario->context;
  auto co = mapping::load_corunners(ctx, f.dir / "plan.json", kWorkload.string(), cat, **sim);
  auto problem = mapping::PlacementProblem::build(*scenario, *tools, cat, *co);
  if (!problem) std::abort();
  for (auto _ : state) {
    auto placed = mapping::place(*problem, {policy, "builtin", std::nullopt}, ctx);
    benchmark::DoNotOptimize(placed->truth.makespan_ms);
  }
}

BENCHMARK_CAPTURE(BM_RoutePlace, agent, "agent")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RoutePlace, heft, "heft")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RoutePlace, brute_force, "brute-force")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MapFromFiles, agent, "agent")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlaceOnly, agent, "agent")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlaceOnly, heft, "heft")->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace corun::serve
