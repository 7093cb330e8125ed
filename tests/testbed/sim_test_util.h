#pragma once

// Helpers for the testbed tests: workloads built in code from the embedded catalog.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/space/space.h"
#include "corun/spec/workload.h"
#include "corun/testbed/sim.h"

namespace corun::testing {

/// @brief A model with no searched knobs: its only local configuration is `s`.
inline ModelSpec make_spec(std::string name, std::string_view arch, const Settings& s,
                           const Demand& d = {}) {
  const ModelArch* a = Catalog::default_catalog().find_model(arch);
  EXPECT_NE(a, nullptr) << arch;
  ModelSpec m;
  m.name = std::move(name);
  if (a != nullptr) m.arch = *a;
  m.base = s;
  // As the workload parser does: vision models default to their reference input size.
  if (a != nullptr && a->family == ModelFamily::kVision && s.imgsz == Settings{}.imgsz) {
    m.base.imgsz = a->reference_size;
  }
  m.demand = d;
  return m;
}

inline Settings settings(Precision p, int batch, double sm_share, int concurrency = 1) {
  Settings s;
  s.precision = p;
  s.batch = batch;
  s.sm_share = sm_share;
  s.request_concurrency = concurrency;
  return s;
}

inline Workload make_workload(std::string_view device, std::vector<ModelSpec> models) {
  const Device* d = Catalog::default_catalog().find_device(device);
  EXPECT_NE(d, nullptr) << device;
  Workload w;
  w.file = "<test>";
  if (d != nullptr) w.device = *d;
  w.models = std::move(models);
  return w;
}

/// @brief Runs every model of `w` (local configuration 0 each).
inline Measurement measure_all(const Workload& w, std::uint64_t seed = 1, double window_s = 10) {
  const SimTestbed sim;
  const JointConfig config(w.models.size(), 0);
  return sim.measure(Context{.seed = seed}, w, config, MeasureOptions(window_s));
}

/// @brief Runs only the models whose indices are listed; the others are absent.
inline Measurement measure_subset(const Workload& w, const std::vector<std::size_t>& running,
                                  std::uint64_t seed = 1, double window_s = 10) {
  const SimTestbed sim;
  JointConfig config(w.models.size(), kAbsent);
  for (std::size_t i : running) config[i] = 0;
  return sim.measure(Context{.seed = seed}, w, config, MeasureOptions(window_s));
}

}  // namespace corun::testing
