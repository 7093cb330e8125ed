// corun profile FILE: runs (or resumes) a profiling campaign into a SQLite dataset.
#include <unistd.h>

#include <cstdio>

#include "command.h"
#include "common.h"
#include "corun/core/atomic_file.h"
#include "corun/core/strings.h"
#include "corun/profile/campaign.h"

namespace corun::cli::cmd_profile {
namespace {

const bool registered = register_command({
    "profile",
    "Measure a profiling campaign (standalone, meanfield or joint) into a resumable dataset",
    [](CLI::App& sub) {
      struct Flags {
        std::string file, catalog, plan = "meanfield", testbed = "sim", out;
        std::uint64_t budget = 0, repeats = 1, seed = kDefaultSeed;
        double window_s = 10;
        bool json = false, quiet = false;
      };
      auto f = std::make_shared<Flags>();
      sub.add_option("file", f->file, "workload YAML")->required();
      sub.add_option("--plan", f->plan,
                     "standalone | meanfield | joint | cotenant (meanfield draws next to a "
                     "synthetic co-tenant: for workloads that declare a tool burst)")
          ->capture_default_str();
      sub.add_option("--budget", f->budget,
                     "joint configurations to measure (meanfield, joint, cotenant; the "
                     "standalone plan measures every local configuration of every model, "
                     "--repeats times)");
      sub.add_option("--repeats", f->repeats,
                     "standalone plan: passes over every local configuration, averaged")
          ->check(CLI::Range(1, 100))
          ->capture_default_str();
      sub.add_option("--testbed", f->testbed, testbed_help())->capture_default_str();
      add_seed_flag(sub, f->seed, "the plan and the measurement noise");
      sub.add_option("--window", f->window_s, "measurement window, seconds")
          ->check(CLI::Range(0.1, 3600.0))
          ->capture_default_str();
      sub.add_option("--out", f->out, "dataset file (SQLite); created or resumed")->required();
      sub.add_option("--catalog", f->catalog, kCatalogFlagHelp);
      sub.add_flag("--json", f->json, "print the campaign report as JSON");
      sub.add_flag("--quiet", f->quiet, "no progress output");
      return std::function<int()>([f] {
        const auto plan = profile::parse_plan(f->plan);
        if (!plan || *plan == profile::Plan::kOnline) {
          return report_error(Error("--plan: unknown plan '" + f->plan + "'" +
                                    did_you_mean(f->plan, profile::plan_names()) +
                                    " (standalone, meanfield, joint, cotenant)"));
        }
        if (*plan != profile::Plan::kStandalone && f->budget == 0) {
          return report_error(Error("--budget: a " + f->plan +
                                    " plan needs --budget K (joint configurations, K >= 1)"));
        }
        if (*plan == profile::Plan::kStandalone && f->budget != 0) {
          return report_error(
              Error("--budget: the standalone plan measures every local "
                    "configuration; use --repeats R for R passes"));
        }
        const std::uint64_t budget = *plan == profile::Plan::kStandalone ? f->repeats : f->budget;
        auto w = load_workload_file(f->file, f->catalog);
        if (!w) return report_error(w.error());
        auto text = read_file(f->file);
        if (!text) return report_error(text.error());
        auto testbed = make_testbed(f->testbed);
        if (!testbed) return report_error(testbed.error());
        auto ds = profile::Dataset::open(f->out, profile::Dataset::Mode::kCreate);
        if (!ds) return report_error(ds.error());
        const profile::CampaignSpec spec{*plan, Context{.seed = f->seed}, f->testbed, f->window_s};
        const std::uint64_t total = profile::plan_size(*w, *plan, budget);
        auto stored_before = std::uint64_t{0};
        if (auto cs = ds->campaigns(); cs.ok()) {
          for (const auto& c : *cs) {
            if (c.workload_hash == w->hash && c.spec.plan == spec.plan &&
                c.spec.context.seed == spec.context.seed && c.spec.testbed == spec.testbed &&
                c.spec.window_s == spec.window_s) {
              stored_before = std::min(c.stored_samples, total);
            }
          }
        }
        const bool terminal = ::isatty(::fileno(stderr)) != 0;
        profile::Progress progress(f->quiet ? nullptr : stderr, terminal, "profile " + f->plan,
                                   total, stored_before);
        auto report = profile::run_campaign(*ds, *w, *text, **testbed, spec, budget, &progress);
        if (!report) return report_error(report.error());
        if (f->json) {
          nlohmann::json j = {{"dataset", f->out},
                              {"campaign", report->campaign},
                              {"plan", f->plan},
                              {"seed", f->seed},
                              {"testbed", f->testbed},
                              {"device", w->device.name},
                              {"workload_hash", w->hash},
                              {"total", report->total},
                              {"already_stored", report->already_stored},
                              {"measured", report->measured},
                              {"failed", report->failed}};
          std::printf("%s\n", j.dump().c_str());
        } else {
          std::printf(
              "campaign %lld (%s, seed %llu, %s/%s): %llu samples, %llu already stored, "
              "%llu measured, %llu failed -> %s\n",
              static_cast<long long>(report->campaign), f->plan.c_str(),
              static_cast<unsigned long long>(f->seed), f->testbed.c_str(), w->device.name.c_str(),
              static_cast<unsigned long long>(report->total),
              static_cast<unsigned long long>(report->already_stored),
              static_cast<unsigned long long>(report->measured),
              static_cast<unsigned long long>(report->failed), f->out.c_str());
        }
        return kExitOk;
      });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_profile
