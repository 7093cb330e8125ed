// corun run FILE: corun's main job. For now it measures the workload on the testbed, each model
// alone and all together, and prints the co-location table; the online scheduler replaces this.
#include <cstdio>

#include "command.h"
#include "common.h"

namespace corun::cli {
namespace {

std::string sla_text(const ModelSpec& m) {
  std::string out;
  auto add = [&](const char* name, const std::optional<double>& v) {
    if (v) out += (out.empty() ? "" : " ") + std::string(name) + "<=" + fixed(*v, 0);
  };
  add("p95", m.sla.latency_ms_p95);
  add("ttft", m.sla.ttft_ms_p95);
  add("tpot", m.sla.tpot_ms_p95);
  return out.empty() ? "-" : out;
}

// Whether a measured model meets its SLA (ground truth only).
bool meets_sla(const ModelSpec& spec, const ModelMetrics& mm) {
  if (!mm.ok()) return false;
  if (spec.sla.latency_ms_p95 && mm.latency_ms_p95 > *spec.sla.latency_ms_p95) return false;
  if (spec.sla.ttft_ms_p95 && mm.ttft_ms_p95 && *mm.ttft_ms_p95 > *spec.sla.ttft_ms_p95) {
    return false;
  }
  if (spec.sla.tpot_ms_p95 && mm.tpot_ms_p95 && *mm.tpot_ms_p95 > *spec.sla.tpot_ms_p95) {
    return false;
  }
  if (spec.sla.min_throughput && mm.throughput < *spec.sla.min_throughput) return false;
  return true;
}

// The metric an SLA is most about: TPOT for LLMs, p95 latency otherwise.
double headline(const ModelMetrics& mm) {
  return mm.tpot_ms_p95 ? *mm.tpot_ms_p95 : mm.latency_ms_p95;
}

const bool registered = register_command({
    "run",
    "Run corun's main job on a workload (measure alone vs co-located, print the table)",
    [](CLI::App& sub) {
      struct Flags {
        std::string file, catalog, testbed = "sim";
        std::uint64_t seed = 1;
      };
      auto f = std::make_shared<Flags>();
      sub.add_option("file", f->file, "workload YAML")->required();
      sub.add_option("--testbed", f->testbed, "testbed: sim")->capture_default_str();
      sub.add_option("--seed", f->seed, "seed")->capture_default_str();
      sub.add_option("--catalog", f->catalog, "catalog directory (default: built in)");
      return std::function<int()>([f] {
        auto w = load_workload_file(f->file, f->catalog);
        if (!w) return report_error(w.error());
        auto testbed = make_testbed(f->testbed);
        if (!testbed) return report_error(testbed.error());
        const std::size_t n = w->models.size();
        const JointConfig all(n, 0);
        const Measurement together = (*testbed)->measure(*w, all, {10, f->seed});
        std::printf("corun run: %s on %s (%s testbed), %zu models, each at its first local "
                    "configuration\n\n",
                    w->file.c_str(), w->device.display_name.c_str(),
                    std::string((*testbed)->name()).c_str(), n);
        Table t({"model", "catalog", "config", "alone ms", "co-run ms", "slowdown", "SLA",
                 "status"});
        for (std::size_t i = 0; i < n; ++i) {
          JointConfig alone(n, kAbsent);
          alone[i] = 0;
          const Measurement solo = (*testbed)->measure(*w, alone, {10, f->seed});
          const ModelMetrics* a = solo.models.empty() ? nullptr : &solo.models[0];
          const ModelMetrics* c = nullptr;
          for (const auto& mm : together.models) c = mm.model == i ? &mm : c;
          const bool ok = a && c && a->ok() && c->ok();
          t.add({w->models[i].name, w->models[i].arch.name, w->models[i].describe(0),
                 ok ? fixed(headline(*a)) : "-", ok ? fixed(headline(*c)) : "-",
                 ok ? "+" + fixed(100 * (headline(*c) / headline(*a) - 1), 0) + "%" : "-",
                 sla_text(w->models[i]),
                 c == nullptr ? "not run" : (!c->ok() ? c->error : meets_sla(w->models[i], *c) ? "ok" : "BREACH")});
        }
        std::printf("%s", t.render().c_str());
        std::printf("\ngpu (co-run): sm %.0f%%  bw %.0f%%  vram %.1f/%.0f GB  power %.0f W  clock "
                    "%.0f MHz\n",
                    100 * together.gpu.sm_util, 100 * together.gpu.mem_bw_util,
                    together.gpu.vram_used_gb, w->device.vram_gb, together.gpu.power_w,
                    together.gpu.clock_mhz);
        std::printf("(LLM rows show TPOT p95; others latency p95.)\n");
        return together.ok() ? kExitOk : kExitFailure;
      });
    },
});

}  // namespace
}  // namespace corun::cli
