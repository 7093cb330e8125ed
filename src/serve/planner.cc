#include "corun/serve/planner.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string_view>

namespace corun::serve {

namespace {

/// @brief Appends each ", "-separated event of `reason` that `into` does not name yet, up to
/// PlannerThread::kMaxReasons events in all.
void fold_reason(std::string& into, const std::string& reason) {
  constexpr std::string_view kSep = ", ";
  auto count = [&] {
    if (into.empty()) return 0;
    int n = 1;
    for (auto at = into.find(kSep); at != std::string::npos; at = into.find(kSep, at + 1)) ++n;
    return n;
  };
  auto names = [&](std::string_view event) {
    for (std::size_t from = 0; from <= into.size();) {
      const auto end = std::min(into.find(kSep, from), into.size());
      if (std::string_view(into).substr(from, end - from) == event) return true;
      from = end + kSep.size();
    }
    return false;
  };
  for (std::size_t from = 0; from < reason.size();) {
    const auto end = std::min(reason.find(kSep, from), reason.size());
    const std::string_view event = std::string_view(reason).substr(from, end - from);
    from = end + kSep.size();
    if (event.empty() || names(event)) continue;
    if (count() >= PlannerThread::kMaxReasons) return;
    if (!into.empty()) into += kSep;
    into += event;
  }
}

}  // namespace

PlannerThread::PlannerThread(PlanFn plan, int min_interval_ms)
    : plan_(std::move(plan)), min_interval_(min_interval_ms) {}

PlannerThread::~PlannerThread() { stop(); }

void PlannerThread::start(const std::string& initial_reason) {
  {
    MutexLock lock(mutex_);
    if (!initial_reason.empty()) {
      pending_ = true;
      reason_.clear();
      fold_reason(reason_, initial_reason);
    }
  }
  thread_ = std::thread([this] { loop(); });
}

void PlannerThread::request(const std::string& reason) {
  {
    MutexLock lock(mutex_);
    if (!pending_) reason_.clear();
    fold_reason(reason_, reason);
    pending_ = true;
  }
  cv_.notify_one();
}

PlannerStatus PlannerThread::status() const {
  MutexLock lock(mutex_);
  return {pending_, replanning_, last_error_};
}

void PlannerThread::stop() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PlannerThread::loop() {
  // The planner yields the CPU to request handlers: a re-plan can wait a few milliseconds, a
  // telemetry post should not (Linux: nice applies per thread).
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10) != 0) {
    std::fprintf(stderr, "corun serve: could not lower the planner's priority\n");
  }
  auto last = std::chrono::steady_clock::now() - std::chrono::hours(1);
  MutexLock lock(mutex_);
  while (true) {
    while (!stopping_ && !pending_) cv_.wait(lock);
    if (stopping_) return;
    const auto next = last + min_interval_;
    while (!stopping_ && std::chrono::steady_clock::now() < next) {
      if (!cv_.wait_until(lock, next)) break;
    }
    if (stopping_) return;
    const std::string reason = reason_;
    pending_ = false;
    replanning_ = true;
    lock.unlock();
    auto st = plan_(reason);
    if (!st) std::fprintf(stderr, "corun serve: planning failed: %s\n", st.error().what().c_str());
    last = std::chrono::steady_clock::now();
    lock.lock();
    replanning_ = false;
    last_error_ = st ? std::string() : st.error().what();
  }
}

}  // namespace corun::serve
