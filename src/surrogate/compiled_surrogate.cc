// The compiled form of a surrogate (CompiledSurrogate): flat per-configuration features,
// GBDT heads specialised per local configuration, and batched prediction.
#include "corun/surrogate/surrogate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "corun/core/check.h"

namespace corun::surrogate {

Result<CompiledSurrogate> CompiledSurrogate::compile(const Surrogate& s, const Workload& w,
                                                     const StandaloneTable* standalone) {
  if (auto st = s.check_workload(w); !st.ok()) return st.error();
  auto fm = FeatureMap::build(s.kind(), w, standalone != nullptr ? *standalone : s.standalone());
  if (!fm) return fm.error();
  CompiledSurrogate c;
  c.features_ = std::move(*fm);
  c.regressors_ = s.regressors();
  c.models_ = w.models.size();
  c.ratio_ = predicts_ratio(s.kind());
  c.monotone_ = s.monotone();
  c.upper95_.assign(c.models_ * kTargetCount, 1.0f);
  c.q50_.assign(c.models_ * kTargetCount, 0.0);
  c.rmse_.assign(c.models_ * kTargetCount, 0.0);
  for (const Head& h : s.heads()) {
    CHead ch;
    ch.model = h.model;
    ch.dim = c.features_.dim(h.model);
    if (ch.dim != h.x_mean.size()) {
      return Error("surrogate head of model '" + w.models[h.model].name + "' expects " +
                   std::to_string(h.x_mean.size()) + " features, the workload gives " +
                   std::to_string(ch.dim));
    }
    ch.feature_target = h.targets.front();
    for (std::size_t k = 0; k < h.targets.size(); ++k) {
      ch.targets.push_back(static_cast<std::size_t>(h.targets[k]));
      const std::size_t slot = h.model * kTargetCount + static_cast<std::size_t>(h.targets[k]);
      c.upper95_[slot] = static_cast<float>(std::exp(h.error[k].q95));
      c.q50_[slot] = h.error[k].q50;
      c.rmse_[slot] = h.error[k].rmse;
    }
    ch.x_mean.assign(h.x_mean.begin(), h.x_mean.end());
    for (double v : h.x_scale) ch.x_inv_scale.push_back(static_cast<float>(1.0 / v));
    ch.y_mean.assign(h.y_mean.begin(), h.y_mean.end());
    ch.y_scale.assign(h.y_scale.begin(), h.y_scale.end());
    ch.regressor = h.regressor;
    c.max_dim_ = std::max(c.max_dim_, ch.dim);
    c.max_out_ = std::max(c.max_out_, ch.targets.size());
    c.heads_.push_back(std::move(ch));
  }
  c.specialize(w);
  return c;
}

void CompiledSurrogate::specialize(const Workload& w) {
  if (!mean_field()) return;
  std::size_t total = 0;
  for (const CHead& h : heads_) {
    if (regressors_[h.regressor].kind() != RegressorKind::kGbdt) return;
    total += w.models[h.model].local_config_count();
  }
  if (total > kMaxSpecialized) return;
  std::vector<std::vector<SpecializedForest>> special;
  std::vector<float> x(max_dim_);
  std::vector<std::int32_t> config(models_, kAbsent);
  for (const CHead& h : heads_) {
    std::vector<std::uint8_t> fixed(h.dim, 1);
    for (std::size_t k : features_.aggregate_inputs(h.model)) fixed[k] = 0;
    auto& per_config = special.emplace_back();
    const std::size_t locals = w.models[h.model].local_config_count();
    for (std::size_t l = 0; l < locals; ++l) {
      config[h.model] = static_cast<std::int32_t>(l);
      features_.fill(h.model, config, features_.contribution(h.model, l), h.feature_target,
                     x.data());
      for (std::size_t k = 0; k < h.dim; ++k) x[k] = (x[k] - h.x_mean[k]) * h.x_inv_scale[k];
      auto f = regressors_[h.regressor].specialize(x.data(), fixed);
      if (!f) return;
      per_config.push_back(std::move(*f));
    }
    config[h.model] = kAbsent;
  }
  special_ = std::move(special);
}

std::size_t CompiledSurrogate::CellHash::operator()(const CellKey& k) const {
  // The key as five words, each multiplied in (independent products, not one chain).
  static_assert(sizeof(k.ranks) == 4 * sizeof(std::uint64_t));
  std::array<std::uint64_t, 4> w{};
  std::memcpy(w.data(), k.ranks.data(), sizeof(w));
  std::uint64_t h = (std::uint64_t{k.head} << 32 | k.local) * 0x9E3779B97F4A7C15ULL;
  h ^= w[0] * 0xC2B2AE3D27D4EB4FULL;
  h ^= w[1] * 0x165667B19E3779F9ULL;
  h ^= w[2] * 0xD6E8FEB86659FD93ULL;
  h ^= w[3] * 0xFF51AFD7ED558CCDULL;
  h ^= h >> 32;
  h *= 0xC4CEB9FE1A85EC53ULL;
  return static_cast<std::size_t>(h ^ (h >> 29));
}

CompiledSurrogate::CellCache::Value& CompiledSurrogate::CellCache::slot(const CellKey& k,
                                                                        bool& hit) {
  if (slots_.empty()) slots_.resize(kSlots);
  Entry& e = slots_[CellHash{}(k) & (kSlots - 1)];
  hit = e.used && e.key == k;
  if (!hit) {
    if (!e.used) ++filled_;
    e.key = k;
    e.used = true;
  }
  return e.value;
}

CompiledSurrogate::Workspace CompiledSurrogate::make_workspace() const {
  Workspace ws;
  ws.x.resize(kChunk * std::max<std::size_t>(max_dim_, 1));
  ws.z.resize(kChunk * std::max<std::size_t>(max_out_, 1));
  ws.totals.resize(kChunk);
  ws.rows.resize(kChunk);
  ws.config.assign(models_, kAbsent);
  ws.scratch.h1.resize(256);
  ws.scratch.h2.resize(256);
  return ws;
}

void CompiledSurrogate::predict(std::span<const std::int32_t> configs, std::span<float> out,
                                Workspace& ws) const {
  CORUN_CHECK(models_ > 0 && configs.size() % models_ == 0);
  const std::size_t n = configs.size() / models_;
  CORUN_CHECK(out.size() >= n * models_ * kTargetCount);
  // A workspace made for another surrogate may be too small for this one: grow it once.
  if (ws.totals.size() < kChunk || ws.x.size() < kChunk * max_dim_ ||
      ws.z.size() < kChunk * max_out_) {
    ws = make_workspace();
  }
  std::fill_n(out.begin(), n * models_ * kTargetCount, std::numeric_limits<float>::quiet_NaN());
  for (std::size_t begin = 0; begin < n; begin += kChunk) {
    const std::size_t count = std::min(kChunk, n - begin);
    for (std::size_t i = 0; i < count; ++i) {
      ws.totals[i] = features_.totals(configs.subspan((begin + i) * models_, models_));
    }
    for (const CHead& h : heads_) {
      std::size_t rows = 0;
      for (std::size_t i = 0; i < count; ++i) {
        const auto c = configs.subspan((begin + i) * models_, models_);
        const std::int32_t local = c[h.model];
        if (local == kAbsent) continue;
        if (ratio_ && !features_.standalone_ok(h.model, static_cast<std::size_t>(local))) continue;
        float* x = ws.x.data() + rows * h.dim;
        features_.fill(h.model, c, ws.totals[i], h.feature_target, x);
        for (std::size_t k = 0; k < h.dim; ++k) x[k] = (x[k] - h.x_mean[k]) * h.x_inv_scale[k];
        ws.rows[rows++] = static_cast<std::uint32_t>(i);
      }
      if (rows == 0) continue;
      const std::size_t k_out = h.targets.size();
      if (!special_.empty()) {
        const std::size_t hi = static_cast<std::size_t>(&h - heads_.data());
        for (std::size_t r = 0; r < rows; ++r) {
          const std::size_t cand = begin + ws.rows[r];
          const auto local = static_cast<std::size_t>(configs[cand * models_ + h.model]);
          special_[hi][local].predict(ws.x.data() + r * h.dim, ws.z.data() + r * k_out,
                                      ws.scratch.ranks);
        }
      } else {
        regressors_[h.regressor].predict(ws.x.data(), rows, ws.z.data(), ws.scratch);
      }
      for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t cand = begin + ws.rows[r];
        const auto local = static_cast<std::size_t>(configs[cand * models_ + h.model]);
        for (std::size_t k = 0; k < k_out; ++k) {
          const std::size_t t = h.targets[k];
          float v = ws.z[r * k_out + k] * h.y_scale[k] + h.y_mean[k];
          if (ratio_) {
            v += static_cast<float>(features_.log_base(h.model, local, static_cast<Target>(t)));
          }
          out[(cand * models_ + h.model) * kTargetCount + t] = std::exp(v);
        }
      }
    }
  }
}

