#include "corun/runtime/surrogate_source.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>

#include "corun/core/check.h"
#include "corun/core/rng.h"
#include "corun/core/stats.h"
#include "corun/profile/dataset.h"
#include "corun/surrogate/cotenant.h"

namespace corun {

using surrogate::CompiledSurrogate;
using surrogate::Target;
using surrogate::kTargetCount;

// Workspaces of concurrent callers: predict() is const and called from several solver threads,
// so each call borrows one (allocated once, reused) instead of allocating per call. One slot per
// workspace, each behind its own lock on its own cache line; a thread starts from the slot its id
// hashes to, so that concurrent callers (the exact solver's workers) keep to their own slot and
// its workspace (and the cells it remembers) without contending for one lock.
struct SurrogatePredictor::Pool {
  struct alignas(64) Slot {
    std::mutex mu;
    std::unique_ptr<CompiledSurrogate::Workspace> ws;
  };
  static constexpr std::size_t kSlots = 8;
  std::array<Slot, kSlots> slots;
};

namespace {

constexpr std::size_t kAggregateDims = 6;  // count, sm, bw, vram, power, occupancy

class Borrowed {
 public:
  Borrowed(SurrogatePredictor::Pool& pool, const CompiledSurrogate& c) {
    using Pool = SurrogatePredictor::Pool;
    const std::size_t home =
        std::hash<std::thread::id>{}(std::this_thread::get_id()) % Pool::kSlots;
    for (std::size_t i = 0; i < Pool::kSlots && slot_ == nullptr; ++i) {
      Pool::Slot& s = pool.slots[(home + i) % Pool::kSlots];
      if (s.mu.try_lock()) slot_ = &s;
    }
    if (slot_ == nullptr) {  // more concurrent callers than slots: wait for the home slot
      slot_ = &pool.slots[home];
      slot_->mu.lock();
    }
    if (!slot_->ws) slot_->ws = std::make_unique<CompiledSurrogate::Workspace>(c.make_workspace());
  }
  ~Borrowed() { slot_->mu.unlock(); }
  Borrowed(const Borrowed&) = delete;
  Borrowed& operator=(const Borrowed&) = delete;
  CompiledSurrogate::Workspace& operator*() { return *slot_->ws; }

