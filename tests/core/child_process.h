#pragma once

// The one way the tests start and stop child processes: the corun binary (`corun serve`,
// `corun profile`, ...), a real program from PATH (Prometheus), or a function of the test
// itself in a forked copy of it. A child never outlives its test: it gets SIGKILL when the test
// dies (PR_SET_PDEATHSIG), and a ChildProcess still running when it goes is killed and reaped.
// Between fork and exec the child only makes system calls (no allocation, no locks: another
// thread of the test may have held one at the fork), and a child that cannot go on ends with
// ::_exit(127), never returning into gtest nor running the test's static destructors.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace corun::testing {

/// @brief How a child process started and ran.
struct ChildOptions {
  /// Variables added to the test's environment for the child (replacing any of the same name).
  std::vector<std::pair<std::string, std::string>> env;
  /// The child's working directory; empty: the test's.
  std::filesystem::path cwd;
  /// Where the child's standard output goes (a log file, "/dev/null"), appended to and created
  /// if missing; empty: the test's. A file that cannot be opened leaves the test's in place.
  std::filesystem::path stdout_path;
  /// The same for standard error; the same path as `stdout_path`: both share one file.
  std::filesystem::path stderr_path;
  /// > 0: RLIMIT_FSIZE in the child, with SIGXFSZ ignored, so that a write past this many bytes
  /// fails with EFBIG as on a full disk (no root, no small filesystem needed).
  std::uint64_t file_size_limit = 0;
};

/// @brief How a child ended.
struct ExitStatus {
  int code = -1;   ///< exit code; -1 when it did not exit by itself (or never started)
  int signal = 0;  ///< the signal that ended it, 0 if none
  [[nodiscard]] bool exited() const { return code >= 0; }
};

/// @brief A child process, SIGKILLed and reaped on destruction if it still runs. Start it from
/// the test's own thread: PR_SET_PDEATHSIG fires when the thread that forked the child ends.
///
/// @code
///   ChildOptions o;
///   o.stdout_path = o.stderr_path = dir.file("serve.log");
///   ChildProcess serve({CORUN_BINARY, "serve", "--port", "0"}, o);
///   ...
///   EXPECT_EQ(serve.stop(SIGTERM).code, 0);
/// @endcode
class ChildProcess {
 public:
  /// @brief No child (like a default std::thread): not running, ended with ExitStatus{}.
  ChildProcess() = default;

