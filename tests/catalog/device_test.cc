// Devices and precisions: every catalog device is complete, and the precision helpers follow
// precision.h. Golden numbers cite the vendor documents they come from.

#include "corun/catalog/device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/catalog/mig.h"
#include "corun/catalog/precision.h"

namespace corun::device_test {
namespace {

const Catalog& catalog() {
  static const Catalog c = Catalog::load_embedded().value();
  return c;
}

TEST(PrecisionTest, NamesRoundTrip) {
  for (const std::string& name : precision_names()) {
    const auto p = parse_precision(name);
    ASSERT_TRUE(p.has_value()) << name;
    EXPECT_EQ(to_string(*p), name);
  }
  EXPECT_FALSE(parse_precision("fp8").has_value());
  EXPECT_FALSE(parse_precision("FP16").has_value());
}

TEST(PrecisionTest, BytesPerElement) {
  EXPECT_DOUBLE_EQ(weight_bytes_per_param(Precision::kFp32), 4);
  EXPECT_DOUBLE_EQ(weight_bytes_per_param(Precision::kFp16), 2);
  EXPECT_DOUBLE_EQ(weight_bytes_per_param(Precision::kBf16), 2);
  EXPECT_DOUBLE_EQ(weight_bytes_per_param(Precision::kInt8), 1);
  // AWQ (Lin et al. 2024): 4-bit weights + FP16 scale and zero per 128-weight group.
  EXPECT_DOUBLE_EQ(weight_bytes_per_param(Precision::kAwq), 0.5 + 4.0 / 128.0);
  EXPECT_DOUBLE_EQ(activation_bytes_per_element(Precision::kAwq), 2);
  EXPECT_DOUBLE_EQ(activation_bytes_per_element(Precision::kInt8), 1);
  EXPECT_DOUBLE_EQ(activation_bytes_per_element(Precision::kFp32), 4);
}

TEST(DeviceCatalogTest, HasTheDevicesAndDefault) {
  for (const char* name :
       {"rtx3090", "v100", "a100-80gb", "l4", "h100-sxm", "h100-pcie", "h200", "jetson-agx-orin"}) {
    EXPECT_NE(catalog().find_device(name), nullptr) << name;
  }
  EXPECT_EQ(catalog().default_device_name(), "rtx3090");
  EXPECT_EQ(catalog().find_device("rtx4090"), nullptr);
  EXPECT_EQ(catalog().find_device(""), nullptr);
}

TEST(DeviceCatalogTest, EveryFieldIsSet) {
  for (const std::string& name : catalog().device_names()) {
    SCOPED_TRACE(name);
    const Device& d = *catalog().find_device(name);
    EXPECT_EQ(d.name, name);
    EXPECT_FALSE(d.display_name.empty());
    EXPECT_GT(d.sm_count, 0);
    EXPECT_GT(d.boost_clock_mhz, 0);
    EXPECT_GT(d.base_clock_mhz, 0);
    EXPECT_LE(d.base_clock_mhz, d.boost_clock_mhz);
    EXPECT_GT(d.peak_fp32_tflops, 0);
    EXPECT_GT(d.peak_fp16_tflops, 0);
    // Volta has no BF16 tensor math; device.h documents 0 for "unsupported".
    if (name == "v100") {
      EXPECT_EQ(d.peak_bf16_tflops, 0);
    } else {
      EXPECT_GT(d.peak_bf16_tflops, 0);
    }
    EXPECT_GT(d.peak_int8_tops, 0);
    EXPECT_GT(d.mem_bandwidth_gbps, 0);
    EXPECT_GT(d.l2_mb, 0);
    EXPECT_GT(d.vram_gb, 0);
    EXPECT_GT(d.tdp_w, 0);
    EXPECT_GT(d.idle_power_w, 0);
    EXPECT_LT(d.idle_power_w, d.tdp_w);
    EXPECT_GT(d.pcie_gbps, 0);
    EXPECT_FALSE(d.source.empty());
    EXPECT_FALSE(d.cpu.name.empty());
    EXPECT_GT(d.cpu.cores, 0);
    EXPECT_GT(d.cpu.clock_ghz, 0);
    EXPECT_GT(d.cpu.fp32_gflops_per_core, 0);
    EXPECT_GT(d.cpu.mem_bandwidth_gbps, 0);
    EXPECT_GT(d.cpu.tdp_w, 0);
    EXPECT_FALSE(d.cpu.source.empty());
    // Tensor math beats CUDA-core FP32 on every GPU here.
    EXPECT_GT(d.peak_fp16_tflops, d.peak_fp32_tflops);
    // AWQ dequantises in the kernel and runs FP16 math.
    EXPECT_EQ(d.peak_flops(Precision::kAwq), d.peak_flops(Precision::kFp16));
    EXPECT_DOUBLE_EQ(d.peak_flops(Precision::kFp32), d.peak_fp32_tflops * 1e12);
    EXPECT_DOUBLE_EQ(d.peak_flops(Precision::kInt8), d.peak_int8_tops * 1e12);
    EXPECT_GT(d.peak_flops(Precision::kBf16), 0);
  }
  EXPECT_TRUE(catalog().find_device("jetson-agx-orin")->unified_memory);
  EXPECT_FALSE(catalog().find_device("rtx3090")->unified_memory);
}

TEST(DeviceCatalogTest, KeyNumbersMatchVendorDocuments) {
  // GA102 whitepaper v2.1, RTX 3090 specification table: 82 SMs, 71 dense FP16 tensor TFLOPS (FP32
  // acc.), 936 GB/s, 350 W.
  const Device& rtx = *catalog().find_device("rtx3090");
  EXPECT_EQ(rtx.sm_count, 82);
  EXPECT_DOUBLE_EQ(rtx.peak_flops(Precision::kFp16), 71e12);
  EXPECT_DOUBLE_EQ(rtx.mem_bandwidth_bytes_per_s(), 936e9);
  EXPECT_DOUBLE_EQ(rtx.tdp_w, 350);
  // 24 GiB of GDDR6X.
  EXPECT_NEAR(rtx.vram_bytes(), 24.0 * 1024 * 1024 * 1024, 0.01e9);
  // Ridge point (peak FLOP/s over bandwidth) of the A100: ~153 FLOP/byte (REFERENCES.md,
  // from 312 TFLOPS and 2,039 GB/s in the A100 datasheet).
  const Device& a100 = *catalog().find_device("a100-80gb");
  EXPECT_NEAR(a100.peak_flops(Precision::kFp16) / a100.mem_bandwidth_bytes_per_s(), 153, 2);
  // H200 measured here: 132 SMs (REFERENCES.md).
  EXPECT_EQ(catalog().find_device("h200")->sm_count, 132);
}

TEST(DeviceCatalogTest, H100MatchesItsDatasheet) {
  // NVIDIA H100 Tensor Core GPU datasheet (2023), SXM and PCIe columns; tensor numbers there
  // are with 2:4 sparsity, the catalog's dense ones are half. SM counts and L2 from the H100
  // architecture whitepaper (2022): SXM5 132 SMs, PCIe 114 SMs, 50 MB L2.
  const Device& sxm = *catalog().find_device("h100-sxm");
  EXPECT_EQ(sxm.sm_count, 132);
  EXPECT_DOUBLE_EQ(sxm.peak_flops(Precision::kFp16), 1979e12 / 2);
  EXPECT_DOUBLE_EQ(sxm.peak_flops(Precision::kBf16), 1979e12 / 2);
  EXPECT_DOUBLE_EQ(sxm.peak_flops(Precision::kInt8), 3958e12 / 2);
  EXPECT_DOUBLE_EQ(sxm.peak_flops(Precision::kFp32), 67e12);
  EXPECT_DOUBLE_EQ(sxm.mem_bandwidth_bytes_per_s(), 3.35e12);
  EXPECT_DOUBLE_EQ(sxm.tdp_w, 700);
  EXPECT_DOUBLE_EQ(sxm.l2_mb, 50);
  EXPECT_NEAR(sxm.vram_bytes(), 80.0 * 1024 * 1024 * 1024, 0.01e9);  // 80 GB HBM3 (GiB)
  // Ridge point ~295 FLOP/byte on H100 (REFERENCES.md): 989.5 TFLOPS over 3.35 TB/s.
  EXPECT_NEAR(sxm.peak_flops(Precision::kFp16) / sxm.mem_bandwidth_bytes_per_s(), 295, 2);

  const Device& pcie = *catalog().find_device("h100-pcie");
  EXPECT_EQ(pcie.sm_count, 114);
  EXPECT_DOUBLE_EQ(pcie.peak_flops(Precision::kFp16), 1513e12 / 2);
  EXPECT_DOUBLE_EQ(pcie.peak_flops(Precision::kBf16), 1513e12 / 2);
  EXPECT_DOUBLE_EQ(pcie.peak_flops(Precision::kInt8), 3026e12 / 2);
  EXPECT_DOUBLE_EQ(pcie.peak_flops(Precision::kFp32), 51e12);
  EXPECT_DOUBLE_EQ(pcie.mem_bandwidth_bytes_per_s(), 2.0e12);
  EXPECT_DOUBLE_EQ(pcie.tdp_w, 350);
  EXPECT_DOUBLE_EQ(pcie.l2_mb, 50);
  EXPECT_NEAR(pcie.vram_bytes(), 80.0 * 1024 * 1024 * 1024, 0.01e9);  // 80 GB HBM2e (GiB)
  // Both sit on a PCIe Gen5 x16 link: ~50 GB/s effective one way (devices.yaml header).
  EXPECT_DOUBLE_EQ(sxm.pcie_gbps, 50);
  EXPECT_DOUBLE_EQ(pcie.pcie_gbps, 50);

  // Both boards split into the MIG profiles of the H100 tables of NVIDIA's MIG user guide.
  const MigCatalog mig = MigCatalog::of(catalog()).value();
  for (const char* name : {"h100-sxm", "h100-pcie"}) {
    SCOPED_TRACE(name);
    const MigGpu* g = mig.find(name);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->profile_names(), (std::vector<std::string>{"1g.10gb", "1g.20gb", "2g.20gb",
                                                            "3g.40gb", "4g.40gb", "7g.80gb"}));
    EXPECT_EQ(g->find("1g.10gb")->max_instances, 7);
    EXPECT_EQ(g->find("3g.40gb")->max_instances, 2);
  }
}

TEST(DeviceCatalogTest, MigCapableDevicesHaveTheirProfiles) {
  // A mig.yaml entry applies to the device of the same key, so a key that drifts from
  // devices.yaml silently turns MIG off. MIG-capable per NVIDIA's MIG user guide: A100, H100,
  // H200; not GeForce, V100, L4 or Jetson.
  const MigCatalog mig = MigCatalog::of(catalog()).value();
  const std::vector<std::string> capable = {"a100-80gb", "h100-sxm", "h100-pcie", "h200"};
  for (const std::string& name : catalog().device_names()) {
    const bool is_capable = std::find(capable.begin(), capable.end(), name) != capable.end();
    EXPECT_EQ(mig.find(name) != nullptr, is_capable) << name;
  }
}

TEST(DeviceCatalogTest, Bf16WithoutTensorCoresFallsBackToFp32) {
  const Device& v100 = *catalog().find_device("v100");
  EXPECT_FALSE(v100.has_native(Precision::kBf16));
  EXPECT_TRUE(v100.has_native(Precision::kFp16));
  EXPECT_DOUBLE_EQ(v100.peak_flops(Precision::kBf16), v100.peak_flops(Precision::kFp32));
  const Device& a100 = *catalog().find_device("a100-80gb");
  EXPECT_TRUE(a100.has_native(Precision::kBf16));
  EXPECT_DOUBLE_EQ(a100.peak_flops(Precision::kBf16), 312e12);  // A100 datasheet
}

}  // namespace
}  // namespace corun::device_test
