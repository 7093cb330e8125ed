// The plan hook's runner: one `/bin/sh -c` child in a process group of its own, driven by a
// poll() loop that writes its stdin and reads its output (non-blocking both, so neither side
// can wait on the other) until the child exits or its time runs out.

#include "corun/serve/plan_hook.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace corun::serve {

namespace {

using Clock = std::chrono::steady_clock;

/// How often the loop looks for the leader's exit while it is silent or its helpers hold the
/// output pipe open (poll() wakes at once on output and on the pipe's last writer closing).
constexpr int kSliceMs = 20;
/// Bytes per read(); also what one pump round reads at most, times kChunksPerRound, so that a
/// hook flooding its output cannot keep the loop from its clock and its stdin writes.
constexpr std::size_t kReadChunk = std::size_t{64} * 1024;
constexpr std::size_t kChunksPerRound = 16;
/// What is read after the leader has been reaped: all it wrote is already in the pipe, at most
/// the pipe's capacity, itself at most Linux's default /proc/sys/fs/pipe-max-size (1 MiB). The
/// bound keeps a helper that goes on writing from holding the caller here.
constexpr std::size_t kFinalDrainBytes = std::size_t{1024} * 1024;

/// Owns one file descriptor; closes it when done.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  /// Closes the descriptor held (never retried on EINTR: Linux has released it by then).
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

std::string errno_text(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

int ms_until(Clock::time_point deadline, Clock::time_point now) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<int>(std::clamp<decltype(left)>(left, 0, kSliceMs));
}

/// Blocks SIGPIPE on the calling thread while it lives, so that writing to a hook that has
/// closed its stdin fails with EPIPE instead of ending the server (SIGPIPE's default action),
/// without touching the process-wide disposition that other threads rely on. SIGPIPE from a
/// write is sent to the writing thread, so a blocked one stays pending there: it is consumed
/// before the old mask comes back, unless one was pending already (then it is not ours).
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigemptyset(&sigpipe_);
    sigaddset(&sigpipe_, SIGPIPE);
    // Cannot fail: the arguments are valid.
    pthread_sigmask(SIG_BLOCK, &sigpipe_, &saved_);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;
  ~ScopedSigpipeBlock() {
    if (raised_ && !was_pending_) {
      const timespec no_wait{0, 0};
      while (sigtimedwait(&sigpipe_, nullptr, &no_wait) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }

  /// A write failed with EPIPE: a SIGPIPE is pending on this thread.
  void note_raised() { raised_ = true; }

 private:
  sigset_t sigpipe_;
  sigset_t saved_;
  bool was_pending_ = false;
  bool raised_ = false;
};

/// The last `limit` bytes of a stream, counting what it drops; holds at most 2 * limit plus one
/// append, so trimming costs amortised O(1) per byte.
class TailBuffer {
 public:
  explicit TailBuffer(std::size_t limit) : limit_(limit) {}

  void append(const char* data, std::size_t n) {
    if (n >= limit_) {
      dropped_ += kept_.size() + (n - limit_);
      kept_.assign(data + (n - limit_), limit_);
      return;
    }
    kept_.append(data, n);
    if (kept_.size() > limit_ && kept_.size() - limit_ > limit_) trim();
  }
  /// The tail, at most `limit` bytes; the buffer is empty afterwards.
  std::string take() {
    trim();
    return std::move(kept_);
  }
  [[nodiscard]] std::size_t dropped() const { return dropped_; }

 private:
  void trim() {
    if (kept_.size() <= limit_) return;
    const std::size_t cut = kept_.size() - limit_;
    dropped_ += cut;
    kept_.erase(0, cut);
  }

  std::size_t limit_;
  std::string kept_;
  std::size_t dropped_ = 0;
};

/// Length of the well-formed UTF-8 sequence `s` starts with, or 0 when it starts with none
/// (RFC 3629, table 3-7 of the Unicode standard: no overlong forms, no surrogates, nothing
/// above U+10FFFF, which is what JSON encoders such as nlohmann::json accept).
std::size_t utf8_sequence_length(std::string_view s) {
  const auto byte = [&s](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;  // overlong below U+0800
    if (lead == 0xED) hi = 0x9F;  // surrogates U+D800..U+DFFF
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;  // overlong below U+10000
    if (lead == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return n;
}

/// U+FFFD REPLACEMENT CHARACTER in UTF-8.
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

/// `raw` as valid UTF-8 of at most `limit` bytes: each byte that starts no well-formed
/// sequence becomes U+FFFD (3 bytes, so the text can grow), and the front is cut, whole
/// characters at a time, to fit. `dropped` grows by the raw bytes cut. `cut_before` says that
/// `raw` is the tail of a longer stream, whose first character may have lost its lead byte.
std::string valid_utf8_tail(std::string_view raw, std::size_t limit, bool cut_before,
                            std::size_t& dropped) {
  std::size_t begin = 0;
  // Continuation bytes of a character whose lead was dropped are half a character, not garbage.
  while (cut_before && begin < raw.size() && begin < 3 && is_continuation(raw[begin])) ++begin;
  // Each unit: raw length, and its length once valid (the same, or the replacement's).
  auto unit = [&raw](std::size_t at) {
    const std::size_t n = utf8_sequence_length(raw.substr(at));
    return n > 0 ? std::pair{n, n} : std::pair{std::size_t{1}, kReplacement.size()};
  };
  std::size_t valid_size = 0;
  for (std::size_t at = begin; at < raw.size();) {
    const auto [raw_n, valid_n] = unit(at);
    valid_size += valid_n;
    at += raw_n;
  }
  while (valid_size > limit) {
    const auto [raw_n, valid_n] = unit(begin);
    valid_size -= valid_n;
    begin += raw_n;
  }
  dropped += begin;
  std::string out;
  out.reserve(valid_size);
  for (std::size_t at = begin; at < raw.size();) {
    const auto [raw_n, valid_n] = unit(at);
    if (raw_n == valid_n) {
      out.append(raw.substr(at, raw_n));
    } else {
      out.append(kReplacement);
    }
    at += raw_n;
  }
  return out;
}

/// A pipe whose ends are close-on-exec and above the standard streams. A server started with
/// a closed stdin would get descriptor 0 for a pipe end, and then dup2-ing the hook's pipes onto
/// 0, 1 and 2 one after the other could overwrite a pipe end before it is duplicated.
std::string make_pipe(UniqueFd& read_end, UniqueFd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errno_text("pipe", errno);
  read_end.reset(fds[0]);
  write_end.reset(fds[1]);
  for (UniqueFd* end : {&read_end, &write_end}) {
    if (end->get() > STDERR_FILENO) continue;
    const int moved = ::fcntl(end->get(), F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    if (moved < 0) return errno_text("fcntl", errno);
    end->reset(moved);
  }
  return {};
}

std::string set_non_blocking(const UniqueFd& fd) {
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return errno_text("fcntl", errno);
  }
  return {};
}

/// posix_spawn's file actions and attributes, destroyed when done.
struct SpawnSetup {
  SpawnSetup() {
    actions_ok = posix_spawn_file_actions_init(&actions) == 0;
    attributes_ok = posix_spawnattr_init(&attributes) == 0;
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
  ~SpawnSetup() {
    if (actions_ok) posix_spawn_file_actions_destroy(&actions);
    if (attributes_ok) posix_spawnattr_destroy(&attributes);
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  bool actions_ok = false;
  bool attributes_ok = false;
};

/// The child's side of the spawn: stdin from `in`, stdout and stderr into `out`; nothing else
/// inherited; a process group of its own; a signal state of its own.
int prepare_spawn(SpawnSetup& s, int in, int out) {
  if (!s.actions_ok || !s.attributes_ok) return ENOMEM;
  int rc = posix_spawn_file_actions_adddup2(&s.actions, in, STDIN_FILENO);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&s.actions, out, STDOUT_FILENO);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&s.actions, out, STDERR_FILENO);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  // Our pipes are close-on-exec, but descriptors that the server's libraries open without
  // O_CLOEXEC (or mark close-on-exec only after opening, a window another thread can spawn in)
  // would leak into the hook and its helpers, which may outlive the server and keep its
  // listening socket bound.
  if (rc == 0) rc = posix_spawn_file_actions_addclosefrom_np(&s.actions, STDERR_FILENO + 1);
#endif
  // A group of its own, so that a time-out reaches what the hook started, not just the shell.
  if (rc == 0) rc = posix_spawnattr_setpgroup(&s.attributes, 0);
  // The server blocks SIGINT and SIGTERM in every thread (it sigwait()s for them) and ignores
  // SIGPIPE; a child inherits both. A hook that cannot see SIGTERM ignores its time-out until
  // SIGKILL, and one that ignores SIGPIPE breaks `producer | head` pipelines in its script.
  sigset_t none, all_catchable;
  sigemptyset(&none);
  sigfillset(&all_catchable);
  sigdelset(&all_catchable, SIGKILL);
  sigdelset(&all_catchable, SIGSTOP);
  if (rc == 0) rc = posix_spawnattr_setsigmask(&s.attributes, &none);
  if (rc == 0) rc = posix_spawnattr_setsigdefault(&s.attributes, &all_catchable);
  if (rc == 0) {
    rc = posix_spawnattr_setflags(
        &s.attributes,
        static_cast<short>(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF));
  }
  return rc;
}

/// One run of the hook: the child, its pipes and what came out of them.
class HookRun {
 public:
  HookRun(const HookOptions& options, std::string_view input, ScopedSigpipeBlock& sigpipe)
      : input_(input),
        sigpipe_(sigpipe),
        output_limit_(options.max_output_bytes),
        tail_(options.max_output_bytes),
        buffer_(kReadChunk) {}
  HookRun(const HookRun&) = delete;
  HookRun& operator=(const HookRun&) = delete;
  // Every path reaps the leader; this is the backstop that keeps a zombie from being left.
  ~HookRun() {
    if (pid_ > 0 && !reaped_) {
      ::kill(-pid_, SIGKILL);
      reap(0);
    }
  }

  /// Starts `/bin/sh -c command`; "" on success, else why not.
  std::string start(const std::string& command);
  /// Waits up to `wait_ms` for the pipes, writes what stdin takes and reads what output holds.
  void pump(int wait_ms);
  /// Whether the leader has been reaped (now or before); `flags` WNOHANG asks without waiting.
  bool reap(int flags);
  /// SIGTERM to the group, a grace of `grace_ms`, SIGKILL to the group, then reaps the leader.
  void stop_group(int grace_ms);
  /// Reads what the leader left in the output pipe (bounded: helpers may still be writing).
  void drain_output() {
    if (output_.valid()) read_output(kFinalDrainBytes);
  }
  /// Fills the outcome's process fields, output and reason.
  void describe(bool timed_out, int timeout_ms, HookOutcome& out);

 private:
  void write_input();
  void read_output(std::size_t budget);
  /// Whether the leader has exited, leaving it unreaped: while it is a zombie its pid stays
  /// reserved, so signalling its group cannot reach an unrelated process that reused the pid.
  bool leader_exited_unreaped();

  std::string_view input_;
  std::size_t written_ = 0;
  ScopedSigpipeBlock& sigpipe_;
  std::size_t output_limit_;
  TailBuffer tail_;
  std::vector<char> buffer_;
  pid_t pid_ = -1;
  UniqueFd stdin_;   ///< our end of the hook's stdin; closed once all input is written
  UniqueFd output_;  ///< our end of the hook's stdout+stderr; closed at end of file
  bool reaped_ = false;
  int status_ = 0;
  int wait_error_ = 0;  ///< errno of a waitpid that found no child: someone else took the status
};

std::string HookRun::start(const std::string& command) {
  UniqueFd in_read, out_write;
  if (auto e = make_pipe(in_read, stdin_); !e.empty()) return e;
  if (auto e = make_pipe(output_, out_write); !e.empty()) return e;
  // Ours only: the child's ends stay blocking, as programs expect of their standard streams.
  if (auto e = set_non_blocking(stdin_); !e.empty()) return e;
  if (auto e = set_non_blocking(output_); !e.empty()) return e;
  SpawnSetup setup;
  int rc = prepare_spawn(setup, in_read.get(), out_write.get());
  std::vector<std::string> args = {"sh", "-c", command};
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (rc == 0) {
    rc = ::posix_spawn(&pid_, "/bin/sh", &setup.actions, &setup.attributes, argv.data(), environ);
  }
  if (rc != 0) {
    pid_ = -1;
    return errno_text("/bin/sh", rc);
  }
  // in_read and out_write close here: the hook holds the only copies, so its exit is our EOF.
  return {};
}

void HookRun::pump(int wait_ms) {
  pollfd fds[2];
  nfds_t n = 0;
  int stdin_slot = -1, output_slot = -1;
  if (stdin_.valid()) {
    stdin_slot = static_cast<int>(n);
    fds[n++] = {stdin_.get(), POLLOUT, 0};
  }
  if (output_.valid()) {
    output_slot = static_cast<int>(n);
    fds[n++] = {output_.get(), POLLIN, 0};
  }
  // EINTR and time-outs alike return to the caller, which looks at its clock again.
  if (::poll(n > 0 ? fds : nullptr, n, wait_ms) <= 0) return;
  if (stdin_slot >= 0 && fds[stdin_slot].revents != 0) write_input();
  if (output_slot >= 0 && fds[output_slot].revents != 0) {
    read_output(kReadChunk * kChunksPerRound);
  }
}

void HookRun::write_input() {
  while (written_ < input_.size()) {
    const ssize_t n = ::write(stdin_.get(), input_.data() + written_, input_.size() - written_);
    if (n > 0) {
      written_ += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // The hook closed its stdin (EPIPE) or the pipe failed: it gets no more input, which is
    // its choice to make; its exit status still decides.
    if (n < 0 && errno == EPIPE) sigpipe_.note_raised();
    stdin_.reset();
    return;
  }
  stdin_.reset();  // end of file: the input is complete
}

void HookRun::read_output(std::size_t budget) {
  std::size_t got = 0;
  while (got < budget) {
    const ssize_t n = ::read(output_.get(), buffer_.data(), buffer_.size());
    if (n > 0) {
      tail_.append(buffer_.data(), static_cast<std::size_t>(n));
      got += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    output_.reset();  // end of file (every writer is gone) or a failed pipe: nothing more comes
    return;
  }
}

bool HookRun::reap(int flags) {
  if (reaped_) return true;
  for (;;) {
    const pid_t r = ::waitpid(pid_, &status_, flags);
    if (r == pid_) break;
    if (r == 0) return false;
    if (errno == EINTR) continue;
    wait_error_ = errno;
    break;
  }
  reaped_ = true;
  return true;
}

bool HookRun::leader_exited_unreaped() {
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  for (;;) {
    if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0) {
      return info.si_pid != 0;
    }
    if (errno != EINTR) return true;  // no such child: nothing left to wait for
  }
}

void HookRun::stop_group(int grace_ms) {
  // The leader is unreaped (the caller's loop saw it running), so -pid_ names its group only.
  ::kill(-pid_, SIGTERM);
  stdin_.reset();
  const auto grace_end = Clock::now() + std::chrono::milliseconds(grace_ms);
  // Keep reading during the grace: a hook cleaning up may write, and must not block on a full
  // pipe. The grace ends early once the leader is dead and nothing holds the output pipe.
  for (auto now = Clock::now(); now < grace_end; now = Clock::now()) {
    if (!output_.valid() && leader_exited_unreaped()) break;
    pump(ms_until(grace_end, now));
  }
  // Whatever ignored SIGTERM, or left the pipe and outlived its leader; the leader, still a
  // zombie at worst, keeps the group's id from being reused until reap() below.
  ::kill(-pid_, SIGKILL);
  reap(0);
}

void HookRun::describe(bool timed_out, int timeout_ms, HookOutcome& out) {
  out.timed_out = timed_out;
  const bool have_status = reaped_ && wait_error_ == 0;
  if (have_status && WIFEXITED(status_)) out.exit_code = WEXITSTATUS(status_);
  if (have_status && WIFSIGNALED(status_)) out.signal = WTERMSIG(status_);
  out.applied = !timed_out && have_status && WIFEXITED(status_) && out.exit_code == 0;
  const std::string raw = tail_.take();  // first: taking trims, which drops more
  std::size_t dropped = tail_.dropped();
  out.output = valid_utf8_tail(raw, output_limit_, dropped > 0, dropped);
  out.dropped_output_bytes = dropped;
  if (timed_out) {
    out.reason = "timed out after " + std::to_string(timeout_ms) + " ms";
  } else if (!have_status) {
    out.reason = errno_text("exit status unknown: waitpid", wait_error_);
  } else if (out.exit_code == 0) {
    out.reason = "exit 0";
  } else if (out.exit_code > 0) {
    out.reason = "exited with code " + std::to_string(out.exit_code);
  } else if (out.signal != 0) {
    out.reason = "killed by signal " + std::to_string(out.signal);
  } else {
    out.reason = "ended with wait status " + std::to_string(status_);
  }
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

HookOutcome run_plan_hook(const HookOptions& options, std::string_view input) {
  HookOutcome out;
  if (options.command.empty()) {
    out.reason = "no hook configured";
    return out;
  }
  if (options.timeout_ms <= 0 || options.kill_grace_ms < 0) {
    out.reason = "could not start: timeout_ms must be > 0 and kill_grace_ms >= 0, not " +
                 std::to_string(options.timeout_ms) + " and " +
                 std::to_string(options.kill_grace_ms);
    return out;
  }
  const auto start = Clock::now();
  // Declared before the run, so it outlives the run's descriptors and restores the mask last.
  ScopedSigpipeBlock sigpipe;
  HookRun run(options, input, sigpipe);
  if (auto e = run.start(options.command); !e.empty()) {
    out.reason = "could not start: " + e;
    out.elapsed_ms = ms_since(start);
    return out;
  }
  const auto deadline = start + std::chrono::milliseconds(options.timeout_ms);
  bool timed_out = false;
  while (!run.reap(WNOHANG)) {
    const auto now = Clock::now();
    if (now >= deadline) {
      timed_out = true;
      run.stop_group(options.kill_grace_ms);
      break;
    }
    run.pump(ms_until(deadline, now));
  }
  run.drain_output();
  run.describe(timed_out, options.timeout_ms, out);
  out.elapsed_ms = ms_since(start);
  return out;
}

}  // namespace corun::serve
