#include "corun/surrogate/features.h"

#include <algorithm>
#include <cmath>

#include "corun/catalog/model.h"
#include "corun/core/check.h"
#include "corun/core/enum_names.h"

namespace corun::surrogate {

namespace {

// Aggregate block shared by kMeanField and kCrossModel (others = totals minus self).
const std::vector<std::string>& aggregate_names() {
  static const std::vector<std::string> names = {
      "others.count",       "others.sm_util",    "others.mem_bw_util",
      "others.vram_gb",     "others.power_frac", "others.occupancy",
      "all.sm_util_excess", "all.mem_bw_excess", "all.power_over_cap"};
  return names;
}

std::size_t family_index(ModelFamily f) {
  switch (f) {
    case ModelFamily::kVision:
      return 0;
    case ModelFamily::kEncoder:
      return 1;
    case ModelFamily::kSpeech:
      return 2;
    case ModelFamily::kLlm:
      return 3;
  }
  return 0;
}

double safe_log(double v) { return std::isfinite(v) && v > 0 ? std::log(v) : NAN; }

/// Names of a model's per-local block, the features copied first into its vectors.
std::vector<std::string> own_block_names(SurrogateKind kind, const ModelSpec& spec,
                                         const std::vector<Target>& targets) {
  std::vector<std::string> names;
  switch (kind) {
    case SurrogateKind::kMeanField:
      for (const auto& k : spec.knobs) names.push_back("knob." + knob_decl(k.id).name);
      for (const char* n : {"self.sm_util", "self.mem_bw_util", "self.vram_gb", "self.power_frac",
                            "self.occupancy"}) {
        names.emplace_back(n);
      }
      for (Target t : targets) names.push_back("self.log_" + std::string(to_string(t)));
      break;
    case SurrogateKind::kCrossModel:
      for (const char* n :
           {"family.vision", "family.encoder", "family.speech", "family.llm", "model.log10_params",
            "model.log10_weight_gb", "self.sm_util", "self.mem_bw_util", "self.vram_gb",
            "self.power_frac", "self.occupancy"}) {
        names.emplace_back(n);
      }
      break;
    case SurrogateKind::kPairwise:
    case SurrogateKind::kJoint:
      break;
  }
  return names;
}

/// Writes model m's per-local block in local configuration l into `own` from the standalone
/// values `f` holds for it so far; returns the features written.
std::size_t fill_own_block(const FeatureMap& f, const ModelSpec& spec, std::size_t m, std::size_t l,
                           const std::vector<Target>& targets, double dynamic_range_w, float* own) {
  const Totals self = f.contribution(m, l);
  std::size_t k = 0;
  const Settings s = spec.settings(l);
  if (f.kind() == SurrogateKind::kMeanField) {
    for (const auto& knob : spec.knobs) own[k++] = static_cast<float>(s.get(knob.id));
    own[k++] = static_cast<float>(self.sm);
    own[k++] = static_cast<float>(self.bw);
    own[k++] = static_cast<float>(self.vram_gb);
    own[k++] = static_cast<float>(self.power_w / dynamic_range_w);
    own[k++] = static_cast<float>(self.occupancy);
    for (Target t : targets) {
      const double v = f.log_base(m, l, t);
      own[k++] = std::isfinite(v) ? static_cast<float>(v) : 0.0f;
    }
  } else if (f.kind() == SurrogateKind::kCrossModel) {
    own[family_index(spec.arch.family)] = 1.0f;
    k = 4;
    own[k++] = static_cast<float>(std::log10(std::max(1.0, param_count(spec.arch))));
    own[k++] =
        static_cast<float>(std::log10(std::max(1e-6, weight_bytes(spec.arch, s.precision) / 1e9)));
    own[k++] = static_cast<float>(self.sm);
    own[k++] = static_cast<float>(self.bw);
    own[k++] = static_cast<float>(self.vram_gb);
    own[k++] = static_cast<float>(self.power_w / dynamic_range_w);
    own[k++] = static_cast<float>(self.occupancy);
  }
  return k;
}

/// Completes a model's feature names after its per-local block: the aggregate block (after
/// the target indicators of the cross-model kind), or the pairwise kind's four.
void finish_names(SurrogateKind kind, std::vector<std::string>& names) {
  switch (kind) {
    case SurrogateKind::kMeanField:
      names.insert(names.end(), aggregate_names().begin(), aggregate_names().end());
      break;
    case SurrogateKind::kCrossModel:
      for (Target t : kAllTargets) names.push_back("target." + std::string(to_string(t)));
      names.emplace_back("self.log_target");
      names.insert(names.end(), aggregate_names().begin(), aggregate_names().end());
      break;
    case SurrogateKind::kPairwise:
      names = {"self.sm_util", "others.sm_util", "self.mem_bw_util", "others.mem_bw_util"};
      break;
    case SurrogateKind::kJoint:
      break;
  }
}

/// Names of the joint kind's features: each model's presence and knob values, in workload
/// order.
std::vector<std::string> joint_names(const Workload& w) {
  std::vector<std::string> names;
  for (const auto& spec : w.models) {
    names.push_back(spec.name + ".present");
    for (const auto& k : spec.knobs) names.push_back(spec.name + "." + knob_decl(k.id).name);
  }
  return names;
}

}  // namespace

namespace {

constexpr EnumNames<SurrogateKind, 4> kSurrogateNames{{{{SurrogateKind::kMeanField, "meanfield"},
                                                       {SurrogateKind::kJoint, "joint"},
                                                       {SurrogateKind::kPairwise, "pairwise"},
                                                       {SurrogateKind::kCrossModel, "crossmodel"}}}};

}  // namespace

std::string_view to_string(SurrogateKind k) { return kSurrogateNames.name(k); }

std::optional<SurrogateKind> parse_surrogate(std::string_view s) {
  return kSurrogateNames.parse(s);
}

const std::vector<std::string>& surrogate_names() {
  static const std::vector<std::string> names = kSurrogateNames.names();
  return names;
}

Result<FeatureMap> FeatureMap::build(SurrogateKind kind, const Workload& w,
                                     const StandaloneTable& standalone) {
  if (standalone.models() != w.models.size()) {
    return Error("standalone profile has " + std::to_string(standalone.models()) +
                 " models, the workload " + std::to_string(w.models.size()));
  }
  FeatureMap f;
  f.kind_ = kind;
  f.idle_power_w_ = standalone.idle_power_w();
  f.tdp_w_ = standalone.tdp_w();
  const double dynamic_range_w = std::max(1.0, f.tdp_w_ - f.idle_power_w_);
  f.models_.resize(w.models.size());
  // Joint blocks: [present, knob values...] per model, concatenated in workload order.
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    f.models_[m].joint_offset = f.joint_dim_;
    f.joint_dim_ += 1 + w.models[m].knobs.size();
  }
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    const ModelSpec& spec = w.models[m];
    PerModel& pm = f.models_[m];
    const std::size_t locals = spec.local_config_count();
    if (standalone.local_count(m) != locals) {
      return Error("standalone profile of '" + spec.name + "' has " +
                   std::to_string(standalone.local_count(m)) + " local configurations, the " +
                   "workload " + std::to_string(locals));
    }
    const std::vector<Target> targets = family_targets(spec.arch.family);
    pm.sm.resize(locals);
    pm.bw.resize(locals);
    pm.vram_gb.resize(locals);
    pm.power_w.resize(locals);
    pm.occ.resize(locals);
    pm.log_base.assign(locals * kTargetCount, NAN);
    pm.ok.resize(locals);

