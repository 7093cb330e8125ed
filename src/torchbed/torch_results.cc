// The end of the torch testbed's co-run: the workers kept for the next measurement or stopped,
// their failures, and their reports and samples turned into the Measurement.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "corun/core/stats.h"
#include "corun/core/strings.h"
#include "torch_testbed_internal.h"

namespace corun::torchbed {

namespace {

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

/// Closes a worker that is not kept, kills it if it is still running (hung, or released by a
/// failed barrier), reaps it, and says why it failed when it did not report.
void kill_and_reap(Worker& wk, bool all_ready, const TorchBedOptions& bed) {
  if (wk.to_child >= 0) ::close(wk.to_child);
  if (wk.pid <= 0) return;
  int status = 0;
  pid_t r = ::waitpid(wk.pid, &status, WNOHANG);
  if (r == 0 && !wk.reported) {
    if (all_ready && wk.error.empty()) {
      wk.error =
          "worker hung: no report " + format_number(bed.grace_s) + " s after the window; killed";
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
    wk.error = WIFSIGNALED(status) ? "worker crashed: " + std::string(::strsignal(WTERMSIG(status)))
                                   : "worker exited with code " +
                                         std::to_string(WEXITSTATUS(status)) + " before reporting";
  } else if (!wk.reported && r > 0 && WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL &&
             wk.error.rfind("worker crashed", 0) != 0) {
    wk.error = "worker crashed: " + std::string(::strsignal(WTERMSIG(status)));
  }
  if (wk.from_child >= 0) ::close(wk.from_child);
}

/// Each model's report and downtime, from the copies that served its window.
struct ModelReports {
  std::vector<WorkerReport> served;
  std::vector<double> downtime_s;
};

/// Merges the reports of each model's copies into one report per model.
ModelReports merge_copies(const CoRun& run) {
  // One report per model: a swap's two copies served the window's arrivals between them.
  ModelReports merged{std::vector<WorkerReport>(run.m.models.size()),
                      std::vector<double>(run.m.models.size(), 0.0)};
  for (const Worker& wk : run.ws) {
    WorkerReport& r = merged.served[wk.model];
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
      merged.downtime_s[wk.model] = std::max(0.0, part.ready_ms / 1000 - wk.down_from_s);
    }
  }
  return merged;
}

}  // namespace

void settle_workers(CoRun& run, WorkerPool& pool, bool all_ready) {
  std::vector<Worker>& ws = run.ws;
  Measurement& m = run.m;
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
      pool.keep(wk, run.bed.max_idle_workers);
      kept_key[wk.model] = wk.key;
      continue;
    }
    kill_and_reap(wk, all_ready, run.bed);
  }
  // The copy in force of each model is the one kept; a model that failed has none.
  for (std::size_t i = 0; i < m.models.size(); ++i) {
    if (kept_key[i].empty()) {
      pool.in_force.erase(m.models[i].name);
    } else {
      pool.in_force[m.models[i].name] = kept_key[i];
    }
  }
}

bool record_failures(CoRun& run) {
  Measurement& m = run.m;
  std::string first_error;
  for (const auto& wk : run.ws) {
    if (!wk.error.empty()) {
      m.models[wk.model].error = wk.error;
      if (first_error.empty()) first_error = "model '" + m.models[wk.model].name + "': " + wk.error;
    }
  }
  if (first_error.empty()) return false;
  m.error = first_error;
  for (auto& mm : m.models) {
    if (mm.error.empty()) mm.error = "co-runner failed: " + first_error;
  }
  return true;
}

void summarise(CoRun& run, NvmlSampler* nvml, const std::string& nvml_error) {
  const Workload& w = run.w;
  Measurement& m = run.m;
  const ModelReports merged = merge_copies(run);
  const std::vector<WorkerReport>& served = merged.served;
  const double window_s = run.options.window_s;
  const double window_ms = window_s * 1000;
  double cpu_s = 0, dram = 0, rss = 0, runnable = 0;
  for (const Worker& wk : run.ws) {
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
    mm.downtime_s = merged.downtime_s[i];
    dram += r.dram_bytes;
    if (i == 0) {
      const std::string cfg = short_config(r.torch_config);
      if (!cfg.empty()) m.device += ", " + cfg;
    }
  }
  m.gpu.sm_util = std::clamp(cpu_s / (window_s * run.bed.cores), 0.0, 1.0);
  const double bw = w.device.cpu.mem_bandwidth_gbps > 0 ? w.device.cpu.mem_bandwidth_gbps : 20;
  m.gpu.mem_bw_util = std::clamp(dram / window_s / (bw * 1e9), 0.0, 1.0);
  m.gpu.vram_used_gb = rss / 1e9;
  m.gpu.clock_mhz = runnable;
  if (nvml != nullptr && nvml->samples() > 0) {
    m.gpu = nvml->mean();  // the device's own counters replace the CPU-side proxies
    m.device += ", NVML";
  } else if (!nvml_error.empty()) {
    m.device += ", " + nvml_error + " (CPU-side proxies)";
  }
}

}  // namespace corun::torchbed
