#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace corun {

/// @brief Thrown by json_number() for a value the target type cannot hold. Derives from
/// nlohmann::json::exception so that loaders which catch the library's errors report it the
/// same way (with the message, as a bad file).
class JsonNumberError : public nlohmann::json::exception {
 public:
  explicit JsonNumberError(const std::string& what) : exception(406, what.c_str()) {}
};

/// @brief Reads a JSON value as the arithmetic type T, refusing what T cannot represent
/// instead of converting it: nlohmann's get<T>() static_casts, which is undefined behaviour
/// for a double beyond T's range (1e300 as int or float) and silently wraps integers (-1 as
/// size_t). Integers must be JSON integers within T's range; floating types take any number
/// whose magnitude fits (NaN and infinities never occur in parsed JSON).
/// @throws JsonNumberError for a non-number, a fraction where an integer is expected, or a
/// value out of T's range.
template <class T>
T json_number(const nlohmann::json& j) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
  if (!j.is_number()) throw JsonNumberError("expected a number, got " + std::string(j.type_name()));
  if constexpr (std::is_integral_v<T>) {
    if (!j.is_number_integer()) throw JsonNumberError("expected an integer, got " + j.dump());
    const bool fits = j.is_number_unsigned() ? std::in_range<T>(j.get<std::uint64_t>())
                                             : std::in_range<T>(j.get<std::int64_t>());
    if (!fits) throw JsonNumberError(j.dump() + " is out of range");
    return j.is_number_unsigned() ? static_cast<T>(j.get<std::uint64_t>())
                                  : static_cast<T>(j.get<std::int64_t>());
  } else {
    const double v = j.get<double>();
    if (std::fabs(v) > static_cast<double>(std::numeric_limits<T>::max())) {
      throw JsonNumberError(j.dump() + " is out of range");
    }
    return static_cast<T>(v);
  }
}

/// @brief An array of numbers, each read by json_number<T>().
/// @throws JsonNumberError (or nlohmann's type_error for a non-array).
template <class T>
std::vector<T> json_numbers(const nlohmann::json& j) {
  if (!j.is_array()) throw JsonNumberError("expected an array, got " + std::string(j.type_name()));
  std::vector<T> out;
  out.reserve(j.size());
  for (const auto& v : j) out.push_back(json_number<T>(v));
  return out;
}

/// @brief json_number<T>(j[key]) when `key` is present, else `fallback`.
template <class T>
T json_number_or(const nlohmann::json& j, const char* key, T fallback) {
  const auto it = j.find(key);
  return it == j.end() ? fallback : json_number<T>(*it);
}

}  // namespace corun
