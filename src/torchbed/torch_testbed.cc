// The torch testbed's parent side: spawns one worker per running model, releases them
// together, samples their CPU time, memory and runnable threads, and turns their reports
// into a Measurement. Torch-free: the parent never initialises a torch thread pool.

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
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

#include "corun/core/rng.h"
#include "corun/core/stats.h"
#include "corun/core/strings.h"
#include "corun/torchbed/torchbed.h"
#include "nvml.h"
#include "protocol.h"

extern char** environ;

namespace corun {

namespace {

using Clock = std::chrono::steady_clock;
using torchbed::WorkerJob;
using torchbed::WorkerReport;

/// Stream id of the replayed arrival traces (TorchBedOptions::replay_arrivals).
constexpr std::uint64_t kTraceStream = 0x7472616365ULL;

int online_cores() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

/// What a model's window does besides serving: a change that begins at its start
/// (TransitionCharge::begins), carried out for real.
enum class Change {
  kNone,
  kRestart,  ///< break first: the copy in force is killed, a new process builds and warms up
  kReload,   ///< break first: the copy in force frees its model and builds the new one
  kSwap,     ///< make-before-break: a new process starts beside the copy in force, which
             ///< serves until the new one is ready and then hands its arrivals over
};

/// A worker's part in its model's window.
enum class Role {
  kServes,  ///< serves the window (a swap's old copy: until the hand-over, then retires)
  kStarts,  ///< a swap's new copy: started at the window's start, serves after the hand-over
};

/// One worker process and what the parent knows about it during one measurement.
struct Worker {
  std::size_t model = 0;
  std::string key;      ///< torchbed::worker_key of its job
  bool reused = false;  ///< taken from the idle pool: built, warm, no "ready" line to wait for
  Change change = Change::kNone;
  Role role = Role::kServes;
  /// Started (or reloaded) at the window's start rather than before it: not part of the
  /// barrier.
  bool deferred = false;
  /// Seconds after the window's start at which the model lost its server (the old copy
  /// killed, or the reload line sent); negative: it did not.
  double down_from_s = -1;
  bool ready_seen = false;  ///< a deferred worker's "ready" line has arrived
  bool go_sent = false;     ///< kStarts: the hand-over happened in the window
  std::string old_key;      ///< kRestart: the worker key of the copy in force it stops
  pid_t pid = -1;
  int to_child = -1;
  int from_child = -1;
  std::string buffer;
  std::vector<std::string> lines;
  bool eof = false;
  std::string error;  ///< why the worker failed, when it did
  WorkerReport report;
  bool reported = false;
  // Samples over the window.
  double cpu_s_start = -1, cpu_s_last = -1;
  double rss_sum = 0, runnable_sum = 0;
  int samples = 0;
};

constexpr std::string_view kReadyLine = R"({"ready":true})";

std::int64_t ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// The change that begins at the window's start for workload model `i`, as its charge says.
Change change_of(const MeasureOptions& o, std::size_t i) {
  for (const TransitionCharge& c : o.transitions) {
    if (c.model != i || c.begins < Actuation::kReload) continue;
    if (c.outage_s <= 0) return Change::kSwap;  // no outage: make-before-break
    return c.begins == Actuation::kReload ? Change::kReload : Change::kRestart;
  }
  return Change::kNone;
}

/// Whether the copy in force (built for `old_key`) can reload `job` in its own process: the
/// same device and intra-op threads, which a process fixes at its start.
bool reloadable(const std::string& old_key, const WorkerJob& job) {
  if (old_key.empty()) return false;
  const auto old = torchbed::decode_job(old_key);
  return old && old->threads == job.threads && old->device == job.device;
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

/// "libtorch 1.13.0, BLAS openblas-openmp, oneDNN v2.6.3" from a worker's torch_config().
std::string short_config(const std::string& cfg) {
  std::string out;
  const auto v = cfg.find("libtorch ");
  if (v != std::string::npos) out = cfg.substr(v, cfg.find(';', v) - v);
  const auto b = cfg.find("BLAS loaded: ");
  if (b != std::string::npos) {
    const std::string path = cfg.substr(b + 13, cfg.find(';', b) - b - 13);
    const auto dir = std::filesystem::path(path).parent_path().filename().string();
    out += ", BLAS " + (dir.empty() ? path : dir);
  }
  const auto d = cfg.find("MKL-DNN v");
  if (d != std::string::npos) out += ", oneDNN " + cfg.substr(d + 8, cfg.find(' ', d + 8) - d - 8);
  return out;
}

}  // namespace

namespace {

/// An unmanaged co-tenant on the host while a window runs (Conditions::interference): child
/// processes that keep `sm_util` of the host's cores busy and stream memory `bandwidth_util` of
/// the time, each in 10 ms periods. Forked (not exec'd): a child only spins on the clock,
/// sleeps and copies a buffer allocated before the fork, so it needs nothing the parent's other
/// threads might hold. Stopped (SIGKILL, reaped) when it goes out of scope.
class CoTenant {
 public:
  CoTenant(const Interference& share, int cores) {
    const double busy = std::clamp(share.sm_util, 0.0, 1.0) * std::max(1, cores);
    const int burners = static_cast<int>(std::ceil(busy - 1e-9));
    for (int i = 0; i < burners; ++i) start(busy / burners, false);
    if (share.bandwidth_util > 0) start(std::clamp(share.bandwidth_util, 0.0, 1.0), true);
  }
  ~CoTenant() {
    for (pid_t p : pids_) ::kill(p, SIGKILL);
    for (pid_t p : pids_) {
      int status = 0;
      ::waitpid(p, &status, 0);
    }
  }
  CoTenant(const CoTenant&) = delete;
  CoTenant& operator=(const CoTenant&) = delete;

