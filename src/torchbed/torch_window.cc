// The torch testbed's co-run up to its reports: one worker per running model with its job, each
// model's copy placed, the setup barrier, and the window, in which the workers start together,
// the changes that begin with it are carried out and the workers' reports are read.

#include <algorithm>
#include <chrono>
#include <thread>

#include "corun/core/rng.h"
#include "corun/core/strings.h"
#include "torch_testbed_internal.h"

namespace corun::torchbed {

namespace {

/// Stream id of the replayed arrival traces (TorchBedOptions::replay_arrivals).
constexpr std::uint64_t kTraceStream = 0x7472616365ULL;

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
  const auto old = decode_job(old_key);
  return old && old->threads == job.threads && old->device == job.device;
}

}  // namespace

std::string plan_workers(CoRun& run, std::span<const std::int32_t> config) {
  const Workload& w = run.w;
  const MeasureOptions& options = run.options;
  Measurement& m = run.m;
  if (config.size() != w.models.size()) {
    return "configuration has " + std::to_string(config.size()) + " entries, workload " +
           std::to_string(w.models.size()) + " models";
  }
  for (std::size_t i = 0; i < w.models.size(); ++i) {
    if (config[i] == kAbsent) continue;
    const ModelSpec& spec = w.models[i];
    ModelMetrics mm;
    mm.model = i;
    mm.name = spec.name;
    if (config[i] < 0 || static_cast<std::size_t>(config[i]) >= spec.local_config_count()) {
      m.models.push_back(mm);
      return "model '" + spec.name + "': local configuration " + std::to_string(config[i]) +
             " out of range";
    }
    mm.config = spec.describe(static_cast<std::size_t>(config[i]));
    m.models.push_back(mm);
    WorkerJob job;
    job.arch = scale_for_cpu(spec.arch);
    job.settings = spec.settings(static_cast<std::size_t>(config[i]));
    job.demand = spec.demand;
    job.int8 =
        job.settings.precision == Precision::kInt8 || job.settings.precision == Precision::kAwq;
    job.threads = torch_threads_for(job.settings.sm_share, run.bed.cores);
    job.window_s = options.window_s;
    job.seed = derive_seed(run.ctx.seed, {i});
    job.device = run.bed.device;
    run.jobs.push_back(job);
    Worker wk;
    wk.model = m.models.size() - 1;
    wk.change = change_of(options, i);
    run.ws.push_back(wk);
  }
  return {};
}

void place_copies(CoRun& run, WorkerPool& pool) {
  std::vector<Worker>& ws = run.ws;
  std::vector<WorkerJob>& jobs = run.jobs;
  // Each model's copy: the copy in force (a kept worker), a new process, or for a change that
  // begins in this window, what the change needs of the copy in force.
  const std::size_t requested = ws.size();
  for (std::size_t k = 0; k < requested; ++k) {
    ws[k].key = worker_key(jobs[k]);
    const auto in_force = pool.in_force.find(run.m.models[ws[k].model].name);
    const std::string old_key = in_force == pool.in_force.end() ? "" : in_force->second;
    if (ws[k].change == Change::kReload &&
        !(reloadable(old_key, jobs[k]) && pool.take(old_key, ws[k]))) {
      ws[k].change = Change::kRestart;  // nothing to reload in: a new process
    }
    if (ws[k].change == Change::kSwap) {
      Worker old = ws[k];
      old.key = old_key;
      if (!old_key.empty() && pool.take(old_key, old)) {
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
    if (pool.take(ws[k].key, ws[k])) continue;
    ws[k].error = spawn(ws[k], run.bed);
    if (ws[k].error.empty() && !write_all(ws[k].to_child, encode_job(jobs[k]) + "\n")) {
      ws[k].error = "worker closed its input before the job was sent";
    }
  }
}

bool await_setup(CoRun& run) {
  std::vector<Worker>& ws = run.ws;
  // Barrier: every worker has built and warmed up its model (or failed) before any starts.
  // A change that begins in this window starts with it, after the barrier.
  const auto setup_deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(run.bed.setup_timeout_s));
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
                        : "worker hung: not ready after " + format_number(run.bed.setup_timeout_s) +
                              " s of setup; killed";
      all_ready = false;
      continue;
    }
    const std::string first = wk.lines.front();
    wk.lines.erase(wk.lines.begin());
    if (first != kReadyLine) {
      auto rep = decode_report(first);
      wk.error = rep ? rep->error : rep.error().what();
      all_ready = false;
    }
  }
  return all_ready;
}

Window::Window(CoRun& run, WorkerPool& pool, bool all_ready) : run_(run), pool_(pool) {
  const std::vector<Worker>& ws = run_.ws;
  const bool changes =
      std::any_of(ws.begin(), ws.end(), [](const Worker& wk) { return wk.deferred; });
  t0_ = Clock::now();
  window_ = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(run_.options.window_s));
  // A copy that (re)starts in the window reports once it has built, warmed up and served
  // the rest of the window: allow its setup on top of the window.
  deadline_ = t0_ + window_ +
              std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                  run_.bed.grace_s + (changes ? run_.bed.setup_timeout_s : 0.0)));
  // The co-tenant runs through the window (from the start line to the last report).
  const Interference& share = run_.options.conditions.interference;
  if (all_ready && (share.sm_util > 0 || share.bandwidth_util > 0)) {
    cotenant_.emplace(share, run_.bed.cores > 0
                                 ? run_.bed.cores
                                 : static_cast<int>(std::thread::hardware_concurrency()));
  }
}

