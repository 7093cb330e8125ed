#pragma once

// The physics of one shared GPU, used by both of corun's problems: the simulator's steady state
// of co-running models (src/testbed/sim.cc) and the tool executor's discrete events
// (src/mapping/executor.cc). One phase of GPU work (a PhaseCost: FLOPs, DRAM bytes, kernels,
// thread blocks) becomes a roofline shape on the device's peaks; what co-runners do to it (MPS /
// SM sharing, DRAM bandwidth saturation and loaded latency, L2 interference, launch delay, the
// power-capped clock) is an environment; PCIe copies cost latency plus bytes over the link.
// Every constant lives in src/testbed/sim_params.h with its source; docs/testbed.md derives the
// equations.

#include "corun/catalog/device.h"
#include "corun/catalog/model.h"
#include "corun/catalog/precision.h"

namespace corun::gpu {

/// @brief Hidden multipliers of the physical parameters (1 everywhere: the catalog's twin).
/// SimTruth carries them for the simulator; everything else uses the defaults.
struct Scales {
  double bandwidth = 1;       ///< achievable DRAM bandwidth
  double compute = 1;         ///< sustained math throughput
  double l2_sensitivity = 1;  ///< how much co-runners' L2 pressure slows a phase
  double launch = 1;          ///< per-kernel launch and fixed costs
  double power = 1;           ///< dynamic power
};

/// @brief Load that others put on the GPU while one phase runs, as the phase sees it. The
/// simulator's unmanaged co-tenant and the tool executor's co-running models are both one.
struct Load {
  double active = 0;    ///< co-located workloads (for the launch delay)
  double sms = 0;       ///< SMs they hold
  double bw = 0;        ///< DRAM demand in units of achievable bandwidth
  double press = 0;     ///< L2 pressure on the phase
  double activity = 0;  ///< SM power activity (fraction of all SMs computing)
  double mem_util = 0;  ///< fraction of datasheet bandwidth (for power)
};

/// @brief The device as the physics sees it: SMs, achievable bandwidth, L2, clocks, power.
struct DeviceModel {
  double sms = 1;
  double dram_bytes_s = 1;  ///< achievable (efficiency x datasheet x scale), bytes/s
  double peak_dram_bytes_s = 1;
  double l2_bytes = 1;
  double l2_bytes_s = 1;
  double boost_mhz = 1;
  double base_mhz = 1;
  double tdp_w = 1;
  double idle_w = 0;
  double cap_w = 1;  ///< power limit in force (TDP unless an administrator lowered it)
  double pcie_bytes_s = 1;
  double compute_scale = 1;
  double l2_scale = 1;
  double fixed_s = 0;  ///< per-kernel fixed cost alone (ramp-up, tail, dependency bubble)
  double launch_scale = 1;
  double power_scale = 1;
};

/// @brief The physics view of `device` under `scales`, with power limit `power_cap_w` (0: TDP).
DeviceModel device_model(const Device& device, const Scales& scales = {}, double power_cap_w = 0);

/// @brief An unmanaged co-tenant holding `sm_util` of the SMs and `bandwidth_util` of the
/// achievable bandwidth (each clamped to [0, 1]); zeros: none.
Load cotenant_load(const DeviceModel& dev, double sm_util, double bandwidth_util);

/// @brief Sustained math throughput in FLOP/s of precision `p` on the whole device.
double sustained_flops(const Device& device, Precision p);

/// @brief Launch/scheduling delay per kernel with `workloads` (>= 1, fractional) co-located
/// workloads, seconds.
double launch_delay_s(double workloads);

/// @brief One host<->device copy of `bytes` over PCIe alone, seconds (0 for no bytes).
double pcie_copy_s(double bytes, const DeviceModel& dev);

/// @brief One GPU phase: everything that does not depend on co-runners.
struct Shape {
  double kernels = 1;
  double bytes = 0;
  double sms = 1;               ///< SMs its kernels keep busy alone: MPS cap soft-min blocks
  double compute_s = 0;         ///< math time on `sms` SMs at boost clock
  double memory_s = 0;          ///< DRAM time at the bandwidth `sms` SMs can pull
  double alone_s = 0;           ///< standalone time (one workload's launch delay)
  double kernel_fixed_s = 0;    ///< per-kernel fixed cost alone (DeviceModel::fixed_s, or an
                                ///< LLM step's kernel-class mean)
  double alone_cv2 = 0;         ///< squared CV of its time alone (clock, cache, launch jitter)
  double bw_demand = 0;         ///< fraction of achievable DRAM bandwidth pulled while running
  double l2_pressure = 0;       ///< L2 pressure exerted on co-runners while running
  double l2_sensitivity = 0;    ///< how much of its memory traffic others' L2 use can evict
  double compute_fraction = 0;  ///< compute_s / (compute_s + memory_s), for power
  double host_s = 0;  ///< host work in the phase (an LLM's first-token sampling), not stretched
                      ///< by co-runners on the GPU
};

/// @brief SM power activity of work holding `held_sms` SMs, `compute_fraction` of its time
/// computing (the rest stalled on memory): fraction of all SMs at full compute power.
double power_activity(double held_sms, double compute_fraction, const DeviceModel& dev);

/// @brief The shape of phase `c` run at `flops_per_s` (sustained_flops x compute scale) with
/// `element_bytes` per activation element, its MPS client capped at `cap_sms` SMs.
Shape make_shape(const PhaseCost& c, const DeviceModel& dev, double flops_per_s,
                 double element_bytes, double cap_sms);

/// @brief What co-runners do to one phase.
struct Env {
  double sm_slow = 1;      ///< compute stretch from MPS cap and SM oversubscription
  double sm_cv2 = 0;       ///< its squared CV over co-runner on/off states
  double mem_slow = 1;     ///< memory stretch from DRAM contention
  double mem_cv2 = 0;      ///< its squared CV
  double mem_latency = 1;  ///< loaded-latency stretch of DRAM accesses
  double l2 = 0;           ///< L2 interference (fractional extra memory traffic)
  double launch_s = 0;     ///< per-kernel launch delay
  double fixed_s = 0;      ///< per-kernel fixed cost alone (DeviceModel::fixed_s)
  double clock_ratio = 1;  ///< clock / boost
};

/// @brief A contended phase time.
struct PhaseTime {
  double total_s = 0;
  double cv2 = 0;  ///< service-time variability from co-runner on/off states (plus jitter)
};

/// @brief Time of phase `s` in environment `e`.
PhaseTime contended(const Shape& s, const Env& e);

/// @brief The environment of phase `me` (its client holding up to `cap_sms` SMs, `mult` of
/// its own jobs at once) when `others` are all running: the deterministic case, used by the
/// executor at each event and by the simulator's mean-field fallback.
Env environment(const Shape& me, double cap_sms, double mult, const Load& others,
                const DeviceModel& dev, double clock_ratio);

/// @brief Memory stretch at total DRAM demand d (units of achievable bandwidth).
double dram_stretch(double d);
/// @brief Loaded DRAM latency relative to idle at total demand d.
double dram_latency(double d);
/// @brief Extra memory traffic of a phase of L2 sensitivity `sensitivity` under others'
/// L2 load `load` (saturating: once the cache is thrashed more co-runners add little).
double l2_interference(double sensitivity, double load);
/// @brief Deterministic L2 pair factor of `aggressor` on `victim` (family matrix and a
/// per-pair jitter from the catalog names).
double pair_factor(const ModelArch& victim, const ModelArch& aggressor);

/// @brief Board power at SM activity, bandwidth utilisation and clock ratio, watts.
double power_at(const DeviceModel& dev, double sm_activity, double mem_util, double ratio);

/// @brief Where the power limiter settles.
struct Clock {
  double ratio = 1;    ///< clock / boost
  double power_w = 0;  ///< board power at that clock
};
/// @brief The power-capped clock at SM activity `sm_activity` (clamped to 1) and bandwidth
/// utilisation `mem_util` (fraction of datasheet).
Clock power_capped_clock(const DeviceModel& dev, double sm_activity, double mem_util);

/// @brief The GPU phases of one request of a catalog model, split the way contention treats
/// them: a main phase (forward pass, speech encoder, or all prefill chunks of an LLM
/// request) and `decode_steps` repetitions of one decode step.
struct ModelPhases {
  PhaseCost main;
  PhaseCost decode;
  double decode_steps = 0;
  double chunks = 1;  ///< LLM prefill chunks
};

/// @brief Speech model: forward_cost(m, batch, size, p) split into the encoder and
/// speech_decode_tokens decode steps at the mean self-attention context.
ModelPhases speech_phases(const ModelArch& m, int batch, int size, Precision p);

/// @brief LLM prefill of `prompt` tokens in chunks of `chunk` (clamped to [1, prompt]) as one
/// main phase; decode of `output` tokens at batch 1, at the mean context.
ModelPhases llm_phases(const ModelArch& m, int prompt, int output, int chunk, Precision p);

/// @brief One LLM request alone on its engine (one sequence), as the simulator's LLM path
/// builds it from engine steps (src/testbed/llm_step.h): the prefill in chunks as one phase
/// (the first token's host work in its host_s) and the decode step at batch 1 at the request's
/// mean context, `decode_steps` times.
struct LlmRequestShapes {
  Shape prefill;
  Shape decode;
  double decode_steps = 0;  ///< output tokens
  double chunks = 1;        ///< prefill chunks
};

/// @brief The shapes of a `prompt` + `output` token request of LLM `m` in precision `p`,
/// prefilled in chunks of `chunk` tokens, on `device` (physics view `dev`), its client capped
/// at `cap_sms` SMs.
LlmRequestShapes llm_request_shapes(const ModelArch& m, int prompt, int output, int chunk,
                                    Precision p, const Device& device, const DeviceModel& dev,
                                    double cap_sms);

/// @brief `a + t (b - a)` field by field.
PhaseCost lerp(const PhaseCost& a, const PhaseCost& b, double t);

}  // namespace corun::gpu
