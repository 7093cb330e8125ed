#include "corun/surrogate/standalone.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "corun/core/json_number.h"

namespace corun::surrogate {

Result<StandaloneTable> StandaloneTable::from_samples(
    const Workload& w, std::span<const profile::SampleRecord> samples) {
  return build(w, samples, nullptr);
}

Result<StandaloneTable> StandaloneTable::refreshed(
    const Workload& w, std::span<const profile::SampleRecord> samples) const {
  if (profiles_.size() != w.models.size()) {
    return Error("standalone table has " + std::to_string(profiles_.size()) +
                 " models, the workload " + std::to_string(w.models.size()));
  }
  return build(w, samples, this);
}

Result<StandaloneTable> StandaloneTable::build(const Workload& w,
                                               std::span<const profile::SampleRecord> samples,
                                               const StandaloneTable* base) {
  StandaloneTable t;
  t.idle_power_w_ = w.device.idle_power_w;
  t.tdp_w_ = w.device.tdp_w > 0 ? w.device.tdp_w : 1;
  // Repeated measurements of one (model, configuration) are averaged: metrics as geometric
  // means (they are fitted in log space), utilisations, memory and power arithmetically.
  struct Acc {
    std::size_t seen = 0, ok = 0;
    std::array<double, kTargetCount> log_sum{};
    std::array<std::size_t, kTargetCount> count{};
    double sm = 0, bw = 0, vram = 0, power = 0, occupancy = 0;
    std::string error;
  };
  std::vector<std::vector<Acc>> acc(w.models.size());
  t.profiles_.resize(w.models.size());
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    t.profiles_[m].resize(w.models[m].local_config_count());
    acc[m].resize(w.models[m].local_config_count());
  }
  for (const auto& s : samples) {
    if (s.config.size() != w.models.size()) {
      return Error("standalone sample " + std::to_string(s.index) + " has " +
                   std::to_string(s.config.size()) + " models, the workload " +
                   std::to_string(w.models.size()));
    }
    std::size_t running = 0, m = 0;
    for (std::size_t k = 0; k < s.config.size(); ++k) {
      if (s.config[k] != kAbsent) {
        ++running;
        m = k;
      }
    }
    if (running != 1) {
      return Error("sample " + std::to_string(s.index) + " runs " + std::to_string(running) +
                   " models; a standalone sample runs exactly one");
    }
    const auto l = static_cast<std::size_t>(s.config[m]);
    if (l >= t.profiles_[m].size()) {
      return Error("standalone sample " + std::to_string(s.index) +
                   ": local configuration out of range");
    }
    Acc& a = acc[m][l];
    ++a.seen;
    const ModelMetrics* mm = nullptr;
    for (const auto& x : s.measurement.models) {
      if (x.model == m) mm = &x;
    }
    if (!s.measurement.ok() || mm == nullptr || !mm->ok()) {
      a.error = !s.measurement.error.empty() ? s.measurement.error
                : mm != nullptr              ? mm->error
                                             : "no metrics reported";
      continue;
    }
    ++a.ok;
    for (Target tg : kAllTargets) {
      const double v = metric_value(*mm, tg);
      if (std::isfinite(v)) {
        a.log_sum[static_cast<std::size_t>(tg)] += std::log(v);
        ++a.count[static_cast<std::size_t>(tg)];
      }
    }
    {
      // LLM throughput counts output tokens; requests are what occupy the engine.
      const double per_request = w.models[m].arch.family == ModelFamily::kLlm
                                     ? std::max(1, w.models[m].demand.output_tokens)
                                     : 1.0;
      const double rate = std::isfinite(mm->throughput) ? mm->throughput / per_request : 0.0;
      const double p50_s = std::isfinite(mm->latency_ms_p50) ? mm->latency_ms_p50 / 1e3 : 0.0;
      a.occupancy += std::clamp(rate * p50_s, 0.0, 1.0);
    }
    a.sm += s.measurement.gpu.sm_util;
    a.bw += s.measurement.gpu.mem_bw_util;
    a.vram += s.measurement.gpu.vram_used_gb;
    a.power += std::max(0.0, s.measurement.gpu.power_w - t.idle_power_w_);
  }
  for (std::size_t m = 0; m < acc.size(); ++m) {
    for (std::size_t l = 0; l < acc[m].size(); ++l) {
      const Acc& a = acc[m][l];
      StandaloneProfile& p = t.profiles_[m][l];
      if (a.seen == 0 && base != nullptr && l < base->profiles_[m].size()) {
        p = base->profiles_[m][l];  // not remeasured: keep the previous profile
        continue;
      }
      if (a.seen == 0) {
        return Error("standalone profile misses model '" + w.models[m].name + "' in " +
                     w.models[m].describe(l) + " (rerun the standalone campaign)");
      }
      p.measurements = a.seen;
      if (a.ok == 0) {
        p.error = a.error;
        continue;
      }
      const auto k = static_cast<double>(a.ok);
      for (std::size_t tg = 0; tg < kTargetCount; ++tg) {
        if (a.count[tg] > 0)
          p.target[tg] = std::exp(a.log_sum[tg] / static_cast<double>(a.count[tg]));
      }
      p.sm_util = a.sm / k;
      p.occupancy = a.occupancy / k;
      p.mem_bw_util = a.bw / k;
      p.vram_gb = a.vram / k;
      p.power_w = a.power / k;
    }
  }
  return t;
}
StandaloneTable StandaloneTable::unprofiled(const Workload& w) {
  StandaloneTable t;
  t.idle_power_w_ = w.device.idle_power_w;
  t.tdp_w_ = w.device.tdp_w > 0 ? w.device.tdp_w : 1;
  for (const auto& m : w.models) {
    StandaloneProfile p;
    p.error = std::string(kNotProfiled);
    p.measurements = 0;
    t.profiles_.emplace_back(m.local_config_count(), p);
  }
  return t;
}

