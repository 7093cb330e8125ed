#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

// Clang's thread-safety analysis (-Wthread-safety): the attributes below let the compiler check
// that shared state is only touched with its lock held. Other compilers ignore them.
// https://clang.llvm.org/docs/ThreadSafetyAnalysis.html
#if defined(__clang__)
#define CORUN_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define CORUN_THREAD_ANNOTATION(x)
#endif

/// A type that is a lock (a capability in clang's terms).
#define CORUN_CAPABILITY(name) CORUN_THREAD_ANNOTATION(capability(name))
/// An RAII type that holds a capability for its lifetime.
#define CORUN_SCOPED_CAPABILITY CORUN_THREAD_ANNOTATION(scoped_lockable)
/// A member that may be read or written only with the given lock held.
#define CORUN_GUARDED_BY(x) CORUN_THREAD_ANNOTATION(guarded_by(x))
/// A pointer member whose pointee may be used only with the given lock held.
#define CORUN_PT_GUARDED_BY(x) CORUN_THREAD_ANNOTATION(pt_guarded_by(x))
/// A function the caller must call with the given locks held.
#define CORUN_REQUIRES(...) CORUN_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
/// A function that acquires the given locks (none: the object itself).
#define CORUN_ACQUIRE(...) CORUN_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
/// A function that releases the given locks (none: the object itself).
#define CORUN_RELEASE(...) CORUN_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
/// A function the caller must not call with the given locks held (it takes them).
#define CORUN_EXCLUDES(...) CORUN_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
/// A lock order: this lock is taken after the given ones.
#define CORUN_ACQUIRED_AFTER(...) CORUN_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
/// The analysis does not follow a lambda into the scope that calls it: a lambda that a function
/// holding the mutex calls synchronously (a callback handed to a policy) opts out with this.
#define CORUN_NO_THREAD_SAFETY_ANALYSIS CORUN_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace corun {

/// @brief A mutex the thread-safety analysis knows: members annotated
/// `CORUN_GUARDED_BY(mutex_)` may only be touched while it is held, functions annotated
/// `CORUN_REQUIRES(mutex_)` only called with it held. Thread-safety: a mutex.
/// @code
/// Mutex mutex_;
/// int count_ CORUN_GUARDED_BY(mutex_) = 0;
/// void add() {
///   MutexLock lock(mutex_);
///   ++count_;
/// }
/// @endcode
class CORUN_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  /// @brief Blocks until the mutex is held by the caller.
  void lock() CORUN_ACQUIRE() { mutex_.lock(); }
  /// @brief Releases a mutex the caller holds.
  void unlock() CORUN_RELEASE() { mutex_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mutex_;
};

/// @brief Holds a Mutex from construction to destruction (std::lock_guard's role), and may
/// release and retake it in between (std::unique_lock's), e.g. around slow work.
/// Thread-safety: used by the one thread that made it.
class CORUN_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& m) CORUN_ACQUIRE(m) : mutex_(m) { mutex_.lock(); }
  ~MutexLock() CORUN_RELEASE() {
    if (held_) mutex_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  /// @brief Releases the mutex before the end of the scope.
  void unlock() CORUN_RELEASE() {
    mutex_.unlock();
    held_ = false;
  }
  /// @brief Takes the mutex again after unlock().
  void lock() CORUN_ACQUIRE() {
    mutex_.lock();
    held_ = true;
  }

 private:
  friend class CondVar;
  Mutex& mutex_;
  bool held_ = true;
};

/// @brief A condition variable waited on with a MutexLock held. Waits release the mutex while
/// they block and hold it again when they return, so the caller's view (held before and after)
/// is the analysis' view. Write the predicate as a loop in the caller, where the guarded state
/// it reads is checked against the lock:
/// @code
/// MutexLock lock(mutex_);
/// while (!ready_) cv_.wait(lock);
/// @endcode
/// Thread-safety: notify from any thread; wait with the lock of the state it waits for.
class CondVar {
 public:
  /// @brief Blocks until notified (or a spurious wake-up).
  void wait(MutexLock& lock) {
    std::unique_lock<std::mutex> native(lock.mutex_.mutex_, std::adopt_lock);
    cv_.wait(native);
    native.release();
  }
  /// @brief As wait(), or until `deadline`. Returns false when the deadline passed.
  template <class Clock, class Duration>
  bool wait_until(MutexLock& lock, const std::chrono::time_point<Clock, Duration>& deadline) {
    std::unique_lock<std::mutex> native(lock.mutex_.mutex_, std::adopt_lock);
    const bool notified = cv_.wait_until(native, deadline) == std::cv_status::no_timeout;
    native.release();
    return notified;
  }
  /// @brief Wakes one waiter.
  void notify_one() { cv_.notify_one(); }
  /// @brief Wakes every waiter.
  void notify_all() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace corun
