#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace corun {

/// @brief SplitMix64 finaliser: a strong 64-bit mix, used to derive independent seeds.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// @brief FNV-1a of `text`, continuing from `h`: a stable 64-bit hash of names and files
/// (the same on every platform and run, unlike std::hash).
constexpr std::uint64_t fnv1a(std::string_view text, std::uint64_t h = 1469598103934665603ULL) {
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

/// @brief Derives a child seed from a parent seed and any number of stream identifiers, so
/// that each random decision has its own reproducible stream.
inline std::uint64_t derive_seed(std::uint64_t seed, std::initializer_list<std::uint64_t> ids) {
  std::uint64_t h = mix64(seed);
  for (auto id : ids) h = mix64(h ^ mix64(id));
  return h;
}

/// @brief Small, fast, deterministic generator (xoshiro256**), seeded by SplitMix64.
/// Same seed, same sequence, on every platform. Not thread-safe: one per thread or task.
class Rng {
 public:
  using result_type = std::uint64_t;
  explicit Rng(std::uint64_t seed) {
    std::uint64_t x = seed;
    for (auto& s : s_) {
      x += 0x9e3779b97f4a7c15ULL;
      s = mix64(x);
    }
  }
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~0ULL; }

  result_type operator()() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// @brief Uniform in [0, 1).
  double uniform() { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }
  /// @brief Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : (*this)() % n; }
  /// @brief Standard normal (Box-Muller; one value per call, no cached state).
  double normal() {
    double u1 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
  }
  std::uint64_t s_[4]{};
};

}  // namespace corun
