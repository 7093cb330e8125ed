// Where a run's predictions come from: a given surrogate, one profiled and fitted for the
// workload, or the catalog twin.

#include "corun/runtime/run_source.h"

#include <string>
#include <utility>

#include "corun/runtime/surrogate_source.h"
#include "corun/runtime/twin_source.h"

namespace corun {

namespace {

/// Repeats averaged when a changed model is re-profiled alone (corun profile --repeats).
constexpr int kReprofileRepeats = 3;
/// The catalog twin's static latency margin (what it plans with while learning is off).
constexpr double kTwinMargin = 0.1;

}  // namespace

std::unique_ptr<PredictorSource> source_for(const Context& ctx,
                                            std::optional<surrogate::Surrogate> fitted,
                                            const Testbed& testbed, double window_s,
                                            double confidence) {
  if (!fitted) return std::make_unique<TwinSource>(TwinOptions{kTwinMargin, window_s});
  return std::make_unique<SurrogateSource>(
      ctx, std::move(*fitted), testbed,
      SurrogateSourceOptions{kReprofileRepeats, window_s, confidence});
}

Result<RunSource> make_run_source(const Context& ctx, const Workload& w,
                                  std::string_view workload_text, const Testbed& testbed,
                                  const RunSourceOptions& o) {
  const double window = o.pipeline.window_s;
  RunSource made;
  if (!o.surrogate.empty()) {
    auto loaded = surrogate::Surrogate::load(o.surrogate);
    if (!loaded) return loaded.error();
    if (auto st = loaded->check_workload(w); !st.ok()) {
      return st.error().wrap(o.surrogate.string() + " does not fit " + w.file);
    }
    made.kind = RunSource::Kind::kGiven;
    made.source = source_for(ctx, std::move(*loaded), testbed, window, o.confidence);
    return made;
  }
  if (!o.profile || w.profiling == Profiling::kNone) {
    made.kind = RunSource::Kind::kTwin;
    made.source = source_for(ctx, std::nullopt, testbed, window, o.confidence);
    return made;
  }
  auto p = profile_and_fit(ctx, w, workload_text, testbed, o.pipeline);
  if (!p) return p.error();
  made.kind = RunSource::Kind::kProfiled;
  made.profiled = static_cast<const PipelineStats&>(*p);
  made.refit_dataset = o.pipeline.dataset;
  made.source = source_for(ctx, std::move(p->surrogate), testbed, window, o.confidence);
  return made;
}

}  // namespace corun
