// Derived model costs against numbers from outside the code: published parameter and FLOP
// counts (each cited where it is used) and hand calculations written out in comments.

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "corun/catalog/catalog.h"
#include "corun/catalog/model.h"

namespace corun::model_cost_test {
namespace {

const ModelArch& model(const std::string& name) {
  static const Catalog c = Catalog::load_embedded().value();
  const ModelArch* m = c.find_model(name);
  if (m == nullptr) {
    ADD_FAILURE() << "no model " << name;
    static const ModelArch empty;
    return empty;
  }
  return *m;
}

/// |derived / expected - 1| <= tolerance.
::testing::AssertionResult within(double derived, double expected, double tolerance) {
  const double rel = derived / expected - 1;
  if (std::fabs(rel) <= tolerance) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "derived " << derived << " vs expected " << expected << " (" << rel * 100
         << " %, tolerance " << tolerance * 100 << " %)";
}

struct Published {
  const char* name;
  double params_m;
  double gflops;
};

// Ultralytics YOLO11 docs (docs.ultralytics.com/models/yolo11), detection table at 640 px:
// params (M) and FLOPs (B).
constexpr Published kYolo11[] = {{"yolo11n", 2.6, 6.5},
                                 {"yolo11s", 9.4, 21.5},
                                 {"yolo11m", 20.1, 68.0},
                                 {"yolo11l", 25.3, 86.9},
                                 {"yolo11x", 56.9, 194.9}};

TEST(ModelCostTest, Yolo11FlopsAndParamsMatchUltralytics) {
  for (const Published& y : kYolo11) {
    SCOPED_TRACE(y.name);
    const ModelArch& m = model(y.name);
    EXPECT_EQ(m.family, ModelFamily::kVision);
    EXPECT_TRUE(within(forward_cost(m, 1, 640, Precision::kFp16).flops / 1e9, y.gflops, 0.15));
    EXPECT_TRUE(within(param_count(m) / 1e6, y.params_m, 0.15));
  }
}

TEST(ModelCostTest, VisionFlopsScaleWithImageAreaAndBatch) {
  for (const Published& y : kYolo11) {
    SCOPED_TRACE(y.name);
    const ModelArch& m = model(y.name);
    const double f640 = forward_cost(m, 1, 640, Precision::kFp16).flops;
    const double f320 = forward_cost(m, 1, 320, Precision::kFp16).flops;
    // (640 / 320)^2 = 4.
    EXPECT_TRUE(within(f640 / f320, 4.0, 0.02));
    EXPECT_DOUBLE_EQ(forward_cost(m, 4, 640, Precision::kFp16).flops, 4 * f640);
    // size <= 0 means the reference size.
    EXPECT_DOUBLE_EQ(forward_cost(m, 1, 0, Precision::kFp16).flops, f640);
    // Precision changes bytes, not FLOPs.
    EXPECT_DOUBLE_EQ(forward_cost(m, 1, 640, Precision::kInt8).flops, f640);
    EXPECT_LT(forward_cost(m, 1, 640, Precision::kInt8).bytes,
              forward_cost(m, 1, 640, Precision::kFp16).bytes);
  }
}

TEST(ModelCostTest, Resnet50MatchesPublished) {
  const ModelArch& m = model("resnet50");
  // torchvision ResNet50_Weights.IMAGENET1K_V1: 25,557,032 parameters, 4.09 GMACs at 224 px
  // (He et al. 2016, Table 1: 3.8e9 multiply-adds without the projection shortcuts).
  EXPECT_TRUE(within(param_count(m), 25.557e6, 0.05));
  const PhaseCost f = forward_cost(m, 1, 224, Precision::kFp16);
  EXPECT_TRUE(within(f.flops, 2 * 4.09e9, 0.05));
  // About 80 kernels per inference (REFERENCES.md, iGniter's launch-delay model).
  EXPECT_GE(f.kernels, 60);
  EXPECT_LE(f.kernels, 100);
  // More images per kernel give more output tiles to spread over the SMs.
  EXPECT_GT(forward_cost(m, 8, 224, Precision::kFp16).ctas, f.ctas);
  // Weights are read once per pass: the pass moves at least the FP16 weights.
  EXPECT_GT(f.bytes, weight_bytes(m, Precision::kFp16));
  // A CNN forward pass is compute-heavy: tens of FLOPs per byte.
  EXPECT_GT(f.intensity(), 30);
}

TEST(ModelCostTest, BertBaseMatchesPublished) {
  const ModelArch& m = model("bert-base");
  // Devlin et al. 2019: BERT-base has 110 M parameters.
  EXPECT_TRUE(within(param_count(m), 110e6, 0.05));
  // Sun et al. 2020 (MobileBERT), Table 4: BERT-base 22.5 GFLOPs at sequence length 128.
  EXPECT_TRUE(within(forward_cost(m, 1, 128, Precision::kFp16).flops, 22.5e9, 0.10));
  EXPECT_EQ(kv_bytes_per_token(m, Precision::kFp16), 0);  // no decoder, no KV cache
}

TEST(ModelCostTest, WhisperSmallMatchesPublished) {
  const ModelArch& m = model("whisper-small");
  // Radford et al. 2022, Table 1: whisper small has 244 M parameters.
  EXPECT_TRUE(within(param_count(m), 244e6, 0.05));
  // The decode steps are part of a request: removing them removes FLOPs and many bytes
  // (each step rereads the decoder weights and the cross-attention K/V).
  ModelArch no_decode = m;
  no_decode.speech_decode_tokens = 0;
  const PhaseCost full = forward_cost(m, 1, 0, Precision::kFp16);
  const PhaseCost encode = forward_cost(no_decode, 1, 0, Precision::kFp16);
  EXPECT_GT(full.flops, encode.flops);
  EXPECT_GT(full.bytes - encode.bytes,
            m.speech_decode_tokens * 0.5 * weight_bytes(m, Precision::kFp16));
  // Hand calculation of the encoder side, 1500 positions, 12 layers of width 768, MLP 3072:
  // linear 2 * 1500 * (4 * 768^2 + 2 * 768 * 3072) = 21.2 GFLOPs per layer, attention
  // 2 * 2 * 1500^2 * 768 = 6.9 GFLOPs per layer: 12 * 28.1 = 337.6 GFLOPs; the conv stem
  // 2 * (3000 * 3 * 80 * 768 + 1500 * 3 * 768^2) = 6.4 GFLOPs; and each of the 12 decoder
  // layers projects the encoder output to cross-attention K and V once per request:
  // 12 * 2 * 1500 * 768 * 1536 = 42.5 GFLOPs. Total 386.5 GFLOPs.
  EXPECT_TRUE(within(encode.flops, 337.6e9 + 6.4e9 + 42.5e9, 0.05));
}

// Qwen2.5 model cards (huggingface.co/Qwen/Qwen2.5-*-Instruct): "Number of Parameters".
constexpr Published kQwen[] = {{"qwen2.5-0.5b", 490, 0},
                               {"qwen2.5-1.5b", 1540, 0},
                               {"qwen2.5-3b", 3090, 0},
                               {"qwen2.5-7b", 7610, 0}};

TEST(ModelCostTest, QwenParamsMatchModelCards) {
  for (const Published& q : kQwen) {
    SCOPED_TRACE(q.name);
    const ModelArch& m = model(q.name);
    EXPECT_EQ(m.family, ModelFamily::kLlm);
    EXPECT_TRUE(within(param_count(m) / 1e6, q.params_m, 0.05));
  }
  // Model cards also give the non-embedding counts: 0.36 B (0.5B) and 6.53 B (7B).
  EXPECT_TRUE(within(param_counts(model("qwen2.5-0.5b")).linear, 0.36e9, 0.05));
  EXPECT_TRUE(within(param_counts(model("qwen2.5-7b")).linear, 6.53e9, 0.05));
}

TEST(ModelCostTest, DecodeIsMemoryBoundPrefillComputeBound) {
  for (const Published& q : kQwen) {
    SCOPED_TRACE(q.name);
    const ModelArch& m = model(q.name);
    // Batch-1 decode reads every weight once for 2 FLOPs per weight: ~1 FLOP/byte in FP16
    // (REFERENCES.md: "decode is memory-bound (~1 FLOP/byte at batch 1)").
    const PhaseCost decode = decode_cost(m, 1, 256, Precision::kFp16);
    EXPECT_NEAR(decode.intensity(), 1.0, 0.15);
    // Every linear weight is read (the embedding table only for one row per sequence).
    EXPECT_GT(decode.bytes, 2 * param_counts(m).linear);
    // A 512-token prefill reuses each weight 512 times.
    EXPECT_GT(prefill_cost(m, 512, 0, Precision::kFp16).intensity(), 100);
    // Batching decode raises intensity almost linearly while the weights dominate.
    EXPECT_GT(decode_cost(m, 8, 256, Precision::kFp16).intensity(), 6 * decode.intensity());
  }
}

TEST(ModelCostTest, DecodeReadsTheKvCache) {
  const ModelArch& m = model("qwen2.5-7b");
  // Hand calculation: 2 (K and V) * 28 layers * 4 KV heads * 128 head dim * 2 bytes = 57,344.
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(m, Precision::kFp16), 57344);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(m, Precision::kAwq), 57344);  // KV stays FP16
  // 0.5B: 2 * 24 * 2 * 64 * 2 = 12,288.
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(model("qwen2.5-0.5b"), Precision::kFp16), 12288);
  // A decode step reads batch * context * kv_bytes_per_token of cache on top of the weights.
  const double extra = decode_cost(m, 4, 1024, Precision::kFp16).bytes -
                       decode_cost(m, 4, 0, Precision::kFp16).bytes;
  EXPECT_NEAR(extra, 4 * 1024 * 57344.0, 1.0);
}

