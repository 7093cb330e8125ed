// Loading catalogs: the embedded one, overlay directories laid over it, CORUN_CATALOG, and
// clear errors (file, line, field path, suggestion) for malformed files.

#include "corun/catalog/catalog.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "corun/catalog/embedded.h"
#include "../core/temp_dir.h"

namespace corun::catalog_test {
namespace {

namespace fs = std::filesystem;
using corun::testing::TempDir;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

fs::path source_catalog() { return fs::path(CORUN_SOURCE_DIR) / "catalog"; }

/// A minimal valid devices.yaml whose rtx3090 entry can be tampered with.
std::string devices_yaml(const std::string& extra_line = "",
                         const std::string& sm_line = "    sm_count: 82\n") {
  return "default: tiny\n"
         "devices:\n"
         "  tiny:\n"
         "    display_name: Tiny GPU\n" +
         sm_line +
         "    boost_clock_mhz: 1695\n"
         "    base_clock_mhz: 1395\n"
         "    peak_fp32_tflops: 35.6\n"
         "    peak_fp16_tflops: 71\n"
         "    peak_bf16_tflops: 71\n"
         "    peak_int8_tops: 284\n"
         "    mem_bandwidth_gbps: 936\n"
         "    l2_mb: 6\n"
         "    vram_gb: 24\n"
         "    tdp_w: 350\n"
         "    idle_power_w: 25\n"
         "    pcie_gbps: 25\n" +
         extra_line +
         "    cpu: {name: cpu, cores: 16, clock_ghz: 3.8, fp32_gflops_per_core: 121.6,\n"
         "          mem_bandwidth_gbps: 51.2, tdp_w: 105}\n";
}

std::string models_yaml(const std::string& precisions = "[fp16, awq]",
                        const std::string& family = "llm") {
  return "models:\n"
         "  tiny-llm:\n"
         "    family: " +
         family +
         "\n"
         "    precisions: " +
         precisions +
         "\n"
         "    decoder: {layers: 2, hidden: 64, heads: 4, kv_heads: 2, head_dim: 16,\n"
         "              intermediate: 128, vocab: 1000, gated_mlp: true}\n"
         "    published_params_m: 0.2\n"
         "    quality: 1\n"
         "    quality_metric: none\n"
         "    source: test\n";
}

TEST(CatalogTest, EmbeddedCatalogLoadsAndMatchesTheSourceTree) {
  const Result<Catalog> embedded = Catalog::load_embedded();
  ASSERT_TRUE(embedded.ok()) << embedded.error().what();
  const Result<Catalog> dir = Catalog::load_overlay(source_catalog());
  ASSERT_TRUE(dir.ok()) << dir.error().what();
  EXPECT_EQ(embedded->device_names(), dir->device_names());
  EXPECT_EQ(embedded->model_names(), dir->model_names());
  // The embedded text is the file as it is in the tree (rebuilt when the file changes).
  for (const EmbeddedFile& f : embedded_catalog_files()) {
    EXPECT_EQ(std::string(f.content), read(source_catalog() / std::string(f.name))) << f.name;
  }
  ASSERT_TRUE(embedded->file("models.yaml").has_value());
  EXPECT_FALSE(embedded->file("nope.yaml").has_value());
}

TEST(CatalogTest, KnowsTheBriefsModels) {
  const Catalog c = Catalog::load_embedded().value();
  for (const char* name :
       {"yolo11n", "yolo11s", "yolo11m", "yolo11l", "yolo11x", "qwen2.5-0.5b", "qwen2.5-1.5b",
        "qwen2.5-3b", "qwen2.5-7b", "resnet50", "bert-base", "whisper-small"}) {
    EXPECT_NE(c.find_model(name), nullptr) << name;
  }
  EXPECT_EQ(c.find_model("yolo12n"), nullptr);
  EXPECT_EQ(c.find_model("Qwen2.5-7B"), nullptr);  // names are exact
  EXPECT_EQ(c.find_model(""), nullptr);
  const ModelArch& q = *c.find_model("qwen2.5-7b");
  EXPECT_EQ(q.decoder.layers, 28);
  EXPECT_EQ(q.decoder.kv_heads, 4);
  EXPECT_FALSE(q.decoder.tied_embeddings);
  EXPECT_EQ(c.find_model("whisper-small")->family, ModelFamily::kSpeech);
  EXPECT_EQ(c.find_model("bert-base")->family, ModelFamily::kEncoder);
  EXPECT_EQ(c.find_model("resnet50")->reference_size, 224);
}

TEST(CatalogTest, OverlayAddsEntriesToTheBuiltInCatalog) {
  TempDir dir;
  dir.write("devices.yaml", devices_yaml());
  dir.write("models.yaml", models_yaml());
  dir.write("tools.yaml", "tools: []\n");
  dir.write("notes.txt", "not a catalog file\n");
  const Result<Catalog> c = Catalog::load_overlay(dir.path());
  ASSERT_TRUE(c.ok()) << c.error().what();
  const Catalog builtin = Catalog::load_embedded().value();
  // Every built-in device and model is still there, next to the overlay's.
  EXPECT_EQ(c->device_names().size(), builtin.device_names().size() + 1);
  EXPECT_EQ(c->model_names().size(), builtin.model_names().size() + 1);
  EXPECT_NE(c->find_device("rtx3090"), nullptr);
  EXPECT_NE(c->find_model("qwen2.5-7b"), nullptr);
  EXPECT_EQ(c->default_device_name(), "tiny");  // the overlay's `default:` wins
  EXPECT_EQ(c->find_device("tiny")->display_name, "Tiny GPU");
  EXPECT_EQ(c->find_model("tiny-llm")->precisions,
            (std::vector<Precision>{Precision::kFp16, Precision::kAwq}));
  // Other files replace the built-in file as a whole; files the overlay lacks are built in.
  EXPECT_EQ(c->file("tools.yaml"), std::optional<std::string>("tools: []\n"));
  EXPECT_EQ(c->file("mig.yaml"), builtin.file("mig.yaml"));
  EXPECT_FALSE(c->file("notes.txt").has_value());
  // The overlay is recorded: its absolute path and a 16-hex-digit content hash.
  ASSERT_TRUE(c->overlay().has_value());
  EXPECT_EQ(c->overlay()->dir, dir.path().string());
  EXPECT_EQ(c->overlay()->hash.size(), 16u);
  EXPECT_EQ(c->overlay()->hash.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_FALSE(builtin.overlay().has_value());
}

TEST(CatalogTest, OverlayEntryReplacesTheBuiltInEntryAsAWhole) {
  // An overlay entry named like a built-in one replaces it: fields the overlay entry leaves
  // out take their defaults, not the built-in entry's values (no field merge).
  TempDir dir;
  std::string devices = devices_yaml();
  devices.replace(devices.find("default: tiny\n"), 14, "");
  devices.replace(devices.find("  tiny:"), 7, "  h200:");
  dir.write("devices.yaml", devices);
  std::string models = models_yaml();
  models.replace(models.find("  tiny-llm:"), 11, "  qwen2.5-7b:");
  dir.write("models.yaml", models);
  const Result<Catalog> c = Catalog::load_overlay(dir.path());
  ASSERT_TRUE(c.ok()) << c.error().what();
  const Device& h200 = *c->find_device("h200");
  EXPECT_EQ(h200.sm_count, 82);  // the overlay's, built in: 132
  EXPECT_EQ(h200.display_name, "Tiny GPU");
  EXPECT_DOUBLE_EQ(h200.storage_gbps, 3);         // the field's default, built in: 12
  EXPECT_EQ(c->find_device("l4")->sm_count, 58);  // untouched built-in entry
  const Catalog builtin = Catalog::load_embedded().value();
  EXPECT_EQ(c->device_names(), builtin.device_names());
  EXPECT_EQ(c->default_device_name(), builtin.default_device_name());  // no `default:` here
  const ModelArch& q = *c->find_model("qwen2.5-7b");
  EXPECT_EQ(q.decoder.layers, 2);
  EXPECT_TRUE(q.checkpoints.empty());  // the built-in entry's checkpoints are not merged in
  EXPECT_EQ(q.display_name, "qwen2.5-7b");
  EXPECT_EQ(c->find_model("qwen2.5-3b")->decoder.layers, 36);
}

TEST(CatalogTest, OverlayWithOneFileKeepsTheOtherBuiltIn) {
  TempDir dir;
  // A model on the built-in YOLO11 template, in an overlay that has no devices.yaml.
  dir.write("models.yaml",
            "models:\n"
            "  yolo11-tiny:\n"
            "    family: vision\n"
            "    precisions: [fp16]\n"
            "    cnn: {template: yolo11, depth: 0.25, width: 0.125, max_channels: 1024}\n"
            "    published_params_m: 1\n"
            "    quality: 1\n"
            "    quality_metric: none\n"
            "    source: test\n");
  const Result<Catalog> c = Catalog::load_overlay(dir.path());
  ASSERT_TRUE(c.ok()) << c.error().what();
  ASSERT_NE(c->find_model("yolo11-tiny"), nullptr);
  EXPECT_FALSE(c->find_model("yolo11-tiny")->conv_layers.empty());
  EXPECT_EQ(c->default_device_name(), Catalog::load_embedded()->default_device_name());
  EXPECT_NE(c->find_device("a100-80gb"), nullptr);

  // An overlay's default may name a built-in device; an unknown one is an error that
  // names the overlay file and suggests.
  dir.write("devices.yaml", "default: l4\n");
  const Result<Catalog> l4 = Catalog::load_overlay(dir.path());
  ASSERT_TRUE(l4.ok()) << l4.error().what();
  EXPECT_EQ(l4->default_device_name(), "l4");
  dir.write("devices.yaml", "default: rtx3009\n");
  const Result<Catalog> bad = Catalog::load_overlay(dir.path());
  ASSERT_FALSE(bad.ok());
  const std::string msg = bad.error().what();
  EXPECT_NE(msg.find("invalid catalog overlay " + dir.path().string()), std::string::npos) << msg;
  EXPECT_NE(msg.find((dir.path() / "devices.yaml").string() + ":1:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("default device 'rtx3009' is not in devices (did you mean 'rtx3090'?)"),
            std::string::npos)
      << msg;
}

TEST(CatalogTest, OverlayHashFollowsContentNotPlace) {
  TempDir a;
  a.write("models.yaml", models_yaml());
  const std::string hash_a = Catalog::load_overlay(a.path())->overlay()->hash;
  // The same files elsewhere hash the same; an edited file does not.
  const fs::path b = a.path() / "copy";
  fs::create_directories(b);
  fs::copy_file(a.path() / "models.yaml", b / "models.yaml");
  EXPECT_EQ(Catalog::load_overlay(b)->overlay()->hash, hash_a);
  a.write("models.yaml", models_yaml("[fp16]"));
  EXPECT_NE(Catalog::load_overlay(a.path())->overlay()->hash, hash_a);
  // The same text under another file name is another overlay.
  fs::rename(b / "models.yaml", b / "tools.yaml");
  EXPECT_NE(Catalog::load_overlay(b)->overlay()->hash, hash_a);
}

TEST(CatalogTest, BadFieldNamesFileLineAndPath) {
  TempDir dir;
  dir.write("devices.yaml", devices_yaml("", "    sm_count: many\n"));
  dir.write("models.yaml", models_yaml());
  const Result<Catalog> c = Catalog::load_overlay(dir.path());
  ASSERT_FALSE(c.ok());
  const std::string msg = c.error().what();
  EXPECT_EQ(c.error().kind(), Error::Kind::kInvalidInput);
  // sm_count is on line 5 of the file written above.
  EXPECT_NE(msg.find((dir.path() / "devices.yaml").string() + ":5:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("devices.tiny.sm_count"), std::string::npos) << msg;
  EXPECT_NE(msg.find("many"), std::string::npos) << msg;
}

TEST(CatalogTest, MissingAndOutOfRangeFields) {
  TempDir dir;
  dir.write("devices.yaml", devices_yaml("    base_clock_mhz: 0\n", ""));
  dir.write("models.yaml", models_yaml());
  const Result<Catalog> c = Catalog::load_overlay(dir.path());
  ASSERT_FALSE(c.ok());
  const std::string msg = c.error().what();
  EXPECT_NE(msg.find("devices.tiny.sm_count: missing required field"), std::string::npos) << msg;
  EXPECT_NE(msg.find("duplicate field 'base_clock_mhz'"), std::string::npos) << msg;
}

TEST(CatalogTest, UnknownKeysGetSuggestions) {
  TempDir dir;
  dir.write("devices.yaml", devices_yaml("    vram_gib: 24\n"));
  dir.write("models.yaml", models_yaml("[fp16, fp166]", "lmm"));
  const Result<Catalog> c = Catalog::load_overlay(dir.path());
  ASSERT_FALSE(c.ok());
  const std::string msg = c.error().what();
  EXPECT_NE(msg.find("unknown field 'vram_gib' (did you mean 'vram_gb'?)"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("models.yaml"), std::string::npos) << msg;
  EXPECT_NE(msg.find("models.tiny-llm.precisions[1]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown precision 'fp166' (did you mean 'fp16'?)"), std::string::npos) << msg;
  // The device with the bad key is rejected, but `default: tiny` still names it: one error.
  EXPECT_EQ(msg.find("default device"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown family 'lmm' (did you mean 'llm'?)"), std::string::npos) << msg;
}

TEST(CatalogTest, InconsistentValuesAreRejected) {
  TempDir dir;
  std::string devices = devices_yaml();
  devices.replace(devices.find("base_clock_mhz: 1395"), 20, "base_clock_mhz: 1995");
  dir.write("devices.yaml", devices);
  std::string models = models_yaml();
  models.replace(models.find("kv_heads: 2"), 11, "kv_heads: 3");
  models += "    conv_layers: []\n";
  dir.write("models.yaml", models);
  const Result<Catalog> c = Catalog::load_overlay(dir.path());
  ASSERT_FALSE(c.ok());
  const std::string msg = c.error().what();
  EXPECT_NE(msg.find("devices.tiny.base_clock_mhz: base clock 1995 MHz is above the boost"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("models.tiny-llm.decoder.kv_heads: heads (4) must be a multiple"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("models.tiny-llm.conv_layers: not used by family 'llm'"), std::string::npos)
      << msg;
}

TEST(CatalogTest, BrokenCnnTemplateIsReported) {
  TempDir dir;
  dir.write("devices.yaml", devices_yaml());
  dir.write("models.yaml",
            "cnn_templates:\n"
            "  net:\n"
            "    source: test\n"
            "    layers:\n"
            "      - {block: conv, out: 16, kernel: 3, stride: 2}\n"
            "      - {block: concat, from: [-1, 5]}\n"
            "      - {block: convv, out: 8}\n"
            "models:\n"
            "  m:\n"
            "    family: vision\n"
            "    precisions: [fp16]\n"
            "    cnn: {template: nett, depth: 1, width: 1, max_channels: 64}\n"
            "    published_params_m: 1\n"
            "    quality: 1\n"
            "    quality_metric: none\n"
            "    source: test\n");
  const Result<Catalog> c = Catalog::load_overlay(dir.path());
  ASSERT_FALSE(c.ok());
  const std::string msg = c.error().what();
  EXPECT_NE(msg.find("unknown block 'convv' (did you mean 'conv'?)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown CNN template 'nett'"), std::string::npos) << msg;

  // A graph error (no earlier layer 5) is reported once the blocks themselves parse.
  std::string text = read(dir.path() / "models.yaml");
  text.replace(text.find("      - {block: convv, out: 8}\n"), 31, "");
  dir.write("models.yaml", text);
  const Result<Catalog> c2 = Catalog::load_overlay(dir.path());
  ASSERT_FALSE(c2.ok());
  EXPECT_NE(c2.error().what().find("layer 1: 'from' 5 does not name an earlier layer"),
            std::string::npos)
      << c2.error().what();
}

TEST(CatalogTest, InvalidYamlAndMissingFiles) {
  TempDir dir;
  dir.write("devices.yaml", "devices: [unclosed\n");
  const Result<Catalog> c = Catalog::load_overlay(dir.path());
  ASSERT_FALSE(c.ok());
  const std::string msg = c.error().what();
  EXPECT_NE(msg.find((dir.path() / "devices.yaml").string() + ":"), std::string::npos) << msg;
  EXPECT_NE(msg.find("invalid YAML"), std::string::npos) << msg;
  // An overlay may leave models.yaml out: the built-in one is used.
  EXPECT_EQ(msg.find("models.yaml"), std::string::npos) << msg;

  const Result<Catalog> none = Catalog::load_overlay(dir.path() / "does-not-exist");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().kind(), Error::Kind::kNotFound);
}

TEST(CatalogTest, LoadDefaultHonoursCorunCatalog) {
  TempDir dir;
  dir.write("devices.yaml", devices_yaml());
  dir.write("models.yaml", models_yaml());
  ASSERT_EQ(::setenv("CORUN_CATALOG", dir.path().c_str(), 1), 0);
  const Result<Catalog> c = Catalog::load_default();
  ASSERT_TRUE(c.ok()) << c.error().what();
  EXPECT_NE(c->find_device("tiny"), nullptr);
  EXPECT_NE(c->find_device("rtx3090"), nullptr);  // an overlay: the built-in entries stay
  ASSERT_TRUE(c->overlay().has_value());
  EXPECT_EQ(c->overlay()->dir, dir.path().string());

  ASSERT_EQ(::setenv("CORUN_CATALOG", (dir.path() / "missing").c_str(), 1), 0);
  const Result<Catalog> bad = Catalog::load_default();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what().find("CORUN_CATALOG="), std::string::npos);

  ASSERT_EQ(::unsetenv("CORUN_CATALOG"), 0);
  const Result<Catalog> embedded = Catalog::load_default();
  ASSERT_TRUE(embedded.ok());
  EXPECT_NE(embedded->find_device("rtx3090"), nullptr);
  // default_catalog() is the same object on every call.
  EXPECT_EQ(&Catalog::default_catalog(), &Catalog::default_catalog());
  EXPECT_NE(Catalog::default_catalog().find_model("yolo11n"), nullptr);
}

TEST(CatalogTest, ParseDeviceInline) {
  // As a workload would: one device mapping inside another document.
  const std::string text = "device:\n" + [] {
    std::string d = devices_yaml();
    d = d.substr(d.find("    display_name"));
    return d;
  }();
  Result<YAML::Node> root = parse_yaml(text, "workload.yaml");
  ASSERT_TRUE(root.ok()) << root.error().what();
  Diagnostics diags;
  const YamlField f(root.value(), "workload.yaml", "", &diags);
  const std::optional<Device> d = Catalog::parse_device(f["device"], "custom");
  ASSERT_TRUE(d.has_value()) << diags.to_error().what();
  EXPECT_EQ(d->name, "custom");
  EXPECT_EQ(d->sm_count, 82);
  EXPECT_DOUBLE_EQ(d->cpu.fp32_gflops_per_core, 121.6);
  EXPECT_TRUE(diags.empty());

  Diagnostics diags2;
  Result<YAML::Node> bad = parse_yaml("device: {sm_count: 82}\n", "w.yaml");
  ASSERT_TRUE(bad.ok());
  const YamlField f2(bad.value(), "w.yaml", "", &diags2);
  EXPECT_FALSE(Catalog::parse_device(f2["device"], "x").has_value());
  EXPECT_NE(diags2.to_error().what().find("w.yaml:1:"), std::string::npos);
  EXPECT_NE(diags2.to_error().what().find("device.vram_gb: missing required field"),
            std::string::npos)
      << diags2.to_error().what();
}

TEST(CatalogTest, EveryLlmHasACheckpointPerPrecision) {
  // A serving stack (corun export) loads an LLM by its Hugging Face id; the ids below are the
  // official Qwen2.5 repositories (huggingface.co/Qwen), typed here from their model cards.
  const Catalog c = Catalog::load_embedded().value();
  for (const auto& name : c.model_names()) {
    const ModelArch& m = *c.find_model(name);
    if (m.family != ModelFamily::kLlm) continue;
    for (Precision p : m.precisions) {
      const ModelCheckpoint* cp = m.checkpoint(p);
      ASSERT_NE(cp, nullptr) << name << " " << to_string(p);
      EXPECT_FALSE(cp->source.empty()) << name;
    }
  }
  const ModelArch& q = *c.find_model("qwen2.5-1.5b");
  EXPECT_EQ(q.checkpoint(Precision::kFp16)->hf_id, "Qwen/Qwen2.5-1.5B-Instruct");
  EXPECT_EQ(q.checkpoint(Precision::kAwq)->hf_id, "Qwen/Qwen2.5-1.5B-Instruct-AWQ");
  EXPECT_EQ(c.find_model("qwen2.5-7b")->checkpoint(Precision::kAwq)->hf_id,
            "Qwen/Qwen2.5-7B-Instruct-AWQ");
  EXPECT_EQ(q.checkpoint(Precision::kInt8), nullptr);
  EXPECT_TRUE(c.find_model("yolo11n")->checkpoints.empty());
}

TEST(CatalogTest, MalformedCheckpointsAreReported) {
  TempDir dir;
  dir.write("devices.yaml", devices_yaml());
  dir.write("models.yaml", models_yaml() +
                               "    checkpoints:\n"
                               "      fp16: {hf_id: org/tiny, source: card}\n"
                               "      bf16: {hf_id: org/tiny, source: card}\n"
                               "      awk: {hf_id: org/tiny-awq, source: card}\n"
                               "      awq: {hf_id: no-slash, source: card}\n");
  const Result<Catalog> c = Catalog::load_overlay(dir.path());
  ASSERT_FALSE(c.ok());
  const std::string msg = c.error().what();
  EXPECT_NE(msg.find("models.tiny-llm.checkpoints.bf16: precision 'bf16' is not in the model's "
                     "precisions"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("checkpoints.awk: unknown precision 'awk' (did you mean 'awq'?)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("checkpoints.awq.hf_id: 'no-slash' is not a Hugging Face repository id"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("checkpoints.fp16"), std::string::npos) << msg;
}

// The fenced ```yaml blocks of a markdown file, in order.
std::vector<std::string> yaml_blocks(const std::string& markdown) {
  std::vector<std::string> out;
  const std::string open = "```yaml\n";
  const std::string close = "```";
  for (std::size_t at = markdown.find(open); at != std::string::npos;
       at = markdown.find(open, at)) {
    const std::size_t start = at + open.size();
    const std::size_t end = markdown.find("\n" + close, start);
    if (end == std::string::npos) break;
    out.push_back(markdown.substr(start, end + 1 - start));
    at = end + 1 + close.size();
  }
  return out;
}

TEST(CatalogDocs, WorkedExamplesAreTheExampleFilesAndLoad) {
  // docs/catalog.md shows examples/catalog-overlay/*.yaml verbatim, so that what a reader
  // copies from the page is what this test loads.
  const fs::path examples = fs::path(CORUN_SOURCE_DIR) / "examples" / "catalog-overlay";
  const std::vector<std::string> blocks =
      yaml_blocks(read(fs::path(CORUN_SOURCE_DIR) / "docs" / "catalog.md"));
  for (const char* name : {"devices.yaml", "models.yaml", "workload.yaml"}) {
    const std::string text = read(examples / name);
    ASSERT_FALSE(text.empty()) << name;
    EXPECT_NE(std::find(blocks.begin(), blocks.end(), text), blocks.end())
        << name << " is not shown verbatim in docs/catalog.md";
  }

  const Result<Catalog> c = Catalog::load_overlay(examples);
  ASSERT_TRUE(c.ok()) << c.error().what();
  // The custom device, against the L40S datasheet: 142 SMs, 864 GB/s, 733 sparse FP16
  // TFLOPS (362 dense), 48 GB, 350 W.
  const Device& l40s = *c->find_device("l40s");
  EXPECT_EQ(l40s.sm_count, 142);
  EXPECT_DOUBLE_EQ(l40s.mem_bandwidth_gbps, 864);
  EXPECT_DOUBLE_EQ(l40s.peak_fp16_tflops, 362);
  EXPECT_DOUBLE_EQ(l40s.vram_gb, 48);
  EXPECT_DOUBLE_EQ(l40s.tdp_w, 350);
  // The custom model: the parameters derived from its config.json dimensions land within 2 %
  // of the model card's 14.7 B (hand count: 48 layers x (attention 62.9 M + SwiGLU 212.3 M)
  // + 2 x 152064 x 5120 embedding and head = 14.77 B).
  const ModelArch& q = *c->find_model("qwen2.5-14b");
  EXPECT_EQ(q.family, ModelFamily::kLlm);
  EXPECT_EQ(q.decoder.kv_heads, 8);
  EXPECT_NEAR(param_count(q) / 1e9, 14.7, 0.02 * 14.7);
  EXPECT_EQ(q.checkpoint(Precision::kAwq)->hf_id, "Qwen/Qwen2.5-14B-Instruct-AWQ");
  // The built-in entries are all still there.
  EXPECT_NE(c->find_model("yolo11s"), nullptr);
  EXPECT_EQ(c->default_device_name(), Catalog::load_embedded()->default_device_name());
}

}  // namespace
}  // namespace corun::catalog_test
