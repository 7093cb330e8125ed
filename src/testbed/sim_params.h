#pragma once

// Every calibrated parameter of the simulated testbed, with its source or the published
// magnitude it was tuned to reproduce. docs/testbed.md explains how each one enters the model
// and tabulates the fidelity checks (tests/testbed/sim_fidelity_test.cc) they pass.
// Private to src/testbed.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>

#include "corun/catalog/model.h"
#include "corun/catalog/precision.h"

namespace corun::sim {

// ---------------------------------------------------------------------------------------------
// Roofline of one phase.

/// Euclidean norm of two non-negative times: how a phase's compute and memory times combine,
/// and how independent noise terms add (std::hypot guards against overflow, at several times
/// the cost; times here are far from the double range).
inline double norm2(double a, double b) { return std::sqrt(a * a + b * b); }

/// Smooth minimum: diminishing returns instead of a hard kink.
inline double softmin(double a, double b) {
  return 1.0 / std::sqrt(1.0 / (a * a) + 1.0 / (b * b));
}

/// Fraction of the datasheet math peak that inference kernels sustain when they have enough
/// thread blocks. FP32 CUDA-core convolutions/GEMMs reach ~80-90 %; tensor-core paths lose
/// more to epilogues, layout transforms and small K. The FP32 value is tuned so that the
/// scaling part of iGniter's V100 ResNet-50 curve (TPDS'23; ~14 TFLOP/s effective at batch 32,
/// 100 % SMs, i.e. 262 GFLOP in ~18 ms) is reproduced; the others are assumptions of the same
/// order as MLPerf Inference tensor-core utilisation (about half of peak).
constexpr double compute_efficiency(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return 0.85;
    case Precision::kFp16:
    case Precision::kBf16:
      return 0.55;
    case Precision::kInt8:
      return 0.50;
    case Precision::kAwq:
      // Weight-only 4-bit: dequantisation sits in the GEMM main loop.
      return 0.40;
  }
  return 0.5;
}

/// Fraction of datasheet DRAM bandwidth a streaming kernel sustains. REFERENCES.md: a
/// device-to-device copy on an H200 measured 4.3 TB/s of the 4.8 TB/s datasheet value (0.90).
inline constexpr double kDramEfficiency = 0.90;

/// Fraction of the SMs needed to pull the full DRAM bandwidth. Little's law: bandwidth x
/// latency (900 GB/s x ~0.5 us on V100 = 450 KB in flight) over the outstanding loads one SM
/// sustains (~16-32 KB) gives ~15-30 SMs of 80. Below it a kernel (or an MPS client with a
/// small share) is latency-bound on memory.
inline constexpr double kSmFractionForFullBandwidth = 0.30;

/// Thread blocks a kernel actually launches per 128x128 output tile of PhaseCost::ctas. When
/// the 128x128 grid under-fills the GPU, cuDNN/cuBLAS heuristics switch to 64x64 tiles or
/// split-K (4 blocks per 128x128 tile); big grids are unaffected because the SM cap binds
/// first. Without it, ResNet-50 at batch 1 (17 tiles per kernel) could not use more than
/// 17 of V100's 80 SMs and iGniter's 50 % -> 100 % gain would vanish.
inline constexpr double kBlocksPerTile = 4;

/// Fixed cost of every kernel besides the launch: ramp-up, tail wave and the inter-kernel
/// dependency bubble on the device. Tuned so that the batch-1 part of iGniter's V100 ResNet-50
/// curve that does not scale with SMs (~1.6 ms of 2.39 ms at 100 %) is reproduced together
/// with the CTA-parallelism limit.
inline constexpr double kKernelFixedS = 18e-6;

/// Launch/scheduling delay per kernel with 1..5 co-located workloads, ms (iGniter, TPDS'23,
/// measured on V100 under MPS). Beyond 5 it grows linearly with the last step (0.0051 ms).
inline constexpr std::array<double, 5> kLaunchDelayMs = {0.0014, 0.0017, 0.0068, 0.0119, 0.0170};

/// Fixed cost of one host<->device copy besides its bytes over the link (cudaMemcpy of a small
/// pinned buffer: about 10 us end to end, an order of magnitude, not a measurement).
inline constexpr double kPcieCopyLatencyS = 10e-6;

// ---------------------------------------------------------------------------------------------
// LLM engine steps (src/testbed/llm_step.cc): per kernel class, per device generation.
//
// Calibrated on operator profiles of Llama-2-7B from the Vidur simulator's repository
// (microsoft/vidur, MLSys'24, MIT licence: data/profiling/compute/{a100,h100}/meta-llama/
// Llama-2-7b-hf/mlp.csv, per-operator medians at 1..4096 tokens, tensor parallelism 1), by
// least squares on log time; the "calibrate" rows of tests/data/llm-measurements.csv are their
// per-step sums. Each fitted per-kernel constant includes one workload's launch delay
// (kLaunchDelayMs[0]), which is subtracted here because the simulator adds it.

