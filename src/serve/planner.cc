#include "corun/serve/planner.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

namespace corun::serve {

PlannerThread::PlannerThread(PlanFn plan, int min_interval_ms)
    : plan_(std::move(plan)), min_interval_(min_interval_ms) {}

PlannerThread::~PlannerThread() { stop(); }

void PlannerThread::start(const std::string& initial_reason) {
  {
    MutexLock lock(mutex_);
    if (!initial_reason.empty()) {
      pending_ = true;
      reason_ = initial_reason;
    }
  }
  thread_ = std::thread([this] { loop(); });
}

void PlannerThread::request(const std::string& reason) {
  {
    MutexLock lock(mutex_);
    if (!pending_) reason_ = reason;
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
