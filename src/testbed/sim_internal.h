#pragma once

// The simulated testbed's model, shared by its files: the device view, one running model with
// its phases and fixed-point state, the LLM engine's state, the GPU's solution and the
// measurement noise, and the steps of one measure() call that pass them on (setup in
// sim_setup.cc, the fixed point in sim_solve.cc, reporting in sim_report.cc). Private to
// src/testbed.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "corun/catalog/device.h"
#include "corun/catalog/model.h"
#include "corun/testbed/gpu_model.h"
#include "corun/testbed/sim.h"
#include "corun/testbed/testbed.h"

namespace corun::sim {

using gpu::PhaseTime;
using gpu::Shape;

// ---------------------------------------------------------------------------------------------
// Device view.

// The shared physics view of the device plus an unmanaged co-tenant: always active, it holds
// SMs and bandwidth, presses on L2, burns power and counts as one more workload for the
// launch delay.
struct DeviceModel : gpu::DeviceModel {
  gpu::Load bg;
};

/// The device view for `d` under `truth` and the conditions `c`.
DeviceModel device_model(const Device& d, const SimTruth& truth, const Conditions& c);

// ---------------------------------------------------------------------------------------------
// One running model.

struct SimModel {
  std::size_t index = 0;  // in Workload::models
  const ModelSpec* spec = nullptr;
  Settings s;
  bool llm = false;
  double cap_sms = 1;

  // Offered load. Server models (vision, encoder, speech): a job is a batch; LLM: a request.
  // Closed loop (benchmark mode): no rate given, `in_flight` requests kept in flight, each
  // sent when the previous answer returns. A demand of 0 keeps one per server.
  bool closed_loop = false;
  int in_flight = 1;     // closed loop: requests in flight; those beyond `servers` queue
  double item_rate = 0;  // frames/s or requests/s offered to the GPU (after frame skip)
  double items_per_job = 1;
  double job_rate = 0;
  int servers = 1;         // concurrent jobs: request_concurrency, or fewer in flight
  double arrival_cv2 = 1;  // of jobs
  double item_cv2 = 1;     // of items (for counting noise)

  // Phases.
  Shape main;                // forward pass, speech encoder, or all prefill chunks of a request
  double chunks = 1;         // LLM prefill chunks per request
  PhaseCost dec_lo, dec_hi;  // speech: decode step cost at batch dec_lo_b and dec_hi_b
  double dec_lo_b = 1, dec_hi_b = 1;
  const Device* device = nullptr;  // LLM: the catalog device (kernel parameters, peaks)
  double dec_context = 0;          // LLM: mean cached context of a decoding sequence
  Shape dec;                       // decode step at the current batch
  Shape dec_full;                  // LLM decode step at full concurrency (capacity)
  double dec_lo_alone_s = 0;       // standalone decode step at batch dec_lo_b
  double dec_steps = 0;            // decode steps per job (speech); output tokens (LLM)
  // LLM KV cache (space.h, llm_kv_cache_bytes): the sequences it holds at their mean
  // occupancy, those the engine admits while a prompt fits, and the recompute of a preempted
  // sequence over its prefill.
  double kv_seqs = 1e300, kv_admit = 1e300, recompute_ratio = 0;
  double flops_per_s = 1, element_bytes = 2;

  // Fixed-point state.
  double u = 0;      // fraction of time at least one of its kernels is on the GPU
  double mult = 1;   // its own jobs running concurrently while busy
  double batch = 1;  // LLM: mean sequences in decode
  double rate = 0;   // jobs/s actually served
  PhaseTime t_main, t_dec, t_dec_full;
  double main_share = 1;  // fraction of its busy time in the main phase

  // Co-runner view, recomputed every iteration.
  double held_sms = 0, bw = 0, press = 0, power_activity = 0;
};

/// A running model: its settings, offered load and phases, standalone.
SimModel make_model(std::size_t index, const ModelSpec& spec, const Settings& s,
                    const Device& device, const DeviceModel& dev);

/// An LLM's decode step at `batch` sequences of its mean context.
Shape llm_decode_shape(const SimModel& m, double batch, const DeviceModel& dev);

// ---------------------------------------------------------------------------------------------
// LLM engine: continuous batching with chunked prefill, derived from contended phase times.

struct LlmState {
  double capacity = 0;        // requests/s at full concurrency
  double rate = 0;            // requests/s served
  double prefill_share = 0;   // others' prefill time per unit time while a sequence decodes
  double tpot_s = 0;          // mean time per output token
  double ttft_engine_s = 0;   // prefill plus interleaved decode steps, without slot wait
  double prefill_wait_s = 0;  // waiting behind another request's prefill
  double residence_s = 0;     // slot occupancy of one request
  double batch = 1;           // new mean decode batch
  double busy = 0;            // engine busy fraction
  double preempted = 0;       // fraction of requests preempted (KV cache full) and recomputed
  double prefill_work_s = 0;  // prefill per request, its share of recomputes included
};

/// The LLM engine's state at the model's contended phase times, preemptions included.
LlmState llm_state(const SimModel& m);

// ---------------------------------------------------------------------------------------------
// The fixed point.

struct GpuSolution {
  double clock_ratio = 1;
  double sm_util = 0;
  double mem_util = 0;  // fraction of datasheet bandwidth
  double power_w = 0;
};

/// Solves the co-runners' contention to a damped fixed point (`pair`: the pair factors, victim
/// row, aggressor column); the GPU's aggregate state.
GpuSolution solve(std::vector<SimModel>& ms, const DeviceModel& dev, const double* pair);

// ---------------------------------------------------------------------------------------------
// Reporting.

struct Noise {
  double median = 0, tail = 0, hiccup = 0, count = 0, ttft = 0, tpot = 0;
};

/// The seeded noise of one model's metrics under one configuration.
Noise draw_noise(std::uint64_t seed, std::size_t model, std::uint64_t config_hash);

/// Latency percentiles and throughput of a server model (vision, encoder, speech).
void report_server(const SimModel& m, const MeasureOptions& o, const Noise& nz, ModelMetrics& mm);

/// Latency, TTFT and TPOT percentiles, throughput and preemptions of an LLM.
void report_llm(const SimModel& m, const MeasureOptions& o, const Noise& nz, ModelMetrics& mm);

}  // namespace corun::sim