void Window::serve(NvmlSampler* nvml) {
  start(nvml);
  await_reports(nvml);
  await_new_copies();
}

// The start line of worker k: every copy of a model replays the same arrivals.
WorkerGo Window::go_for(std::size_t k) const {
  WorkerGo go;
  go.window_s = run_.options.window_s;
  go.seed = run_.bed.replay_arrivals
                ? derive_seed(fnv1a(run_.m.models[run_.ws[k].model].name), {kTraceStream})
                : run_.jobs[k].seed;
  go.t0_ns = ns_of(t0_);
  return go;
}

// A swap's new copy is ready: the old copy serves no arrival from now on, the new one
// serves them. After the window's end the new copy takes over at the next window.
void Window::hand_over(std::size_t k) {
  std::vector<Worker>& ws = run_.ws;
  const double at_s = seconds_between(t0_, Clock::now());
  if (at_s >= run_.options.window_s) return;
  for (auto& old : ws) {
    if (old.model != ws[k].model || old.role != Role::kServes || !old.error.empty()) continue;
    if (!write_all(old.to_child, encode_cut({at_s}) + "\n")) {
      old.error = "worker closed its input before the hand-over";
    }
  }
  WorkerGo go = go_for(k);
  go.from_s = at_s;
  ws[k].go_sent = true;
  if (!write_all(ws[k].to_child, encode_go(go) + "\n")) {
    ws[k].error = "worker closed its input before the start";
  }
}

// Carries out the change that begins at the window's start: the model is down from the
// kill (restart) or the reload line until its copy is ready; a swap's new copy starts
// beside the old one, which serves meanwhile. The new copy's whole CPU time counts.
void Window::start_change(Worker& wk, const WorkerJob& job, WorkerGo go) {
  go.restarted = true;
  if (wk.change == Change::kRestart && !wk.old_key.empty()) pool_.retire(wk.old_key);
  if (wk.change != Change::kSwap) wk.down_from_s = seconds_between(t0_, Clock::now());
  if (wk.change != Change::kReload) {
    wk.error = spawn(wk, run_.bed);
    if (!wk.error.empty()) return;
    wk.cpu_s_start = 0;
  }
  std::string lines = encode_job(job) + "\n";
  if (wk.change != Change::kSwap) lines += encode_go(go) + "\n";
  if (!write_all(wk.to_child, lines)) wk.error = "worker closed its input before the job was sent";
}

// Reads what the workers wrote: "ready" lines of copies started in the window, reports.
void Window::read_lines() {
  std::vector<Worker>& ws = run_.ws;
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
      auto rep = decode_report(line);
      if (rep) {
        wk.report = std::move(*rep);
        wk.reported = true;
        if (!wk.report.error.empty()) wk.error = wk.report.error;
      } else {
        wk.error = rep.error().what();
      }
    }
  }
}

void Window::start(NvmlSampler* nvml) {
  std::vector<Worker>& ws = run_.ws;
  for (std::size_t k = 0; k < ws.size(); ++k) {
    if (ws[k].deferred || !ws[k].error.empty()) continue;
    if (!write_all(ws[k].to_child, encode_go(go_for(k)) + "\n")) {
      ws[k].error = "worker closed its input before the start";
    }
  }
  for (std::size_t k = 0; k < ws.size(); ++k) {
    if (ws[k].deferred) start_change(ws[k], run_.jobs[k], go_for(k));
  }
  for (auto& wk : ws) sample(wk);
  if (nvml != nullptr) nvml->sample();
}

void Window::await_reports(NvmlSampler* nvml) {
  std::vector<Worker>& ws = run_.ws;
  auto pending = [&] {
    return std::any_of(ws.begin(), ws.end(), [](const Worker& wk) {
      return wk.error.empty() && !wk.reported && !wk.eof &&
             (wk.role != Role::kStarts || wk.go_sent);
    });
  };
  while (pending() && Clock::now() < deadline_) {
    pump(ws, 20);
    if (Clock::now() < t0_ + window_) {
      for (auto& wk : ws) sample(wk);
      if (nvml != nullptr) nvml->sample();
    }
    read_lines();
  }
}

void Window::await_new_copies() {
  std::vector<Worker>& ws = run_.ws;
  // A swap's new copy not ready by the window's end: it takes over at the next window
  // once ready (the old copy served this one throughout).
  auto starting = [&] {
    return std::any_of(ws.begin(), ws.end(), [](const Worker& wk) {
      return wk.role == Role::kStarts && wk.error.empty() && !wk.ready_seen && !wk.eof;
    });
  };
  while (starting() && Clock::now() < deadline_) {
    pump(ws, 50);
    read_lines();
  }
  for (auto& wk : ws) {
    if (wk.role == Role::kStarts && wk.error.empty() && !wk.ready_seen) {
      wk.error = wk.eof ? "worker exited during setup"
                        : "worker hung: not ready after " +
                              format_number(run_.bed.setup_timeout_s) + " s of setup; killed";
    }
  }
}

}  // namespace corun::torchbed
