#include "corun/surrogate/training.h"

#include <set>

#include "corun/surrogate/cotenant.h"

namespace corun::surrogate {

namespace {

// A co-run sample's configuration indexes the workload's local configurations when features
// are computed: one the workload cannot have (another model count, an index out of range) is
// a damaged or altered dataset, refused before any table is indexed with it.
Status check_configs(const Workload& w, const std::vector<profile::SampleRecord>& samples,
                     const std::string& where) {
  for (const auto& s : samples) {
    bool fits = s.config.size() == w.models.size();
    for (std::size_t m = 0; fits && m < s.config.size(); ++m) {
      const std::int32_t l = s.config[m];
      fits = l == kAbsent ||
             (l >= 0 && static_cast<std::size_t>(l) < w.models[m].local_config_count());
    }
    if (!fits) {
      return Error(where + ": damaged dataset: sample " + std::to_string(s.index) +
                       " has a configuration the stored workload cannot have",
                   Error::Kind::kDamaged);
    }
  }
  return {};
}

}  // namespace

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
  std::string name, file;
  for (const auto& c : *campaigns) {
    if (c.workload_hash == hash) {
      name = c.workload_name;
      file = c.workload_file;
    }
  }
  // Parsed as from the file it was read from, so that a trace it replays is found again.
  if (file.empty()) file = name.empty() ? "<dataset workload>" : name + ".yaml";
  auto w = parse_workload(*text, file, catalog);
  // The text corun stored with the campaigns: if it no longer parses, the file was altered
  // (or the catalog it was written against lost a model the message names).
  if (!w) return w.error().wrap(where + ": stored workload").as(Error::Kind::kDamaged);
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
    if (auto st = check_configs(data.workload, *samples, where); !st.ok()) return st.error();
    if (online) data.online += samples->size();
    if (c.spec.plan == profile::Plan::kCoTenant) {
      // Recomputed from the campaign's seed, as it was drawn when the sample was measured.
      data.cotenants.resize(data.corun.size());
      for (const auto& r : *samples) {
        data.cotenants.push_back(cotenant_totals(
            data.workload.device,
            profile::plan_cotenant(Context{.seed = c.spec.context.seed}, c.spec.plan, r.index)));
      }
    } else if (!data.cotenants.empty()) {
      data.cotenants.resize(data.cotenants.size() + samples->size());
    }
    data.corun.insert(data.corun.end(), std::make_move_iterator(samples->begin()),
                      std::make_move_iterator(samples->end()));
  }
  if (standalone != nullptr) {
    auto samples = dataset.samples(standalone->id);
    if (!samples) return samples.error();
    auto table = StandaloneTable::from_samples(data.workload, *samples);
    // Standalone samples that do not fit the stored workload: the file was altered.
    if (!table) return table.error().wrap(where + ": damaged dataset").as(Error::Kind::kDamaged);
    data.standalone = std::move(*table);
    data.provenance.context.seed = standalone->spec.context.seed;
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