    // Names of the per-local block.
    pm.names = own_block_names(kind, spec, targets);
    std::vector<std::string>& names = pm.names;
    pm.own_dim = names.size();
    pm.own.assign(locals * pm.own_dim, 0.0f);
    for (std::size_t l = 0; l < locals; ++l) {
      const StandaloneProfile& p = standalone.at(m, l);
      pm.ok[l] = p.ok() ? 1 : 0;
      pm.sm[l] = p.ok() ? p.sm_util : 0;
      pm.bw[l] = p.ok() ? p.mem_bw_util : 0;
      pm.vram_gb[l] = p.ok() ? p.vram_gb : 0;
      pm.power_w[l] = p.ok() ? p.power_w : 0;
      pm.occ[l] = p.ok() ? p.occupancy : 0;
      for (Target t : kAllTargets) {
        pm.log_base[l * kTargetCount + static_cast<std::size_t>(t)] =
            safe_log(p.target[static_cast<std::size_t>(t)]);
      }
      const std::size_t k =
          fill_own_block(f, spec, m, l, targets, dynamic_range_w, pm.own.data() + l * pm.own_dim);
      CORUN_CHECK(k == pm.own_dim);
    }
    finish_names(kind, names);
    pm.dim = names.size();
  }
  if (kind == SurrogateKind::kJoint) {
    const std::vector<std::string> names = joint_names(w);
    for (auto& pm : f.models_) {
      pm.names = names;
      pm.dim = f.joint_dim_;
    }
    // Knob values of every local configuration, for the concatenation.
    for (std::size_t m = 0; m < w.models.size(); ++m) {
      PerModel& pm = f.models_[m];
      const ModelSpec& spec = w.models[m];
      pm.own_dim = spec.knobs.size();
      pm.own.assign(spec.local_config_count() * pm.own_dim, 0.0f);
      for (std::size_t l = 0; l < spec.local_config_count(); ++l) {
        const Settings s = spec.settings(l);
        for (std::size_t k = 0; k < spec.knobs.size(); ++k) {
          pm.own[l * pm.own_dim + k] = static_cast<float>(s.get(spec.knobs[k].id));
        }
      }
    }
  }
  return f;
}

