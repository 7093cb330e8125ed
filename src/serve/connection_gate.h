#pragma once

// Private to the serve layer: the event-driven front of HttpServer (server.cc).

#include <chrono>
#include <cstddef>
#include <functional>
#include "corun/core/mutex.h"
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "corun/core/result.h"

namespace corun::serve {

/// @brief Limits the gate enforces before a request reaches a worker thread.
struct GateOptions {
  /// A kept-alive (or fresh) connection that starts no request for this long is closed.
  std::chrono::milliseconds idle_timeout{5000};
  /// A request must arrive whole (header section and body) within this time of its first
  /// byte; a slower one is answered 408 and its connection closed.
  std::chrono::milliseconds request_timeout{10000};
  /// Open connections beyond this are answered 503 and closed at once.
  std::size_t max_connections = 1024;
  /// A header section still unfinished at this size is answered 431 without reading more.
  std::size_t max_head_bytes = 24 * 1024;
  /// A body declared larger than this goes to the parser at once (which answers 413).
  std::size_t max_body_bytes = 64 * 1024;
};

/// @brief Holds every open connection in one epoll loop until its next request is buffered
/// whole, so that idle, slow (slowloris headers or body) and flooding clients cost a file
/// descriptor and a buffer, never a worker thread. A complete request (or one whose framing
/// the parser will refuse without reading further: a Content-Length that is not a length, a
/// body over the limit) is handed to `dispatch` with the bytes buffered so far; the worker
/// answers it and gives the connection back with finish().
///
/// Thread-safety: admit() and finish() may be called from any thread; `dispatch` and `refuse`
/// are called on the gate's thread and must not block (dispatch queues work elsewhere).
class ConnectionGate {
 public:
  /// Hands a connection with a whole request in `buffered` to a worker.
  using Dispatch = std::function<void(int fd, std::string buffered)>;
  /// The full HTTP response (status line to body) that refuses a request with `status`
  /// (408, 431, 503) for `reason`; it must say `Connection: close`.
  using Refuse = std::function<std::string(int status, const std::string& reason)>;

  ConnectionGate(GateOptions options, Dispatch dispatch, Refuse refuse);
  ~ConnectionGate();
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  /// @brief Creates the epoll instance and starts the gate's thread.
  Status start();
  /// @brief Takes a newly accepted connection (the gate owns it from now on).
  void admit(int fd);
  /// @brief Gives back a dispatched connection after its response: kept open with the bytes
  /// the worker did not consume (a pipelined request), or closed gracefully.
  void finish(int fd, bool keep_open, std::string leftover);
  /// @brief Stops the thread and closes every connection it holds; connections still with a
  /// worker are closed when they are finished. Idempotent.
  void stop();
  /// @brief Connections open now (held, dispatched or closing). For tests and metrics.
  [[nodiscard]] std::size_t open_connections() const;

 private:
  enum class State { kIdle, kReading, kDispatched, kDraining };
  struct Conn {
    State state = State::kIdle;
    bool watched = false;  ///< registered with epoll
    std::string buffer;
    std::chrono::steady_clock::time_point deadline;
  };
  struct Handback {
    int fd;
    bool admit;  ///< a new connection (else a finished one)
    bool keep_open;
    std::string leftover;
  };
  using Clock = std::chrono::steady_clock;

  void loop();
  void take_inbox();
  void on_readable(int fd, Conn& c);
  /// Dispatches, refuses or keeps waiting, by what `c.buffer` holds.
  void advance(int fd, Conn& c);
  void refuse(int fd, Conn& c, int status, const std::string& reason);
  /// Half-closes and reads what the client still sends for a moment, so that its unread
  /// request bytes do not turn the close into a reset that destroys the response in flight.
  void drain(int fd, Conn& c);
  void close_now(int fd);
  void sweep();
  void watch(int fd, Conn& c, bool on);

  GateOptions options_;
  Dispatch dispatch_;
  Refuse refuse_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;

  std::unordered_map<int, Conn> conns_;  ///< the gate thread's only
  Clock::time_point next_sweep_;         ///< the gate thread's only

  mutable Mutex inbox_mutex_;
  std::vector<Handback> inbox_ CORUN_GUARDED_BY(inbox_mutex_);
  bool stopped_ CORUN_GUARDED_BY(inbox_mutex_) = false;
  std::size_t open_ CORUN_GUARDED_BY(inbox_mutex_) = 0;
};

/// @brief How much of `buffered` one request takes, once it is all there: the header section
/// and the body its framing declares (Content-Length, or chunked up to the last chunk and
/// trailers). Returns 0 while more bytes are needed, and `buffered.size()` when the framing is
/// one the parser refuses without reading the body (so it is handed over at once).
/// `head_end` receives the offset just past the header section (0 when it is not complete).
/// Thread-safety: pure function.
std::size_t request_extent(const std::string& buffered, std::size_t max_body_bytes,
                           std::size_t& head_end);

}  // namespace corun::serve
