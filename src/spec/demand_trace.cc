#include "corun/spec/demand_trace.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdint>

#include "corun/core/atomic_file.h"
#include "corun/core/rng.h"
#include "corun/core/strings.h"

namespace corun {

namespace {

// Input limits: the public traces hold tens of thousands of requests a day; a bound keeps a
// mistaken file (a video, a dump) from filling memory.
constexpr std::size_t kMaxRequests = 10'000'000;
constexpr long long kMaxTokens = 1 << 20;  // as a workload's prompt_tokens and output_tokens
// Past this many bad lines a file is not a trace: the rest are counted, not listed.
constexpr std::size_t kMaxReportedLines = 20;

// A wall-clock time split into whole seconds since 1970-01-01 and nanoseconds, so that the
// differences of a day's timestamps keep their 100 ns digits (a double of ~1.7e9 s would not).
struct Instant {
  std::int64_t s = 0;
  std::int64_t ns = 0;
  bool operator<(const Instant& o) const { return s != o.s ? s < o.s : ns < o.ns; }
};

// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int days_in_month(int y, int m) {
  static constexpr std::array<int, 12> kDays = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap(y) ? 29 : kDays[static_cast<std::size_t>(m - 1)];
}

// `n` decimal digits at `s[pos]`, or -1.
int digits_at(std::string_view s, std::size_t pos, std::size_t n) {
  if (pos + n > s.size()) return -1;
  int v = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

// `YYYY-MM-DD HH:MM:SS[.f...]` (1 to 9 fraction digits). Returns the reason it is not one.
std::optional<Instant> parse_timestamp(std::string_view s, std::string& why) {
  const int y = digits_at(s, 0, 4), mo = digits_at(s, 5, 2), d = digits_at(s, 8, 2);
  const int h = digits_at(s, 11, 2), mi = digits_at(s, 14, 2), sec = digits_at(s, 17, 2);
  const bool shape = s.size() >= 19 && s[4] == '-' && s[7] == '-' && s[10] == ' ' &&
                     s[13] == ':' && s[16] == ':';
  if (!shape || y < 0 || mo < 0 || d < 0 || h < 0 || mi < 0 || sec < 0) {
    why = "not a timestamp '" + std::string(s) + "' (expected YYYY-MM-DD HH:MM:SS[.fraction])";
    return std::nullopt;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 59) {
    why = "no such time '" + std::string(s) + "'";
    return std::nullopt;
  }
  Instant t;
  t.s = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 +
        h * 3600 + mi * 60 + sec;
  if (s.size() > 19) {
    const std::string_view frac = s.substr(20);
    if (s[19] != '.' || frac.empty() || frac.size() > 9 ||
        digits_at(frac, 0, frac.size()) < 0) {
      why = "not a timestamp '" + std::string(s) + "' (the fraction of a second is '.' and 1 to "
            "9 digits)";
      return std::nullopt;
    }
    std::int64_t ns = digits_at(frac, 0, frac.size());
    for (std::size_t i = frac.size(); i < 9; ++i) ns *= 10;
    t.ns = ns;
  }
  return t;
}

std::optional<int> parse_tokens(std::string_view s, std::string& why) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
    why = "not a whole number '" + std::string(s) + "'";
    return std::nullopt;
  }
  if (v < 0 || v > kMaxTokens) {
    why = "value " + std::string(s) + " is out of range [0, " + std::to_string(kMaxTokens) + "]";
    return std::nullopt;
  }
  return static_cast<int>(v);
}

// Blanks around a CSV field, and the CR of a CRLF line end.
std::string_view trim_field(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::string lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// " (did you mean 'TIMESTAMP'?)": a column misspelt is often only in another case.
std::string nearest_column(const std::string& name) {
  const std::vector<std::string> columns = {std::string(DemandTrace::kTimestamp),
                                            std::string(DemandTrace::kContextTokens),
                                            std::string(DemandTrace::kGeneratedTokens)};
  std::vector<std::string> lower;
  for (const auto& c : columns) lower.push_back(lowered(c));
  const std::string hint = did_you_mean(lowered(name), lower);
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (hint == " (did you mean '" + lower[i] + "'?)") return " (did you mean '" + columns[i] + "'?)";
  }
  return hint;
}

}  // namespace

