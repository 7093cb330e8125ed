// Loading the catalog: devices.yaml and models.yaml compiled into the binary, with an overlay
// directory laid over them entry by entry.
// Every read goes through YamlField so that a bad file yields file:line:col: path: reason,
// and reading continues after an error so that all problems are reported at once.

#include "corun/catalog/catalog.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "cnn_template.h"
#include "corun/catalog/embedded.h"
#include "corun/core/check.h"
#include "corun/core/rng.h"
#include "corun/core/strings.h"

namespace corun {
namespace {

constexpr std::string_view kDevicesFile = "devices.yaml";
constexpr std::string_view kModelsFile = "models.yaml";

/// Tells whether a stretch of parsing reported anything: parse functions return nothing for
/// an entry with errors, so that a half-read device or model never reaches the catalog.
class ErrorWatch {
 public:
  explicit ErrorWatch(const Diagnostics* d) : diags_(d), before_(d->items().size()) {}
  [[nodiscard]] bool clean() const { return diags_->items().size() == before_; }

 private:
  const Diagnostics* diags_;
  std::size_t before_;
};

void read_number(const YamlField& f, std::string_view key, double min, double max, double& out) {
  if (auto v = f.number_at(key, min, max, true)) out = *v;
}

void read_int(const YamlField& f, std::string_view key, long long min, long long max, int& out) {
  if (auto v = f.integer_at(key, min, max, true)) out = static_cast<int>(*v);
}

void read_optional_int(const YamlField& f, std::string_view key, long long min, long long max,
                       int& out) {
  if (auto v = f.integer_at(key, min, max, false)) out = static_cast<int>(*v);
}

void read_optional_bool(const YamlField& f, std::string_view key, bool& out) {
  const YamlField child = f[key];
  if (!child.present()) return;
  if (auto v = child.boolean()) out = *v;
}

/// Reports `key` as meaningless for `family` (instead of silently ignoring it).
void reject_key(const YamlField& f, std::string_view key, ModelFamily family) {
  const YamlField child = f[key];
  if (child.present()) {
    child.error("not used by family '" + std::string(to_string(family)) + "'");
  }
}

// ----------------------------------------------------------------------------------------
// Devices

std::optional<HostCpu> parse_cpu(const YamlField& f) {
  if (!f.present()) {
    f.error("missing required field");
    return std::nullopt;
  }
  if (!f.expect_map()) return std::nullopt;
  ErrorWatch watch(f.diagnostics());
  f.check_keys({"name", "cores", "clock_ghz", "fp32_gflops_per_core", "mem_bandwidth_gbps", "tdp_w",
                "source"});
  HostCpu cpu;
  cpu.name = f.string_at("name", true).value_or("");
  read_int(f, "cores", 1, 4096, cpu.cores);
  read_number(f, "clock_ghz", 0.1, 10, cpu.clock_ghz);
  read_number(f, "fp32_gflops_per_core", 0.1, 1e4, cpu.fp32_gflops_per_core);
  read_number(f, "mem_bandwidth_gbps", 0.1, 1e5, cpu.mem_bandwidth_gbps);
  read_number(f, "tdp_w", 0.1, 1e5, cpu.tdp_w);
  cpu.source = f.string_at("source", false).value_or("");
  if (!watch.clean()) return std::nullopt;
  return cpu;
}

// ----------------------------------------------------------------------------------------
// Models

std::optional<ModelFamily> parse_family(const YamlField& f) {
  const auto s = f.string();
  if (!s) return std::nullopt;
  if (auto fam = corun::parse_family(*s)) return fam;
  f.error("unknown family '" + *s + "'" + did_you_mean(*s, family_names()) +
          "; known: " + join(family_names(), ", "));
  return std::nullopt;
}

std::vector<Precision> parse_precisions(const YamlField& f) {
  std::vector<Precision> out;
  if (!f.present()) {
    f.error("missing required field");
    return out;
  }
  if (!f.expect_sequence()) return out;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const YamlField item = f.at(i);
    const auto s = item.string();
    if (!s) continue;
    const auto p = parse_precision(*s);
    if (!p) {
      item.error("unknown precision '" + *s + "'" + did_you_mean(*s, precision_names()) +
                 "; known: " + join(precision_names(), ", "));
    } else if (std::find(out.begin(), out.end(), *p) != out.end()) {
      item.error("precision '" + *s + "' listed twice");
    } else {
      out.push_back(*p);
    }
  }
  return out;
}

/// Transformer dimensions; `need_vocab` is false for an encoder fed by something other than
/// tokens (Whisper's audio encoder).
std::optional<TransformerDims> parse_dims(const YamlField& f, bool need_vocab) {
  if (!f.present()) {
    f.error("missing required field");
    return std::nullopt;
  }
  if (!f.expect_map()) return std::nullopt;
  ErrorWatch watch(f.diagnostics());
  f.check_keys({"layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab",
                "gated_mlp", "tied_embeddings", "position_embeddings"});
  TransformerDims d;
  read_int(f, "layers", 1, 1000, d.layers);
  read_int(f, "hidden", 1, 1 << 20, d.hidden);
  read_int(f, "heads", 1, 4096, d.heads);
  read_int(f, "kv_heads", 1, 4096, d.kv_heads);
  read_int(f, "head_dim", 1, 4096, d.head_dim);
  read_int(f, "intermediate", 1, 1 << 22, d.intermediate);
  read_int(f, "vocab", need_vocab ? 1 : 0, 1 << 24, d.vocab);
  read_optional_bool(f, "gated_mlp", d.gated_mlp);
  read_optional_bool(f, "tied_embeddings", d.tied_embeddings);
  read_optional_int(f, "position_embeddings", 0, 1 << 24, d.position_embeddings);
  if (d.heads > 0 && d.kv_heads > 0 && d.heads % d.kv_heads != 0) {
    f["kv_heads"].error("heads (" + std::to_string(d.heads) + ") must be a multiple of kv_heads (" +
                        std::to_string(d.kv_heads) + ")");
  }
  if (!watch.clean()) return std::nullopt;
  return d;
}

std::optional<ConvLayer> parse_conv_layer(const YamlField& f) {
  if (!f.expect_map()) return std::nullopt;
  ErrorWatch watch(f.diagnostics());
  f.check_keys({"c_in", "c_out", "kernel", "stride", "conv_stride", "groups", "repeats", "pooled"});
  ConvLayer l;
  read_int(f, "c_in", 1, 1 << 20, l.c_in);
  read_int(f, "c_out", 1, 1 << 20, l.c_out);
  read_int(f, "kernel", 1, 64, l.kernel);
  read_int(f, "stride", 1, 1 << 16, l.stride);
  read_optional_int(f, "conv_stride", 1, 64, l.conv_stride);
  read_optional_int(f, "groups", 1, 1 << 20, l.groups);
  read_optional_int(f, "repeats", 1, 1 << 16, l.repeats);
  read_optional_bool(f, "pooled", l.pooled);
  if (watch.clean() && (l.c_in % l.groups != 0 || l.c_out % l.groups != 0)) {
    f["groups"].error("groups must divide c_in and c_out");
  }
  if (watch.clean() && l.stride % l.conv_stride != 0) {
    f["conv_stride"].error("conv_stride must divide stride (the input's stride is their ratio)");
  }
  if (!watch.clean()) return std::nullopt;
  return l;
}

const std::vector<std::string>& block_names() {
  static const std::vector<std::string> names = {"conv",     "c3k2",   "sppf",  "c2psa",
                                                 "upsample", "concat", "detect"};
  return names;
}

std::optional<detail::CnnBlock> parse_block(const YamlField& f) {
  using detail::CnnBlockKind;
  if (!f.expect_map()) return std::nullopt;
  ErrorWatch watch(f.diagnostics());
  f.check_keys({"block", "from", "repeats", "out", "kernel", "stride", "c3k", "expand", "classes"});
  detail::CnnBlock b;
  const auto kind = f.string_at("block", true);
  if (!kind) return std::nullopt;
  static constexpr CnnBlockKind kKinds[] = {
      CnnBlockKind::kConv,     CnnBlockKind::kC3k2,   CnnBlockKind::kSppf,  CnnBlockKind::kC2psa,
      CnnBlockKind::kUpsample, CnnBlockKind::kConcat, CnnBlockKind::kDetect};
  const auto it = std::find(block_names().begin(), block_names().end(), *kind);
  if (it == block_names().end()) {
    f["block"].error("unknown block '" + *kind + "'" + did_you_mean(*kind, block_names()) +
                     "; known: " + join(block_names(), ", "));
    return std::nullopt;
  }
  b.kind = kKinds[it - block_names().begin()];

  const YamlField from = f["from"];
  if (from.present()) {
    b.from.clear();
    if (from.is_sequence()) {
      if (from.expect_sequence()) {
        for (std::size_t i = 0; i < from.size(); ++i) {
          if (auto v = from.at(i).integer(-1000, 1000)) b.from.push_back(static_cast<int>(*v));
        }
      }
    } else if (auto v = from.integer(-1000, 1000)) {
      b.from.push_back(static_cast<int>(*v));
    }
  }
  const bool needs_out = b.kind == CnnBlockKind::kConv || b.kind == CnnBlockKind::kC3k2 ||
                         b.kind == CnnBlockKind::kSppf || b.kind == CnnBlockKind::kC2psa;
  if (needs_out) read_int(f, "out", 1, 1 << 20, b.out);
  if (b.kind == CnnBlockKind::kConv) read_int(f, "kernel", 1, 64, b.kernel);
  // SPPF's pooling kernel does not change its cost; accepted for fidelity to the source.
  if (b.kind == CnnBlockKind::kSppf) read_optional_int(f, "kernel", 1, 64, b.kernel);
  read_optional_int(f, "stride", 1, 64, b.stride);
  read_optional_int(f, "repeats", 1, 1000, b.repeats);
  read_optional_bool(f, "c3k", b.c3k);
  if (auto v = f.number_at("expand", 0.01, 4, false)) b.expand = *v;
  read_optional_int(f, "classes", 1, 100000, b.classes);
  if ((b.kind == CnnBlockKind::kConcat || b.kind == CnnBlockKind::kDetect) && b.from.size() < 2 &&
      watch.clean()) {
    f["from"].error("needs a list of at least two input layers");
  }
  if (!watch.clean()) return std::nullopt;
  return b;
}

using TemplateMap = std::map<std::string, detail::CnnTemplate, std::less<>>;

void parse_templates(const YamlField& f, TemplateMap& out) {
  if (!f.present()) return;
  if (!f.expect_map()) return;
  for (const std::string& name : f.keys()) {
    const YamlField t = f[name];
    if (!t.expect_map()) continue;
    ErrorWatch watch(t.diagnostics());
    t.check_keys({"layers", "source"});
    (void)t.string_at("source", true);
    detail::CnnTemplate tmpl;
    tmpl.name = name;
    const YamlField layers = t["layers"];
    if (!layers.present()) {
      layers.error("missing required field");
    } else if (layers.expect_sequence()) {
      for (std::size_t i = 0; i < layers.size(); ++i) {
        if (auto b = parse_block(layers.at(i))) tmpl.blocks.push_back(*b);
      }
    }
    if (!watch.clean()) continue;
    // Check the graph once at unit scale, so that a broken template is reported even when
    // no model uses it.
    const Result<detail::CnnExpansion> check = detail::expand_cnn_template(tmpl, {});
    if (!check.ok()) {
      layers.error(check.error().what());
      continue;
    }
    out.insert_or_assign(name, std::move(tmpl));  // an overlay's template replaces a built-in one
  }
}

/// `cnn: {template, depth, width, max_channels, force_c3k}`: expands into m.conv_layers.
void parse_cnn_ref(const YamlField& f, const TemplateMap& templates, ModelArch& m) {
  if (!f.expect_map()) return;
  ErrorWatch watch(f.diagnostics());
  f.check_keys({"template", "depth", "width", "max_channels", "force_c3k"});
  const auto name = f.string_at("template", true);
  detail::CnnScale scale;
  read_number(f, "depth", 0.01, 10, scale.depth);
  read_number(f, "width", 0.01, 10, scale.width);
  read_int(f, "max_channels", 8, 1 << 20, scale.max_channels);
  read_optional_bool(f, "force_c3k", scale.force_c3k);
  if (!watch.clean() || !name) return;
  const auto it = templates.find(*name);
  if (it == templates.end()) {
    std::vector<std::string> known;
    for (const auto& kv : templates) known.push_back(kv.first);
    f["template"].error("unknown CNN template '" + *name + "'" + did_you_mean(*name, known));
    return;
  }
  Result<detail::CnnExpansion> e = detail::expand_cnn_template(it->second, scale);
  if (!e.ok()) {
    f.error(e.error().what());
    return;
  }
  m.conv_layers = std::move(e.value().layers);
  m.aux_kernels = e.value().aux_kernels;
}

// `checkpoints: {PRECISION: {hf_id: ORG/NAME, source: ...}}`: one published checkpoint per
// precision variant. A precision the model does not list has no variant to point at.
std::vector<ModelCheckpoint> parse_checkpoints(const YamlField& f,
                                               const std::vector<Precision>& precisions) {
  std::vector<ModelCheckpoint> out;
  if (!f.present() || !f.expect_map()) return out;
  for (const auto& key : f.keys()) {
    const YamlField c = f[key];
    const auto p = parse_precision(key);
    if (!p) {
      c.error("unknown precision '" + key + "'" + did_you_mean(key, precision_names()) +
              "; known: " + join(precision_names(), ", "));
      continue;
    }
    if (std::find(precisions.begin(), precisions.end(), *p) == precisions.end()) {
      c.error("precision '" + key + "' is not in the model's precisions");
      continue;
    }
    if (!c.expect_map()) continue;
    c.check_keys({"hf_id", "source"});
    ModelCheckpoint cp;
    cp.precision = *p;
    cp.hf_id = c.string_at("hf_id", true).value_or("");
    cp.source = c.string_at("source", true).value_or("");
    // A Hugging Face repository id is "owner/name", each part non-empty, no spaces.
    const auto slash = cp.hf_id.find('/');
    if (!cp.hf_id.empty() &&
        (slash == std::string::npos || slash == 0 || slash + 1 == cp.hf_id.size() ||
         cp.hf_id.find('/', slash + 1) != std::string::npos ||
         cp.hf_id.find_first_of(" \t") != std::string::npos)) {
      c["hf_id"].error("'" + cp.hf_id + "' is not a Hugging Face repository id (owner/name)");
      continue;
    }
    if (!cp.hf_id.empty() && !cp.source.empty()) out.push_back(std::move(cp));
  }
  return out;
}

std::optional<ModelArch> parse_model(const YamlField& f, const std::string& name,
                                     const TemplateMap& templates) {
  if (!f.expect_map()) return std::nullopt;
  ErrorWatch watch(f.diagnostics());
  f.check_keys({"display_name", "family", "precisions", "reference_size", "cnn", "conv_layers",
                "aux_kernels", "encoder", "decoder", "default_seq_len", "speech_decode_tokens",
                "audio_mel_bins", "published_params_m", "published_gflops", "quality",
                "quality_metric", "source", "checkpoints"});
  ModelArch m;
  m.name = name;
  m.display_name = f.string_at("display_name", false).value_or(name);
  m.precisions = parse_precisions(f["precisions"]);
  read_number(f, "published_params_m", 1e-3, 1e7, m.published_params_m);
  if (auto v = f.number_at("published_gflops", 0, 1e9, false)) m.published_gflops = *v;
  read_number(f, "quality", 0, 100, m.quality);
  m.quality_metric = f.string_at("quality_metric", true).value_or("");
  m.source = f.string_at("source", true).value_or("");
  m.checkpoints = parse_checkpoints(f["checkpoints"], m.precisions);

  const YamlField family = f["family"];
  if (!family.present()) {
    family.error("missing required field");
    return std::nullopt;
  }
  const auto fam = parse_family(family);
  if (!fam) return std::nullopt;
  m.family = *fam;

  const bool is_vision = m.family == ModelFamily::kVision;
  if (!is_vision) {
    for (std::string_view key : {"reference_size", "cnn", "conv_layers", "aux_kernels"}) {
      reject_key(f, key, m.family);
    }
  }
  if (m.family != ModelFamily::kSpeech) {
    for (std::string_view key : {"speech_decode_tokens", "audio_mel_bins"}) {
      reject_key(f, key, m.family);
    }
  }
  switch (m.family) {
    case ModelFamily::kVision: {
      reject_key(f, "encoder", m.family);
      reject_key(f, "decoder", m.family);
      reject_key(f, "default_seq_len", m.family);
      read_optional_int(f, "reference_size", 16, 8192, m.reference_size);
      const YamlField cnn = f["cnn"];
      const YamlField layers = f["conv_layers"];
      if (cnn.present() == layers.present()) {
        f.error("a vision model needs exactly one of 'cnn' (a template) or 'conv_layers'");
      } else if (cnn.present()) {
        parse_cnn_ref(cnn, templates, m);
        const YamlField aux = f["aux_kernels"];
        if (aux.present()) aux.error("derived from the template; do not set it");
      } else if (layers.expect_sequence()) {
        for (std::size_t i = 0; i < layers.size(); ++i) {
          if (auto l = parse_conv_layer(layers.at(i))) m.conv_layers.push_back(*l);
        }
        read_optional_int(f, "aux_kernels", 0, 100000, m.aux_kernels);
      }
      break;
    }
    case ModelFamily::kEncoder:
      reject_key(f, "decoder", m.family);
      if (auto d = parse_dims(f["encoder"], true)) m.encoder = *d;
      read_optional_int(f, "default_seq_len", 1, 1 << 20, m.default_seq_len);
      break;
    case ModelFamily::kLlm:
      reject_key(f, "encoder", m.family);
      if (auto d = parse_dims(f["decoder"], true)) m.decoder = *d;
      read_optional_int(f, "default_seq_len", 1, 1 << 24, m.default_seq_len);
      break;
    case ModelFamily::kSpeech:
      if (auto d = parse_dims(f["encoder"], false)) m.encoder = *d;
      if (auto d = parse_dims(f["decoder"], true)) m.decoder = *d;
      read_int(f, "audio_mel_bins", 1, 4096, m.audio_mel_bins);
      read_int(f, "speech_decode_tokens", 0, 1 << 16, m.speech_decode_tokens);
      read_int(f, "default_seq_len", 1, 1 << 20, m.default_seq_len);
      break;
  }
  if (!watch.clean()) return std::nullopt;
  return m;
}

// ----------------------------------------------------------------------------------------
// Files

Result<std::string> read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error("cannot read '" + path.string() + "'", Error::Kind::kIo);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Error("error reading '" + path.string() + "'", Error::Kind::kIo);
  return ss.str();
}