 private:
  // 64 MiB: far beyond any cache, so every copy goes to DRAM.
  static constexpr std::size_t kStreamBytes = 64u << 20;

  void start(double duty, bool stream) {
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
          sink = sink + buffer[static_cast<std::size_t>(t0.time_since_epoch().count()) % buffer.size()];
        }
      }
      const auto left = period - (Clock::now() - t0);
      if (left > Clock::duration::zero()) std::this_thread::sleep_for(left);
    }
  }

  std::vector<pid_t> pids_;
};

/// A worker kept between measurements: blocked reading its next start line (no CPU), its
/// model built and warm.
struct IdleWorker {
  pid_t pid = -1;
  int to_child = -1;
  int from_child = -1;
  std::string key;
  std::uint64_t last_use = 0;
};

void stop(const IdleWorker& w) {
  ::close(w.to_child);
  ::kill(w.pid, SIGKILL);
  int status = 0;
  ::waitpid(w.pid, &status, 0);
  ::close(w.from_child);
}

}  // namespace

struct TorchTestbed::State {
  /// One co-run at a time on this machine; also guards `idle` and `uses`.
  std::mutex measure_mutex;
  std::vector<IdleWorker> idle;  // GUARDED_BY(measure_mutex)
  std::uint64_t uses = 0;        // GUARDED_BY(measure_mutex)
  /// Per model name, the worker key of the copy that served its last measurement: the copy
  /// in force that a restart stops, a reload rebuilds and a swap hands over from.
  std::map<std::string, std::string> in_force;  // GUARDED_BY(measure_mutex)
  /// torch-cuda: the GPU's own counters, opened on the first measurement; when NVML cannot
  /// be opened, `nvml_error` says why and the CPU-side proxies stand in.
  std::unique_ptr<torchbed::NvmlSampler> nvml;  // GUARDED_BY(measure_mutex)
  std::string nvml_error;                       // GUARDED_BY(measure_mutex)
  bool nvml_tried = false;                      // GUARDED_BY(measure_mutex)

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    for (const auto& w : idle) stop(w);
  }

  /// Takes an idle worker built for `key`, if one is alive.
  bool take(const std::string& key, Worker& wk) {
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

  /// Stops an idle worker built for `key` (the copy in force of a model that restarts).
  /// Returns whether one was running.
  bool retire(const std::string& key) {
    const auto it =
        std::find_if(idle.begin(), idle.end(), [&](const IdleWorker& w) { return w.key == key; });
    if (it == idle.end()) return false;
    stop(*it);
    idle.erase(it);
    return true;
  }

  /// Keeps a worker that served its window cleanly; stops the least recently used ones
  /// beyond `capacity`.
  void keep(const Worker& wk, int capacity) {
    idle.push_back({wk.pid, wk.to_child, wk.from_child, wk.key, ++uses});
    while (static_cast<int>(idle.size()) > std::max(0, capacity)) {
      const auto lru = std::min_element(idle.begin(), idle.end(), [](const auto& a, const auto& b) {
        return a.last_use < b.last_use;
      });
      stop(*lru);
      idle.erase(lru);
    }
  }
};