std::size_t StandaloneTable::measurements() const {
  std::size_t n = 0;
  for (const auto& m : profiles_) {
    for (const auto& p : m) n += p.measurements;
  }
  return n;
}

StandaloneTable StandaloneTable::prefix(std::size_t n) const {
  StandaloneTable t = *this;
  if (n < t.profiles_.size()) t.profiles_.resize(n);
  return t;
}

nlohmann::json StandaloneTable::to_json() const {
  nlohmann::json j;
  j["idle_power_w"] = idle_power_w_;
  j["tdp_w"] = tdp_w_;
  j["models"] = nlohmann::json::array();
  for (const auto& m : profiles_) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& p : m) {
      nlohmann::json r;
      if (!p.ok()) {
        r["error"] = p.error;
      } else {
        for (Target t : kAllTargets) {
          const double v = p.target[static_cast<std::size_t>(t)];
          if (std::isfinite(v)) r[std::string(to_string(t))] = v;
        }
        r["sm_util"] = p.sm_util;
        r["occupancy"] = p.occupancy;
        r["mem_bw_util"] = p.mem_bw_util;
        r["vram_gb"] = p.vram_gb;
        r["power_w"] = p.power_w;
      }
      r["measurements"] = p.measurements;
      rows.push_back(std::move(r));
    }
    j["models"].push_back(std::move(rows));
  }
  return j;
}

Result<StandaloneTable> StandaloneTable::from_json(const nlohmann::json& j) {
  try {
    StandaloneTable t;
    t.idle_power_w_ = j.at("idle_power_w").get<double>();
    t.tdp_w_ = j.at("tdp_w").get<double>();
    if (!(t.tdp_w_ > 0)) return Error("standalone.tdp_w must be positive");
    for (const auto& rows : j.at("models")) {
      std::vector<StandaloneProfile> m;
      for (const auto& r : rows) {
        StandaloneProfile p;
        p.measurements = json_number_or(r, "measurements", std::size_t{1});
        if (r.contains("error")) {
          p.error = r.at("error").get<std::string>();
          if (p.error.empty()) p.error = "failed";
        } else {
          for (Target tg : kAllTargets) {
            const std::string key(to_string(tg));
            if (r.contains(key)) p.target[static_cast<std::size_t>(tg)] = r.at(key).get<double>();
          }
          p.sm_util = r.at("sm_util").get<double>();
          p.occupancy = r.at("occupancy").get<double>();
          p.mem_bw_util = r.at("mem_bw_util").get<double>();
          p.vram_gb = r.at("vram_gb").get<double>();
          p.power_w = r.at("power_w").get<double>();
        }
        m.push_back(std::move(p));
      }
      t.profiles_.push_back(std::move(m));
    }
    return t;
  } catch (const nlohmann::json::exception& e) {
    return Error(std::string("standalone: ") + e.what());
  }
}

}  // namespace corun::surrogate