std::string display_path(const std::string& origin, std::string_view name) {
  return (std::filesystem::path(origin) / std::string(name)).string();
}

}  // namespace

std::optional<Device> Catalog::parse_device(const YamlField& f, std::string_view name) {
  CORUN_CHECK(f.diagnostics() != nullptr);
  if (!f.expect_map()) return std::nullopt;
  ErrorWatch watch(f.diagnostics());
  // `name`: a workload's device mapping may name its device (the caller reads it).
  f.check_keys({"name", "display_name", "sm_count", "boost_clock_mhz", "base_clock_mhz",
                "peak_fp32_tflops", "peak_fp16_tflops", "peak_bf16_tflops", "peak_int8_tops",
                "mem_bandwidth_gbps", "l2_mb", "vram_gb", "tdp_w", "idle_power_w", "pcie_gbps",
                "storage_gbps", "unified_memory", "cpu", "source"});
  Device d;
  d.name = std::string(name);
  d.display_name = f.string_at("display_name", false).value_or(d.name);
  read_int(f, "sm_count", 1, 100000, d.sm_count);
  read_number(f, "boost_clock_mhz", 1, 10000, d.boost_clock_mhz);
  read_number(f, "base_clock_mhz", 1, 10000, d.base_clock_mhz);
  read_number(f, "peak_fp32_tflops", 1e-3, 1e6, d.peak_fp32_tflops);
  read_number(f, "peak_fp16_tflops", 1e-3, 1e6, d.peak_fp16_tflops);
  read_number(f, "peak_bf16_tflops", 0, 1e6, d.peak_bf16_tflops);  // 0: no BF16 tensor math
  read_number(f, "peak_int8_tops", 1e-3, 1e7, d.peak_int8_tops);
  read_number(f, "mem_bandwidth_gbps", 1e-3, 1e7, d.mem_bandwidth_gbps);
  read_number(f, "l2_mb", 1e-3, 1e5, d.l2_mb);
  read_number(f, "vram_gb", 1e-3, 1e6, d.vram_gb);
  read_number(f, "tdp_w", 1e-3, 1e5, d.tdp_w);
  read_number(f, "idle_power_w", 1e-3, 1e5, d.idle_power_w);
  read_number(f, "pcie_gbps", 1e-3, 1e5, d.pcie_gbps);
  if (auto v = f.number_at("storage_gbps", 1e-3, 1e5, false)) d.storage_gbps = *v;
  read_optional_bool(f, "unified_memory", d.unified_memory);
  if (auto cpu = parse_cpu(f["cpu"])) d.cpu = *cpu;
  d.source = f.string_at("source", false).value_or("");
  if (watch.clean() && d.base_clock_mhz > d.boost_clock_mhz) {
    f["base_clock_mhz"].error("base clock " + format_number(d.base_clock_mhz) +
                              " MHz is above the boost clock " + format_number(d.boost_clock_mhz) +
                              " MHz");
  }
  if (watch.clean() && d.idle_power_w >= d.tdp_w) {
    f["idle_power_w"].error("idle power must be below tdp_w");
  }
  if (!watch.clean()) return std::nullopt;
  return d;
}

