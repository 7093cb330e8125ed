#include "corun/runtime/twin_source.h"

#include <algorithm>
#include <cstdio>

#include "corun/core/check.h"
#include "corun/runtime/controller.h"
#include "corun/runtime/loaded_predictor.h"
#include "corun/runtime/renumbered_predictor.h"
#include "corun/runtime/testbed_predictor.h"

namespace corun {

namespace {

// The twin's predictor: a noise-free TestbedPredictor that owns the workload it measures.
class TwinPredictor final : public Predictor {
 public:
  TwinPredictor(const Workload& w, const Testbed& t, double window_s, const Interference& load)
      : w_(std::make_unique<Workload>(w)),
        inner_(Context{}, *w_, t, MeasureOptions{window_s, Conditions{load, 0, 0}, false}) {}
  [[nodiscard]] std::size_t models() const override { return inner_.models(); }
  void predict(std::span<const std::int32_t> configs, std::size_t rows,
               std::span<Predicted> out) const override {
    inner_.predict(configs, rows, out);
  }

 private:
  std::unique_ptr<Workload> w_;  // stable address for inner_
  TestbedPredictor inner_;
};

}  // namespace

// How far a GPU strays from its catalog twin, in log space, by family and metric. A real board
// differs from its datasheet and from corun's calibration by tens of percent in achieved
// bandwidth, kernel efficiency and launch costs (REFERENCES.md: static models erred by more than
// 60 % on an L4); the simulator's perturbation draws each of them 10-40 % off. Measured on that
// design (tests/runtime/twin_prior_test.cc recomputes them: 30 perturbations of three
// workloads, each configuration alone), a model's error shared by its configurations has an sd
// of about 0.28 whatever the family, while one configuration's own deviation from it depends on
// the metric: small for a vision model's latency (the configurations of a CNN share their
// compute/memory mix) and an LLM's TPOT, large for TTFT and speech (queueing amplifies the
// perturbation near saturation). The contention slope is given the shared error's size per unit
// of load; window noise starts at 0.1 and is estimated online.
ErrorPrior twin_prior(ModelFamily family, Target t) {
  ErrorPrior p{0, 0.28, 0.3, 0.05, 0.1};
  switch (t) {
    case Target::kTtftP95:
      p.config_sd = 0.35;
      break;
    case Target::kTpotP95:
      p.config_sd = 0.06;
      break;
    case Target::kLatencyP95:
      p.config_sd = family == ModelFamily::kVision    ? 0.05
                    : family == ModelFamily::kEncoder ? 0.2
                                                      : 0.35;
      break;
    case Target::kThroughput:
      p = ErrorPrior{0, 0.1, 0.1, 0.05, 0.05};
      break;
  }
  return p;
}

TwinSource::TwinSource(TwinOptions options) : options_(options) {}

Result<std::unique_ptr<Predictor>> TwinSource::predictor_for(const Workload& current) {
  return predictor_under(current, Interference{});
}

Result<std::unique_ptr<Predictor>> TwinSource::predictor_under(const Workload& current,
                                                               const Interference& load) {
  const double window =
      current.timeline.interval_s > 0 ? current.timeline.interval_s : options_.window_s;
  return std::unique_ptr<Predictor>(std::make_unique<TwinPredictor>(current, sim_, window, load));
}

std::vector<double> TwinSource::margins(const Workload& current) {
  return std::vector<double>(current.models.size(), options_.margin);
}

ErrorPriors TwinSource::priors(const Workload& current) {
  ErrorPriors out(current.models.size());
  for (std::size_t m = 0; m < out.size(); ++m) {
    for (Target t : surrogate::kAllTargets) {
      out[m][static_cast<std::size_t>(t)] = twin_prior(current.models[m].arch.family, t);
    }
  }
  return out;
}

LoadTable TwinSource::loads(const Workload& current) {
  const double window =
      current.timeline.interval_s > 0 ? current.timeline.interval_s : options_.window_s;
  LoadTable out(current.models.size());
  for (std::size_t m = 0; m < current.models.size(); ++m) {
    const ModelSpec& spec = current.models[m];
    char demand[96];
    std::snprintf(demand, sizeof demand, "|%.9g|%.9g|%d|%d|%d", spec.demand.fps, spec.demand.rps,
                  spec.demand.prompt_tokens, spec.demand.output_tokens, spec.demand.concurrency);
    const std::string key = Controller::model_key(spec) + demand;
    auto it = alone_.find(key);
    if (it == alone_.end()) {
      std::vector<float> loads(spec.local_config_count(), 0.0f);
      JointConfig c(current.models.size(), kAbsent);
      for (std::size_t l = 0; l < loads.size(); ++l) {
        c[m] = static_cast<std::int32_t>(l);
        const Measurement alone =
            sim_.measure(Context{}, current, c, MeasureOptions{window, {}, false});
        if (alone.ok()) loads[l] = static_cast<float>(alone.gpu.sm_util + alone.gpu.mem_bw_util);
      }
      it = alone_.emplace(key, std::move(loads)).first;
    }
    out[m] = it->second;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The fitted surrogate while it fits, the twin otherwise.

// Registrations arrive as JSON objects, whose keys (the knobs) come back sorted: the same knobs
// as the surrogate's, in another order, number local configurations differently. This view gives
// a workload the surrogate's knob order and maps local indices between the two.
struct FittedOrTwinSource::KnobOrder {
  Workload reordered;                             // `current` with the surrogate's knob order
  std::vector<std::vector<std::int32_t>> to_fit;  // [model][workload local] -> surrogate local
};

namespace {

std::unique_ptr<FittedOrTwinSource::KnobOrder> match_knob_order(const Workload& current,
                                                                const surrogate::Surrogate& s) {
  const auto& sig = s.signature();
  if (sig.size() != current.models.size()) return nullptr;
  auto k = std::make_unique<FittedOrTwinSource::KnobOrder>();
  k->reordered = current;
  for (std::size_t m = 0; m < sig.size(); ++m) {
    ModelSpec& spec = k->reordered.models[m];
    if (spec.knobs.size() != sig[m].knobs.size()) return nullptr;
    std::vector<KnobSpec> ordered;
    for (const auto& want : sig[m].knobs) {
      auto it = std::find_if(spec.knobs.begin(), spec.knobs.end(),
                             [&](const KnobSpec& have) { return have.id == want.id; });
      if (it == spec.knobs.end()) return nullptr;
      ordered.push_back(*it);
    }
    const ModelSpec original = current.models[m];
    spec.knobs = std::move(ordered);
    std::vector<std::int32_t> map(original.local_config_count());
    for (std::size_t l = 0; l < map.size(); ++l) {
      std::vector<std::pair<std::string, std::string>> assign;
      const Settings st = original.settings(l);
      for (const auto& knob : original.knobs) {
        assign.emplace_back(knob_decl(knob.id).name, format_knob_value(knob.id, st.get(knob.id)));
      }
      auto idx = spec.find_config(assign);
      if (!idx) return nullptr;
      map[l] = static_cast<std::int32_t>(*idx);
    }
    k->to_fit.push_back(std::move(map));
  }
  if (!s.check_workload(k->reordered).ok()) return nullptr;
  return k;
}

}  // namespace

FittedOrTwinSource::FittedOrTwinSource(const Context& ctx, surrogate::Surrogate s,
                                       const Testbed& testbed, SurrogateSourceOptions fitted,
                                       TwinOptions twin)
    : fitted_(ctx, std::move(s), testbed, fitted), twin_(twin) {}

FittedOrTwinSource::FittedOrTwinSource(const Context& ctx, std::unique_ptr<Testbed> owned,
                                       surrogate::Surrogate s, SurrogateSourceOptions fitted,
                                       TwinOptions twin)
    : owned_(std::move(owned)), fitted_(ctx, std::move(s), *owned_, fitted), twin_(twin) {}

Result<std::unique_ptr<FittedOrTwinSource>> FittedOrTwinSource::on_own_testbed(
    const Context& ctx, surrogate::Surrogate s, SurrogateSourceOptions fitted, TwinOptions twin) {
  auto t = make_testbed(s.provenance().testbed.empty() ? "sim" : s.provenance().testbed);
  if (!t) return t.error().wrap("the surrogate's testbed");
  return std::unique_ptr<FittedOrTwinSource>(
      new FittedOrTwinSource(ctx, std::move(*t), std::move(s), fitted, twin));
}

FittedOrTwinSource::~FittedOrTwinSource() = default;

std::string FittedOrTwinSource::describe() const {
  return order_ ? fitted_.describe() : twin_.describe();
}

Result<std::unique_ptr<Predictor>> FittedOrTwinSource::predictor_under(
    const Workload& current, const Interference& load) {
  order_ = match_knob_order(current, *fitted_.fitted());
  if (!order_) {
    const Status fits = fitted_.fitted()->check_workload(current);
    const std::string reason = fits.ok() ? "" : fits.error().what();
    if (reason != last_reason_) {
      std::fprintf(stderr, "corun: planning with the twin: the surrogate does not fit: %s\n",
                   reason.c_str());
    }
    last_reason_ = reason;
    return twin_.predictor_under(current, load);
  }
  last_reason_.clear();
  auto inner = fitted_.predictor_for(order_->reordered);
  if (!inner) return inner.error();
  return make_loaded(
      make_renumbered(std::shared_ptr<const Predictor>(std::move(*inner)), order_->to_fit), load);
}

Result<std::unique_ptr<Predictor>> FittedOrTwinSource::predictor_for(const Workload& current) {
  return predictor_under(current, Interference{});
}

std::vector<double> FittedOrTwinSource::margins(const Workload& current) {
  return order_ ? fitted_.margins(order_->reordered) : twin_.margins(current);
}

ErrorPriors FittedOrTwinSource::priors(const Workload& current) {
  return order_ ? fitted_.priors(order_->reordered) : twin_.priors(current);
}

LoadTable FittedOrTwinSource::loads(const Workload& current) {
  if (!order_) return twin_.loads(current);
  const LoadTable fitted = fitted_.loads(order_->reordered);
  LoadTable out(current.models.size());
  for (std::size_t m = 0; m < out.size(); ++m) {
    for (std::int32_t l : order_->to_fit[m]) {
      out[m].push_back(static_cast<std::size_t>(l) < fitted[m].size() ? fitted[m][static_cast<std::size_t>(l)] : 0.0f);
    }
  }
  return out;
}

Status FittedOrTwinSource::adopt(surrogate::Surrogate refit) { return fitted_.adopt(std::move(refit)); }

}  // namespace corun
