#pragma once

// The `torch-cpu` testbed: real libtorch inference, one worker process per co-running model.
// This header is torch-free; libtorch is confined to src/torchbed/zoo.cc.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "corun/catalog/model.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief How the torch testbed runs its workers.
struct TorchBedOptions {
  /// Program exec'd for each worker, with `worker_args`: the corun-torch-worker program,
  /// which the corun binary finds next to itself.
  std::string worker_exe;
  std::vector<std::string> worker_args;
  std::string device = "cpu";     ///< torch::Device of every worker: "cpu" or "cuda"
  double setup_timeout_s = 120;  ///< building and warming up a model, per measurement
  double grace_s = 20;           ///< after the window, before a silent worker is killed
  int cores = 0;                 ///< CPU cores (0: the online count); scales `threads`
  /// Workers kept alive between measurements, blocked on their input, so that the next
  /// measurement of the same model and settings skips starting a process and building the
  /// model (seconds on two cores). 24 covers the local configurations of a four-model
  /// workload; a scaled zoo model holds 100-300 MB. 0: a fresh process per model and
  /// measurement (torch-cuda: idle workers would keep their device memory and contexts).
  int max_idle_workers = 24;
  /// Each model's requests replay one seeded Poisson trace, the same in every window and
  /// measurement (drawn from the model's name), so that configurations are compared on the
  /// same requests: with a few requests per window, whether one happens to queue behind
  /// another moves a p95 TTFT by 2-5x, which is sampling noise of the workload, not of the
  /// machine. The measurement seed then seeds only the weights. false: every measurement
  /// draws its arrivals from its own seed.
  bool replay_arrivals = true;
};

/// @brief Threads a model's worker runs with: the CPU analogue of its `sm_share` cap,
/// `max(1, round(sm_share / 100 · cores))`.
int torch_threads_for(double sm_share, int cores);

/// @brief A catalog architecture reduced so that a co-run on a two-core CPU finishes in
/// seconds (see docs/testbed.md, "torch-cpu"): transformers keep at most 4 layers with a
/// hidden size of at most 512 (head size kept, heads, kv heads and MLP width scaled with
/// it) and at most 16384 vocabulary entries; CNNs above 7 GFLOPs at their reference size
/// have their channel counts halved. Smaller architectures are returned unchanged.
ModelArch scale_for_cpu(const ModelArch& arch);

/// @brief Ground truth from real libtorch runs. Each running model gets its own worker
/// process (as GPU clients would), which builds the model from its (scaled) catalog
/// architecture with seeded random weights, waits at a start barrier, then serves its
/// demand open loop for the window. The parent samples the workers' CPU time, resident
/// memory and runnable threads, and maps them onto GpuState:
/// sm_util = CPU-seconds of the workers / (window · cores), mem_bw_util = estimated DRAM
/// bytes of the work done (catalog cost functions) / (window · host bandwidth),
/// vram_used_gb = summed resident memory, clock_mhz = mean runnable worker threads
/// (power_w stays 0). A crashed, failing or hung worker is killed and reported as a failed
/// measurement with its reason. Workers that served a window cleanly are kept (up to
/// `max_idle_workers`, least recently used stopped first) and reused by later measurements
/// of the same model and settings; the destructor stops them. measure() is const; calls are
/// serialised (two co-runs at once would measure each other).
///
/// Transitions are carried out, not modelled: a model whose window begins a change
/// (TransitionCharge::begins) is restarted (its copy in force killed, a new process started,
/// built and warmed up), reloaded in its own process, or, make-before-break (no outage in the
/// charge), swapped to a new process started beside the old one, which serves until the new
/// one is ready. What arrives while no copy serves waits (requests) or is lost (frames), and
/// each model's ModelMetrics::downtime_s is the measured time from losing its copy to the new
/// one being ready (docs/testbed.md, "Transitions on torch-cpu"). The copy in force is the
/// worker that served the model's last measurement.
class TorchTestbed final : public Testbed {
 public:
  explicit TorchTestbed(TorchBedOptions options);
  ~TorchTestbed() override;
  [[nodiscard]] std::string_view name() const override;
  Measurement measure(const Context& ctx, const Workload& w, std::span<const std::int32_t> config,
                      const MeasureOptions& options) const override;

 private:
  struct State;
  TorchBedOptions options_;
  std::unique_ptr<State> state_;
};

/// @brief Registers "torch-cpu" (and "torch-cuda" when libtorch has CUDA) with
/// make_testbed, with workers exec'd from `worker_exe`. Idempotent.
void register_torch_testbeds(const std::string& worker_exe);

/// @brief The worker's main loop: reads one job line from `in_fd`, builds the model,
/// answers "ready", waits for "go", serves the window and writes one report line to
/// `out_fd`. Returns the process exit code.
int torch_worker_main(int in_fd, int out_fd);

/// @brief libtorch's build configuration and the BLAS it loaded (for provenance).
std::string torch_build_info();

}  // namespace corun