Result<Catalog> Catalog::load_layers(const std::vector<Layer>& layers) {
  CORUN_CHECK(!layers.empty());
  Catalog cat;
  Diagnostics diags;
  std::vector<std::string> failures;  // whole-file problems (missing, invalid YAML)
  TemplateMap templates;              // CNN templates of every layer so far, by name

  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& layer = layers[i];
    // The first layer is a whole catalog; an overlay may hold any subset of its files.
    const bool base = i == 0;
    const auto parse_file = [&](std::string_view name) -> std::optional<YamlField> {
      const auto it = layer.files.find(std::string(name));
      const std::string path = display_path(layer.origin, name);
      if (it == layer.files.end()) {
        if (base) {
          failures.push_back(path + ": missing (a catalog needs " + std::string(kDevicesFile) +
                             " and " + std::string(kModelsFile) + ")");
        }
        return std::nullopt;
      }
      Result<YAML::Node> root = parse_yaml(it->second, path);
      if (!root.ok()) {
        failures.push_back(root.error().what());
        return std::nullopt;
      }
      YamlField f(root.value(), path, "", &diags);
      if (!f.expect_map()) return std::nullopt;
      return f;
    };

    if (auto f = parse_file(kDevicesFile)) {
      f->check_keys({"default", "devices"});
      const YamlField devices = (*f)["devices"];
      // Checked against the names in the file (and the layers below), not the devices that
      // parsed cleanly, so that one bad device is reported once.
      std::vector<std::string> names = cat.device_names();
      if (!devices.present()) {
        if (base) devices.error("missing required field");
      } else if (devices.expect_map()) {
        for (const std::string& name : devices.keys()) {
          names.push_back(name);
          if (auto d = parse_device(devices[name], name)) {
            cat.devices_.insert_or_assign(name, std::move(*d));
          }
        }
      }
      const YamlField def = (*f)["default"];
      if (auto name = f->string_at("default", base)) {
        if (std::find(names.begin(), names.end(), *name) == names.end()) {
          def.error("default device '" + *name + "' is not in devices" +
                    did_you_mean(*name, names));
        } else {
          cat.default_device_ = *name;
        }
      }
    }

    if (auto f = parse_file(kModelsFile)) {
      f->check_keys({"cnn_templates", "models"});
      parse_templates((*f)["cnn_templates"], templates);
      const YamlField models = (*f)["models"];
      if (!models.present()) {
        if (base) models.error("missing required field");
      } else if (models.expect_map()) {
        for (const std::string& name : models.keys()) {
          if (auto m = parse_model(models[name], name, templates)) {
            cat.models_.insert_or_assign(name, std::move(*m));
          }
        }
      }
    }

    // Other files are read by their own layers (mig.yaml, actuation.yaml, tools.yaml): an
    // overlay's copy replaces the built-in one as a whole.
    for (const auto& [name, text] : layer.files) cat.files_.insert_or_assign(name, text);

    if (!failures.empty() || !diags.empty()) {
      for (const Diagnostic& d : diags.items()) failures.push_back(d.to_string());
      return Error(join(failures, "\n"), Error::Kind::kInvalidInput)
          .wrap(base ? "invalid catalog " + layer.origin
                     : "invalid catalog overlay " + layer.origin);
    }
  }
  return cat;
}

