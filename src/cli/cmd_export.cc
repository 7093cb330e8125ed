// corun export PLAN --format vllm|triton|mps|compose|k8s [--out DIR] [--from OLD]: a plan as the
// configuration of a serving stack, or only what changes from the plan in force (docs/export.md).
#include <cstdio>

#include "command.h"
#include "common.h"
#include "corun/core/strings.h"
#include "corun/export/export.h"

namespace corun::cli::cmd_export {
namespace {

const bool registered = register_command({
    "export",
    "Write a plan (corun plan --json, a run's report.json, or a served plan) as vLLM "
    "arguments, Triton configs, MPS limits or a docker compose file",
    [](CLI::App& sub) {
      auto req = std::make_shared<exporting::ExportRequest>();
      auto catalog = std::make_shared<std::string>();
      auto* plan = sub.add_option("plan", req->plan_file,
                                  "plan JSON: corun plan --json output, report.json of corun "
                                  "run, or GET /v1/plan of corun serve");
      auto* to = sub.add_option("--to", req->plan_file, "the plan to go to (same as PLAN)");
      plan->excludes(to);
      sub.add_option("--from", req->from_file,
                     "the plan in force: write only what changes from it to PLAN, with "
                     "transition.json (order, downtime, how each stack applies it)");
      sub.add_option("--format", req->format,
                     "output format: " + join(exporting::export_format_names(), ", "))
          ->required();
      sub.add_option("--workload", req->workload_file,
                     "workload file (default: the one the plan names; a served plan names none)");
      sub.add_option("--out", req->out_dir, "write the files under DIR (default: print them)");
      sub.add_option("--catalog", *catalog, kCatalogFlagHelp);
      return std::function<int()>([req, catalog] {
        if (req->plan_file.empty()) {
          return report_error(Error("PLAN: required (or --to PLAN with --from OLD)"));
        }
        auto c = load_catalog_for_plan(*catalog, req->plan_file);
        if (!c) return report_error(c.error());
        std::vector<std::string> warnings;
        auto out = exporting::run_export(*req, **c, exporting::default_export_options(), &warnings);
        if (!out) return report_error(out.error());
        std::fputs(out->c_str(), stdout);
        // The files say it too; here it is seen whether or not they are read.
        for (const auto& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
        return kExitOk;
      });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_export