std::vector<std::size_t> FeatureMap::aggregate_inputs(std::size_t m) const {
  switch (kind_) {
    case SurrogateKind::kJoint:
      return {};
    case SurrogateKind::kPairwise:
      return {1, 3};  // others' SM and DRAM utilisation
    case SurrogateKind::kMeanField:
    case SurrogateKind::kCrossModel:
      break;
  }
  // The aggregate block closes every vector (see fill()).
  constexpr std::size_t kAggregateFeatures = 9;
  std::vector<std::size_t> out;
  for (std::size_t k = models_[m].dim - kAggregateFeatures; k < models_[m].dim; ++k) {
    out.push_back(k);
  }
  return out;
}

Totals FeatureMap::contribution(std::size_t m, std::size_t l) const {
  const PerModel& pm = models_[m];
  return {1.0, pm.sm[l], pm.bw[l], pm.vram_gb[l], pm.power_w[l], pm.occ[l]};
}

Totals FeatureMap::totals(std::span<const std::int32_t> c) const {
  Totals t;
  for (std::size_t m = 0; m < models_.size() && m < c.size(); ++m) {
    if (c[m] == kAbsent) continue;
    const auto l = static_cast<std::size_t>(c[m]);
    const PerModel& pm = models_[m];
    t.count += 1;
    t.sm += pm.sm[l];
    t.bw += pm.bw[l];
    t.vram_gb += pm.vram_gb[l];
    t.power_w += pm.power_w[l];
    t.occupancy += pm.occ[l];
  }
  return t;
}

void FeatureMap::fill(std::size_t m, std::span<const std::int32_t> c, const Totals& totals,
                      Target target, float* out) const {
  const PerModel& pm = models_[m];
  const auto l = static_cast<std::size_t>(c[m]);
  if (kind_ == SurrogateKind::kJoint) {
    std::fill_n(out, joint_dim_, 0.0f);
    for (std::size_t j = 0; j < models_.size(); ++j) {
      if (c[j] == kAbsent) continue;
      const PerModel& pj = models_[j];
      float* block = out + pj.joint_offset;
      block[0] = 1.0f;
      std::copy_n(pj.own.data() + static_cast<std::size_t>(c[j]) * pj.own_dim, pj.own_dim,
                  block + 1);
    }
    return;
  }
  const double sm_o = totals.sm - pm.sm[l];
  const double bw_o = totals.bw - pm.bw[l];
  if (kind_ == SurrogateKind::kPairwise) {
    out[0] = static_cast<float>(pm.sm[l]);
    out[1] = static_cast<float>(sm_o);
    out[2] = static_cast<float>(pm.bw[l]);
    out[3] = static_cast<float>(bw_o);
    return;
  }
  std::copy_n(pm.own.data() + l * pm.own_dim, pm.own_dim, out);
  std::size_t k = pm.own_dim;
  if (kind_ == SurrogateKind::kCrossModel) {
    for (Target t : kAllTargets) out[k++] = t == target ? 1.0f : 0.0f;
    const double base = log_base(m, l, target);
    out[k++] = std::isfinite(base) ? static_cast<float>(base) : 0.0f;
  }
  const double dynamic_range_w = std::max(1.0, tdp_w_ - idle_power_w_);
  out[k++] = static_cast<float>(totals.count - 1);
  out[k++] = static_cast<float>(sm_o);
  out[k++] = static_cast<float>(bw_o);
  out[k++] = static_cast<float>(totals.vram_gb - pm.vram_gb[l]);
  out[k++] = static_cast<float>((totals.power_w - pm.power_w[l]) / dynamic_range_w);
  out[k++] = static_cast<float>(totals.occupancy - pm.occ[l]);
  out[k++] = static_cast<float>(std::max(0.0, totals.sm - 1));
  out[k++] = static_cast<float>(std::max(0.0, totals.bw - 1));
  out[k++] =
      static_cast<float>(std::max(0.0, idle_power_w_ + totals.power_w - tdp_w_) / dynamic_range_w);
}

}  // namespace corun::surrogate