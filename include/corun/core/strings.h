#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace corun {

/// @brief Levenshtein distance (insertions, deletions, substitutions; case-sensitive).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// @brief The candidate `word` most plausibly meant, or "" when none is. Used for "did you
/// mean" suggestions. In order:
/// 1. the candidate equal to `word` once both are lower-cased, '_' and ' ' are read as '-' and
///    a trailing -instruct, -chat or -hf is dropped from `word` ("Qwen2.5-7B-Instruct" ->
///    "qwen2.5-7b");
/// 2. when the first '-'-separated token of `word` holds a digit (a product line: a100,
///    qwen2.5), the candidates that start with that token, ranked by how many of `word`'s other
///    tokens they share (a size: 7b, 80gb), then by edit distance, then by their order
///    ("a100" -> "a100-80gb", not "v100");
/// 3. the candidate nearest by edit distance, if at most max(2, |word|/3) edits away.
/// @code
///   nearest("h100", {"h200", "h100-sxm", "h100-pcie"});  // "h100-sxm"
///   nearest("modles", {"models", "device"});              // "models"
/// @endcode
std::string nearest(std::string_view word, std::span<const std::string> candidates);

/// @brief " (did you mean 'x'?)" or "" when nearest() finds nothing.
std::string did_you_mean(std::string_view word, std::span<const std::string> candidates);

/// @brief Joins with a separator.
std::string join(std::span<const std::string> parts, std::string_view sep);

/// @brief `s` without the white space (std::isspace) at either end (a view into `s`).
std::string_view trim(std::string_view s);

/// @brief Splits on a single character; empty fields are kept.
std::vector<std::string> split(std::string_view s, char sep);

/// @brief `s` with &, <, > and " replaced by their entities: safe as HTML/SVG/XML text and
/// as a double-quoted attribute value.
std::string markup_escape(std::string_view s);

/// @brief Formats a double compactly ("640", "0.33", "1.5e-05").
std::string format_number(double v);

/// @brief A measured or predicted quantity for people: thousands separated and no decimals from
/// 1,000 up ("9,900"), one decimal below ("48.3"), two below 1 ("0.87").
std::string format_quantity(double v);

}  // namespace corun
