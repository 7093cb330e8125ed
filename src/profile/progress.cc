#include "corun/profile/progress.h"

#include <algorithm>
#include <cmath>

namespace corun::profile {

namespace {

constexpr int kBarWidth = 30;
// A terminal line is redrawn at most this often: redrawing on every sample of a fast testbed
// would cost more than the measurement.
constexpr double kRedrawIntervalS = 0.1;

}  // namespace

Progress::Progress(std::FILE* out, bool terminal, std::string label, std::uint64_t total,
                   std::uint64_t done_before, double min_line_interval_s)
    : out_(out),
      terminal_(terminal),
      label_(std::move(label)),
      total_(total),
      done_before_(done_before),
      last_done_(done_before),
      // A resumed run reports from the next tenth on, not the tenth it starts in.
      last_tenth_(total == 0 ? 10 : static_cast<int>(done_before * 10 / total)),
      min_line_interval_s_(min_line_interval_s),
      start_(Clock::now()),
      last_line_(start_),
      last_draw_(start_ - std::chrono::hours(1)) {
  if (out_ != nullptr && !terminal_) {
    std::fprintf(out_, "%s: %llu samples, %llu already stored\n", label_.c_str(),
                 static_cast<unsigned long long>(total_),
                 static_cast<unsigned long long>(done_before_));
    std::fflush(out_);
  }
}

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

double Progress::eta_s(std::uint64_t done) const {
  if (done <= done_before_) return -1;
  const double rate = static_cast<double>(done - done_before_) / std::max(1e-9, elapsed_s());
  return static_cast<double>(total_ - std::min(done, total_)) / rate;
}

std::string Progress::format_duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  char buf[48];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%llds", s);
  }
  return buf;
}

void Progress::update(std::uint64_t done) {
  last_done_ = done;
  if (out_ == nullptr) return;
  if (terminal_) {
    const auto now = Clock::now();
    if (std::chrono::duration<double>(now - last_draw_).count() < kRedrawIntervalS) return;
    last_draw_ = now;
    draw(done);
    return;
  }
  const int tenth = total_ == 0 ? 10 : static_cast<int>(done * 10 / total_);
  if (tenth <= last_tenth_ || tenth >= 10) return;
  const auto now = Clock::now();
  // Too soon after the last line: this tenth is reported by a later update, if one comes in time.
  if (std::chrono::duration<double>(now - last_line_).count() < min_line_interval_s_) return;
  last_tenth_ = tenth;
  if (done == done_before_) return;
  last_line_ = now;
  std::fprintf(out_, "%s: %llu/%llu (%d%%) elapsed %s eta %s\n", label_.c_str(),
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
               tenth * 10, format_duration(elapsed_s()).c_str(),
               format_duration(eta_s(done)).c_str());
  std::fflush(out_);
}

void Progress::draw(std::uint64_t done) {
  const double frac = total_ == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total_);
  const int filled = std::clamp(static_cast<int>(frac * kBarWidth), 0, kBarWidth);
  const double rate =
      static_cast<double>(done - std::min(done, done_before_)) / std::max(1e-9, elapsed_s());
  std::fprintf(out_, "\r%s [%s%s] %llu/%llu %5.1f%% %.1f/s eta %s\x1b[K", label_.c_str(),
               std::string(static_cast<std::size_t>(filled), '#').c_str(),
               std::string(static_cast<std::size_t>(kBarWidth - filled), ' ').c_str(),
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
               100 * frac, rate, format_duration(eta_s(done)).c_str());
  std::fflush(out_);
}

void Progress::finish() {
  if (out_ == nullptr || finished_) return;
  finished_ = true;
  if (terminal_) {
    draw(last_done_);
    std::fprintf(out_, "\n");
  } else {
    std::fprintf(out_, "%s: %llu/%llu done in %s\n", label_.c_str(),
                 static_cast<unsigned long long>(last_done_),
                 static_cast<unsigned long long>(total_), format_duration(elapsed_s()).c_str());
  }
  std::fflush(out_);
}

}  // namespace corun::profile
