// An LLM's KV cache on the simulated GPU: sized from the memory the plan leaves its engine
// (space.h, llm_kv_cache_bytes), and what vLLM does when the running sequences outgrow it.
//
// Hand values: Llama-2-7B has 32 layers with 32 KV heads of 128 dimensions (Touvron et al.,
// Llama 2, arXiv 2307.09288; its config.json), so one token keeps K and V of
// 2 x 32 x 32 x 128 x 2 bytes = 524,288 bytes in FP16. An NVIDIA L4 has 24 GB.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "sim_test_util.h"

namespace corun::kv_cache_test {
namespace {

using testing::make_spec;
using testing::make_workload;
using testing::settings;

constexpr double kLlama2KvBytesPerToken = 524'288;

Workload chat_on_l4(int concurrency, Demand d) {
  Settings s = settings(Precision::kFp16, 1, 100, concurrency);
  return make_workload("l4", {make_spec("chat", "llama-2-7b", s, d)});
}

Measurement measure_exact(const Workload& w) {
  const SimTestbed sim;
  MeasureOptions o(60, {}, false);  // no measurement noise: the physics alone
  return sim.measure(Context{}, w, JointConfig{0}, o);
}

TEST(KvCache, HoldsEveryConcurrentSequenceWhenItFits) {
  const Workload w = chat_on_l4(4, Demand{.rps = 0.1, .prompt_tokens = 1024, .output_tokens = 256});
  // 4 sequences x (1,024 + 256) tokens x 524,288 bytes.
  EXPECT_DOUBLE_EQ(llm_kv_cache_bytes(w.models[0], w.models[0].base, w.device.vram_bytes()),
                   4.0 * 1280 * kLlama2KvBytesPerToken);
  const Measurement m = measure_exact(w);
  ASSERT_TRUE(m.ok()) << m.error;
  ASSERT_TRUE(m.models[0].preemptions_per_request.has_value());
  EXPECT_EQ(*m.models[0].preemptions_per_request, 0);
}

TEST(KvCache, AConcurrencyBeyondTheDeviceRunsKvLimitedInsteadOfOutOfMemory) {
  const Workload w =
      chat_on_l4(32, Demand{.rps = 0.1, .prompt_tokens = 1024, .output_tokens = 256});
  const ModelSpec& chat = w.models[0];
  const double device = w.device.vram_bytes();
  // 32 full sequences need 21.5 GB of KV cache alone, beside 13.5 GB of weights: more than an
  // L4. vLLM starts anyway and holds what fits; the engine takes its 0.9 of the device.
  const double full = model_vram_bytes(chat, chat.base, std::numeric_limits<double>::infinity());
  EXPECT_DOUBLE_EQ(model_vram_bytes(chat, chat.base, 1e15), full);  // a device that holds it
  EXPECT_GT(full, device);
  EXPECT_NEAR(model_vram_bytes(chat, chat.base, device), 0.9 * device, 1.0);
  const double held = llm_kv_cache_bytes(chat, chat.base, device);
  EXPECT_LT(held, 32.0 * 1280 * kLlama2KvBytesPerToken);
  EXPECT_GE(held, 1280 * kLlama2KvBytesPerToken);  // at least one whole sequence
  const Measurement m = measure_exact(w);
  ASSERT_TRUE(m.ok()) << m.error;
  EXPECT_NEAR(m.gpu.vram_used_gb, 0.9 * device / 1e9, 1e-9);
}

TEST(KvCache, ADeviceThatCannotHoldOneSequenceIsOutOfMemory) {
  // One 26,000-token sequence keeps 26,000 x 524,288 bytes = 13.6 GB of KV; beside 13.5 GB of
  // weights that is more than the L4's 24.15 GB, so no engine starts (vLLM refuses a
  // --max-model-len its cache cannot hold once).
  const Workload w =
      chat_on_l4(1, Demand{.rps = 0.1, .prompt_tokens = 22'000, .output_tokens = 4'000});
  const Measurement m = measure_exact(w);
  EXPECT_FALSE(m.ok());
  EXPECT_NE(m.error.find("out of memory"), std::string::npos) << m.error;
}

// Output-heavy chat (256-token prompts, 1,024 output tokens) at a load that keeps the engine
// full. A running sequence holds 256 + 512 tokens on average, so the cache holds
// floor(tokens / 768) sequences at once: a --max-num-seqs of that many runs without preemption;
// 32 runs the same number at once (the rest do not fit), but admits more while their prompts
// fit and preempts them as they grow: the same slots plus recomputation.
TEST(KvCache, PreemptionShowsInTtftAndLatency) {
  const Demand d{.rps = 0.25, .prompt_tokens = 256, .output_tokens = 1024};
  const Workload big = chat_on_l4(32, d);
  const double tokens =
      llm_kv_cache_bytes(big.models[0], big.models[0].base, big.device.vram_bytes()) /
      kLlama2KvBytesPerToken;
  const int fits = static_cast<int>(std::floor(tokens / 768));
  ASSERT_GT(fits, 4);
  ASSERT_LT(fits, 32);
  const Measurement limited = measure_exact(big);
  const Measurement fitting = measure_exact(chat_on_l4(fits, d));
  ASSERT_TRUE(limited.ok()) << limited.error;
  ASSERT_TRUE(fitting.ok()) << fitting.error;
  const ModelMetrics& a = limited.models[0];
  const ModelMetrics& b = fitting.models[0];
  EXPECT_EQ(*b.preemptions_per_request, 0);
  EXPECT_GT(*a.preemptions_per_request, 0.05);
  EXPECT_GT(*a.ttft_ms_p95, *b.ttft_ms_p95);
  EXPECT_GT(a.latency_ms_p95, b.latency_ms_p95);
  EXPECT_GT(*a.tpot_ms_p95, *b.tpot_ms_p95);  // decode steps stall behind the recomputes
  EXPECT_LT(a.throughput, b.throughput);
}

TEST(KvCache, ALightLoadDoesNotFillIt) {
  // The same KV-limited engine at a load that keeps fewer sequences than fit: no preemption.
  const Workload w =
      chat_on_l4(32, Demand{.rps = 0.02, .prompt_tokens = 256, .output_tokens = 1024});
  const Measurement m = measure_exact(w);
  ASSERT_TRUE(m.ok()) << m.error;
  EXPECT_EQ(*m.models[0].preemptions_per_request, 0);
}

TEST(KvCache, ADemandWithoutTokenLengthsKeepsItsSlots) {
  // Built in code without lengths (the workload parser requires them): the cache sizes to
  // nothing and must limit nothing. 8 requests kept in flight on 8 slots give about 1.8 times
  // the output of 1 slot (one-token requests: the prefills and first-token work serialise);
  // a cache that held no sequence would leave 1 slot and the same output.
  const Workload eight = chat_on_l4(8, Demand{.concurrency = 8});
  const Workload one = chat_on_l4(1, Demand{.concurrency = 8});
  EXPECT_EQ(llm_kv_cache_bytes(eight.models[0], eight.models[0].base, eight.device.vram_bytes()),
            0);
  const Measurement a = measure_exact(eight);
  const Measurement b = measure_exact(one);
  ASSERT_TRUE(a.ok() && b.ok()) << a.error << b.error;
  EXPECT_GT(a.models[0].throughput, 1.5 * b.models[0].throughput);
  EXPECT_EQ(*a.models[0].preemptions_per_request, 0);
}

}  // namespace
}  // namespace corun::kv_cache_test