/// Parameters of one device generation's LLM kernels.
struct LlmKernelParams {
  /// Fraction of the dense tensor peak the linear layers (cuBLAS GEMMs) sustain at large M.
  /// A100: 0.70 (2,048-token MLP up projection: 369 GFLOP in 1.69 ms = 218 TFLOP/s).
  double gemm_efficiency;
  /// Fraction of datasheet bandwidth the weight-streaming GEMV of a decode step sustains.
  /// A100: 0.84 with the fixed cost below (the 1-token QKV projection, 101 MB, takes 65 us).
  double gemv_bandwidth_efficiency;
  /// Per-kernel fixed cost of a GEMM or attention kernel (ramp-up, tail), seconds.
  double gemm_fixed_s;
  /// Fraction of datasheet bandwidth of norms, rotary embedding, activation, adds, embedding.
  double elementwise_bandwidth_efficiency;
  /// Per-kernel fixed cost of an elementwise kernel, seconds (profiled: 2-8 us on A100).
  double elementwise_fixed_s;
  /// Fraction of the dense tensor peak of causal flash attention in a prefill. Not profiled
  /// (Vidur's attention files are LFS pointers upstream): FlashAttention-2 (Dao, 2023) reports
  /// 50-73 % of peak on A100 forward and up to 335 TFLOP/s (34 %) on H100; causal masks and
  /// prompts of <= 2k tokens sit at the low end.
  double attention_prefill_efficiency;
  /// Fraction of datasheet bandwidth of paged decode attention reading the KV cache.
  /// Calibrated on one lmdeploy point (batch 16, 2,048 + 2,048 tokens, "calibrate" in the
  /// table): 0.90, which is also the device-to-device copy bound (kDramEfficiency); validated
  /// on the other batch/context points.
  double attention_kv_bandwidth_efficiency;
};

/// A100 (Ampere, 2,048 dense FP16 tensor FLOPs per SM per clock) and every device that is not
/// Hopper: only A100 and H100 were profiled, so other generations inherit Ampere's fit.
inline constexpr LlmKernelParams kLlmAmpere = {
    .gemm_efficiency = 0.70,
    .gemv_bandwidth_efficiency = 0.84,
    .gemm_fixed_s = 8e-6 - 1.4e-6,
    .elementwise_bandwidth_efficiency = 0.55,
    .elementwise_fixed_s = 3.2e-6 - 1.4e-6,
    .attention_prefill_efficiency = 0.50,
    .attention_kv_bandwidth_efficiency = 0.90,
};
/// H100 SXM (Hopper, 4,096 dense FP16 tensor FLOPs per SM per clock), and H200.
inline constexpr LlmKernelParams kLlmHopper = {
    .gemm_efficiency = 0.72,
    .gemv_bandwidth_efficiency = 0.80,
    .gemm_fixed_s = 6e-6 - 1.4e-6,
    .elementwise_bandwidth_efficiency = 0.63,
    .elementwise_fixed_s = 2.6e-6 - 1.4e-6,
    .attention_prefill_efficiency = 0.34,
    .attention_kv_bandwidth_efficiency = 0.90,  // not profiled on Hopper: Ampere's fit
};
/// Dense FP16 tensor FLOPs per SM per boost clock above which a device is Hopper-class
/// (Volta/Ada 1,024, A100 2,048, GH100 ~3,800 at the catalog's boost clock).
inline constexpr double kHopperTensorFlopsPerSmClock = 3000;

/// Weight-only 4-bit (AWQ) GEMMs dequantise in the main loop: their tensor efficiency is this
/// fraction of FP16's, so they lose to FP16 once a step is compute-bound (large batch, long
/// prefill) and win while it streams weights (small batch). The ratio is the simulator's
/// earlier FP16/AWQ compute-efficiency assumption (0.40 / 0.55), not a measurement.
inline constexpr double kAwqGemmEfficiencyRatio = 0.40 / 0.55;

/// Host-side work of a request's first token besides its GPU steps (admission, first
/// sampling, detokenisation). Calibrated on TensorRT-LLM's 16 ms first-token latency of
/// LLaMA 7B at 128 tokens on A100 (docs/source/performance.md, v0.5 "Low Latency" table).
inline constexpr double kLlmFirstTokenOverheadS = 1.0e-3;

