// libFuzzer target: the dataset reader (dataset.db, an SQLite file that users copy between
// machines and that a disk or a crash may damage). The bytes are written to a file and opened
// read-only as `corun fit` opens it; every campaign's samples are read back, the training data
// of its workload is assembled, and a linear surrogate is fitted on it, so that a tampered row
// (a configuration index, a model index, a seed, a number) must be refused with a reason
// rather than indexing a table out of bounds. Nothing may crash, hang or leak for any bytes.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "corun/catalog/catalog.h"
#include "corun/profile/dataset.h"
#include "corun/surrogate/surrogate.h"
#include "corun/surrogate/training.h"

namespace {

// One file per process, rewritten for every input; SQLite's side files go with it.
const std::string& scratch_path() {
  static const std::string p = "/tmp/corun-fuzz-dataset-" + std::to_string(::getpid()) + ".db";
  return p;
}

void remove_scratch() {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    std::remove((scratch_path() + suffix).c_str());
  }
}

void fit_on(const corun::profile::Dataset& ds) {
  namespace s = corun::surrogate;
  const auto data = s::load_training_data(ds, corun::Catalog::default_catalog(), "", false);
  if (!data.ok()) {
    if (data.error().message().empty()) __builtin_trap();  // a refusal says why
    return;
  }
  s::FitOptions o;
  o.kind =
      data->standalone.measurements() > 0 ? s::SurrogateKind::kMeanField : s::SurrogateKind::kJoint;
  o.regressor = s::RegressorKind::kLinear;
  o.calibration_folds = 0;
  const auto fitted = s::Surrogate::fit(corun::Context{}, data->workload, data->standalone,
                                        data->corun, o, data->provenance);
  if (!fitted.ok() && fitted.error().message().empty()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  remove_scratch();
  if (std::FILE* f = std::fopen(scratch_path().c_str(), "wb")) {
    const bool whole = std::fwrite(data, 1, size, f) == size;
    if (std::fclose(f) != 0 || !whole) __builtin_trap();  // /tmp must hold one input
  }
  {
    auto ds =
        corun::profile::Dataset::open(scratch_path(), corun::profile::Dataset::Mode::kReadOnly);
    if (!ds.ok()) {
      if (ds.error().message().empty()) __builtin_trap();
    } else {
      const auto campaigns = ds->campaigns();
      if (campaigns.ok()) {
        for (const auto& c : *campaigns) {
          const auto samples = ds->samples(c.id);
          if (!samples.ok() && samples.error().message().empty()) __builtin_trap();
          (void)ds->workload_text(c.workload_hash);
        }
        fit_on(*ds);
      }
    }
  }
  remove_scratch();
  return 0;
}
