// `corun serve --device auto`: NVML product names to catalog devices, the overlay entry for a
// GPU the catalog lacks, and a clear error where NVML cannot be read. The names are as NVML's
// nvmlDeviceGetName and nvidia-smi print them (sources in src/catalog/gpu_detect.cc).
#include "corun/catalog/gpu_detect.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "corun/catalog/catalog.h"

namespace corun::gpu_detect_test {
namespace {

TEST(GpuDetect, EveryProductNameIsACatalogDeviceWithASource) {
  const Catalog& c = Catalog::default_catalog();
  std::set<std::string> named;
  for (const auto& p : gpu_product_names()) {
    SCOPED_TRACE(std::string(p.nvml_name));
    EXPECT_NE(c.find_device(p.device), nullptr);
    EXPECT_FALSE(p.source.empty());
    EXPECT_EQ(catalog_device_for_gpu(p.nvml_name), std::string(p.device));
    named.insert(std::string(p.device));
  }
  // Every catalog GPU that NVML can report has a name (a Jetson has no NVML: tegrastats).
  for (const auto& d : c.device_names()) {
    if (c.find_device(d)->unified_memory) continue;
    EXPECT_TRUE(named.count(d)) << d << " has no NVML product name";
  }
}

TEST(GpuDetect, NamesMapAsNvidiaSmiPrintsThem) {
  // Strings copied from nvidia-smi output (GitHub issues cited in gpu_detect.cc).
  EXPECT_EQ(catalog_device_for_gpu("NVIDIA H100 80GB HBM3"), "h100-sxm");
  EXPECT_EQ(catalog_device_for_gpu("NVIDIA GeForce RTX 3090"), "rtx3090");
  EXPECT_EQ(catalog_device_for_gpu("Tesla V100-SXM2-32GB"), "v100");
  EXPECT_EQ(catalog_device_for_gpu("NVIDIA H200"), "h200");
  EXPECT_EQ(catalog_device_for_gpu("  NVIDIA L4 "), "l4");  // padding as a fixed-width column
  // Boards the catalog does not describe are not mapped to a near relative: a 40 GB A100 or
  // an H100 NVL has other memory, clocks and power.
  EXPECT_FALSE(catalog_device_for_gpu("NVIDIA A100-SXM4-40GB").has_value());
  EXPECT_FALSE(catalog_device_for_gpu("NVIDIA H100 NVL").has_value());
  EXPECT_FALSE(catalog_device_for_gpu("Tesla V100-SXM2-16GB").has_value());
  EXPECT_FALSE(catalog_device_for_gpu("nvidia l4").has_value());  // NVML's case is exact
  EXPECT_FALSE(catalog_device_for_gpu("").has_value());
}

TEST(GpuDetect, AnUnknownGpuGetsAnOverlayEntryThatSaysWhatIsMissing) {
  // An L40S as nvidia-smi shows one (isaac-sim/IsaacSim#228): 48 GB, 2520 MHz, 350 W.
  DetectedGpu g;
  g.name = "NVIDIA L40S";
  g.memory_bytes = 46068.0 * 1048576;  // nvidia-smi total 46068 MiB
  g.max_sm_clock_mhz = 2520;
  g.power_limit_w = 350;
  const std::string e = device_overlay_entry(g, "l40s");
  EXPECT_NE(e.find("devices:\n  l40s:\n"), std::string::npos) << e;
  EXPECT_NE(e.find("display_name: NVIDIA L40S"), std::string::npos) << e;
  EXPECT_NE(e.find("vram_gb: 48.31"), std::string::npos) << e;  // 46068 x 1048576 bytes
  EXPECT_NE(e.find("boost_clock_mhz: 2520"), std::string::npos) << e;
  EXPECT_NE(e.find("tdp_w: 350.00"), std::string::npos) << e;
  EXPECT_NE(e.find("sm_count"), std::string::npos) << e;
  EXPECT_NE(e.find("peak_fp16_tflops"), std::string::npos) << e;
  // What NVML did not give is listed with the rest to fill in.
  g.power_limit_w = 0;
  g.unread = {"tdp_w"};
  const std::string partial = device_overlay_entry(g, "l40s");
  EXPECT_EQ(partial.find("tdp_w: "), std::string::npos) << partial;
  EXPECT_NE(partial.find("#   tdp_w, sm_count"), std::string::npos) << partial;
}

TEST(GpuDetect, NoNvmlIsAnInputErrorNamingTheFlag) {
  const auto r = detect_catalog_device(Catalog::default_catalog(), "/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), Error::Kind::kInvalidInput);
  EXPECT_NE(r.error().what().find("--device auto"), std::string::npos) << r.error().what();
  EXPECT_NE(r.error().what().find("cannot load /nonexistent/libnvidia-ml.so.1"),
            std::string::npos)
      << r.error().what();
  EXPECT_NE(r.error().what().find("--device NAME"), std::string::npos) << r.error().what();
}

}  // namespace
}  // namespace corun::gpu_detect_test