/// Step-to-step variability of an LLM engine step at a constant batch (clock and launch
/// jitter): Vidur's per-operator standard deviations are 0.9 % (GEMMs) to 1.6 % (norms) of
/// their medians (A100, Llama-2-7B, median over token counts).
inline constexpr double kLlmStepCv2 = 0.015 * 0.015;

/// CUDA context, allocator and cuBLAS workspaces of one engine process (as space.cc reserves).
inline constexpr double kLlmRuntimeBytes = 0.4e9;

// ---------------------------------------------------------------------------------------------
// L2 cache interference.

/// L2 bandwidth over DRAM bandwidth. Jia et al., "Dissecting the NVIDIA Volta GPU
/// Architecture via Microbenchmarking" (2018): V100 L2 ~2155 GB/s vs 900 GB/s DRAM (2.4);
/// A100's ratio is similar.
inline constexpr double kL2BandwidthPerDramBandwidth = 2.4;

/// Output-tile edge of the GEMM/convolution kernels (PhaseCost::ctas counts 128x128 tiles):
/// a tile reads (128 + 128) x K elements through L2 for 2 x 128 x 128 x K FLOPs, so L2 traffic
/// is FLOPs x element bytes / 128 on top of the DRAM bytes.
inline constexpr double kTileEdge = 128;

/// Weight of the co-runners' L2 pressure in the slowdown of a fully sensitive phase. gpulet
/// (USENIX ATC'22) fitted slowdown = 0.113 L2_self + 0.716 L2_other + 0.355 DRAM_self +
/// 0.088 DRAM_other + 0.895 on pairs of CNN/BERT inference jobs; the other-L2 weight is used
/// here, multiplied by the victim's own sensitivity (iGniter's self-sensitivity x others'
/// pressure form) and a deterministic pair factor.
inline constexpr double kL2OtherWeight = 0.716;

/// Share of the L2 slowdown that reaches the compute part of a phase. Lost hits become DRAM
/// traffic (the memory part and the latency-bound part feel them in full), but the
/// multi-stage operand pipelines (cp.async / TMA double buffering) of tensor-core and FMA
/// loops hide most of the extra latency. Tuned so that a compute-bound LLM prefill loses only a
/// few percent next to another LLM (TTFT +1.4 % for two LLMs under MPS on an A100).
inline constexpr double kL2ComputeShare = 0.30;

/// Pair factor: how much an aggressor family's L2 pressure hurts a victim family (row =
/// victim, column = aggressor; order vision, encoder, speech, llm). Synthetic, not from a
/// source: it makes interference depend on WHO runs together, not only on aggregate load, the
/// way gpulet's per-pair fits differ. BERT's large GEMM tiles evict CNN feature maps harder
/// than another CNN does; an LLM's streaming decode (little reuse) is a gentler aggressor, and
/// two LLMs interfere least through L2 (their decode traffic is evict-first streaming; two
/// LLMs under MPS on an A100 lost only 1.4 % TTFT).
inline constexpr double kFamilyPair[4][4] = {
    {1.00, 1.30, 1.10, 0.85},  // vision victim
    {1.15, 1.00, 1.05, 0.90},  // encoder victim
    {1.05, 1.05, 1.00, 0.95},  // speech victim
    {0.90, 0.95, 1.00, 0.80},  // llm victim
};

/// Per-pair deterministic jitter (+/-) from a hash of the two catalog names: two models of the
/// same families still interfere differently.
inline constexpr double kPairJitter = 0.20;

/// L2 pressure of an unmanaged co-tenant per unit of the SM share it keeps busy. Not from a
/// source: a co-tenant is an unknown process (a training job, another team's server), so it is
/// given the pressure of a mid-sized CNN at full load, about half the scale's maximum.
inline constexpr double kCoTenantL2Pressure = 0.5;

// ---------------------------------------------------------------------------------------------
// DRAM bandwidth contention.

/// Extra DRAM latency as the bus fills, below saturation: memory time x (1 + gain x load^2).
/// gpulet's DRAM_other weight (0.088) is small next to its L2_other weight (0.716); 0.12 on
/// the memory part of a phase gives a few percent on whole kernels, in that proportion.
inline constexpr double kDramQueueGain = 0.12;

/// Loaded DRAM latency: idle latency x (1 + gain x load^2). Latency stays near idle at low
/// load and rises steeply towards saturation (the usual loaded-latency curve of DRAM
/// subsystems); 0.6 (1.6x at saturation) is tuned so that an LLM's time per output token rises
/// ~20 % next to a decoding neighbour (two LLMs under MPS on an A100: TPOT +19.5 %), where the
/// latency-bound part of each decode kernel is what the neighbour's traffic stretches.
inline constexpr double kLoadedLatencyGain = 0.6;

