#pragma once

// The torch testbed's parent side, shared by its files: the worker processes of one
// measurement, the idle ones kept between measurements, and the steps of one co-run.
// Private to src/torchbed.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "corun/torchbed/torchbed.h"
#include "nvml.h"
#include "protocol.h"

namespace corun::torchbed {

using Clock = std::chrono::steady_clock;

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

inline constexpr std::string_view kReadyLine = R"({"ready":true})";

std::int64_t ns_of(Clock::time_point t);

double seconds_between(Clock::time_point a, Clock::time_point b);

/// Writes all of `s` to `fd`; false when the reader is gone.
bool write_all(int fd, const std::string& s);

/// Starts `wk`'s process with pipes to its stdin and stdout; the error, or empty.
std::string spawn(Worker& wk, const TorchBedOptions& o);

/// Reads whatever the workers have written, for up to `wait_ms`.
void pump(std::vector<Worker>& ws, int wait_ms);

/// Adds one sample of `w`'s CPU time, resident memory and runnable threads.
void sample(Worker& w);

/// An unmanaged co-tenant on the host while a window runs (Conditions::interference): child
/// processes that keep `sm_util` of the host's cores busy and stream memory `bandwidth_util` of
/// the time, each in 10 ms periods. Forked (not exec'd): a child only spins on the clock,
/// sleeps and copies a buffer allocated before the fork, so it needs nothing the parent's other
/// threads might hold. Stopped (SIGKILL, reaped) when it goes out of scope.
class CoTenant {
 public:
  CoTenant(const Interference& share, int cores);
  ~CoTenant();
  CoTenant(const CoTenant&) = delete;
  CoTenant& operator=(const CoTenant&) = delete;

 private:
  // 64 MiB: far beyond any cache, so every copy goes to DRAM.
  static constexpr std::size_t kStreamBytes = 64u << 20;

  void start(double duty, bool stream);

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

/// The workers kept between measurements, and which of them is each model's copy in force.
/// Stops the idle ones when it goes out of scope.
struct WorkerPool {
  std::vector<IdleWorker> idle;
  std::uint64_t uses = 0;
  /// Per model name, the worker key of the copy that served its last measurement: the copy
  /// in force that a restart stops, a reload rebuilds and a swap hands over from.
  std::map<std::string, std::string> in_force;

  WorkerPool() = default;
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool();

  /// Takes an idle worker built for `key`, if one is alive.
  bool take(const std::string& key, Worker& wk);
  /// Stops an idle worker built for `key` (the copy in force of a model that restarts).
  /// Returns whether one was running.
  bool retire(const std::string& key);
  /// Keeps a worker that served its window cleanly; stops the least recently used ones
  /// beyond `capacity`.
  void keep(const Worker& wk, int capacity);
};

/// One measurement's co-run: what it measures, its workers and their jobs, and the
/// Measurement it fills in.
struct CoRun {
  const Context& ctx;  ///< the measurement's seed
  const Workload& w;
  const MeasureOptions& options;
  const TorchBedOptions& bed;
  Measurement& m;
  std::vector<Worker> ws;
  std::vector<WorkerJob> jobs;
};

/// Adds a ModelMetrics, a job and a worker for every running model of `config`; the
/// configuration's error, or empty.
std::string plan_workers(CoRun& run, std::span<const std::int32_t> config);

/// Gives each model its copy: a kept worker, a new process, or for a change that begins in
/// this window, what the change needs of the copy in force.
void place_copies(CoRun& run, WorkerPool& pool);

/// Waits until every worker not deferred has built and warmed up its model (or failed);
/// whether all of them are ready.
bool await_setup(CoRun& run);

/// The window of one co-run: releases the workers together, carries out the changes that
/// begin with it, and reads the workers' reports. Its co-tenant, if any, runs while it lives.
class Window {
 public:
  Window(CoRun& run, WorkerPool& pool, bool all_ready);
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  /// Serves the window: the start lines, the changes, samples while it lasts, and the
  /// workers' reports until each one reports or the deadline passes.
  void serve(NvmlSampler* nvml);

 private:
  /// The start line of worker k: every copy of a model replays the same arrivals.
  [[nodiscard]] WorkerGo go_for(std::size_t k) const;
  void hand_over(std::size_t k);
  void start_change(Worker& wk, const WorkerJob& job, WorkerGo go);
  void read_lines();
  /// Sends the start lines, starts the changes and takes the first samples.
  void start(NvmlSampler* nvml);
  /// Samples during the window and reads lines until no worker has a report pending.
  void await_reports(NvmlSampler* nvml);
  /// Waits for the swaps' new copies to be ready; those that are not have failed.
  void await_new_copies();

  CoRun& run_;
  WorkerPool& pool_;
  Clock::time_point t0_;
  Clock::duration window_{};
  Clock::time_point deadline_;
  std::optional<CoTenant> cotenant_;
};

/// Keeps the workers that served their window cleanly and stops the others, and records
/// each model's copy in force.
void settle_workers(CoRun& run, WorkerPool& pool, bool all_ready);

/// Puts each worker's error on its model and the first one on the measurement (the other
/// models fail with it); whether any worker failed.
bool record_failures(CoRun& run);

/// Turns the workers' reports and samples into the models' metrics and the GPU state.
void summarise(CoRun& run, NvmlSampler* nvml, const std::string& nvml_error);

}  // namespace corun::torchbed