int torch_threads_for(double sm_share, int cores) {
  return std::clamp(static_cast<int>(std::lround(sm_share / 100.0 * cores)), 1,
                    std::max(1, cores));
}

ModelArch scale_for_cpu(const ModelArch& arch) {
  ModelArch a = arch;
  auto scale_dims = [](TransformerDims& d) {
    if (d.layers <= 0) return;
    d.layers = std::min(d.layers, 4);
    d.vocab = std::min(d.vocab, 16384);
    if (d.hidden > 512 && d.head_dim > 0) {
      const double f = 512.0 / d.hidden;
      d.kv_heads = std::max(1, static_cast<int>(std::lround(d.kv_heads * f)));
      int heads = std::max(d.kv_heads, static_cast<int>(std::lround(d.heads * f)));
      heads -= heads % d.kv_heads;
      d.heads = heads;
      d.hidden = heads * d.head_dim;
      d.intermediate = static_cast<int>(std::lround(d.intermediate * f));
    }
    if (d.position_embeddings > 0) d.position_embeddings = std::min(d.position_embeddings, 2048);
  };
  scale_dims(a.encoder);
  scale_dims(a.decoder);
  if (a.family == ModelFamily::kVision &&
      forward_cost(arch, 1, arch.reference_size, Precision::kFp32).flops > 7e9) {
    for (auto& l : a.conv_layers) {
      const bool depthwise = l.groups > 1 && l.groups == l.c_in;
      if (l.c_in > 3) l.c_in = (l.c_in + 1) / 2;
      l.c_out = (l.c_out + 1) / 2;
      l.groups = depthwise ? l.c_in : 1;
    }
  }
  return a;
}

TorchTestbed::TorchTestbed(TorchBedOptions options)
    : options_(std::move(options)), state_(std::make_unique<State>()) {
  if (options_.cores <= 0) options_.cores = online_cores();
}

TorchTestbed::~TorchTestbed() = default;

std::string_view TorchTestbed::name() const {
  return options_.device == "cpu" ? "torch-cpu" : "torch-cuda";
}