 private:
  SurrogatePredictor::Pool::Slot* slot_ = nullptr;
};

// Natural-unit targets of one model (NaN = does not apply or never ran alone) to Predicted.
Predicted to_predicted(const float* t, bool running) {
  Predicted p;
  if (!running) return p;
  const float lat = t[static_cast<std::size_t>(Target::kLatencyP95)];
  const float ttft = t[static_cast<std::size_t>(Target::kTtftP95)];
  const float tpot = t[static_cast<std::size_t>(Target::kTpotP95)];
  const float thr = t[static_cast<std::size_t>(Target::kThroughput)];
  const bool any = std::isfinite(lat) || std::isfinite(ttft) || std::isfinite(tpot);
  if (!any) {
    // The configuration never ran alone (e.g. out of memory): no plan may choose it.
    p.latency_ms_p95 = p.ttft_ms_p95 = p.tpot_ms_p95 = kUnusableLatencyMs;
    return p;
  }
  p.latency_ms_p95 = std::isfinite(lat) ? lat : 0;
  p.ttft_ms_p95 = std::isfinite(ttft) ? ttft : 0;
  p.tpot_ms_p95 = std::isfinite(tpot) ? tpot : 0;
  p.throughput = std::isfinite(thr) ? thr : 0;
  return p;
}

bool same_demand(const Demand& a, const Demand& b) { return a == b; }

}  // namespace

SurrogatePredictor::SurrogatePredictor(CompiledSurrogate compiled, const surrogate::Totals& extra,
                                       std::optional<Device> device)
    : compiled_(std::move(compiled)),
      extra_(extra),
      has_extra_(extra.count != 0 || extra.sm != 0 || extra.bw != 0 || extra.vram_gb != 0 ||
                 extra.power_w != 0 || extra.occupancy != 0),
      device_(std::move(device)),
      pool_(std::make_unique<Pool>()) {}

SurrogatePredictor::~SurrogatePredictor() = default;

void SurrogatePredictor::predict(std::span<const std::int32_t> configs, std::size_t rows,
                                 std::span<Predicted> out) const {
  const std::size_t n = models();
  CORUN_CHECK(configs.size() >= rows * n && out.size() >= rows * n);
  if (has_extra_) {
    // The compiled batch path sums the workload's own contributions only: with a load from
    // outside, go through predict_given, which adds it.
    AggregatePredictor::predict(configs, rows, out);
    return;
  }
  Borrowed ws(*pool_, compiled_);
  // Chunks keep the natural-unit buffer bounded whatever the batch size.
  constexpr std::size_t kBatch = CompiledSurrogate::kChunk;
  thread_local std::vector<float> buf;
  buf.resize(kBatch * n * kTargetCount);
  for (std::size_t begin = 0; begin < rows; begin += kBatch) {
    const std::size_t count = std::min(kBatch, rows - begin);
    compiled_.predict(configs.subspan(begin * n, count * n), buf, *ws);
    for (std::size_t i = 0; i < count; ++i) {
      for (std::size_t m = 0; m < n; ++m) {
        out[(begin + i) * n + m] = to_predicted(buf.data() + (i * n + m) * kTargetCount,
                                                configs[(begin + i) * n + m] != kAbsent);
      }
    }
  }
}

std::size_t SurrogatePredictor::aggregate_dims() const { return kAggregateDims; }

namespace {

// Totals as the aggregate vector of contribution() (the order predict_given() reads back).
void write_aggregate(const surrogate::Totals& t, std::span<float> out) {
  out[0] = static_cast<float>(t.count);
  out[1] = static_cast<float>(t.sm);
  out[2] = static_cast<float>(t.bw);
  out[3] = static_cast<float>(t.vram_gb);
  out[4] = static_cast<float>(t.power_w);
  out[5] = static_cast<float>(t.occupancy);
}

}  // namespace

void SurrogatePredictor::contribution(std::size_t m, std::int32_t l, std::span<float> out) const {
  CORUN_CHECK(out.size() >= kAggregateDims && l >= 0);
  write_aggregate(compiled_.contribution(m, static_cast<std::size_t>(l)), out);
}

bool SurrogatePredictor::cotenant(double sm, double bw, std::span<float> out) const {
  if (!device_ || out.size() < kAggregateDims) return false;
  write_aggregate(surrogate::cotenant_totals(*device_, Interference{sm, bw}), out);
  return true;
}

Predicted SurrogatePredictor::predict_given(std::size_t m, std::int32_t l,
                                            std::span<const float> others) const {
  CORUN_CHECK(others.size() >= kAggregateDims && l >= 0);
  const surrogate::Totals o{others[0], others[1], others[2], others[3], others[4], others[5]};
  std::array<float, kTargetCount> t{};
  Borrowed ws(*pool_, compiled_);
  compiled_.predict_given(m, static_cast<std::size_t>(l), o + extra_, t, *ws);
  return to_predicted(t.data(), true);
}

SurrogateSource::SurrogateSource(const Context& ctx, surrogate::Surrogate s, const Testbed& testbed,
                                 SurrogateSourceOptions options)
    : surrogate_(std::move(s)),
      testbed_(testbed),
      ctx_(ctx),
      options_(options),
      table_(surrogate_.standalone()) {
  for (const auto& sig : surrogate_.signature()) profiled_.push_back(sig.demand);
}

Result<std::unique_ptr<Predictor>> SurrogateSource::predictor_for(const Workload& current) {
  if (auto st = surrogate_.check_workload(current); !st.ok()) return st.error();
  // Re-profile alone every model whose demand moved since its profile was measured.
  std::vector<profile::SampleRecord> samples;
  std::vector<std::size_t> changed;
  for (std::size_t m = 0; m < current.models.size(); ++m) {
    if (same_demand(current.models[m].demand, profiled_[m])) continue;
    changed.push_back(m);
    const Demand& d = current.models[m].demand;
    char key[160];
    std::snprintf(key, sizeof key, "%.9g:%.9g:%d:%d:%d", d.fps, d.rps, d.prompt_tokens,
                  d.output_tokens, d.concurrency);
    auto [cached, fresh] = alone_.try_emplace({m, key});
    if (!fresh) {
      samples.insert(samples.end(), cached->second.begin(), cached->second.end());
      continue;
    }
    const std::size_t first = samples.size();
    const std::size_t locals = current.models[m].local_config_count();
    for (std::size_t l = 0; l < locals; ++l) {
      for (int r = 0; r < std::max(1, options_.standalone_repeats); ++r) {
        profile::SampleRecord rec;
        rec.index = samples.size();
        rec.config.assign(current.models.size(), kAbsent);
        rec.config[m] = static_cast<std::int32_t>(l);
        rec.measurement_seed = derive_seed(
            ctx_.seed, {0x5354414eULL, refreshes_, m, l, static_cast<std::uint64_t>(r)});
        rec.measurement = testbed_.measure(Context{.seed = rec.measurement_seed}, current,
                                           rec.config, MeasureOptions(options_.window_s));
        samples.push_back(std::move(rec));
        ++measurements_;
      }
    }
    cached->second.assign(samples.begin() + static_cast<std::ptrdiff_t>(first), samples.end());
  }
  if (!changed.empty()) {
    auto t = table_.refreshed(current, samples);
    if (!t) return t.error().wrap("re-profiling changed models alone");
    table_ = std::move(*t);
    ++refreshes_;
    for (std::size_t m : changed) profiled_[m] = current.models[m].demand;
  }
  auto compiled = CompiledSurrogate::compile(surrogate_, current, &table_);
  if (!compiled) return compiled.error();
  const double z = normal_quantile(options_.confidence);
  upper_.assign(current.models.size() * kTargetCount, 1.0f);
  for (std::size_t m = 0; m < current.models.size(); ++m) {
    for (Target t : surrogate::kAllTargets) {
      upper_[m * kTargetCount + static_cast<std::size_t>(t)] = compiled->upper_factor(m, t, z);
    }
  }
  return std::unique_ptr<Predictor>(
      std::make_unique<SurrogatePredictor>(std::move(*compiled), options_.burst, current.device));
}

std::string SurrogateSource::describe() const {
  return "surrogate " + std::string(surrogate::to_string(surrogate_.kind())) + "/" +
         std::string(surrogate::to_string(surrogate_.regressor_kind()));
}

Status SurrogateSource::adopt(surrogate::Surrogate refit) {
  if (refit.signature().size() != surrogate_.signature().size()) {
    return Error("the refit surrogate has " + std::to_string(refit.signature().size()) +
                 " models, the source " + std::to_string(surrogate_.signature().size()));
  }
  surrogate_ = std::move(refit);
  return {};
}

ErrorPriors SurrogateSource::priors(const Workload& current) {
  ErrorPriors out(current.models.size());
  for (const auto& h : surrogate_.heads()) {
    if (h.model >= out.size()) continue;
    const auto p = priors_from_error_model(h.error, h.targets);
    for (Target t : h.targets) {
      out[h.model][static_cast<std::size_t>(t)] = p[static_cast<std::size_t>(t)];
    }
  }
  return out;
}

LoadTable SurrogateSource::loads(const Workload& current) {
  LoadTable out(current.models.size());
  for (std::size_t m = 0; m < current.models.size() && m < table_.models(); ++m) {
    out[m].resize(table_.local_count(m), 0.0f);
    for (std::size_t l = 0; l < table_.local_count(m); ++l) {
      const auto& p = table_.at(m, l);
      if (p.ok()) out[m][l] = static_cast<float>(p.sm_util + p.mem_bw_util);
    }
  }
  return out;
}

std::vector<double> SurrogateSource::margins(const Workload& current) {
  std::vector<double> out(current.models.size(), 0.0);
  if (upper_.size() != current.models.size() * kTargetCount) return out;
  for (std::size_t m = 0; m < current.models.size(); ++m) {
    const Sla& sla = current.models[m].sla;
    auto use = [&](const std::optional<double>& limit, Target t) {
      if (!limit) return;
      const double f = upper_[m * kTargetCount + static_cast<std::size_t>(t)];
      if (std::isfinite(f)) out[m] = std::max(out[m], f - 1.0);
    };
    use(sla.latency_ms_p95, Target::kLatencyP95);
    use(sla.ttft_ms_p95, Target::kTtftP95);
    use(sla.tpot_ms_p95, Target::kTpotP95);
  }
  return out;
}

}  // namespace corun
