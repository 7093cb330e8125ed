#include "corun/testbed/llm_fidelity.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>

#include "corun/space/space.h"
#include "corun/spec/workload.h"
#include "corun/testbed/sim.h"
#include "llm_step.h"

namespace corun {
namespace {

// Splits one CSV line; a field may be quoted ("a, b"), with "" for a quote inside.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  return out;
}

const char* const kColumns[] = {"gpu",    "model",  "precision", "prompt", "output",
                                "batch",  "metric", "value_ms",  "split",  "reference"};

// Whole-field number parse (no trailing characters).
template <class T>
bool parse_number(const std::string& s, T& out) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One LLM serving a closed loop of one request at a time, the prompt in one chunk.
double sim_ttft_ms(const ModelArch& arch, const Device& device, Precision p,
                   const LlmMeasurement& pt) {
  ModelSpec m;
  m.name = pt.model;
  m.arch = arch;
  m.base.precision = p;
  m.base.request_concurrency = 1;
  m.base.prefill_chunk = std::max(pt.prompt, 1);
  m.demand.concurrency = 1;
  m.demand.prompt_tokens = pt.prompt;
  m.demand.output_tokens = pt.output;
  Workload w;
  w.file = "<llm-physics>";
  w.device = device;
  w.models.push_back(m);
  const SimTestbed sim;
  const JointConfig config(1, 0);
  const Measurement r = sim.measure(Context{}, w, config, MeasureOptions(600, {}, false));
  if (!r.ok() || r.models.empty() || !r.models[0].ttft_ms_p95) return NAN;
  return *r.models[0].ttft_ms_p95;
}

// Sequences the engine's KV cache holds at once at `context` tokens each: the memory an
// engine takes (kLlmEngineMemoryFraction of the device) less weights and runtime.
double kv_limited_batch(const ModelArch& arch, const Device& device, Precision p, double batch,
                        double context) {
  const double kv_bytes = kLlmEngineMemoryFraction * device.vram_bytes() -
                          weight_bytes(arch, p) - sim::kLlmRuntimeBytes;
  const double tokens = sim::kv_capacity_tokens(arch, p, kv_bytes);
  return std::clamp(tokens / std::max(context, 1.0), 1.0, batch);
}

}  // namespace

Result<std::vector<LlmMeasurement>> read_llm_measurements(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error("cannot read '" + path + "'", Error::Kind::kIo);
  std::vector<LlmMeasurement> out;
  std::string line;
  int line_no = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const auto f = csv_fields(line);
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    if (!header) {
      if (f.size() != std::size(kColumns)) return Error(where + "expected 10 columns in header");
      for (std::size_t i = 0; i < f.size(); ++i) {
        if (f[i] != kColumns[i]) {
          return Error(where + "column " + std::to_string(i + 1) + " is '" + f[i] +
                       "', expected '" + kColumns[i] + "'");
        }
      }
      header = true;
      continue;
    }
    if (f.size() != std::size(kColumns)) return Error(where + "expected 10 fields");
    LlmMeasurement m;
    m.gpu = f[0];
    m.model = f[1];
    m.precision = f[2];
    if (!parse_number(f[3], m.prompt) || !parse_number(f[4], m.output) ||
        !parse_number(f[5], m.batch) || !parse_number(f[7], m.value_ms)) {
      return Error(where + "prompt, output, batch and value_ms must be numbers");
    }
    m.metric = f[6];
    if (m.metric != "ttft_ms" && m.metric != "tpot_ms" && m.metric != "ops_ms") {
      return Error(where + "unknown metric '" + m.metric + "' (ttft_ms, tpot_ms, ops_ms)");
    }
    if (f[8] != "calibrate" && f[8] != "validate") {
      return Error(where + "split must be calibrate or validate, got '" + f[8] + "'");
    }
    m.calibrate = f[8] == "calibrate";
    m.reference = f[9];
    if (m.prompt < 1 || m.output < 1 || m.batch < 1 || !(m.value_ms > 0)) {
      return Error(where + "prompt, output, batch and value_ms must be positive");
    }
    out.push_back(std::move(m));
  }
  if (!header) return Error(path + ": no header");
  return out;
}

Result<std::vector<LlmComparison>> compare_llm_physics(const std::vector<LlmMeasurement>& points,
                                                       const Catalog& catalog) {
  std::vector<LlmComparison> out;
  for (const LlmMeasurement& pt : points) {
    const Device* device = catalog.find_device(pt.gpu);
    const ModelArch* arch = catalog.find_model(pt.model);
    const auto p = parse_precision(pt.precision);
    if (device == nullptr || arch == nullptr || !p) {
      return Error("point " + pt.gpu + "/" + pt.model + "/" + pt.precision +
                   ": unknown device, model or precision in the catalog");
    }
    const gpu::DeviceModel dev = gpu::device_model(*device);
    LlmComparison c;
    c.point = pt;
    if (pt.metric == "ttft_ms") {
      c.sim_ms = sim_ttft_ms(*arch, *device, *p, pt);
    } else if (pt.metric == "tpot_ms") {
      const double context = pt.prompt + 0.5 * pt.output;
      sim::LlmBatch b;
      b.decode_seqs = kv_limited_batch(*arch, *device, *p, pt.batch, context);
      b.decode_context = context;
      c.sim_ms = 1e3 * sim::make_llm_shape(*arch, b, *p, *device, dev, dev.sms).alone_s;
    } else {
      sim::LlmBatch b;
      b.prefill_tokens = static_cast<double>(pt.prompt) * pt.batch;
      sim::LlmStepTimes t;
      sim::make_llm_shape(*arch, b, *p, *device, dev, dev.sms, &t);
      c.sim_ms = 1e3 * (t.linear_s + t.elementwise_s);
    }
    if (!std::isfinite(c.sim_ms)) {
      return Error("point " + pt.gpu + "/" + pt.model + " " + pt.metric + ": the simulator failed");
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<LlmErrorSummary> summarize(const std::vector<LlmComparison>& rows) {
  std::vector<std::string> metrics;
  for (const auto& r : rows) {
    if (std::find(metrics.begin(), metrics.end(), r.point.metric) == metrics.end()) {
      metrics.push_back(r.point.metric);
    }
  }
  std::vector<LlmErrorSummary> out;
  for (const auto& metric : metrics) {
    for (const bool calibrate : {true, false}) {
      std::vector<double> errors;
      for (const auto& r : rows) {
        if (r.point.metric == metric && r.point.calibrate == calibrate) {
          errors.push_back(std::abs(r.error()));
        }
      }
      if (errors.empty()) continue;
      LlmErrorSummary s;
      s.metric = metric;
      s.calibrate = calibrate;
      s.points = errors.size();
      s.median_abs = median(errors);
      s.worst_abs = *std::max_element(errors.begin(), errors.end());
      out.push_back(s);
    }
  }
  return out;
}

}  // namespace corun
