// The node part of a workload: `gpus`, per-model `gpu` pins, MIG partitions and candidate
// partitionings, and the units (GPUs, slices) they resolve to.
#include <gtest/gtest.h>

#include "corun/catalog/catalog.h"
#include "corun/catalog/mig.h"
#include "corun/spec/node.h"
#include "corun/spec/workload.h"

namespace corun::node_spec_test {
namespace {

Result<Workload> parse(const std::string& head, const std::string& model_extra = "") {
  const std::string text = head +
                           "models:\n"
                           "  - name: cam0\n"
                           "    model: yolo11s\n"
                           "    demand: {fps: 30}\n" +
                           model_extra;
  return parse_workload(text, "w.yaml", Catalog::default_catalog());
}

std::string error_of(const Result<Workload>& w) {
  return w.ok() ? std::string("(accepted)") : w.error().what();
}

TEST(NodeSpec, DefaultIsOneWholeGpu) {
  auto w = parse("device: a100-80gb\n");
  ASSERT_TRUE(w.ok()) << error_of(w);
  EXPECT_TRUE(w->node.single_gpu());
  EXPECT_EQ(w->node.gpus(), 1u);
  EXPECT_FALSE(w->models[0].gpu.has_value());
}

TEST(NodeSpec, GpuCountAndPin) {
  auto w = parse("device: a100-80gb\ngpus: 4\n", "    gpu: 3\n");
  ASSERT_TRUE(w.ok()) << error_of(w);
  EXPECT_FALSE(w->node.single_gpu());
  EXPECT_EQ(w->node.gpus(), 4u);
  EXPECT_EQ(w->node.layout_count(), 1u);
  ASSERT_TRUE(w->models[0].gpu.has_value());
  EXPECT_EQ(*w->models[0].gpu, 3u);
  const auto layouts = node_layouts(*w);
  ASSERT_EQ(layouts.size(), 1u);
  ASSERT_EQ(layouts[0].units.size(), 4u);
  EXPECT_EQ(layouts[0].units[2].label(), "gpu2");
  EXPECT_FALSE(pin_allows(*w, 0, layouts[0].units[2]));
  EXPECT_TRUE(pin_allows(*w, 0, layouts[0].units[3]));
}

TEST(NodeSpec, PinBeyondTheNodeNamesTheFieldAndTheGpuCount) {
  auto w = parse("device: a100-80gb\ngpus: 2\n", "    gpu: 2\n");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().kind(), Error::Kind::kInvalidInput);
  const std::string msg = w.error().what();
  EXPECT_NE(msg.find("models[0].gpu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 GPU(s)"), std::string::npos) << msg;
}

TEST(NodeSpec, MisspeltKeysGetSuggestions) {
  auto w = parse("device: a100-80gb\ngpu: 2\n");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(error_of(w).find("did you mean 'gpus'"), std::string::npos) << error_of(w);
  auto m = parse("device: a100-80gb\ngpus: 2\n", "    gpus: 1\n");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(error_of(m).find("models[0].gpus"), std::string::npos) << error_of(m);
  EXPECT_NE(error_of(m).find("did you mean 'gpu'"), std::string::npos) << error_of(m);
}

TEST(NodeSpec, BadGpuCounts) {
  EXPECT_NE(error_of(parse("device: a100-80gb\ngpus: 0\n")).find("gpus"), std::string::npos);
  EXPECT_NE(error_of(parse("device: a100-80gb\ngpus: 65\n")).find("gpus"), std::string::npos);
  EXPECT_NE(error_of(parse("device: a100-80gb\ngpus: many\n")).find("gpus"), std::string::npos);
  EXPECT_NE(error_of(parse("device: a100-80gb\ngpus: [{slices: 2}]\n")).find("gpus[0].slices"),
            std::string::npos);
}

TEST(NodeSpec, FixedPartitionsResolveToSlices) {
  auto w = parse("device: a100-80gb\ngpus: [{mig: [3g.40gb, 2g.20gb, 2g.20gb]}, {}]\n");
  ASSERT_TRUE(w.ok()) << error_of(w);
  EXPECT_EQ(w->node.gpus(), 2u);
  EXPECT_EQ(w->node.layout_count(), 1u);
  const auto layouts = node_layouts(*w);
  ASSERT_EQ(layouts[0].units.size(), 4u);
  EXPECT_EQ(layouts[0].units[0].label(), "gpu0/3g.40gb#0");
  EXPECT_EQ(layouts[0].units[2].label(), "gpu0/2g.20gb#2");
  EXPECT_EQ(layouts[0].units[3].label(), "gpu1");
  EXPECT_EQ(layouts[0].describe(), "gpu0 [3g.40gb 2g.20gb 2g.20gb], gpu1 whole");
}

TEST(NodeSpec, SliceDeviceFollowsTheProfileTable) {
  auto w = parse("device: a100-80gb\ngpus: [{mig: [3g.40gb, 4g.40gb]}]\n");
  ASSERT_TRUE(w.ok()) << error_of(w);
  const auto layout = node_layouts(*w)[0];
  const Device& d = layout.units[0].device;
  // 3g.40gb on an A100 80GB (MIG user guide: 3/7 of the SMs, 4/8 of memory, L2 and bandwidth):
  // SMs floor(108 * 3 / 7) = 46; FP16 312 * 46 / 108 = 132.9 TFLOP/s; bandwidth
  // 2039 / 2 = 1019.5 GB/s; L2 40 / 2 = 20 MB; VRAM 85.9 / 2 = 42.95 GB; TDP 400 * 3 / 7.
  EXPECT_EQ(d.sm_count, 46);
  EXPECT_NEAR(d.peak_fp16_tflops, 312.0 * 46 / 108, 1e-9);
  EXPECT_NEAR(d.mem_bandwidth_gbps, 1019.5, 1e-9);
  EXPECT_NEAR(d.l2_mb, 20.0, 1e-9);
  EXPECT_NEAR(d.vram_gb, 42.95, 1e-9);
  EXPECT_NEAR(d.tdp_w, 400.0 * 3 / 7, 1e-9);
  EXPECT_EQ(d.name, "a100-80gb/3g.40gb");
  // 4g.40gb: SMs floor(108 * 4 / 7) = 61, the same memory share as 3g.40gb.
  EXPECT_EQ(layout.units[1].device.sm_count, 61);
  EXPECT_NEAR(layout.units[1].device.vram_gb, 42.95, 1e-9);
}

TEST(NodeSpec, CandidatePartitioningsMultiplyOverFreeGpus) {
  auto w = parse(
      "device: a100-80gb\n"
      "gpus: [{mig: [7g.80gb]}, {}, null]\n"
      "mig: [[7g.80gb], [3g.40gb, 3g.40gb], [4g.40gb, 2g.20gb, 1g.10gb]]\n");
  ASSERT_TRUE(w.ok()) << error_of(w);
  // GPU 0 is fixed, GPUs 1 and 2 choose among 3 candidates each: 9 layouts.
  EXPECT_EQ(w->node.layout_count(), 9u);
  const auto layouts = node_layouts(*w);
  ASSERT_EQ(layouts.size(), 9u);
  EXPECT_EQ(layouts[0].describe(), "gpu0 [7g.80gb], gpu1 [7g.80gb], gpu2 [7g.80gb]");
  EXPECT_EQ(layouts[8].describe(),
            "gpu0 [7g.80gb], gpu1 [4g.40gb 2g.20gb 1g.10gb], gpu2 [4g.40gb 2g.20gb 1g.10gb]");
  EXPECT_EQ(layouts[5].units.size(), 1u + 2u + 3u);
}

TEST(NodeSpec, InvalidPartitionsAreRejectedWithTheReason) {
  // 4g + 4g = 8 compute slices of 7.
  auto a = parse("device: a100-80gb\ngpus: [{mig: [4g.40gb, 4g.40gb]}]\n");
  EXPECT_NE(error_of(a).find("gpus[0].mig"), std::string::npos) << error_of(a);
  EXPECT_NE(error_of(a).find("8 compute slices"), std::string::npos) << error_of(a);
  // 3g.40gb x 3 = 12 memory slices of 8 (and 9 compute).
  auto b = parse("device: a100-80gb\nmig: [[7g.80gb], [3g.40gb, 3g.40gb, 3g.40gb]]\n");
  EXPECT_NE(error_of(b).find("mig[1]"), std::string::npos) << error_of(b);
  // A misspelt profile gets a suggestion.
  auto c = parse("device: a100-80gb\nmig: [[3g.40g]]\n");
  EXPECT_NE(error_of(c).find("mig[0][0]"), std::string::npos) << error_of(c);
  EXPECT_NE(error_of(c).find("did you mean '3g.40gb'"), std::string::npos) << error_of(c);
  // A 40 GB profile name on the 80 GB board.
  auto d = parse("device: a100-80gb\ngpus: [{mig: [3g.20gb]}]\n");
  EXPECT_NE(error_of(d).find("unknown MIG profile '3g.20gb' for a100-80gb"), std::string::npos)
      << error_of(d);
}

TEST(NodeSpec, MigOnADeviceWithoutMigIsAnError) {
  auto w = parse("device: rtx3090\nmig: [[7g.80gb]]\n");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(error_of(w).find("'rtx3090' does not support MIG"), std::string::npos) << error_of(w);
  EXPECT_EQ(w.error().kind(), Error::Kind::kInvalidInput);
}

TEST(NodeSpec, UnitWorkloadKeepsModelsAndTakesTheUnitsDevice) {
  auto w = parse("device: a100-80gb\ngpus: [{mig: [2g.20gb, 2g.20gb]}]\n");
  ASSERT_TRUE(w.ok()) << error_of(w);
  const auto layout = node_layouts(*w)[0];
  const Workload u = unit_workload(*w, layout.units[1]);
  EXPECT_EQ(u.models.size(), w->models.size());
  EXPECT_EQ(u.device.name, "a100-80gb/2g.20gb");
  EXPECT_TRUE(u.node.single_gpu());
}

// A unit's workload file (what `corun run` runs on each unit of a node): it parses back to a
// single-GPU workload with the unit's device, the unit's models without their pins, and only
// the timeline events of those models or of the GPU (drift).
TEST(NodeSpec, UnitWorkloadTextParsesToTheUnitsOwnWorkload) {
  const std::string text =
      "name: n\n"
      "device: a100-80gb\n"
      "gpus: [{mig: [3g.40gb, 4g.40gb]}, {}]\n"
      "models:\n"
      "  - {name: a, model: yolo11s, knobs: {imgsz: [320, 640]}, demand: {fps: 30}, gpu: 0}\n"
      "  - {name: b, model: yolo11n, demand: {fps: 15}, active: false}\n"
      "  - {name: c, model: resnet50, demand: {fps: 20}}\n"
      "timeline:\n"
      "  duration_s: 40\n"
      "  events:\n"
      "    - {at_s: 10, arrive: b}\n"
      "    - {at_s: 10, demand: {model: c, fps: 40}}\n"
      "    - {at_s: 20, power_cap_w: 150}\n"
      "    - {at_s: 30, demand: {model: a, fps: 10}}\n";
  auto w = parse_workload(text, "n.yaml", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << error_of(w);
  const auto layout = node_layouts(*w)[0];
  ASSERT_EQ(layout.units.size(), 3u);  // gpu0 3g.40gb, gpu0 4g.40gb, gpu1 whole
  const std::vector<std::size_t> ab = {0, 1};
  auto slice = unit_workload_text(text, *w, layout.units[0], ab);
  ASSERT_TRUE(slice.ok()) << slice.error().what();
  auto u = parse_workload(*slice, "u.yaml", Catalog::default_catalog());
  ASSERT_TRUE(u.ok()) << error_of(u) << "\n" << *slice;
  EXPECT_TRUE(u->node.single_gpu());
  // The slice's device, every field as mig_slice_device derived it (printed to 17 digits).
  EXPECT_EQ(u->device.name, "a100-80gb/3g.40gb");
  EXPECT_EQ(u->device.sm_count, 46);
  EXPECT_EQ(u->device.peak_fp16_tflops, layout.units[0].device.peak_fp16_tflops);
  EXPECT_EQ(u->device.tdp_w, layout.units[0].device.tdp_w);
  EXPECT_EQ(u->device.vram_gb, layout.units[0].device.vram_gb);
  EXPECT_EQ(u->device.cpu.cores, w->device.cpu.cores);
  ASSERT_EQ(u->models.size(), 2u);
  EXPECT_EQ(u->models[0].name, "a");
  EXPECT_FALSE(u->models[0].gpu.has_value());
  EXPECT_EQ(u->models[0].local_config_count(), 2u);
  EXPECT_FALSE(u->models[1].active);
  // b's arrival, the power cap and a's demand change; not c's demand change.
  ASSERT_EQ(u->timeline.events.size(), 3u);
  EXPECT_EQ(u->timeline.events[0].kind, TimelineEvent::Kind::kArrive);
  EXPECT_EQ(u->timeline.events[1].kind, TimelineEvent::Kind::kPowerCap);
  EXPECT_EQ(u->timeline.events[2].kind, TimelineEvent::Kind::kDemand);
  EXPECT_EQ(u->timeline.events[2].model, 0u);
  EXPECT_EQ(u->timeline.duration_s, 40);
  // A whole GPU keeps the catalog's device by name; c alone keeps only its own and the GPU's.
  const std::vector<std::size_t> c = {2};
  auto whole = unit_workload_text(text, *w, layout.units[2], c);
  ASSERT_TRUE(whole.ok());
  auto v = parse_workload(*whole, "v.yaml", Catalog::default_catalog());
  ASSERT_TRUE(v.ok()) << error_of(v) << "\n" << *whole;
  EXPECT_EQ(v->device.name, "a100-80gb");
  ASSERT_EQ(v->models.size(), 1u);
  ASSERT_EQ(v->timeline.events.size(), 2u);
  EXPECT_EQ(v->timeline.events[0].kind, TimelineEvent::Kind::kDemand);
  EXPECT_EQ(v->timeline.events[1].kind, TimelineEvent::Kind::kPowerCap);
}

TEST(MigCatalog, EmbeddedTableHasTheGuidesProfiles) {
  auto table = MigCatalog::of(Catalog::default_catalog());
  ASSERT_TRUE(table.ok()) << table.error().what();
  // The MIG user guide's A100 40GB table: 1g.5gb (1/8 memory, 7 instances), 4g.20gb (4/7 SMs,
  // 4/8 memory, 1 instance); H200: 7g.141gb is the whole GPU.
  const MigGpu* a40 = table->find("a100-40gb");
  ASSERT_NE(a40, nullptr);
  const MigProfile* p = a40->find("1g.5gb");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->memory, 1);
  EXPECT_EQ(p->max_instances, 7);
  const MigProfile* q = a40->find("4g.20gb");
  ASSERT_NE(q, nullptr);
  EXPECT_DOUBLE_EQ(q->sm_fraction(), 4.0 / 7);
  EXPECT_DOUBLE_EQ(q->memory_fraction(), 0.5);
  ASSERT_NE(table->find("h200"), nullptr);
  ASSERT_NE(table->find("h200")->find("7g.141gb"), nullptr);
  EXPECT_EQ(table->find("rtx3090"), nullptr);
  // Eight 1g.10gb slices exceed seven instances (and seven compute slices).
  const MigGpu* a80 = table->find("a100-80gb");
  ASSERT_NE(a80, nullptr);
  EXPECT_FALSE(a80->invalid_reason(MigPartition(8, *a80->find("1g.10gb"))).empty());
  EXPECT_TRUE(a80->invalid_reason(MigPartition(7, *a80->find("1g.10gb"))).empty());
}

}  // namespace
}  // namespace corun::node_spec_test
