// corun measure FILE: runs one joint configuration on a testbed and prints what it observed;
// with --concurrency, once per number of requests in flight (benchmark mode).
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>

#include "command.h"
#include "common.h"
#include "corun/core/strings.h"
#include "corun/testbed/concurrency_sweep.h"

namespace corun::cli::cmd_measure {
namespace {

// "1,2,4,8" -> {1, 2, 4, 8}: each level an integer in 1..kMaxConcurrency, none repeated.
Result<std::vector<int>> parse_levels(const std::string& text) {
  std::vector<int> out;
  const auto bad = [&](const std::string& why) {
    return Error("--concurrency: " + why + " (expected a comma list of integers in 1.." +
                 std::to_string(kMaxConcurrency) + ", e.g. 1,2,4,8), got '" + text + "'");
  };
  for (const auto& part : split(text, ',')) {
    int v = 0;
    const auto r = std::from_chars(part.data(), part.data() + part.size(), v);
    if (r.ec != std::errc() || r.ptr != part.data() + part.size()) {
      return bad("'" + part + "' is not an integer");
    }
    if (v < 1 || v > kMaxConcurrency) return bad(part + " is out of range");
    if (std::find(out.begin(), out.end(), v) != out.end()) return bad(part + " is repeated");
    out.push_back(v);
  }
  if (out.empty()) return bad("no level");
  return out;
}

// The sweep as perf_analyzer prints it: one block of rows per level.
int print_sweep(const std::vector<ConcurrencyLevel>& levels, bool json) {
  bool ok = true;
  for (const auto& l : levels) ok = ok && l.measurement.ok();
  if (json) {
    nlohmann::json j;
    j["testbed"] = levels.front().measurement.testbed;
    j["device"] = levels.front().measurement.device;
    j["levels"] = nlohmann::json::array();
    for (const auto& l : levels) {
      nlohmann::json jl = to_json(l.measurement);
      jl.erase("testbed");
      jl.erase("device");
      jl["concurrency"] = l.concurrency;
      j["levels"].push_back(std::move(jl));
    }
    std::printf("%s\n", j.dump().c_str());
    return ok ? kExitOk : kExitFailure;
  }
  Table t({"concurrency", "model", "throughput", "p50 ms", "p95 ms", "TTFT p95", "TPOT p95", "sm %",
           "error"});
  for (const auto& l : levels) {
    for (const auto& mm : l.measurement.models) {
      t.add({std::to_string(l.concurrency), mm.name, fixed(mm.throughput), fixed(mm.latency_ms_p50),
             fixed(mm.latency_ms_p95), mm.ttft_ms_p95 ? fixed(*mm.ttft_ms_p95) : "-",
             mm.tpot_ms_p95 ? fixed(*mm.tpot_ms_p95) : "-",
             fixed(100 * l.measurement.gpu.sm_util, 0), mm.error});
    }
  }
  std::printf("%s", t.render().c_str());
  std::printf(
      "throughput: frames/s (vision), requests/s (encoder, speech), output tokens/s "
      "(LLM); a request is one batch (batched models) or one prompt and its "
      "generation (LLM)\n");
  return ok ? kExitOk : kExitFailure;
}

const bool registered = register_command({
    "measure",
    "Measure one joint configuration on a testbed (ground truth)",
    [](CLI::App& sub) {
      struct Flags {
        std::string file, catalog, config, only, concurrency, testbed = "sim";
        std::uint64_t seed = kDefaultSeed;
        double window_s = 10;
        bool json = false;
      };
      auto f = std::make_shared<Flags>();
      sub.add_option("file", f->file, "workload YAML")->required();
      sub.add_option("--config", f->config,
                     "knob values, e.g. cam0.imgsz=640,chat.precision=awq (others: first value)");
      sub.add_option("--models", f->only, "comma list of models to run (default: all)");
      sub.add_option("--testbed", f->testbed, testbed_help())->capture_default_str();
      add_seed_flag(sub, f->seed, "the measurement noise");
      sub.add_option("--window", f->window_s, "measurement window, seconds")
          ->check(CLI::Range(0.1, 3600.0))
          ->capture_default_str();
      CLI::Option* sweep = sub.add_option(
          "--concurrency", f->concurrency,
          "sweep: comma list of requests kept in flight (e.g. 1,2,4,8), replacing the "
          "measured models' demand; one measurement per level");
      sub.add_option("--catalog", f->catalog, kCatalogFlagHelp);
      sub.add_flag("--json", f->json, "print JSON");
      return std::function<int()>([f, sweep] {
        std::optional<std::vector<int>> levels;
        if (sweep->count() > 0) {  // given, even as an empty list (then an error)
          auto parsed = parse_levels(f->concurrency);
          if (!parsed) return report_error(parsed.error());
          levels = std::move(*parsed);
        }
        auto w = load_workload_file(f->file, f->catalog);
        if (!w) return report_error(w.error());
        if (auto st = require_one_gpu(*w, "measure"); !st.ok()) return report_error(st.error());
        auto config = parse_config_flag(*w, f->config, f->only);
        if (!config) return report_error(config.error());
        auto testbed = make_testbed(f->testbed);
        if (!testbed) return report_error(testbed.error());
        if (levels) {
          return print_sweep(sweep_concurrency(Context{.seed = f->seed}, **testbed, *w, *config,
                                               *levels, MeasureOptions(f->window_s)),
                             f->json);
        }
        const Measurement m =
            (*testbed)->measure(Context{.seed = f->seed}, *w, *config, MeasureOptions(f->window_s));
        if (f->json) {
          std::printf("%s\n", to_json(m).dump().c_str());
          return m.ok() ? kExitOk : kExitFailure;
        }
        Table t({"model", "config", "p50 ms", "p95 ms", "throughput", "TTFT p95", "TPOT p95",
                 "error"});
        for (const auto& mm : m.models) {
          t.add({mm.name, mm.config, fixed(mm.latency_ms_p50), fixed(mm.latency_ms_p95),
                 fixed(mm.throughput), mm.ttft_ms_p95 ? fixed(*mm.ttft_ms_p95) : "-",
                 mm.tpot_ms_p95 ? fixed(*mm.tpot_ms_p95) : "-", mm.error});
        }
        std::printf("%s", t.render().c_str());
        std::printf("gpu: sm %.0f%%  bw %.0f%%  vram %.1f GB  power %.0f W  clock %.0f MHz\n",
                    100 * m.gpu.sm_util, 100 * m.gpu.mem_bw_util, m.gpu.vram_used_gb,
                    m.gpu.power_w, m.gpu.clock_mhz);
        return m.ok() ? kExitOk : kExitFailure;
      });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_measure
