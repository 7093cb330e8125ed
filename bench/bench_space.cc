// Hot paths of the configuration space and the simulated testbed.
#include <benchmark/benchmark.h>

#include "corun/catalog/catalog.h"
#include "corun/space/space.h"
#include "corun/testbed/sim.h"

namespace corun {
namespace {

const Workload& paper_n5() {
  static const Workload w = [] {
    auto r = load_workload(CORUN_SOURCE_DIR "/workloads/paper-n5.yaml", Catalog::default_catalog());
    if (!r) std::abort();
    return std::move(r).value();
  }();
  return w;
}

// Decoding a joint index and checking VRAM: the inner loop of exhaustive enumeration.
void BM_DecodeAndCheckVram(benchmark::State& state) {
  const ConfigSpace space(paper_n5());
  JointConfig c(space.models());
  std::uint64_t i = 0;
  for (auto _ : state) {
    space.decode(i, c);
    benchmark::DoNotOptimize(space.fits_vram(c));
    i = (i + 7919) % space.joint_count().value();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeAndCheckVram);

// One ground-truth measurement of a 5-model joint configuration on the simulator.
void BM_SimMeasureN5(benchmark::State& state) {
  const ConfigSpace space(paper_n5());
  const SimTestbed sim;
  JointConfig c(space.models());
  std::uint64_t i = 0;
  for (auto _ : state) {
    space.decode(i, c);
    benchmark::DoNotOptimize(sim.measure(Context{.seed = i}, paper_n5(), c, MeasureOptions(10)));
    i = (i + 7919) % space.joint_count().value();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SimMeasureN5);

}  // namespace
}  // namespace corun
