// The torch testbed's parent side: spawns one worker per running model, releases them
// together, samples their CPU time, memory and runnable threads, and turns their reports
// into a Measurement. Torch-free: the parent never initialises a torch thread pool.
// The co-run's steps live in torch_window.cc and torch_results.cc, its processes in
// torch_workers.cc.

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>

#include "corun/torchbed/torchbed.h"
#include "nvml.h"
#include "torch_testbed_internal.h"

namespace corun {

namespace {

int online_cores() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace

struct TorchTestbed::State {
  /// One co-run at a time on this machine; also guards `pool`.
  std::mutex measure_mutex;
  /// torch-cuda: the GPU's own counters, opened on the first measurement; when NVML cannot
  /// be opened, `nvml_error` says why and the CPU-side proxies stand in.
  std::unique_ptr<torchbed::NvmlSampler> nvml;  // GUARDED_BY(measure_mutex)
  std::string nvml_error;                       // GUARDED_BY(measure_mutex)
  bool nvml_tried = false;                      // GUARDED_BY(measure_mutex)
  /// The idle workers and each model's copy in force. Declared last, so that its workers are
  /// stopped before the counters close.
  torchbed::WorkerPool pool;  // GUARDED_BY(measure_mutex)

  /// The GPU's counters, opened on the first measurement of a GPU device; null if there are none.
  torchbed::NvmlSampler* open_nvml(const std::string& device);
};

torchbed::NvmlSampler* TorchTestbed::State::open_nvml(const std::string& device) {
  if (device != "cpu" && !nvml_tried) {
    nvml_tried = true;
    if (auto s = torchbed::NvmlSampler::open()) {
      nvml = std::move(*s);
    } else {
      nvml_error = s.error().what();
    }
  }
  return nvml.get();
}

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

Measurement TorchTestbed::measure(const Context& ctx, const Workload& w,
                                  std::span<const std::int32_t> config,
                                  const MeasureOptions& options) const {
  Measurement m;
  m.testbed = std::string(name());
  m.device = w.device.name + " host CPU (" + std::to_string(options_.cores) + " cores)";
  auto fail_all = [&](const std::string& why) {
    m.error = why;
    for (auto& mm : m.models) mm.error = why;
    return m;
  };
  torchbed::CoRun run{ctx, w, options, options_, m, {}, {}};
  if (const std::string why = torchbed::plan_workers(run, config); !why.empty()) {
    return fail_all(why);
  }
  if (run.ws.empty()) return m;

  std::lock_guard<std::mutex> lock(state_->measure_mutex);
  torchbed::NvmlSampler* const nvml = state_->open_nvml(options_.device);
  if (nvml != nullptr) nvml->reset();
  torchbed::place_copies(run, state_->pool);
  const bool all_ready = torchbed::await_setup(run);
  torchbed::Window window(run, state_->pool, all_ready);
  if (all_ready) window.serve(nvml);
  torchbed::settle_workers(run, state_->pool, all_ready);
  if (torchbed::record_failures(run)) return m;
  torchbed::summarise(run, nvml, state_->nvml_error);
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