TEST(ModelCostTest, PrefillChunksAddUp) {
  const ModelArch& m = model("qwen2.5-1.5b");
  // Causal attention pairs: 256*257/2 + (256*256 + 256*257/2) = 512*513/2, so two chunks
  // cost one whole prefill, except one extra last-token LM head (2 * 1536 * 151936 FLOPs).
  const double whole = prefill_cost(m, 512, 0, Precision::kFp16).flops;
  const double chunks = prefill_cost(m, 256, 0, Precision::kFp16).flops +
                        prefill_cost(m, 256, 256, Precision::kFp16).flops;
  EXPECT_NEAR(chunks - whole, 2.0 * 1536 * 151936, 1e3);
  // More cached context costs more attention.
  EXPECT_GT(prefill_cost(m, 256, 4096, Precision::kFp16).flops,
            prefill_cost(m, 256, 0, Precision::kFp16).flops);
}

TEST(ModelCostTest, AwqWeightsAreAQuarterOfFp16) {
  const ModelArch& m = model("qwen2.5-7b");
  const ParamCounts c = param_counts(m);
  // Linear layers: (0.5 + 4/128) / 2 = 0.266 of FP16, within 10 % of 1/4.
  const double fp16_linear = 2 * c.linear;
  const double awq_linear = weight_bytes(m, Precision::kAwq) - 2 * (c.embedding + c.other);
  EXPECT_TRUE(within(awq_linear / fp16_linear, 0.25, 0.10));
  // Whole checkpoint, embedding and untied LM head kept FP16: by hand,
  // (6.53e9 * 0.53125 + 1.09e9 * 2) / (7.62e9 * 2) = 0.371.
  EXPECT_TRUE(
      within(weight_bytes(m, Precision::kAwq) / weight_bytes(m, Precision::kFp16), 0.371, 0.03));
  EXPECT_DOUBLE_EQ(weight_bytes(m, Precision::kFp16), 2 * param_count(m));
  // AWQ decode moves fewer bytes for the same FLOPs.
  EXPECT_LT(decode_cost(m, 1, 256, Precision::kAwq).bytes,
            0.5 * decode_cost(m, 1, 256, Precision::kFp16).bytes);
}

