// The planner thread's coalescing: events that arrive while a re-plan runs fold into the next
// one, and that re-plan names every distinct event (a client waiting for "demand cam0" finds it
// even when a telemetry-driven re-plan was already pending).
#include "corun/serve/planner.h"

#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "corun/core/mutex.h"

namespace corun::serve::planner_test {
namespace {

// A plan function that records each reason and holds its first call until released, so that the
// requests a test makes meanwhile are certain to coalesce.
class HeldPlans {
 public:
  PlannerThread::PlanFn fn() {
    return [this](const std::string& reason) -> Status {
      bool first = false;
      {
        MutexLock lock(mutex_);
        reasons_.push_back(reason);
        first = reasons_.size() == 1;
      }
      cv_.notify_all();
      if (first) {
        entered_.set_value();
        release_.get_future().wait();
      }
      return {};
    };
  }
  void wait_entered() { entered_.get_future().wait(); }
  void release() { release_.set_value(); }
  std::vector<std::string> wait_for(std::size_t n) {
    MutexLock lock(mutex_);
    while (reasons_.size() < n) cv_.wait(lock);
    return reasons_;
  }

 private:
  Mutex mutex_;
  CondVar cv_;
  std::vector<std::string> reasons_ CORUN_GUARDED_BY(mutex_);
  std::promise<void> entered_;
  std::promise<void> release_;
};

TEST(PlannerThread, ARePlanNamesEveryDistinctEventThatFoldedIntoIt) {
  HeldPlans plans;
  PlannerThread planner(plans.fn(), 0);
  planner.start("start");
  plans.wait_entered();  // "start" runs; what follows waits for it
  planner.request("learning");
  planner.request("demand cam0");
  planner.request("learning");               // already named
  planner.request("breach cam1, learning");  // a re-plan asked again passes its own list
  EXPECT_TRUE(planner.status().pending);
  plans.release();
  const auto reasons = plans.wait_for(2);
  planner.stop();
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_EQ(reasons[0], "start");
  EXPECT_EQ(reasons[1], "learning, demand cam0, breach cam1");
}

TEST(PlannerThread, AReasonNamesAtMostEightEvents) {
  HeldPlans plans;
  PlannerThread planner(plans.fn(), 0);
  planner.start("start");
  plans.wait_entered();
  // Hand-written: ten demand changes, of which the first eight are named.
  for (int i = 0; i < 10; ++i) planner.request("demand cam" + std::to_string(i));
  plans.release();
  const auto reasons = plans.wait_for(2);
  planner.stop();
  EXPECT_EQ(reasons[1],
            "demand cam0, demand cam1, demand cam2, demand cam3, demand cam4, demand cam5, "
            "demand cam6, demand cam7");
  EXPECT_EQ(PlannerThread::kMaxReasons, 8);
}

}  // namespace
}  // namespace corun::serve::planner_test
