// libFuzzer target: the fitted-surrogate loader (surrogate.json, which users copy between
// machines and may hand-edit) and what runs on what it loads. Bytes are read as JSON, then as a
// surrogate; one that loads and matches the paper-n2 workload is compiled for it and predicts
// every joint configuration, so that tampered trees, weights or feature tables must be refused
// at load or compile time rather than read out of bounds while predicting.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "corun/catalog/catalog.h"
#include "corun/space/space.h"
#include "corun/spec/workload.h"
#include "corun/surrogate/surrogate.h"

namespace {

const corun::Workload& paper_n2() {
  static const corun::Workload w = [] {
    auto r = corun::load_workload(CORUN_SOURCE_DIR "/workloads/paper-n2.yaml",
                                  corun::Catalog::default_catalog());
    if (!r.ok()) __builtin_trap();
    return std::move(r).value();
  }();
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return 0;
  const auto s = corun::surrogate::Surrogate::from_json(j);
  if (!s.ok()) {
    if (s.error().message().empty()) __builtin_trap();  // a refusal says why
    return 0;
  }
  const corun::Workload& w = paper_n2();
  const auto c = corun::surrogate::CompiledSurrogate::compile(*s, w);
  if (!c.ok()) return 0;
  const corun::ConfigSpace space(w);
  const std::uint64_t n = space.joint_count().value();  // exact: paper-n2 is small
  std::vector<std::int32_t> configs;
  for (std::uint64_t i = 0; i < n; ++i) {
    const corun::JointConfig jc = space.decode(i);
    configs.insert(configs.end(), jc.begin(), jc.end());
  }
  std::vector<float> out(configs.size() * corun::surrogate::kTargetCount);
  auto ws = c->make_workspace();
  c->predict(configs, out, ws);
  return 0;
}