void CompiledSurrogate::predict_given(std::size_t m, std::size_t l, const Totals& others,
                                      std::span<float> out, Workspace& ws) const {
  CORUN_CHECK(mean_field() && m < models_ && out.size() >= kTargetCount);
  if (ws.totals.empty() || ws.x.size() < max_dim_ || ws.z.size() < max_out_ ||
      ws.config.size() != models_) {
    ws = make_workspace();
  }
  std::fill_n(out.begin(), kTargetCount, std::numeric_limits<float>::quiet_NaN());
  if (ratio_ && !features_.standalone_ok(m, l)) return;
  const Totals all = others + features_.contribution(m, l);
  ws.config[m] = static_cast<std::int32_t>(l);  // fill() reads only the model's own entry
  for (std::size_t hi = 0; hi < heads_.size(); ++hi) {
    const CHead& h = heads_[hi];
    if (h.model != m) continue;
    float* x = ws.x.data();
    features_.fill(m, ws.config, all, h.feature_target, x);
    for (std::size_t k = 0; k < h.dim; ++k) x[k] = (x[k] - h.x_mean[k]) * h.x_inv_scale[k];
    if (!special_.empty()) {
      const SpecializedForest& f = special_[hi][l];
      if (f.has_cells && f.cut_inputs.size() <= CellKey::kMaxCutInputs) {
        CellKey key;
        key.head = static_cast<std::uint32_t>(hi);
        key.local = static_cast<std::uint32_t>(l);
        f.cell(x, key.ranks.data());
        bool hit = false;
        CellCache::Value& remembered = ws.cells.slot(key, hit);
        if (!hit) f.predict(x, key.ranks.data(), remembered.data());
        std::copy_n(remembered.begin(), h.targets.size(), ws.z.begin());
      } else {
        f.predict(x, ws.z.data(), ws.scratch.ranks);
      }
    } else {
      regressors_[h.regressor].predict(x, 1, ws.z.data(), ws.scratch);
    }
    for (std::size_t k = 0; k < h.targets.size(); ++k) {
      const std::size_t t = h.targets[k];
      float v = ws.z[k] * h.y_scale[k] + h.y_mean[k];
      if (ratio_) v += static_cast<float>(features_.log_base(m, l, static_cast<Target>(t)));
      out[t] = std::exp(v);
    }
  }
  ws.config[m] = kAbsent;
}

}  // namespace corun::surrogate