Catalog::Layer Catalog::embedded_layer() {
  Layer layer;
  layer.origin = "<embedded>";
  for (const EmbeddedFile& f : embedded_catalog_files()) {
    layer.files.emplace(std::string(f.name), std::string(f.content));
  }
  return layer;
}

Result<Catalog> Catalog::load_embedded() { return load_layers({embedded_layer()}); }

Result<Catalog> Catalog::load_overlay(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Error("catalog directory '" + dir.string() + "' does not exist or is not a directory",
                 Error::Kind::kNotFound);
  }
  Layer overlay;
  overlay.origin = dir.string();
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".yaml") continue;
    Result<std::string> text = read_text(entry.path());
    if (!text.ok()) return text.error();
    overlay.files.emplace(entry.path().filename().string(), std::move(text.value()));
  }
  if (ec) {
    return Error("cannot list '" + dir.string() + "': " + ec.message(), Error::Kind::kIo);
  }
  Result<Catalog> cat = load_layers({embedded_layer(), overlay});
  if (!cat.ok()) return cat.error();
  // The hash covers names and contents in name order (std::map), with separators that no
  // name holds, so that moving text from one file to another changes it.
  std::uint64_t h = fnv1a("corun catalog overlay\n");
  for (const auto& [name, text] : overlay.files) {
    h = fnv1a(name, h);
    h = fnv1a(std::string_view("\0", 1), h);
    h = fnv1a(text, h);
    h = fnv1a(std::string_view("\0", 1), h);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  std::filesystem::path absolute = std::filesystem::absolute(dir, ec).lexically_normal();
  if (ec) absolute = dir;
  if (absolute.has_parent_path() && absolute.filename().empty()) absolute = absolute.parent_path();
  cat->overlay_ = CatalogOverlay{absolute.string(), hex};
  return cat;
}