// ---------------------------------------------------------------------------------------------
// Power and clock.

/// Where the power limiter settles relative to TDP under sustained overload: iGniter measured
/// 296 W on a 300 W V100 with 5 co-located workloads.
inline constexpr double kPowerCapSettle = 296.0 / 300.0;

/// Dynamic SM power grows as clock^exponent (P ~ f V^2 with V roughly proportional to f in
/// the DVFS range, minus the voltage floor near base clock).
inline constexpr double kClockPowerExponent = 2.5;

/// Dynamic power of all SMs fully busy with compute-bound work at boost clock, as a fraction of
/// (TDP - idle). Above 1: a saturated board hits its power cap and throttles, as every modern
/// datacenter GPU does under dense GEMMs. Tuned with kMemoryPowerFullLoad to iGniter's V100
/// 118 W (1 workload) -> 296 W (5 workloads).
inline constexpr double kSmPowerFullLoad = 1.20;
/// Dynamic power of DRAM at full bandwidth, fraction of (TDP - idle) (HBM2 + memory
/// controllers are ~20-25 % of a V100's board power).
inline constexpr double kMemoryPowerFullLoad = 0.22;
/// An SM held by a memory-stalled kernel still burns this fraction of a computing SM's power.
inline constexpr double kStalledSmPower = 0.45;

// ---------------------------------------------------------------------------------------------
// Queueing and noise.

/// Arrival variability of camera frames (periodic, with capture/decode jitter) per frame.
inline constexpr double kFrameJitterCv2 = 0.02;

/// Arrival variability of `n` unsynchronised camera streams of one rate whose frames one
/// served model takes (`streams:`): in each period their frames are n points at independent
/// uniform phases, and the gaps between n uniform points on a circle have squared CV
/// (n - 1) / (n + 1) (uniform spacings: each gap is T x Beta(1, n - 1), mean T / n, variance
/// T^2 (n - 1) / (n^2 (n + 1))). Each camera's own jitter is weighted so that one stream is one
/// camera: 0.02 at n = 1, 0.51 at n = 3, toward 1 (Poisson, the Palm-Khintchine limit of many
/// merged streams) as n grows.
inline double merged_frame_cv2(std::size_t n) {
  const double k = static_cast<double>(std::max<std::size_t>(n, 1));
  return (k - 1) / (k + 1) + 2 / (k + 1) * kFrameJitterCv2;
}
/// Service-time variability of one phase running alone (clock, cache and launch jitter).
inline constexpr double kServiceCv2Alone = 0.0025;
/// Standard normal 95th percentile.
inline constexpr double kZ95 = 1.6449;

/// Measurement noise: log-normal sigma on medians and on throughput counters.
inline constexpr double kMedianNoise = 0.02;
/// Log-normal sigma on 95th percentiles, plus an exponential hiccup with this mean (heavier
/// tail: GC pauses, interrupts, clock excursions) — tails are noisier than medians.
inline constexpr double kTailNoise = 0.04;
/// Upper bound on the log-normal sigma of a percentile's sampling error: with 15 requests in a
/// window the empirical p95 lies roughly between the true p85 and p99 of a queueing-tail
/// distribution, about +-25 % around the p95 for the tails corun meets.
inline constexpr double kMaxQuantileSigma = 0.25;
inline constexpr double kTailHiccupMean = 0.03;
/// Noise on the aggregate GPU counters (nvidia-smi sampling).
inline constexpr double kGpuCounterNoise = 0.01;

// ---------------------------------------------------------------------------------------------
// Fixed point.

/// Damping of the fixed-point iteration (new = old + damping (computed - old)): it starts at
/// kDampingStart and halves, down to kDampingMin, whenever a step fails to contract.
inline constexpr double kDampingStart = 1.0;
inline constexpr double kDampingMin = 0.2;
inline constexpr int kMaxIterations = 80;
/// Stop when busy fractions, batches and the clock ratio move less than this per iteration:
/// far below the measurement noise (a few percent).
inline constexpr double kTolerance = 1e-4;
/// Up to this many running models the co-runners' on/off states are enumerated exactly
/// (2^N subsets); above it their expected demand is used (a mean-field approximation).
inline constexpr int kMaxExactModels = 8;

/// Index of a family in kFamilyPair.
constexpr int family_index(ModelFamily f) {
  switch (f) {
    case ModelFamily::kVision:
      return 0;
    case ModelFamily::kEncoder:
      return 1;
    case ModelFamily::kSpeech:
      return 2;
    case ModelFamily::kLlm:
      return 3;
  }
  return 0;
}

}  // namespace corun::sim
