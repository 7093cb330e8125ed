// corun measure FILE: runs one joint configuration on a testbed and prints what it observed.
#include <cstdio>

#include "command.h"
#include "common.h"

namespace corun::cli {
namespace {

const bool registered = register_command({
    "measure",
    "Measure one joint configuration on a testbed (ground truth)",
    [](CLI::App& sub) {
      struct Flags {
        std::string file, catalog, config, only, testbed = "sim";
        std::uint64_t seed = 1;
        double window_s = 10;
        bool json = false;
      };
      auto f = std::make_shared<Flags>();
      sub.add_option("file", f->file, "workload YAML")->required();
      sub.add_option("--config", f->config,
                     "knob values, e.g. cam0.imgsz=640,chat.precision=awq (others: first value)");
      sub.add_option("--models", f->only, "comma list of models to run (default: all)");
      sub.add_option("--testbed", f->testbed, testbed_help())->capture_default_str();
      sub.add_option("--seed", f->seed, "seed of the measurement noise")->capture_default_str();
      sub.add_option("--window", f->window_s, "measurement window, seconds")
          ->check(CLI::Range(0.1, 3600.0))
          ->capture_default_str();
      sub.add_option("--catalog", f->catalog, "catalog directory (default: built in)");
      sub.add_flag("--json", f->json, "print JSON");
      return std::function<int()>([f] {
        auto w = load_workload_file(f->file, f->catalog);
        if (!w) return report_error(w.error());
        auto config = parse_config_flag(*w, f->config, f->only);
        if (!config) return report_error(config.error());
        auto testbed = make_testbed(f->testbed);
        if (!testbed) return report_error(testbed.error());
        const Measurement m = (*testbed)->measure(*w, *config, {f->window_s, f->seed});
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
}  // namespace corun::cli