TEST(ModelCostTest, EveryCatalogModelHasSaneCosts) {
  const Catalog c = Catalog::load_embedded().value();
  for (const std::string& name : c.model_names()) {
    SCOPED_TRACE(name);
    const ModelArch& m = *c.find_model(name);
    EXPECT_FALSE(m.precisions.empty());
    EXPECT_FALSE(m.source.empty());
    EXPECT_FALSE(m.quality_metric.empty());
    EXPECT_GT(m.quality, 0);
    const double params = param_count(m);
    EXPECT_TRUE(within(params / 1e6, m.published_params_m, 0.15));
    for (Precision p : m.precisions) {
      const PhaseCost f = forward_cost(m, 1, 0, p);
      EXPECT_GT(f.flops, 0);
      EXPECT_GT(f.bytes, 0);
      EXPECT_GT(f.kernels, 0);
      EXPECT_GE(f.ctas, 1);
      EXPECT_GT(activation_bytes(m, 1, 0, p), 0);
      EXPECT_GE(activation_bytes(m, 4, 0, p), activation_bytes(m, 1, 0, p));
      EXPECT_GT(weight_bytes(m, p), 0);
    }
    if (m.published_gflops > 0) {
      EXPECT_TRUE(
          within(forward_cost(m, 1, 0, Precision::kFp16).flops / 1e9, m.published_gflops, 0.15));
    }
  }
}

TEST(ModelCostTest, PhaseCostAddsAndAveragesCtas) {
  PhaseCost a{10, 5, 2, 100};
  const PhaseCost b{20, 15, 6, 20};
  a += b;
  EXPECT_DOUBLE_EQ(a.flops, 30);
  EXPECT_DOUBLE_EQ(a.bytes, 20);
  EXPECT_DOUBLE_EQ(a.kernels, 8);
  EXPECT_DOUBLE_EQ(a.ctas, (2 * 100 + 6 * 20) / 8.0);  // mean over kernels
  EXPECT_DOUBLE_EQ(a.intensity(), 1.5);
  EXPECT_EQ(PhaseCost{}.intensity(), 0);
}

}  // namespace
}  // namespace corun::model_cost_test
