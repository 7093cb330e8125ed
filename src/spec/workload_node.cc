// Parsing of a workload's node: its GPUs and the MIG partitionings offered to the planner.
#include <string>
#include <utility>
#include <vector>

#include "corun/core/strings.h"
#include "corun/core/yaml.h"
#include "corun/spec/workload.h"
#include "workload_internal.h"

namespace corun::workload_detail {

namespace {

// One partition: a list of the device's MIG profile names, checked against its slice counts.
std::optional<MigPartition> parse_partition(const YamlField& f, const MigGpu& mig) {
  if (!f.expect_sequence()) return std::nullopt;
  MigPartition out;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const YamlField e = f.at(i);
    const auto name = e.string();
    if (!name) return std::nullopt;
    const MigProfile* p = mig.find(*name);
    if (p == nullptr) {
      e.error("unknown MIG profile '" + *name + "' for " + mig.device +
              did_you_mean(*name, mig.profile_names()) + " (profiles: " +
              join(mig.profile_names(), ", ") + ")");
      return std::nullopt;
    }
    out.push_back(*p);
  }
  if (const std::string why = mig.invalid_reason(out); !why.empty()) {
    f.error("not a valid MIG partition: " + why);
    return std::nullopt;
  }
  return out;
}

// The device's MIG table, or an error at `f` when the device has none.
const MigGpu* mig_of(const YamlField& f, const Workload& w, const MigCatalog& table) {
  const MigGpu* mig = table.find(w.device.name);
  if (mig == nullptr) {
    f.error("device '" + w.device.name + "' does not support MIG (catalog/mig.yaml lists the " +
            "devices that do)");
  }
  return mig;
}

}  // namespace

// `gpus: N` or `gpus: [{mig: [...]}, {}]`, and the node's candidate partitionings
// `mig: [[...], ...]`, which every GPU the workload does not partition itself may take.
void parse_node(const YamlField& gpus, const YamlField& mig, const Catalog& catalog,
                Workload& w) {
  if (!gpus.present() && !mig.present()) return;
  auto table = MigCatalog::of(catalog);
  if (!table) {
    gpus.error(table.error().what());
    return;
  }
  std::vector<MigPartition> candidates;
  if (mig.present()) {
    const MigGpu* geometry = mig_of(mig, w, *table);
    if (geometry != nullptr && mig.expect_sequence()) {
      if (mig.size() > kMaxMigCandidates) {
        mig.error("too many partitionings (" + std::to_string(mig.size()) + ", at most " +
                  std::to_string(kMaxMigCandidates) + ")");
      } else {
        for (std::size_t i = 0; i < mig.size(); ++i) {
          if (auto p = parse_partition(mig.at(i), *geometry)) candidates.push_back(std::move(*p));
        }
      }
    }
  }
  const std::vector<MigPartition> free_gpu =
      candidates.empty() ? std::vector<MigPartition>{MigPartition{}} : candidates;
  std::vector<std::vector<MigPartition>> options;
  if (!gpus.present()) {
    options.push_back(free_gpu);
  } else if (gpus.is_scalar()) {
    const auto n = gpus.integer(1, kMaxGpus);
    if (n) options.assign(static_cast<std::size_t>(*n), free_gpu);
  } else if (gpus.is_sequence()) {
    if (!gpus.expect_sequence()) return;
    if (gpus.size() > static_cast<std::size_t>(kMaxGpus)) {
      gpus.error("too many GPUs (" + std::to_string(gpus.size()) + ", at most " +
                 std::to_string(kMaxGpus) + ")");
      return;
    }
    for (std::size_t g = 0; g < gpus.size(); ++g) {
      const YamlField e = gpus.at(g);
      if (!e.present()) {  // `- ` or `- null`: a GPU left to the node's choice
        options.push_back(free_gpu);
        continue;
      }
      if (!e.expect_map()) continue;
      e.check_keys({"mig"});
      if (!e["mig"].present()) {
        options.push_back(free_gpu);
        continue;
      }
      const MigGpu* geometry = mig_of(e["mig"], w, *table);
      if (geometry == nullptr) continue;
      if (auto p = parse_partition(e["mig"], *geometry)) options.push_back({std::move(*p)});
    }
  } else {
    gpus.error("expected a GPU count or a list of GPUs ({} or {mig: [profiles]})");
  }
  if (options.empty()) return;
  NodeSpec node{options};
  if (node.layout_count() > kMaxNodeLayouts) {
    (mig.present() ? mig : gpus)
        .error("too many ways to partition the node (" + std::to_string(node.layout_count()) +
               ", at most " + std::to_string(kMaxNodeLayouts) +
               "): fix some GPUs' partitions in 'gpus' or offer fewer candidates");
    return;
  }
  w.node = std::move(node);
}

}  // namespace corun::workload_detail
