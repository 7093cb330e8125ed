#include "corun/surrogate/training.h"

#include <set>

namespace corun::surrogate {

Result<TrainingData> load_training_data(const profile::Dataset& dataset, const Catalog& catalog,
                                        std::string_view workload_hash, bool need_standalone,
                                        bool include_online) {
  const std::string where = dataset.path().string();
  auto campaigns = dataset.campaigns();
  if (!campaigns) return campaigns.error();
  std::set<std::string> hashes;
  for (const auto& c : *campaigns) hashes.insert(c.workload_hash);
  if (hashes.empty()) return Error(where + " holds no campaign (run corun profile first)");
  std::string hash(workload_hash);
  if (hash.empty()) {
    if (hashes.size() > 1) {
      std::string list;
      for (const auto& h : hashes) list += " " + h;
      return Error(where + " holds campaigns of " + std::to_string(hashes.size()) +
                   " workloads; choose one with --workload-hash:" + list);
    }
    hash = *hashes.begin();
  } else if (!hashes.contains(hash)) {
    return Error(where + " holds no campaign of workload hash " + hash, Error::Kind::kNotFound);
  }
  auto text = dataset.workload_text(hash);
  if (!text) return text.error();
  TrainingData data;
  std::string name;
  for (const auto& c : *campaigns) {
    if (c.workload_hash == hash) name = c.workload_name;
  }
  auto w = parse_workload(*text, name.empty() ? "<dataset workload>" : name + ".yaml", catalog);
  if (!w) return w.error().wrap(where + ": stored workload");
  data.workload = std::move(*w);

  const profile::CampaignInfo* standalone = nullptr;
  std::string testbed, device;
  auto same_origin = [&](const profile::CampaignInfo& c) -> Status {
    if (testbed.empty()) {
      testbed = c.spec.testbed;
      device = c.device;
    } else if (c.spec.testbed != testbed || c.device != device) {
      return Error(where + ": campaigns of this workload mix testbeds or devices (" + testbed +
                   "/" + device + " and " + c.spec.testbed + "/" + c.device + ")");
    }
    return {};
  };
  for (const auto& c : *campaigns) {
    if (c.workload_hash != hash) continue;
    if (auto s = same_origin(c); !s.ok()) return s.error();
    if (c.spec.plan == profile::Plan::kStandalone) {
      if (standalone == nullptr || c.stored_samples > standalone->stored_samples) standalone = &c;
      continue;
    }
    const bool online = c.spec.plan == profile::Plan::kOnline;
    if (online && !include_online) continue;
    auto samples = dataset.samples(c.id);
    if (!samples) return samples.error();
    if (online) data.online += samples->size();
    data.corun.insert(data.corun.end(), std::make_move_iterator(samples->begin()),
                      std::make_move_iterator(samples->end()));
  }
  if (standalone != nullptr) {
    auto samples = dataset.samples(standalone->id);
    if (!samples) return samples.error();
    auto table = StandaloneTable::from_samples(data.workload, *samples);
    if (!table) return table.error().wrap(where);
    data.standalone = std::move(*table);
    data.provenance.seed = standalone->spec.seed;
  } else if (need_standalone) {
    return Error(where + " has no standalone campaign for this workload: run `corun profile " +
                 "FILE --plan standalone --out " + where + "` first");
  } else {
    data.standalone = StandaloneTable::unprofiled(data.workload);
  }
  if (data.corun.empty()) {
    return Error(where + " has no co-run samples for this workload: run `corun profile FILE " +
                 "--plan meanfield --budget K --out " + where + "` first");
  }
  data.provenance.testbed = testbed;
  data.provenance.device = device;
  data.provenance.workload_hash = hash;
  data.provenance.workload_name = name;
  data.provenance.dataset = where;
  return data;
}

}  // namespace corun::surrogate
