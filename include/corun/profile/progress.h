#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace corun::profile {

/// @brief Reports how far a long job is. On a terminal: one line redrawn in place with a bar,
/// the count, the rate and the ETA. Otherwise (logs, pipes): a plain line at each new tenth of
/// the work reached at least `min_line_interval_s` after the previous line, and one at the end,
/// so that logs stay short and greppable and a job of a few seconds prints no "elapsed 0s eta
/// 0s" lines. Not thread-safe.
class Progress {
 public:
  /// @param out where to write (stderr in the CLI); nullptr silences the reporter.
  /// @param terminal draw the in-place bar (the CLI passes isatty(fileno(out))).
  /// @param label what is being done, e.g. "profile meanfield".
  /// @param total units of work; @param done_before units already done (a resumed campaign).
  /// @param min_line_interval_s least time between two plain lines (not on a terminal).
  Progress(std::FILE* out, bool terminal, std::string label, std::uint64_t total,
           std::uint64_t done_before, double min_line_interval_s = 5.0);

  /// @brief Records that `done` units (including done_before) are finished.
  void update(std::uint64_t done);
  /// @brief Writes the final line.
  void finish();

  /// @brief "1:02:03", "4:05" or "7s": a duration for humans.
  static std::string format_duration(double seconds);
  /// @brief Seconds left at the mean rate since start, or a negative value when unknown.
  [[nodiscard]] double eta_s(std::uint64_t done) const;

 private:
  using Clock = std::chrono::steady_clock;
  [[nodiscard]] double elapsed_s() const;
  void draw(std::uint64_t done);

  std::FILE* out_;
  bool terminal_;
  std::string label_;
  std::uint64_t total_;
  std::uint64_t done_before_;
  std::uint64_t last_done_ = 0;
  int last_tenth_ = -1;
  double min_line_interval_s_;
  Clock::time_point start_;
  Clock::time_point last_line_;
  Clock::time_point last_draw_;
  bool finished_ = false;
};

}  // namespace corun::profile