Result<Catalog> Catalog::load_default() {
  const char* dir = std::getenv("CORUN_CATALOG");  // NOLINT(concurrency-mt-unsafe): read-only
  if (dir != nullptr && *dir != '\0') {
    Result<Catalog> c = load_overlay(dir);
    if (!c.ok()) return c.error().wrap(std::string("CORUN_CATALOG=") + dir);
    return c;
  }
  return load_embedded();
}

const Catalog& Catalog::default_catalog() {
  // A function-local static: initialised once, thread-safely, on first use.
  static const Catalog catalog = [] {
    Result<Catalog> c = load_default();
    if (c.ok()) return std::move(c).value();
    std::fprintf(stderr, "corun: warning: %s\ncorun: warning: using the embedded catalog\n",
                 c.error().what().c_str());
    Result<Catalog> embedded = load_embedded();
    CORUN_CHECK_MSG(embedded.ok(), embedded.ok() ? "" : embedded.error().what().c_str());
    return std::move(embedded).value();
  }();
  return catalog;
}

const Device* Catalog::find_device(std::string_view name) const {
  const auto it = devices_.find(name);
  return it == devices_.end() ? nullptr : &it->second;
}

const ModelArch* Catalog::find_model(std::string_view name) const {
  const auto it = models_.find(name);
  return it == models_.end() ? nullptr : &it->second;
}

std::vector<std::string> Catalog::device_names() const {
  std::vector<std::string> out;
  out.reserve(devices_.size());
  for (const auto& kv : devices_) out.push_back(kv.first);
  return out;
}

std::vector<std::string> Catalog::model_names() const {
  std::vector<std::string> out;
  out.reserve(models_.size());
  for (const auto& kv : models_) out.push_back(kv.first);
  return out;
}

std::optional<std::string> Catalog::file(std::string_view name) const {
  const auto it = files_.find(name);
  if (it == files_.end()) return std::nullopt;
  return it->second;
}

const ModelCheckpoint* ModelArch::checkpoint(Precision p) const {
  for (const auto& c : checkpoints) {
    if (c.precision == p) return &c;
  }
  return nullptr;
}

}  // namespace corun
