// corun eval llm-physics TABLE: the simulated GPU's LLM beside public measurements (TTFT,
// TPOT and operator-profile points; tests/data/llm-measurements.csv), per point and as the
// median and worst |error| per metric on the calibration and the validation points.
#include <cmath>
#include <cstdio>

#include "command.h"
#include "common.h"
#include "corun/testbed/llm_fidelity.h"

namespace corun::cli::cmd_eval_llm_physics {
namespace {

struct Flags {
  std::string table;
  bool markdown = false;
};

int run(const Flags& f) {
  auto points = read_llm_measurements(f.table);
  if (!points) return report_error(points.error());
  auto rows = compare_llm_physics(*points, Catalog::default_catalog());
  if (!rows) return report_error(rows.error());
  const char* sep = f.markdown ? " | " : "  ";
  if (f.markdown) {
    std::printf("| gpu | model | prec | prompt | output | batch | metric | split | measured ms | "
                "sim ms | error |\n|---|---|---|---:|---:|---:|---|---|---:|---:|---:|\n");
  } else {
    std::printf("%-10s %-11s %-5s %6s %6s %5s %-8s %-9s %10s %10s %7s\n", "gpu", "model", "prec",
                "prompt", "output", "batch", "metric", "split", "measured", "sim", "error");
  }
  for (const auto& r : *rows) {
    const auto& p = r.point;
    if (f.markdown) {
      std::printf("| %s%s%s%s%s%s%d%s%d%s%d%s%s%s%s%s%.3g%s%.3g%s%+.1f %% |\n", p.gpu.c_str(), sep,
                  p.model.c_str(), sep, p.precision.c_str(), sep, p.prompt, sep, p.output, sep,
                  p.batch, sep, p.metric.c_str(), sep, p.calibrate ? "calibrate" : "validate",
                  sep, p.value_ms, sep, r.sim_ms, sep, 100 * r.error());
    } else {
      std::printf("%-10s %-11s %-5s %6d %6d %5d %-8s %-9s %10.3g %10.3g %+6.1f%%\n", p.gpu.c_str(),
                  p.model.c_str(), p.precision.c_str(), p.prompt, p.output, p.batch,
                  p.metric.c_str(), p.calibrate ? "calibrate" : "validate", p.value_ms, r.sim_ms,
                  100 * r.error());
    }
  }
  std::printf(f.markdown ? "\n| metric | split | points | median abs error | worst abs error |\n"
                           "|---|---|---:|---:|---:|\n"
                         : "\n%-8s %-9s %6s %12s %12s\n",
              "metric", "split", "points", "median|err|", "worst|err|");
  for (const auto& s : summarize(*rows)) {
    if (f.markdown) {
      std::printf("| %s | %s | %zu | %.1f %% | %.1f %% |\n", s.metric.c_str(),
                  s.calibrate ? "calibrate" : "validate", s.points, 100 * s.median_abs,
                  100 * s.worst_abs);
    } else {
      std::printf("%-8s %-9s %6zu %11.1f%% %11.1f%%\n", s.metric.c_str(),
                  s.calibrate ? "calibrate" : "validate", s.points, 100 * s.median_abs,
                  100 * s.worst_abs);
    }
  }
  return kExitOk;
}

const bool registered = register_command(
    {"eval llm-physics",
     "Compare the simulated GPU's LLM with public TTFT, TPOT and operator measurements",
     [](CLI::App& sub) {
       auto f = std::make_shared<Flags>();
       sub.add_option("table", f->table, "measurement table (CSV), e.g. tests/data/llm-measurements.csv")
           ->required();
       sub.add_flag("--markdown", f->markdown, "print markdown tables (docs/testbed.md)");
       return [f] { return run(*f); };
     }});

}  // namespace
}  // namespace corun::cli::cmd_eval_llm_physics
