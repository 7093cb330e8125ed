#include "corun/space/space.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "corun/catalog/model.h"
#include "corun/core/check.h"

namespace corun {

namespace {

// Each co-running model is its own process with its own CUDA context. A context costs a few
// hundred MB of device memory on Ampere/Hopper (module images, heaps, cuBLAS/cuDNN workspaces);
// PyTorch users commonly observe 300-500 MB. We charge 0.4 GB.
constexpr double kRuntimeContextBytes = 0.4e9;

// Above this many joint configurations feasible_count() switches from exact enumeration to a
// dynamic programme over VRAM rounded up to 1 MiB or coarser (a lower bound on the feasible
// count).
constexpr std::uint64_t kMaxEnumerate = 20'000'000;

// Above this many steps (models x memory buckets x distinct needs) feasible_count() counts in
// coarser memory buckets, so that the count itself takes a few tenths of a second at most
// (0.35 s for 64 models of 262,144 configurations each).
constexpr double kMaxCountingWork = 2e8;

}  // namespace

ConfigCount ConfigCount::product(std::span<const std::size_t> factors) {
  std::uint64_t n = 1;
  double approx = 1;
  bool exact = true;
  for (const std::size_t f : factors) {
    if (f == 0) return exactly(0);  // even after an overflow: the product is exactly 0
    approx *= static_cast<double>(f);
    if (exact && n > std::numeric_limits<std::uint64_t>::max() / f) exact = false;
    if (exact) n *= f;
  }
  return exact ? exactly(n) : approximately(approx);
}

ConfigCount joint_config_count(const Workload& w) {
  std::vector<std::size_t> counts;
  counts.reserve(w.models.size());
  for (const auto& m : w.models) counts.push_back(m.local_config_count());
  return ConfigCount::product(counts);
}

std::uint64_t ConfigCount::value() const {
  CORUN_CHECK(exact_);
  return exact_value_;
}

std::string ConfigCount::to_string() const {
  if (exact_) return std::to_string(exact_value_);
  if (std::isinf(approx_)) return "more than 1.8e+308";
  char buf[48];
  std::snprintf(buf, sizeof buf, "about %.4g", approx_);
  return buf;
}

namespace {

// Memory of everything but an LLM's KV cache: runtime context, weights, activations.
double fixed_vram_bytes(const ModelSpec& m, const Settings& s) {
  const ModelArch& a = m.arch;
  double bytes = kRuntimeContextBytes + weight_bytes(a, s.precision);
  switch (a.family) {
    case ModelFamily::kVision:
      bytes += activation_bytes(a, s.batch, s.imgsz, s.precision);
      break;
    case ModelFamily::kEncoder:
    case ModelFamily::kSpeech:
      bytes += activation_bytes(a, s.batch * s.request_concurrency, 0, s.precision);
      break;
    case ModelFamily::kLlm: {
      // Prefill activations of one chunk (the largest transient).
      const int chunk = std::max(1, std::min(s.prefill_chunk, std::max(1, m.demand.prompt_tokens)));
      bytes += activation_bytes(a, 1, chunk, s.precision);
      break;
    }
  }
  return bytes;
}

// The KV cache beside `fixed` bytes of everything else (fixed_vram_bytes).
double kv_cache_bytes(const ModelSpec& m, const Settings& s, double device_bytes, double fixed) {
  if (m.arch.family != ModelFamily::kLlm) return 0;
  // Every in-flight sequence holds its whole context in the KV cache at the end of decode.
  const double per_sequence =
      (m.demand.prompt_tokens + m.demand.output_tokens) * kv_bytes_per_token(m.arch, s.precision);
  const double need = s.request_concurrency * per_sequence;
  const double room = kLlmEngineMemoryFraction * device_bytes - fixed;
  // KV-limited: the engine takes its share of the device when that still holds one sequence.
  return need > room && room >= per_sequence ? room : need;
}

}  // namespace

double llm_kv_cache_bytes(const ModelSpec& m, const Settings& s, double device_bytes) {
  return kv_cache_bytes(m, s, device_bytes, fixed_vram_bytes(m, s));
}

double llm_kv_sequences(const ModelSpec& m, const Settings& s, double device_bytes) {
  const double occupancy = (m.demand.prompt_tokens + 0.5 * m.demand.output_tokens) *
                           kv_bytes_per_token(m.arch, s.precision);
  if (!(occupancy > 0)) return std::numeric_limits<double>::infinity();
  return llm_kv_cache_bytes(m, s, device_bytes) / occupancy;
}

double model_vram_bytes(const ModelSpec& m, const Settings& s, double device_bytes) {
  const double fixed = fixed_vram_bytes(m, s);
  return fixed + kv_cache_bytes(m, s, device_bytes, fixed);
}

ConfigSpace::ConfigSpace(const Workload& w) : capacity_bytes_(w.device.vram_bytes()) {
  for (const auto& m : w.models) {
    const std::size_t n = m.local_config_count();
    radix_.push_back(n);
    std::vector<double> v(n);
    for (std::size_t l = 0; l < n; ++l) v[l] = model_vram_bytes(m, m.settings(l), capacity_bytes_);
    local_vram_.push_back(std::move(v));
  }
  joint_count_ = ConfigCount::product(radix_);
}

JointConfig ConfigSpace::decode(std::uint64_t i) const {
  JointConfig c(radix_.size());
  decode(i, c);
  return c;
}

void ConfigSpace::decode(std::uint64_t i, std::span<std::int32_t> out) const {
  CORUN_CHECK(out.size() == radix_.size());
  for (std::size_t k = radix_.size(); k-- > 0;) {
    out[k] = static_cast<std::int32_t>(i % radix_[k]);
    i /= radix_[k];
  }
}

std::uint64_t ConfigSpace::encode(std::span<const std::int32_t> c) const {
  CORUN_CHECK(c.size() == radix_.size());
  std::uint64_t i = 0;
  for (std::size_t k = 0; k < radix_.size(); ++k) {
    CORUN_CHECK(c[k] >= 0 && static_cast<std::size_t>(c[k]) < radix_[k]);
    i = i * radix_[k] + static_cast<std::uint64_t>(c[k]);
  }
  return i;
}

double ConfigSpace::vram_bytes(std::span<const std::int32_t> c) const {
  double total = 0;
  for (std::size_t k = 0; k < c.size() && k < radix_.size(); ++k) {
    if (c[k] != kAbsent) total += local_vram_[k][static_cast<std::size_t>(c[k])];
  }
  return total;
}

bool ConfigSpace::fits_vram(std::span<const std::int32_t> c) const {
  return vram_bytes(c) <= capacity_bytes_;
}

ConfigCount ConfigSpace::feasible_count() const {
  if (radix_.empty()) return ConfigCount::exactly(0);
  double worst = 0;
  for (const auto& v : local_vram_) worst += *std::max_element(v.begin(), v.end());
  if (worst <= capacity_bytes_) return joint_count_;
  if (joint_count_.exact() && joint_count_.value() <= kMaxEnumerate) {
    std::uint64_t feasible = 0;
    JointConfig c(radix_.size());
    for (std::uint64_t i = 0; i < joint_count_.value(); ++i) {
      decode(i, c);
      feasible += fits_vram(c) ? 1 : 0;
    }
    return ConfigCount::exactly(feasible);
  }
  // Count by dynamic programming over memory in buckets, rounding every model's need up: a
  // configuration counted here certainly fits. Each model's local configurations are grouped
  // by their need in buckets, and the buckets start at 1 MiB and double until the work (models
  // x buckets x distinct needs) stays within kMaxCountingWork.
  double bucket = 1024.0 * 1024.0;
  std::size_t cap = 0;
  std::vector<std::vector<std::pair<std::size_t, double>>> needs;  // per model: (need, configs)
  const auto model_count = static_cast<double>(local_vram_.size());
  for (;; bucket *= 2) {
    // Every model has at least one need: skip bucket sizes too fine to ever fit the budget.
    if ((std::floor(capacity_bytes_ / bucket) + 1) * model_count > kMaxCountingWork) continue;
    cap = static_cast<std::size_t>(capacity_bytes_ / bucket);
    needs.assign(local_vram_.size(), {});
    std::vector<double> histogram(cap + 1);
    double work = 0;
    for (std::size_t m = 0; m < local_vram_.size(); ++m) {
      std::fill(histogram.begin(), histogram.end(), 0.0);
      for (double b : local_vram_[m]) {
        const double need = std::ceil(b / bucket);
        if (need <= static_cast<double>(cap)) histogram[static_cast<std::size_t>(need)] += 1;
      }
      for (std::size_t d = 0; d <= cap; ++d) {
        if (histogram[d] > 0) needs[m].emplace_back(d, histogram[d]);
      }
      work += static_cast<double>(cap + 1) * static_cast<double>(needs[m].size());
    }
    if (work <= kMaxCountingWork) break;
  }
  std::vector<double> ways(cap + 1, 0.0);
  ways[0] = 1;
  for (const auto& model_needs : needs) {
    std::vector<double> next(cap + 1, 0.0);
    for (std::size_t used = 0; used <= cap; ++used) {
      if (ways[used] == 0) continue;
      for (const auto& [need, configs] : model_needs) {
        if (used + need > cap) break;  // needs are in increasing order
        next[used + need] += ways[used] * configs;
      }
    }
    ways.swap(next);
  }
  double total = 0;
  for (double x : ways) total += x;
  return ConfigCount::approximately(total);
}

}  // namespace corun
