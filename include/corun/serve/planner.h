#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "corun/core/mutex.h"
#include "corun/core/result.h"

namespace corun::serve {

/// @brief Where the planner thread stands (GET /healthz).
struct PlannerStatus {
  bool pending = false;     ///< a re-plan is requested and not started
  bool replanning = false;  ///< a re-plan is running
  std::string last_error;   ///< why the last re-plan failed ("" = it did not)
};

/// @brief The thread that re-plans `corun serve`'s models: requests coalesce (a burst of events
/// costs one re-plan, whose reason lists the burst's distinct events in order, ", "-separated,
/// at most kMaxReasons of them), re-plans start at least
/// `min_interval_ms` apart, and the thread runs at a lower priority than request handlers.
/// What a re-plan does is the `plan` function it is given (Service::plan_once).
/// Thread-safety: request(), status() and stop() may be called from any thread; `plan` runs on
/// the planner thread only, one call at a time, with no lock of this class held.
class PlannerThread {
 public:
  /// @brief A re-plan for the given reason; a failure is logged and shown by status().
  using PlanFn = std::function<Status(const std::string& reason)>;

  /// @brief How many distinct events one re-plan's reason names; later ones still fold into it.
  static constexpr int kMaxReasons = 8;

  PlannerThread(PlanFn plan, int min_interval_ms);
  ~PlannerThread();
  PlannerThread(const PlannerThread&) = delete;
  PlannerThread& operator=(const PlannerThread&) = delete;

  /// @brief Starts the thread; `initial_reason` (when not empty) is a re-plan due at once.
  void start(const std::string& initial_reason);
  /// @brief Asks for a re-plan (coalesced with one that is pending; `reason` may itself be a
  /// ", "-separated list, as a re-plan that is asked again passes its own).
  void request(const std::string& reason);
  /// @brief A consistent snapshot of the planner's state.
  [[nodiscard]] PlannerStatus status() const;
  /// @brief Stops the thread after the re-plan in progress (if any); idempotent.
  void stop();

 private:
  void loop();

  PlanFn plan_;
  std::chrono::milliseconds min_interval_;
  mutable Mutex mutex_;
  CondVar cv_;
  bool pending_ CORUN_GUARDED_BY(mutex_) = false;
  std::string reason_ CORUN_GUARDED_BY(mutex_);
  bool replanning_ CORUN_GUARDED_BY(mutex_) = false;
  bool stopping_ CORUN_GUARDED_BY(mutex_) = false;
  std::string last_error_ CORUN_GUARDED_BY(mutex_);
  std::thread thread_;
};

}  // namespace corun::serve
