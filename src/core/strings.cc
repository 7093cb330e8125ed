#include "corun/core/strings.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

namespace corun {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1);
  std::vector<std::size_t> cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {

// Words a published model name carries after its size that name a fine-tune, not another
// model: "Qwen2.5-7B-Instruct" is the catalog's qwen2.5-7b.
constexpr std::string_view kVariantSuffixes[] = {"instruct", "chat", "hf"};

/// A name cut into tokens: lower case, with '_' and ' ' read as '-'.
std::vector<std::string> name_tokens(std::string_view name) {
  std::string s;
  s.reserve(name.size());
  for (const char c : name) {
    const bool sep = c == '-' || c == '_' || c == ' ';
    s += sep ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  std::vector<std::string> out;
  for (auto& t : split(s, '-')) {
    if (!t.empty()) out.push_back(std::move(t));
  }
  return out;
}

bool has_digit(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string nearest(std::string_view word, std::span<const std::string> candidates) {
  // 1. The same name once case, separators and a fine-tune suffix are set aside.
  std::vector<std::string> query = name_tokens(word);
  while (query.size() > 1 && std::find(std::begin(kVariantSuffixes), std::end(kVariantSuffixes),
                                       query.back()) != std::end(kVariantSuffixes)) {
    query.pop_back();
  }
  const std::string query_name = join(query, "-");
  std::vector<std::vector<std::string>> tokens;
  tokens.reserve(candidates.size());
  for (const auto& c : candidates) {
    tokens.push_back(name_tokens(c));
    if (!query_name.empty() && join(tokens.back(), "-") == query_name) return c;
  }

  // 2. The same family: a first token with a digit names a product line (a100, h100,
  // qwen2.5, yolo11), so a candidate that starts with it is a better guess than a near
  // spelling of another line (a100 -> a100-80gb, not v100). Among them, the one sharing most
  // of the query's other tokens (its size: 7b, 80gb), then the nearest spelling. A first
  // token without a digit (max, peak) is too common a word to mean the same thing.
  if (!query.empty() && has_digit(query.front())) {
    std::string best;
    std::size_t best_shared = 0;
    std::size_t best_d = 0;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const auto& t = tokens[i];
      if (t.empty() || t.front() != query.front()) continue;
      const auto shared = static_cast<std::size_t>(std::count_if(
          query.begin() + 1, query.end(),
          [&](const std::string& q) { return std::find(t.begin() + 1, t.end(), q) != t.end(); }));
      const std::size_t d = edit_distance(query_name, join(t, "-"));
      if (best.empty() || shared > best_shared || (shared == best_shared && d < best_d)) {
        best = candidates[i];
        best_shared = shared;
        best_d = d;
      }
    }
    if (!best.empty()) return best;
  }

  // 3. A plausible misspelling: the smallest edit distance, at most max(2, |word| / 3).
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  std::string best;
  std::size_t best_d = limit + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, std::span<const std::string> candidates) {
  std::string n = nearest(word, candidates);
  if (n.empty()) return "";
  return " (did you mean '" + n + "'?)";
}

std::string markup_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::string join(std::span<const std::string> parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.emplace_back(s.substr(start));
      return out;
    }
    out.emplace_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string format_quantity(double v) {
  if (!std::isfinite(v)) return v > 0 ? "inf" : (v < 0 ? "-inf" : "nan");
  char buf[64];
  const double a = std::fabs(v);
  if (a >= 1000) {
    std::snprintf(buf, sizeof buf, "%.0f", a);
    std::string digits = buf, out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
      out += digits[i];
    }
    return (v < 0 ? "-" : "") + out;
  }
  std::snprintf(buf, sizeof buf, a >= 1 ? "%.1f" : "%.2f", v);
  return buf;
}

}  // namespace corun