std::optional<DemandTrace> DemandTrace::parse(std::string_view text, const std::string& file,
                                              Diagnostics& diags) {
  const std::size_t before = diags.items().size();
  std::size_t bad_lines = 0;
  auto report = [&](int line, std::string_view column, std::string reason) {
    if (++bad_lines <= kMaxReportedLines) {
      diags.add({file, line, 0, std::string(column), std::move(reason)});
    }
  };
  static const std::vector<std::string> kColumns = {
      std::string(kTimestamp), std::string(kContextTokens), std::string(kGeneratedTokens)};
  // Column positions of TIMESTAMP, ContextTokens, GeneratedTokens, from the header.
  std::array<std::size_t, 3> at{0, 1, 2};
  bool header = false;
  std::vector<std::pair<Instant, TraceRequest>> rows;
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte order mark
  int line = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string_view raw = trim_field(text.substr(pos, eol - pos));
    pos = eol + 1;
    ++line;
    if (raw.empty()) continue;
    std::vector<std::string> fields = split(raw, ',');
    for (auto& f : fields) f = std::string(trim_field(f));
    if (!header) {
      header = true;
      std::array<bool, 3> seen{false, false, false};
      bool ok = true;
      for (std::size_t i = 0; i < fields.size(); ++i) {
        const auto c = std::find(kColumns.begin(), kColumns.end(), fields[i]);
        if (c == kColumns.end()) {
          report(line, "", "unknown column '" + fields[i] + "'" + nearest_column(fields[i]) +
                               " (a trace has the columns " + join(kColumns, ", ") + ")");
          ok = false;
          continue;
        }
        const auto k = static_cast<std::size_t>(c - kColumns.begin());
        if (seen[k]) {
          report(line, fields[i], "column named twice");
          ok = false;
        }
        seen[k] = true;
        at[k] = i;
      }
      for (std::size_t k = 0; k < 3; ++k) {
        if (!seen[k]) {
          report(line, kColumns[k], "missing column (the header must name " +
                                        join(kColumns, ", ") + ")");
          ok = false;
        }
      }
      if (!ok) break;  // the rows cannot be read without their columns
      continue;
    }
    if (fields.size() != 3) {
      if (fields.size() < 3) {
        // The first column the line lacks: fields fill positions 0, 1, 2 in order.
        std::size_t missing = 0;
        for (std::size_t k = 0; k < 3; ++k) {
          if (at[k] >= fields.size()) {
            missing = k;
            break;
          }
        }
        report(line, kColumns[missing], "missing field (the line has " +
                                            std::to_string(fields.size()) + " of 3)");
      } else {
        report(line, "", "3 fields expected (" + join(kColumns, ", ") + "), got " +
                             std::to_string(fields.size()));
      }
      continue;
    }
    std::string why;
    const auto t = parse_timestamp(fields[at[0]], why);
    if (!t) report(line, kTimestamp, why);
    const auto context = parse_tokens(fields[at[1]], why);
    if (!context) report(line, kContextTokens, why);
    const auto generated = parse_tokens(fields[at[2]], why);
    if (!generated) report(line, kGeneratedTokens, why);
    if (!t || !context || !generated) continue;
    if (rows.size() >= kMaxRequests) {
      report(line, "", "more than " + std::to_string(kMaxRequests) + " requests");
      break;
    }
    rows.push_back({*t, TraceRequest{0, *context, *generated}});
  }
  if (!header) {
    report(std::max(line, 1), "", "empty trace: expected the header " + join(kColumns, ",") +
                                      " and one request per line");
  } else if (rows.empty() && bad_lines == 0) {
    report(line, "", "no requests after the header");
  }
  if (bad_lines > kMaxReportedLines) {
    diags.add({file, 0, 0, "", std::to_string(bad_lines - kMaxReportedLines) +
                                   " more problems not listed"});
  }
  if (diags.items().size() != before) return std::nullopt;
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  DemandTrace trace;
  trace.text_hash_ = fnv1a(text);
  trace.requests_.reserve(rows.size());
  const Instant first = rows.front().first;
  for (auto& [t, r] : rows) {
    r.t_s = static_cast<double>(t.s - first.s) + 1e-9 * static_cast<double>(t.ns - first.ns);
    trace.requests_.push_back(r);
  }
  return trace;
}

Result<DemandTrace> DemandTrace::load(const std::filesystem::path& path) {
  auto text = read_file(path);
  if (!text) return text.error();
  Diagnostics diags;
  auto trace = parse(*text, path.string(), diags);
  if (!trace) return diags.to_error();
  return std::move(*trace);
}

TraceWindow DemandTrace::window(double from_s, double to_s) const {
  CORUN_CHECK_MSG(to_s > from_s, "a trace window has a positive length");
  const auto by_time = [](const TraceRequest& r, double t) { return r.t_s < t; };
  const auto first = std::lower_bound(requests_.begin(), requests_.end(), from_s, by_time);
  const auto last = std::lower_bound(first, requests_.end(), to_s, by_time);
  TraceWindow w;
  w.requests = static_cast<std::size_t>(last - first);
  w.rps = static_cast<double>(w.requests) / (to_s - from_s);
  if (w.requests == 0) return w;
  double context = 0, generated = 0;
  for (auto r = first; r != last; ++r) {
    context += r->context_tokens;
    generated += r->generated_tokens;
  }
  const auto n = static_cast<double>(w.requests);
  w.mean_context_tokens = context / n;
  w.mean_generated_tokens = generated / n;
  if (w.requests >= 3) {
    double sum = 0, sum2 = 0;
    for (auto r = first + 1; r != last; ++r) {
      const double gap = r->t_s - (r - 1)->t_s;
      sum += gap;
      sum2 += gap * gap;
    }
    const double gaps = n - 1;
    const double mean = sum / gaps;
    if (mean > 0) w.arrival_cv = std::sqrt(std::max(0.0, sum2 / gaps - mean * mean)) / mean;
  }
  return w;
}

}  // namespace corun
