#pragma once

// An enum's names, written once: one table from which to_string, parsing and the list of names
// (help texts, did-you-mean suggestions) all read, instead of a switch, a parse list and a
// names vector that must agree.

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corun {

/// @brief One enumerator and its name.
template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

/// @brief The names of an enum, in the order of the table.
///
/// @code
///   constexpr EnumNames<Precision, 2> kNames{{{{Precision::kFp32, "fp32"},
///                                              {Precision::kFp16, "fp16"}}}};
///   kNames.name(Precision::kFp16);  // "fp16"
///   kNames.parse("fp32");           // Precision::kFp32
///   kNames.names();                 // {"fp32", "fp16"}
/// @endcode
template <class E, std::size_t N>
struct EnumNames {
  std::array<EnumName<E>, N> table;

  /// @brief The name of `v`; "unknown" for a value outside the table.
  [[nodiscard]] constexpr std::string_view name(E v) const {
    for (const auto& e : table) {
      if (e.value == v) return e.name;
    }
    return "unknown";
  }
  /// @brief The enumerator called `s` (exact match), or none.
  [[nodiscard]] constexpr std::optional<E> parse(std::string_view s) const {
    for (const auto& e : table) {
      if (e.name == s) return e.value;
    }
    return std::nullopt;
  }
  /// @brief Every name, in table order.
  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<std::string> out;
    out.reserve(N);
    for (const auto& e : table) out.emplace_back(e.name);
    return out;
  }
  /// @brief Every enumerator, in table order.
  [[nodiscard]] constexpr std::array<E, N> values() const {
    std::array<E, N> out{};
    for (std::size_t i = 0; i < N; ++i) out[i] = table[i].value;
    return out;
  }
};

}  // namespace corun
