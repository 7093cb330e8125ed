// corun run FILE: corun's main job. Profile the workload (standalone passes and a MeanField
// co-run campaign, cached in a resumable dataset), fit the surrogate (reused when unchanged),
// then run the workload's timeline online: re-plan on every event and measured SLA breach,
// apply each plan to the testbed, and report predicted against measured, interval by interval.
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "command.h"
#include "common.h"
#include "corun/core/atomic_file.h"
#include "corun/core/strings.h"
#include "corun/runtime/controller.h"
#include "corun/runtime/pipeline.h"
#include "corun/runtime/report.h"
#include "corun/runtime/surrogate_source.h"
#include "corun/space/space.h"
#include "surrogate_flags.h"

namespace corun::cli {
namespace {

// "cam0 640/0.33 -> 480/0.33; chat ..." for the models whose configuration changed.
std::string plan_change(const Workload& w, const JointConfig& before, const JointConfig& after) {
  std::string out;
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    if (m < before.size() && before[m] == after[m]) continue;
    if (!out.empty()) out += "; ";
    out += w.models[m].name + " ";
    out += after[m] == kAbsent ? "off" : w.models[m].describe(static_cast<std::size_t>(after[m]));
  }
  return out.empty() ? "-" : out;
}

std::string sla_status(const Workload& w, const IntervalRecord& r) {
  std::string out;
  for (std::size_t m = 0; m < r.breach.size(); ++m) {
    if (!r.breach[m]) continue;
    out += (out.empty() ? "BREACH " : ",") + w.models[m].name;
  }
  return out.empty() ? "ok" : out;
}

std::string thousands(std::uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

const bool registered = register_command({
    "run",
    "corun's main job: profile, fit, then schedule the workload's timeline online",
    [](CLI::App& sub) {
      struct Flags {
        std::string file, testbed = "sim", solver = "ga", out, model, catalog;
        std::uint64_t repeats = 3;
        bool json = false, quiet = false;
        SurrogateFlags surrogate;
      };
      auto f = std::make_shared<Flags>();
      sub.add_option("file", f->file, "workload YAML (its timeline is run; none = one interval)")
          ->required();
      sub.add_option("--testbed", f->testbed, testbed_help())->capture_default_str();
      sub.add_option("--solver", f->solver, "exhaustive, ga, exact, greedy or hillclimb")
          ->capture_default_str();
      f->surrogate.add(sub);
      sub.add_option("--repeats", f->repeats, "standalone profiling passes")->capture_default_str();
      sub.add_option("--surrogate", f->model,
                     "use this fitted surrogate instead of profiling and fitting");
      sub.add_option("--out", f->out,
                     "directory for dataset.db, surrogate.json, report.json and report.html "
                     "(default out/run/NAME on sim, out/run/NAME-TESTBED on the others: a "
                     "dataset holds one testbed's measurements)");
      sub.add_option("--catalog", f->catalog, "catalog directory (default: built in)");
      sub.add_flag("--json", f->json, "print the report JSON instead of the table");
      sub.add_flag("--quiet", f->quiet, "no progress bars");
      return std::function<int()>([f] {
        auto catalog = load_catalog(f->catalog);
        if (!catalog) return report_error(catalog.error());
        auto w = load_workload_file(f->file, f->catalog);
        if (!w) return report_error(w.error());
        auto text = read_file(f->file);
        if (!text) return report_error(text.error());
        auto testbed = make_testbed(f->testbed);
        if (!testbed) return report_error(testbed.error());
        if (!make_solver(f->solver)) return report_error(make_solver(f->solver).error());
        const auto regressor = f->surrogate.regressor_kind();
        if (!regressor) return report_error(regressor.error());
        const std::string name = std::filesystem::path(f->file).stem().string();
        // One default directory per testbed: a dataset that mixed testbeds could not be fitted.
        const std::string dir = f->testbed == "sim" ? name : name + "-" + f->testbed;
        const std::filesystem::path out = f->out.empty() ? "out/run/" + dir : f->out;
        const double interval = w->timeline.interval_s > 0 ? w->timeline.interval_s : 10;
        std::FILE* log = f->json ? stderr : stdout;
        const bool terminal = ::isatty(::fileno(stderr)) != 0;

        const ConfigSpace space(*w);
        std::fprintf(log, "corun run: %s on %s (%s testbed), %zu models, %s joint configurations\n",
                     f->file.c_str(), w->device.display_name.c_str(), f->testbed.c_str(),
                     w->models.size(), thousands(space.joint_count()).c_str());

        std::optional<surrogate::Surrogate> s;
        if (!f->model.empty()) {
          auto loaded = surrogate::Surrogate::load(f->model);
          if (!loaded) return report_error(loaded.error());
          if (auto st = loaded->check_workload(*w); !st.ok()) {
            return report_error(st.error().wrap(f->model + " does not fit " + f->file));
          }
          s = std::move(*loaded);
          std::fprintf(log, "surrogate: %s (given)\n", f->model.c_str());
        } else {
          PipelineOptions po = f->surrogate.pipeline(*regressor, f->testbed, interval,
                                                     f->quiet ? nullptr : stderr, terminal);
          po.dataset = out / "dataset.db";
          po.model = out / "surrogate.json";
          po.standalone_repeats = f->repeats;
          po.catalog = *catalog;
          auto p = profile_and_fit(*w, *text, **testbed, po);
          if (!p) return report_error(p.error());
          std::fprintf(log,
                       "profile: %llu standalone + %llu co-run measurements (%llu + %llu taken "
                       "now, the rest cached in %s)\n",
                       static_cast<unsigned long long>(p->standalone_total),
                       static_cast<unsigned long long>(p->corun_total),
                       static_cast<unsigned long long>(p->standalone_measured),
                       static_cast<unsigned long long>(p->corun_measured),
                       po.dataset.string().c_str());
          if (p->model_reused) {
            std::fprintf(log, "surrogate: meanfield/%s reused from %s\n",
                         f->surrogate.regressor.c_str(), po.model.string().c_str());
          } else {
            std::fprintf(log, "surrogate: meanfield/%s fitted in %.1f s -> %s\n",
                         f->surrogate.regressor.c_str(), p->fit_s, po.model.string().c_str());
          }
          s = std::move(p->surrogate);
        }

        SurrogateSource source(std::move(*s), **testbed,
                               {3, interval, f->surrogate.seed, f->surrogate.confidence});
        ControllerOptions co;
        co.solver = f->solver;
        co.seed = f->surrogate.seed;
        co.threads = f->surrogate.threads;
        Table t({"t (s)", "event", "decision", "plan change", "utility pred/meas", "SLA"});
        JointConfig last;
        auto on_interval = [&](const IntervalRecord& r) {
          if (!r.replanned && r.events.empty() &&
              std::none_of(r.breach.begin(), r.breach.end(), [](bool b) { return b; })) {
            last = r.plan;
            return;  // a quiet interval: summarised at the end
          }
          std::string events = join(r.events, ", ");
          if (r.replanned && events.empty()) events = r.reason;
          const std::string decision =
              r.replanned ? f->solver + " " + fixed(r.decision_ms, 1) + " ms" : "-";
          const std::string change = r.replanned ? plan_change(*w, last, r.plan) : "-";
          t.add({fixed(r.t_s, 0), events.empty() ? "-" : events, decision, change,
                 fixed(r.predicted_utility, 3) + " / " + fixed(r.measured_utility, 3),
                 sla_status(*w, r)});
          if (!f->json && !terminal) {
            // Piped output streams one line per decision as it happens.
            std::fprintf(log, "t=%-5s %-24s %-14s %s | utility %s/%s | %s\n",
                         fixed(r.t_s, 0).c_str(), (events.empty() ? "-" : events).c_str(),
                         decision.c_str(), change.c_str(), fixed(r.predicted_utility, 3).c_str(),
                         fixed(r.measured_utility, 3).c_str(), sla_status(*w, r).c_str());
          }
          last = r.plan;
        };
        auto report = run_online(*w, **testbed, source, co, on_interval);
        if (!report) return report_error(report.error());
        if (!f->json && terminal) std::fprintf(log, "\n%s", t.render().c_str());

        if (auto st = write_report(*report, *w, out); !st.ok()) return report_error(st.error());
        const nlohmann::json j = report_json(*report, *w);
        const auto& sum = j.at("summary");
        std::fprintf(log,
                     "\nsummary: %zu intervals of %s s, %zu decisions (p50 %.1f ms, p99 %.1f ms), "
                     "%zu standalone re-profiling measurements, mean measured utility %.3f, %zu "
                     "measured SLA violation(s) (model-intervals)\n",
                     report->intervals.size(), fixed(interval, 0).c_str(),
                     sum.at("decisions").get<std::size_t>(),
                     sum.at("decision_ms_p50").get<double>(),
                     sum.at("decision_ms_p99").get<double>(), source.standalone_measurements(),
                     sum.at("mean_measured_utility").get<double>(), report->sla_violations());
        std::fprintf(log, "report: %s, %s\n", (out / "report.json").string().c_str(),
                     (out / "report.html").string().c_str());
        if (f->json) std::printf("%s\n", j.dump().c_str());
        return report->sla_violations() == 0 ? kExitOk : kExitFailure;
      });
    },
});

}  // namespace
}  // namespace corun::cli
