// The torch testbed parent's processes: starting a worker and talking to it over its pipes,
// sampling it through /proc, the pool of idle workers kept between measurements, and the
// forked co-tenant that loads the host while a window runs.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "torch_testbed_internal.h"

extern char** environ;

namespace corun::torchbed {

namespace {

/// CPU seconds (user + system) of a process, or -1 when it is gone.
double cpu_seconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(f, s)) return -1;
  const auto close = s.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream in(s.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && (in >> field); ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double rss_bytes(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/statm");
  double size = 0, resident = 0;
  if (!(f >> size >> resident)) return 0;
  return resident * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

int runnable_threads(pid_t pid) {
  int n = 0;
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream f(e.path() / "stat");
    std::string s;
    if (!std::getline(f, s)) continue;
    const auto close = s.rfind(')');
    if (close != std::string::npos && close + 2 < s.size() && s[close + 2] == 'R') ++n;
  }
  return n;
}

void stop(const IdleWorker& w) {
  ::close(w.to_child);
  ::kill(w.pid, SIGKILL);
  int status = 0;
  ::waitpid(w.pid, &status, 0);
  ::close(w.from_child);
}

}  // namespace

std::int64_t ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

bool write_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

std::string spawn(Worker& wk, const TorchBedOptions& o) {
  int in_pipe[2], out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    ::close(in_pipe[0]);
    ::close(in_pipe[1]);
    return std::string("pipe: ") + std::strerror(errno);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  std::vector<std::string> args = {o.worker_exe};
  args.insert(args.end(), o.worker_args.begin(), o.worker_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = ::posix_spawn(&wk.pid, o.worker_exe.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  wk.to_child = in_pipe[1];
  wk.from_child = out_pipe[0];
  if (rc != 0) {
    wk.pid = -1;
    return "cannot start worker " + o.worker_exe + ": " + std::strerror(rc);
  }
  // A worker that dies must not kill the parent with SIGPIPE when it writes "go".
  ::signal(SIGPIPE, SIG_IGN);
  return {};
}

/// Reads whatever the workers have written, for up to `wait_ms`.
void pump(std::vector<Worker>& ws, int wait_ms) {
  std::vector<pollfd> fds;
  std::vector<Worker*> owners;
  for (auto& w : ws) {
    if (w.from_child >= 0 && !w.eof) {
      fds.push_back({w.from_child, POLLIN, 0});
      owners.push_back(&w);
    }
  }
  if (fds.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    return;
  }
  if (::poll(fds.data(), fds.size(), wait_ms) <= 0) return;
  char buf[65536];
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    Worker& w = *owners[i];
    const ssize_t n = ::read(w.from_child, buf, sizeof buf);
    if (n <= 0) {
      w.eof = true;
      continue;
    }
    w.buffer.append(buf, static_cast<std::size_t>(n));
    std::size_t nl;
    while ((nl = w.buffer.find('\n')) != std::string::npos) {
      w.lines.push_back(w.buffer.substr(0, nl));
      w.buffer.erase(0, nl + 1);
    }
  }
}

void sample(Worker& w) {
  if (w.pid <= 0 || w.reported) return;
  const double cpu = cpu_seconds(w.pid);
  if (cpu < 0) return;
  if (w.cpu_s_start < 0) w.cpu_s_start = cpu;
  w.cpu_s_last = cpu;
  w.rss_sum += rss_bytes(w.pid);
  w.runnable_sum += runnable_threads(w.pid);
  ++w.samples;
}

CoTenant::CoTenant(const Interference& share, int cores) {
  const double busy = std::clamp(share.sm_util, 0.0, 1.0) * std::max(1, cores);
  const int burners = static_cast<int>(std::ceil(busy - 1e-9));
  for (int i = 0; i < burners; ++i) start(busy / burners, false);
  if (share.bandwidth_util > 0) start(std::clamp(share.bandwidth_util, 0.0, 1.0), true);
}

CoTenant::~CoTenant() {
  for (pid_t p : pids_) ::kill(p, SIGKILL);
  for (pid_t p : pids_) {
    int status = 0;
    ::waitpid(p, &status, 0);
  }
}

void CoTenant::start(double duty, bool stream) {
  std::vector<char> buffer(stream ? kStreamBytes : 0, 1);
  const pid_t pid = ::fork();
  if (pid != 0) {
    if (pid > 0) pids_.push_back(pid);
    return;
  }
  const auto period = std::chrono::milliseconds(10);
  const auto on = std::chrono::duration_cast<Clock::duration>(period * duty);
  volatile char sink = 0;
  for (;;) {
    const auto t0 = Clock::now();
    while (Clock::now() - t0 < on) {
      if (stream) {
        // Read and write the whole buffer: DRAM traffic, not cache hits.
        std::memmove(buffer.data() + 64, buffer.data(), buffer.size() - 64);
        sink =
            sink + buffer[static_cast<std::size_t>(t0.time_since_epoch().count()) % buffer.size()];
      }
    }
    const auto left = period - (Clock::now() - t0);
    if (left > Clock::duration::zero()) std::this_thread::sleep_for(left);
  }
}

WorkerPool::~WorkerPool() {
  for (const auto& w : idle) stop(w);
}

bool WorkerPool::take(const std::string& key, Worker& wk) {
  std::erase_if(idle, [](const IdleWorker& w) {
    int status = 0;
    if (::waitpid(w.pid, &status, WNOHANG) == 0) return false;
    ::close(w.to_child);
    ::close(w.from_child);
    return true;
  });
  const auto it =
      std::find_if(idle.begin(), idle.end(), [&](const IdleWorker& w) { return w.key == key; });
  if (it == idle.end()) return false;
  wk.pid = it->pid;
  wk.to_child = it->to_child;
  wk.from_child = it->from_child;
  wk.reused = true;
  idle.erase(it);
  return true;
}

bool WorkerPool::retire(const std::string& key) {
  const auto it =
      std::find_if(idle.begin(), idle.end(), [&](const IdleWorker& w) { return w.key == key; });
  if (it == idle.end()) return false;
  stop(*it);
  idle.erase(it);
  return true;
}

void WorkerPool::keep(const Worker& wk, int capacity) {
  idle.push_back({wk.pid, wk.to_child, wk.from_child, wk.key, ++uses});
  while (static_cast<int>(idle.size()) > std::max(0, capacity)) {
    const auto lru = std::min_element(idle.begin(), idle.end(), [](const auto& a, const auto& b) {
      return a.last_use < b.last_use;
    });
    stop(*lru);
    idle.erase(lru);
  }
}

}  // namespace corun::torchbed
