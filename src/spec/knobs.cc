#include "corun/spec/knobs.h"

#include <cmath>

#include "corun/core/check.h"
#include "corun/core/strings.h"

namespace corun {

namespace {

using F = ModelFamily;

std::vector<KnobDecl> make_decls() {
  const std::vector<F> all = {F::kVision, F::kEncoder, F::kSpeech, F::kLlm};
  return {
      {KnobId::kPrecision, "precision", true, false, 0, 4, 1, all,
       "numeric format of weights and math: fp32, fp16, bf16, int8, awq (4-bit weights)"},
      {KnobId::kBatch, "batch", false, true, 1, 1024, 1, {F::kVision, F::kEncoder, F::kSpeech},
       "inputs per forward pass; frames wait until a batch fills"},
      {KnobId::kSmShare, "sm_share", false, false, 1, 100, 100, all,
       "MPS active-thread percentage: a cap on the SMs the model's kernels may occupy"},
      {KnobId::kRequestConcurrency, "request_concurrency", false, true, 1, 256, 1,
       {F::kLlm, F::kEncoder, F::kSpeech},
       "requests served at once (LLM: sequences in the continuous batch)"},
      {KnobId::kImgsz, "imgsz", false, true, 32, 4096, 640, {F::kVision},
       "input image side in pixels (a multiple of 32)"},
      {KnobId::kSkipRate, "skip_rate", false, false, 0, 0.95, 0, {F::kVision},
       "fraction of incoming frames dropped before inference"},
      {KnobId::kPrefillChunk, "prefill_chunk", false, true, 16, 131072, 2048, {F::kLlm},
       "prompt tokens per prefill step (chunked prefill)"},
  };
}

}  // namespace

const std::vector<KnobDecl>& knob_decls() {
  static const std::vector<KnobDecl> decls = make_decls();
  return decls;
}

const KnobDecl& knob_decl(KnobId id) {
  const auto& d = knob_decls()[static_cast<std::size_t>(id)];
  CORUN_CHECK(d.id == id);
  return d;
}

std::optional<KnobId> find_knob(std::string_view name) {
  for (const auto& d : knob_decls()) {
    if (d.name == name) return d.id;
  }
  return std::nullopt;
}

const std::vector<std::string>& knob_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& d : knob_decls()) out.push_back(d.name);
    return out;
  }();
  return names;
}

void Settings::set(KnobId id, double value) {
  switch (id) {
    case KnobId::kPrecision:
      precision = static_cast<Precision>(static_cast<int>(value));
      return;
    case KnobId::kBatch:
      batch = static_cast<int>(value);
      return;
    case KnobId::kSmShare:
      sm_share = value;
      return;
    case KnobId::kRequestConcurrency:
      request_concurrency = static_cast<int>(value);
      return;
    case KnobId::kImgsz:
      imgsz = static_cast<int>(value);
      return;
    case KnobId::kSkipRate:
      skip_rate = value;
      return;
    case KnobId::kPrefillChunk:
      prefill_chunk = static_cast<int>(value);
      return;
  }
}

double Settings::get(KnobId id) const {
  switch (id) {
    case KnobId::kPrecision:
      return static_cast<double>(static_cast<int>(precision));
    case KnobId::kBatch:
      return batch;
    case KnobId::kSmShare:
      return sm_share;
    case KnobId::kRequestConcurrency:
      return request_concurrency;
    case KnobId::kImgsz:
      return imgsz;
    case KnobId::kSkipRate:
      return skip_rate;
    case KnobId::kPrefillChunk:
      return prefill_chunk;
  }
  return 0;
}

std::string format_knob_value(KnobId id, double value) {
  if (id == KnobId::kPrecision) {
    return std::string(to_string(static_cast<Precision>(static_cast<int>(value))));
  }
  return format_number(value);
}

}  // namespace corun