  /// @brief Starts `argv[0]` (a path, or a name looked up in PATH) with `argv`. Returns once
  /// the program runs or failed to start (started() says which).
  explicit ChildProcess(std::vector<std::string> argv, const ChildOptions& options = {}) {
    // Everything the child needs is made here, before the fork.
    const bool one_output = shares_one_file(options);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    std::vector<std::string> env_strings = environment_with(options.env);
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    // A close-on-exec pipe: a successful exec closes it (EOF in the parent); a failed one
    // writes its errno into it first.
    int exec_pipe[2];
    if (::pipe2(exec_pipe, O_CLOEXEC) != 0) return;
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(exec_pipe[0]);
      int error = set_up_child(parent, options, one_output);
      if (error == 0) {
        ::execvpe(args[0], args.data(), envp.data());
        error = errno;
      }
      // Nothing more to do if this write fails: the parent then sees the child end with 127.
      [[maybe_unused]] const ssize_t sent = ::write(exec_pipe[1], &error, sizeof error);
      ::_exit(127);
    }
    ::close(exec_pipe[1]);
    if (pid < 0) {
      ::close(exec_pipe[0]);
      return;
    }
    pid_ = pid;
    ended_.reset();
    int error = 0;
    ssize_t n = 0;
    do {
      n = ::read(exec_pipe[0], &error, sizeof error);
    } while (n < 0 && errno == EINTR);
    ::close(exec_pipe[0]);
    if (n > 0) {  // the child could not start the program: it ends with 127
      exec_failed_ = true;
      wait();
    }
  }

  /// @brief Forks the test and runs `body` in the child, which then exits with what `body`
  /// returned (127 if it threw). For code that must run in a process of its own (under a
  /// file-size limit, say) without an exec. As after any fork, only the calling thread exists
  /// in the child: `body` must not wait on what the test's other threads do.
  static ChildProcess fork_and_run(const std::function<int()>& body,
                                   const ChildOptions& options = {}) {
    ChildProcess child;
    const bool one_output = shares_one_file(options);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (set_up_child(parent, options, one_output) != 0) ::_exit(127);
      int code = 127;
      try {
        code = body();
      } catch (...) {
        // An exception must not unwind into the forked copy of gtest.
      }
      ::_exit(code);
    }
    if (pid > 0) {
      child.pid_ = pid;
      child.ended_.reset();
    }
    return child;
  }

  ~ChildProcess() { stop(SIGKILL); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ChildProcess(ChildProcess&& other) noexcept { *this = std::move(other); }
  /// @brief Takes `other`'s child; the child held before is SIGKILLed and reaped first.
  ChildProcess& operator=(ChildProcess&& other) noexcept {
    if (this != &other) {
      stop(SIGKILL);
      pid_ = std::exchange(other.pid_, -1);
      ended_ = std::exchange(other.ended_, ExitStatus{});
      exec_failed_ = std::exchange(other.exec_failed_, false);
    }
    return *this;
  }

  /// @brief The child's process id; -1 when none was started.
  [[nodiscard]] pid_t pid() const { return pid_; }
  /// @brief Whether the child was forked and (for a program) its exec succeeded.
  [[nodiscard]] bool started() const { return pid_ > 0 && !exec_failed_; }
  /// @brief How it ended, once it was reaped (or never started); std::nullopt until then.
  /// Does not look at the child: running(), wait_for() and wait() do.
  [[nodiscard]] const std::optional<ExitStatus>& exit_status() const { return ended_; }

  /// @brief Whether the child still runs; reaps it (recording its status) when it has ended.
  bool running() {
    if (ended_) return false;
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == 0) return true;
    record(r, status);
    return false;
  }

  /// @brief Sends `sig` to the child if it has not been reaped. Returns whether it was sent.
  bool signal(int sig) { return !ended_ && ::kill(pid_, sig) == 0; }

  /// @brief Waits until the child ends, at most `timeout`: how it ended, or std::nullopt if it
  /// still runs then.
  std::optional<ExitStatus> wait_for(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (running()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          deadline - now, std::chrono::milliseconds(10)));
    }
    return ended_;
  }

  /// @brief Waits, without a deadline, until the child ends: how it ended.
  ExitStatus wait() {
    if (!ended_) {
      int status = 0;
      pid_t r = 0;
      do {
        r = ::waitpid(pid_, &status, 0);
      } while (r < 0 && errno == EINTR);
      record(r, status);
    }
    return *ended_;
  }

  /// @brief Sends `sig` (if the child still runs) and waits until it ends: how it ended.
  ExitStatus stop(int sig = SIGKILL) {
    signal(sig);
    return wait();
  }

 private:
  // The test's environment with `add` in it (an added variable replaces one of its name).
  static std::vector<std::string> environment_with(
      const std::vector<std::pair<std::string, std::string>>& add) {
    std::vector<std::string> env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const std::string entry = *e;
      const std::string name = entry.substr(0, entry.find('='));
      const bool replaced =
          std::any_of(add.begin(), add.end(), [&](const auto& kv) { return kv.first == name; });
      if (!replaced) env.push_back(entry);
    }
    for (const auto& [name, value] : add) env.push_back(name + "=" + value);
    return env;
  }

  // Whether standard output and error go to one file (opened once, so that they interleave
  // as written). Decided in the parent: comparing paths may allocate.
  static bool shares_one_file(const ChildOptions& options) {
    return !options.stdout_path.empty() && options.stderr_path == options.stdout_path;
  }

  // In the child, after the fork: system calls only, on what the parent made. Returns 0, or
  // the errno of a working directory it could not change to.
  static int set_up_child(pid_t parent, const ChildOptions& options, bool one_output) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);       // never outlive a crashed test
    if (::getppid() != parent) ::_exit(127);  // the test died before prctl took effect
    redirect(options.stdout_path, STDOUT_FILENO);
    if (one_output) {
      ::dup2(STDOUT_FILENO, STDERR_FILENO);
    } else {
      redirect(options.stderr_path, STDERR_FILENO);
    }
    if (options.file_size_limit > 0) {
      ::signal(SIGXFSZ, SIG_IGN);
      const rlimit lim{options.file_size_limit, options.file_size_limit};
      ::setrlimit(RLIMIT_FSIZE, &lim);
    }
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) return errno;
    return 0;
  }

  static void redirect(const std::filesystem::path& path, int target) {
    if (path.empty()) return;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    ::dup2(fd, target);
    if (fd != target) ::close(fd);
  }

  // Records how the child ended from what waitpid answered. A child waitpid could not reap
  // (reaped elsewhere) counts as ended, how unknown.
  void record(pid_t reaped, int status) {
    ExitStatus s;
    if (reaped == pid_ && WIFEXITED(status)) s.code = WEXITSTATUS(status);
    if (reaped == pid_ && WIFSIGNALED(status)) s.signal = WTERMSIG(status);
    ended_ = s;
  }

  pid_t pid_ = -1;
  std::optional<ExitStatus> ended_ = ExitStatus{};  // set once reaped, or when none started
  bool exec_failed_ = false;
};

}  // namespace corun::testing
