#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace corun {

/// @brief Levenshtein distance (insertions, deletions, substitutions; case-sensitive).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// @brief The candidate closest to `word` by edit distance, or "" when none is plausibly a
/// misspelling (distance above max(2, |word|/3)). Used for "did you mean" suggestions.
std::string nearest(std::string_view word, std::span<const std::string> candidates);

/// @brief " (did you mean 'x'?)" or "" when nearest() finds nothing.
std::string did_you_mean(std::string_view word, std::span<const std::string> candidates);

/// @brief Joins with a separator.
std::string join(std::span<const std::string> parts, std::string_view sep);

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
