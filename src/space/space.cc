#include "corun/space/space.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "corun/catalog/model.h"
#include "corun/core/check.h"

namespace corun {

namespace {

// Each co-running model is its own process with its own CUDA context. A context costs a few
// hundred MB of device memory on Ampere/Hopper (module images, heaps, cuBLAS/cuDNN workspaces);
// PyTorch users commonly observe 300-500 MB. We charge 0.4 GB.
constexpr double kRuntimeContextBytes = 0.4e9;

// Above this many joint configurations feasible_count() switches from exact enumeration to a
// dynamic programme over VRAM rounded up to 1 MiB (a lower bound on the feasible count).
constexpr std::uint64_t kMaxEnumerate = 20'000'000;

}  // namespace

double model_vram_bytes(const ModelSpec& m, const Settings& s) {
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
      // Every in-flight sequence holds its whole context in the KV cache at the end of decode.
      const double context = m.demand.prompt_tokens + m.demand.output_tokens;
      bytes += s.request_concurrency * context * kv_bytes_per_token(a, s.precision);
      // Prefill activations of one chunk (the largest transient).
      const int chunk = std::max(1, std::min(s.prefill_chunk, std::max(1, m.demand.prompt_tokens)));
      bytes += activation_bytes(a, 1, chunk, s.precision);
      break;
    }
  }
  return bytes;
}

ConfigSpace::ConfigSpace(const Workload& w) : capacity_bytes_(w.device.vram_bytes()) {
  for (const auto& m : w.models) {
    const std::size_t n = m.local_config_count();
    radix_.push_back(n);
    std::vector<double> v(n);
    for (std::size_t l = 0; l < n; ++l) v[l] = model_vram_bytes(m, m.settings(l));
    local_vram_.push_back(std::move(v));
    if (joint_count_ > std::numeric_limits<std::uint64_t>::max() / n) {
      joint_count_ = std::numeric_limits<std::uint64_t>::max();
    } else {
      joint_count_ *= n;
    }
  }
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

std::uint64_t ConfigSpace::feasible_count() const {
  if (radix_.empty()) return 0;
  double worst = 0;
  for (const auto& v : local_vram_) worst += *std::max_element(v.begin(), v.end());
  if (worst <= capacity_bytes_) return joint_count_;
  if (joint_count_ <= kMaxEnumerate) {
    std::uint64_t feasible = 0;
    JointConfig c(radix_.size());
    for (std::uint64_t i = 0; i < joint_count_; ++i) {
      decode(i, c);
      feasible += fits_vram(c) ? 1 : 0;
    }
    return feasible;
  }
  // Count by dynamic programming over memory in MiB buckets, rounding every model's need up:
  // a configuration counted here certainly fits.
  constexpr double kBucket = 1024.0 * 1024.0;
  const auto cap = static_cast<std::size_t>(capacity_bytes_ / kBucket);
  std::vector<double> ways(cap + 1, 0.0);
  ways[0] = 1;
  for (const auto& v : local_vram_) {
    std::vector<double> next(cap + 1, 0.0);
    for (std::size_t used = 0; used <= cap; ++used) {
      if (ways[used] == 0) continue;
      for (double b : v) {
        const auto need = static_cast<std::size_t>(std::ceil(b / kBucket));
        if (used + need <= cap) next[used + need] += ways[used];
      }
    }
    ways.swap(next);
  }
  double total = 0;
  for (double x : ways) total += x;
  return total >= 1.8e19 ? std::numeric_limits<std::uint64_t>::max()
                         : static_cast<std::uint64_t>(total);
}

}  // namespace corun