Measurement TorchTestbed::measure(const Workload& w, std::span<const std::int32_t> config,
                                  const MeasureOptions& options) const {
  Measurement m;
  m.testbed = std::string(name());
  m.device = w.device.name + " host CPU (" + std::to_string(options_.cores) + " cores)";
  auto fail_all = [&](const std::string& why) {
    m.error = why;
    for (auto& mm : m.models) mm.error = why;
    return m;
  };
  if (config.size() != w.models.size()) {
    return fail_all("configuration has " + std::to_string(config.size()) + " entries, workload " +
                    std::to_string(w.models.size()) + " models");
  }
  std::vector<Worker> ws;
  std::vector<WorkerJob> jobs;
  for (std::size_t i = 0; i < w.models.size(); ++i) {
    if (config[i] == kAbsent) continue;
    const ModelSpec& spec = w.models[i];
    ModelMetrics mm;
    mm.model = i;
    mm.name = spec.name;
    if (config[i] < 0 || static_cast<std::size_t>(config[i]) >= spec.local_config_count()) {
      m.models.push_back(mm);
      return fail_all("model '" + spec.name + "': local configuration " +
                      std::to_string(config[i]) + " out of range");
    }
    mm.config = spec.describe(static_cast<std::size_t>(config[i]));
    m.models.push_back(mm);
    WorkerJob job;
    job.arch = scale_for_cpu(spec.arch);
    job.settings = spec.settings(static_cast<std::size_t>(config[i]));
    job.demand = spec.demand;
    job.int8 = job.settings.precision == Precision::kInt8 ||
               job.settings.precision == Precision::kAwq;
    job.threads = torch_threads_for(job.settings.sm_share, options_.cores);
    job.window_s = options.window_s;
    job.seed = derive_seed(options.seed, {i});
    job.device = options_.device;
    jobs.push_back(job);
    Worker wk;
    wk.model = m.models.size() - 1;
    wk.change = change_of(options, i);
    ws.push_back(wk);
  }
  if (ws.empty()) return m;

  std::lock_guard<std::mutex> lock(state_->measure_mutex);
  if (options_.device != "cpu" && !state_->nvml_tried) {
    state_->nvml_tried = true;
    if (auto s = torchbed::NvmlSampler::open()) {
      state_->nvml = std::move(*s);
    } else {
      state_->nvml_error = s.error().what();
    }
  }
  torchbed::NvmlSampler* const nvml = state_->nvml.get();
  if (nvml != nullptr) nvml->reset();
  // Each model's copy: the copy in force (a kept worker), a new process, or for a change that
  // begins in this window, what the change needs of the copy in force.
  const std::size_t requested = ws.size();
  for (std::size_t k = 0; k < requested; ++k) {
    ws[k].key = torchbed::worker_key(jobs[k]);
    const auto in_force = state_->in_force.find(m.models[ws[k].model].name);
    const std::string old_key = in_force == state_->in_force.end() ? "" : in_force->second;
    if (ws[k].change == Change::kReload &&
        !(reloadable(old_key, jobs[k]) && state_->take(old_key, ws[k]))) {
      ws[k].change = Change::kRestart;  // nothing to reload in: a new process
    }
    if (ws[k].change == Change::kSwap) {
      Worker old = ws[k];
      old.key = old_key;
      if (!old_key.empty() && state_->take(old_key, old)) {
        ws[k].role = Role::kStarts;
        ws[k].deferred = true;
        ws.push_back(std::move(old));
        jobs.push_back(jobs[k]);
        continue;
      }
      ws[k].change = Change::kRestart;  // no copy in force to serve meanwhile: it breaks
    }
    if (ws[k].change == Change::kRestart) ws[k].old_key = old_key;
    if (ws[k].change != Change::kNone) {
      ws[k].deferred = true;
      continue;
    }
    if (state_->take(ws[k].key, ws[k])) continue;
    ws[k].error = spawn(ws[k], options_);
    if (ws[k].error.empty() && !write_all(ws[k].to_child, torchbed::encode_job(jobs[k]) + "\n")) {
      ws[k].error = "worker closed its input before the job was sent";
    }
  }
  // Barrier: every worker has built and warmed up its model (or failed) before any starts.
  // A change that begins in this window starts with it, after the barrier.
  const auto setup_deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(options_.setup_timeout_s));
  auto ready = [](const Worker& wk) {
    return wk.deferred || wk.reused || !wk.error.empty() || !wk.lines.empty() || wk.eof;
  };
  while (Clock::now() < setup_deadline && !std::all_of(ws.begin(), ws.end(), ready)) pump(ws, 50);
  bool all_ready = true;
  for (auto& wk : ws) {
    if (!wk.error.empty()) {
      all_ready = false;
      continue;
    }
    if (wk.reused || wk.deferred) continue;
    if (wk.lines.empty()) {
      wk.error = wk.eof ? "worker exited during setup"
                        : "worker hung: not ready after " + format_number(options_.setup_timeout_s) +
                              " s of setup; killed";
      all_ready = false;
      continue;
    }
    const std::string first = wk.lines.front();
    wk.lines.erase(wk.lines.begin());
    if (first != kReadyLine) {
      auto rep = torchbed::decode_report(first);
      wk.error = rep ? rep->error : rep.error().what();
      all_ready = false;
    }
  }
  const bool changes =
      std::any_of(ws.begin(), ws.end(), [](const Worker& wk) { return wk.deferred; });
  const auto t0 = Clock::now();
  const auto window = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options.window_s));
  // A copy that (re)starts in the window reports once it has built, warmed up and served
  // the rest of the window: allow its setup on top of the window.
  const auto deadline =
      t0 + window +
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
          options_.grace_s + (changes ? options_.setup_timeout_s : 0.0)));
  // The co-tenant runs through the window (from the start line to the last report).
  std::optional<CoTenant> cotenant;
  const Interference& share = options.conditions.interference;
  if (all_ready && (share.sm_util > 0 || share.bandwidth_util > 0)) {
    cotenant.emplace(share, options_.cores > 0 ? options_.cores
                                               : static_cast<int>(std::thread::hardware_concurrency()));
  }
  // The start line of worker k: every copy of a model replays the same arrivals.
  auto go_for = [&](std::size_t k) {
    torchbed::WorkerGo go;
    go.window_s = options.window_s;
    go.seed = options_.replay_arrivals
                  ? derive_seed(fnv1a(m.models[ws[k].model].name), {kTraceStream})
                  : jobs[k].seed;
    go.t0_ns = ns_of(t0);
    return go;
  };
  // A swap's new copy is ready: the old copy serves no arrival from now on, the new one
  // serves them. After the window's end the new copy takes over at the next window.
  auto hand_over = [&](std::size_t k) {
    const double at_s = seconds_between(t0, Clock::now());
    if (at_s >= options.window_s) return;
    for (auto& old : ws) {
      if (old.model != ws[k].model || old.role != Role::kServes || !old.error.empty()) continue;
      if (!write_all(old.to_child, torchbed::encode_cut({at_s}) + "\n")) {
        old.error = "worker closed its input before the hand-over";
      }
    }
    torchbed::WorkerGo go = go_for(k);
    go.from_s = at_s;
    ws[k].go_sent = true;
    if (!write_all(ws[k].to_child, torchbed::encode_go(go) + "\n")) {
      ws[k].error = "worker closed its input before the start";
    }
  };
  // Carries out the change that begins at the window's start: the model is down from the
  // kill (restart) or the reload line until its copy is ready; a swap's new copy starts
  // beside the old one, which serves meanwhile. The new copy's whole CPU time counts.
  auto start_change = [&](Worker& wk, const WorkerJob& job, torchbed::WorkerGo go) {
    go.restarted = true;
    if (wk.change == Change::kRestart && !wk.old_key.empty()) state_->retire(wk.old_key);
    if (wk.change != Change::kSwap) wk.down_from_s = seconds_between(t0, Clock::now());
    if (wk.change != Change::kReload) {
      wk.error = spawn(wk, options_);
      if (!wk.error.empty()) return;
      wk.cpu_s_start = 0;
    }
    std::string lines = torchbed::encode_job(job) + "\n";
    if (wk.change != Change::kSwap) lines += torchbed::encode_go(go) + "\n";
    if (!write_all(wk.to_child, lines)) wk.error = "worker closed its input before the job was sent";
  };
  // Reads what the workers wrote: "ready" lines of copies started in the window, reports.
  auto read_lines = [&] {
    for (std::size_t k = 0; k < ws.size(); ++k) {
      Worker& wk = ws[k];
      while (!wk.lines.empty() && !wk.reported && wk.error.empty()) {
        const std::string line = wk.lines.front();
        wk.lines.erase(wk.lines.begin());
        if (wk.deferred && !wk.ready_seen && line == kReadyLine) {
          wk.ready_seen = true;
          if (wk.role == Role::kStarts) hand_over(k);
          continue;
        }
        auto rep = torchbed::decode_report(line);
        if (rep) {
          wk.report = std::move(*rep);
          wk.reported = true;
          if (!wk.report.error.empty()) wk.error = wk.report.error;
        } else {
          wk.error = rep.error().what();
        }
      }
    }
  };
  if (all_ready) {
    for (std::size_t k = 0; k < ws.size(); ++k) {
      if (ws[k].deferred || !ws[k].error.empty()) continue;
      if (!write_all(ws[k].to_child, torchbed::encode_go(go_for(k)) + "\n")) {
        ws[k].error = "worker closed its input before the start";
      }
    }
    for (std::size_t k = 0; k < ws.size(); ++k) {
      if (ws[k].deferred) start_change(ws[k], jobs[k], go_for(k));
    }
    for (auto& wk : ws) sample(wk);
    if (nvml != nullptr) nvml->sample();
    auto pending = [&] {
      return std::any_of(ws.begin(), ws.end(), [](const Worker& wk) {
        return wk.error.empty() && !wk.reported && !wk.eof &&
               (wk.role != Role::kStarts || wk.go_sent);
      });
    };
    while (pending() && Clock::now() < deadline) {
      pump(ws, 20);
      if (Clock::now() < t0 + window) {
        for (auto& wk : ws) sample(wk);
        if (nvml != nullptr) nvml->sample();
      }
      read_lines();
    }
    // A swap's new copy not ready by the window's end: it takes over at the next window
    // once ready (the old copy served this one throughout).
    auto starting = [&] {
      return std::any_of(ws.begin(), ws.end(), [](const Worker& wk) {
        return wk.role == Role::kStarts && wk.error.empty() && !wk.ready_seen && !wk.eof;
      });
    };
    while (starting() && Clock::now() < deadline) {
      pump(ws, 50);
      read_lines();
    }
    for (auto& wk : ws) {
      if (wk.role == Role::kStarts && wk.error.empty() && !wk.ready_seen) {
        wk.error = wk.eof ? "worker exited during setup"
                          : "worker hung: not ready after " +
                                format_number(options_.setup_timeout_s) + " s of setup; killed";
      }
    }
  }
  // Keep the workers that served their window cleanly for the next measurement (a swap's
  // new copy once ready, not its old one); kill whatever else is still running (hung,
  // released by a failed barrier, or retired by a swap) and reap it.
  auto retired = [&](const Worker& wk) {
    return wk.change == Change::kSwap && wk.role == Role::kServes &&
           std::any_of(ws.begin(), ws.end(), [&](const Worker& n) {
             return n.model == wk.model && n.role == Role::kStarts && n.ready_seen &&
                    n.error.empty();
           });
  };
  std::vector<std::string> kept_key(m.models.size());
  for (auto& wk : ws) {
    const bool served = wk.reported || (wk.role == Role::kStarts && wk.ready_seen && !wk.go_sent);
    if (served && wk.error.empty() && !wk.eof && wk.lines.empty() && wk.buffer.empty() &&
        !retired(wk)) {
      state_->keep(wk, options_.max_idle_workers);
      kept_key[wk.model] = wk.key;
      continue;
    }
    if (wk.to_child >= 0) ::close(wk.to_child);
    if (wk.pid <= 0) continue;
    int status = 0;
    pid_t r = ::waitpid(wk.pid, &status, WNOHANG);
    if (r == 0 && !wk.reported) {
      if (all_ready && wk.error.empty()) {
        wk.error = "worker hung: no report " + format_number(options_.grace_s) +
                   " s after the window; killed";
      }
      ::kill(wk.pid, SIGKILL);
    }
    if (r == 0) {
      // A reporting worker exits on its own once its input closes; give it a moment.
      for (int i = 0; i < 100 && (r = ::waitpid(wk.pid, &status, WNOHANG)) == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (r == 0) {
        ::kill(wk.pid, SIGKILL);
        r = ::waitpid(wk.pid, &status, 0);
      }
    }
    if (!wk.reported && wk.error.empty() && r > 0) {
      wk.error = WIFSIGNALED(status)
                     ? "worker crashed: " + std::string(::strsignal(WTERMSIG(status)))
                     : "worker exited with code " + std::to_string(WEXITSTATUS(status)) +
                           " before reporting";
    } else if (!wk.reported && r > 0 && WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL &&
               wk.error.rfind("worker crashed", 0) != 0) {
      wk.error = "worker crashed: " + std::string(::strsignal(WTERMSIG(status)));
    }
    if (wk.from_child >= 0) ::close(wk.from_child);
  }
  // The copy in force of each model is the one kept; a model that failed has none.
  for (std::size_t i = 0; i < m.models.size(); ++i) {
    if (kept_key[i].empty()) {
      state_->in_force.erase(m.models[i].name);
    } else {
      state_->in_force[m.models[i].name] = kept_key[i];
    }
  }

  std::string first_error;
  for (const auto& wk : ws) {
    if (!wk.error.empty()) {
      m.models[wk.model].error = wk.error;
      if (first_error.empty()) first_error = "model '" + m.models[wk.model].name + "': " + wk.error;
    }
  }
  if (!first_error.empty()) {
    m.error = first_error;
    for (auto& mm : m.models) {
      if (mm.error.empty()) mm.error = "co-runner failed: " + first_error;
    }
    return m;
  }

  // One report per model: a swap's two copies served the window's arrivals between them.
  std::vector<WorkerReport> served(m.models.size());
  std::vector<double> downtime_s(m.models.size(), 0.0);
  for (const Worker& wk : ws) {
    WorkerReport& r = served[wk.model];
    const WorkerReport& part = wk.report;
    r.latency_ms.insert(r.latency_ms.end(), part.latency_ms.begin(), part.latency_ms.end());
    r.ttft_ms.insert(r.ttft_ms.end(), part.ttft_ms.begin(), part.ttft_ms.end());
    r.tpot_ms.insert(r.tpot_ms.end(), part.tpot_ms.begin(), part.tpot_ms.end());
    r.served += part.served;
    r.dram_bytes += part.dram_bytes;
    if (r.torch_config.empty()) r.torch_config = part.torch_config;
    // From losing the copy in force to the new one being ready (past the window's end when
    // its start took longer: the next window then begins once it is ready).
    if (wk.down_from_s >= 0 && wk.reported) {
      downtime_s[wk.model] = std::max(0.0, part.ready_ms / 1000 - wk.down_from_s);
    }
  }
  const double window_s = options.window_s;
  const double window_ms = window_s * 1000;
  double cpu_s = 0, dram = 0, rss = 0, runnable = 0;
  for (const Worker& wk : ws) {
    if (wk.cpu_s_start >= 0) cpu_s += wk.cpu_s_last - wk.cpu_s_start;
    if (wk.samples > 0) {
      rss += wk.rss_sum / wk.samples;
      runnable += wk.runnable_sum / wk.samples;
    }
  }
  for (std::size_t i = 0; i < m.models.size(); ++i) {
    const WorkerReport& r = served[i];
    ModelMetrics& mm = m.models[i];
    // No completion inside the window: the latency is at least the window (finite, large).
    mm.latency_ms_p50 = r.latency_ms.empty() ? window_ms : quantile(r.latency_ms, 0.5);
    mm.latency_ms_p95 = r.latency_ms.empty() ? window_ms : quantile(r.latency_ms, 0.95);
    mm.throughput = r.served / window_s;
    if (w.models[mm.model].arch.family == ModelFamily::kLlm) {
      // Every request that arrived has a TTFT (a lower bound if it was still waiting), and
      // every one that produced two tokens a TPOT. None: the window did not observe it (no
      // arrival in a Poisson draw, or none decoding yet), which is not a latency of its own.
      if (!r.ttft_ms.empty()) mm.ttft_ms_p95 = quantile(r.ttft_ms, 0.95);
      if (!r.tpot_ms.empty()) mm.tpot_ms_p95 = quantile(r.tpot_ms, 0.95);
    }
    mm.downtime_s = downtime_s[i];
    dram += r.dram_bytes;
    if (i == 0) {
      const std::string cfg = short_config(r.torch_config);
      if (!cfg.empty()) m.device += ", " + cfg;
    }
  }
  m.gpu.sm_util = std::clamp(cpu_s / (window_s * options_.cores), 0.0, 1.0);
  const double bw = w.device.cpu.mem_bandwidth_gbps > 0 ? w.device.cpu.mem_bandwidth_gbps : 20;
  m.gpu.mem_bw_util = std::clamp(dram / window_s / (bw * 1e9), 0.0, 1.0);
  m.gpu.vram_used_gb = rss / 1e9;
  m.gpu.clock_mhz = runnable;
  if (nvml != nullptr && nvml->samples() > 0) {
    m.gpu = nvml->mean();  // the device's own counters replace the CPU-side proxies
    m.device += ", NVML";
  } else if (!state_->nvml_error.empty()) {
    m.device += ", " + state_->nvml_error + " (CPU-side proxies)";
  }
  return m;
}

void register_torch_testbeds(const std::string& worker_exe) {
  static std::once_flag once;
  std::call_once(once, [&] {
    TorchBedOptions o;
    o.worker_exe = worker_exe;
    register_testbed("torch-cpu", [o] { return std::make_unique<TorchTestbed>(o); });
#ifdef CORUN_TORCH_CUDA
    TorchBedOptions g = o;
    g.device = "cuda";
    g.max_idle_workers = 0;  // an idle worker would keep its device memory and context
    register_testbed("torch-cuda", [g] { return std::make_unique<TorchTestbed>(g); });
#endif
  });
}

}  // namespace corun
