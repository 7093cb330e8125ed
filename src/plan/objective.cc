#include "corun/plan/objective.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "corun/core/check.h"

namespace corun {

namespace {

// Detection accuracy versus input size. Redmon & Farhadi, "YOLOv3: An Incremental
// Improvement" (2018), Table 3, COCO test-dev mAP@[.5:.95] of one network at three input sizes:
// 320 -> 28.2, 416 -> 31.0, 608 -> 33.0. We interpolate that curve linearly in log(size),
// extrapolate with the end segments, and apply it as a ratio to the catalog's mAP at the
// model's reference size (640 for YOLO11).
constexpr std::array<double, 3> kSizeLog = {5.768321, 6.030685, 6.410175};  // ln 320, 416, 608
constexpr std::array<double, 3> kSizeMap = {28.2, 31.0, 33.0};

double yolov3_curve(double size) {
  const double x = std::log(std::max(1.0, size));
  std::size_t i = x < kSizeLog[1] ? 0 : 1;
  const double t = (x - kSizeLog[i]) / (kSizeLog[i + 1] - kSizeLog[i]);
  return std::max(1.0, kSizeMap[i] + t * (kSizeMap[i + 1] - kSizeMap[i]));
}

// 4-bit weight quantisation costs a little quality. Lin et al., "AWQ: Activation-aware Weight
// Quantization" (MLSys 2024), Table 4: Llama-2-7B WikiText-2 perplexity FP16 5.47 vs AWQ
// INT4-g128 5.60; we score quality as the perplexity ratio 5.47 / 5.60. INT8 weight+activation
// quantisation is near-lossless for these sizes (Dettmers et al., LLM.int8(), 2022): 0.995.
constexpr double kAwqQuality = 5.47 / 5.60;
constexpr double kInt8Quality = 0.995;

double precision_factor(Precision p) {
  switch (p) {
    case Precision::kAwq:
      return kAwqQuality;
    case Precision::kInt8:
      return kInt8Quality;
    default:
      return 1.0;
  }
}

}  // namespace

double config_quality(const ModelSpec& m, const Settings& s) {
  double factor = precision_factor(s.precision);
  if (m.arch.family == ModelFamily::kVision && m.arch.reference_size > 0) {
    factor *= yolov3_curve(s.imgsz) / yolov3_curve(m.arch.reference_size);
  }
  return m.arch.quality > 0 ? m.arch.quality * factor : factor;
}

namespace {

// The demand a model is offered in the unit of its throughput: frames/s it does not skip,
// output tokens/s, or requests/s.
double offered_load(const ModelSpec& m, const Settings& s) {
  switch (m.arch.family) {
    case ModelFamily::kVision:
      return m.demand.fps * (1 - s.skip_rate);
    case ModelFamily::kLlm:
      return m.demand.rps * m.demand.output_tokens;
    case ModelFamily::kEncoder:
    case ModelFamily::kSpeech:
      return m.demand.rps;
  }
  return 0;
}

}  // namespace

double served_fraction(const ModelSpec& m, const Settings& s, double throughput) {
  double frac = m.arch.family == ModelFamily::kVision ? 1 - s.skip_rate : 1.0;
  const double offered = offered_load(m, s);
  if (offered > 0) frac *= std::clamp(throughput / offered, 0.0, 1.0);
  return frac;
}

double planned_throughput(const ModelSpec& m, const Settings& s, const Predicted& p) {
  const double throughput = p.throughput;
  if (m.arch.family != ModelFamily::kLlm || m.demand.rps <= 0 || !(p.ttft_ms_p95 > 0) ||
      !(p.tpot_ms_p95 > 0)) {
    return throughput;
  }
  const double latency_ms = static_cast<double>(p.ttft_ms_p95) +
                            m.demand.output_tokens * static_cast<double>(p.tpot_ms_p95);
  const double in_system = m.demand.rps * (latency_ms / 1000.0);
  return in_system < s.request_concurrency ? std::max(throughput, offered_load(m, s)) : throughput;
}

double model_utility(const Workload& w, std::size_t m, std::int32_t l, const Predicted& p) {
  const ModelSpec& spec = w.models[m];
  const Settings s = spec.settings(static_cast<std::size_t>(l));
  const double served = served_fraction(spec, s, p.throughput);
  if (w.objective.maximize == "throughput") return spec.weight * served;
  return spec.weight * config_quality(spec, s) * served;
}

double Margin::max() const { return std::max({latency, ttft, tpot}); }

std::vector<SlaKey> sla_keys(const ModelSpec& m) {
  std::vector<SlaKey> out;
  for (const SlaKey& k : kSlaKeys) {
    if (k.llm_only && m.arch.family != ModelFamily::kLlm) continue;
    if (m.sla.*k.limit) out.push_back(k);
  }
  return out;
}

double sla_excess(const ModelSpec& m, const Predicted& p, const Margin& margin) {
  double excess = 0;
  const bool llm = m.arch.family == ModelFamily::kLlm;
  for (const SlaKey& k : kSlaKeys) {  // no allocation: this runs for every candidate
    if (k.llm_only && !llm) continue;
    const std::optional<double>& bound = m.sla.*k.limit;
    if (!bound || *bound <= 0) continue;
    const double limit = *bound;
    const double value = p.*k.predicted;
    const double mk = margin.*k.margin;
    excess += k.floor ? std::max(0.0, 1 - value / ((1 + mk) * limit))
                      : std::max(0.0, value * (1 + mk) / limit - 1);
  }
  return excess;
}

double planned_utility(const Workload& w, std::size_t m, std::int32_t l, const Predicted& p) {
  Predicted planned = p;
  const ModelSpec& spec = w.models[m];
  planned.throughput =
      static_cast<float>(planned_throughput(spec, spec.settings(static_cast<std::size_t>(l)), p));
  return model_utility(w, m, l, planned);
}

bool meets_sla(const ModelSpec& m, const Predicted& p, const Margin& margin) {
  return sla_excess(m, p, margin) == 0;
}

namespace {

MarginTable per_model(const Workload& w, std::vector<double> margins) {
  if (margins.empty()) margins.assign(w.models.size(), 0.0);
  CORUN_CHECK(margins.size() == w.models.size());
  MarginTable t(w.models.size());
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    t[m].assign(w.models[m].local_config_count(), Margin::uniform(margins[m]));
  }
  return t;
}

}  // namespace

PlanProblem::PlanProblem(const Workload& w, std::vector<bool> active, const Predictor& predictor,
                         std::vector<double> margins)
    : PlanProblem(w, std::move(active), predictor, per_model(w, std::move(margins))) {}

PlanProblem::PlanProblem(const Workload& w, std::vector<bool> active, const Predictor& predictor,
                         MarginTable margins)
    : workload_(&w),
      predictor_(&predictor),
      space_(w),
      active_(std::move(active)),
      margins_(std::move(margins)) {
  CORUN_CHECK(active_.size() == w.models.size());
  CORUN_CHECK(predictor.models() == w.models.size());
  CORUN_CHECK(margins_.size() == w.models.size());
  pinned_.assign(w.models.size(), kAbsent);
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    CORUN_CHECK(margins_[m].size() == w.models[m].local_config_count());
    if (active_[m]) active_list_.push_back(m);
    const std::size_t n = w.models[m].local_config_count();
    std::vector<double> q(n);
    std::vector<Settings> s(n);
    for (std::size_t l = 0; l < n; ++l) {
      s[l] = w.models[m].settings(l);
      q[l] = config_quality(w.models[m], s[l]);
    }
    quality_.push_back(std::move(q));
    settings_.push_back(std::move(s));
  }
}

ConfigCount PlanProblem::candidate_count() const {
  if (active_list_.empty()) return ConfigCount::exactly(0);
  std::vector<std::size_t> counts;
  counts.reserve(active_list_.size());
  for (auto m : active_list_) counts.push_back(local_count(m));
  return ConfigCount::product(counts);
}

void PlanProblem::set_transitions(std::vector<std::vector<double>> cost,
                                  std::vector<std::vector<bool>> allowed,
                                  std::vector<std::vector<double>> throughput_scale) {
  CORUN_CHECK(cost.empty() || cost.size() == models());
  CORUN_CHECK(allowed.empty() || allowed.size() == models());
  for (std::size_t m = 0; m < cost.size(); ++m) {
    CORUN_CHECK(cost[m].size() == local_count(m));
    for (double c : cost[m]) CORUN_CHECK(c >= 0 && std::isfinite(c));
  }
  for (std::size_t m = 0; m < allowed.size(); ++m) CORUN_CHECK(allowed[m].size() == local_count(m));
  CORUN_CHECK(throughput_scale.empty() || throughput_scale.size() == models());
  for (std::size_t m = 0; m < throughput_scale.size(); ++m) {
    CORUN_CHECK(throughput_scale[m].size() == local_count(m));
    for (double f : throughput_scale[m]) CORUN_CHECK(f > 0 && f <= 1);
  }
  throughput_scale_ = std::move(throughput_scale);
  cost_ = std::move(cost);
  allowed_ = std::move(allowed);
}

double PlanProblem::model_utility(std::size_t m, std::int32_t l, const Predicted& p) const {
  return gross_utility(m, l, p) - transition_cost(m, l);
}

double PlanProblem::gross_utility(std::size_t m, std::int32_t l, const Predicted& p) const {
  const ModelSpec& spec = workload_->models[m];
  const Settings& s = settings_[m][static_cast<std::size_t>(l)];
  const double predicted = planned_throughput(spec, s, p);
  const double throughput = throughput_scale_.empty()
                                ? predicted
                                : predicted * throughput_scale_[m][static_cast<std::size_t>(l)];
  if (workload_->objective.maximize == "throughput") {
    return spec.weight * served_fraction(spec, s, throughput);
  }
  return spec.weight * quality_[m][static_cast<std::size_t>(l)] *
         served_fraction(spec, s, throughput);
}

PlanProblem::Score PlanProblem::score(std::span<const std::int32_t> config,
                                      std::span<const Predicted> predicted) const {
  Score s;
  s.fits_vram = space_.fits_vram(config);
  for (auto m : active_list_) {
    const std::int32_t l = config[m];
    s.utility += model_utility(m, l, predicted[m]);
    s.excess += excess(m, l, predicted[m]);
  }
  return s;
}

void AggregatePredictor::predict(std::span<const std::int32_t> configs, std::size_t rows,
                                 std::span<Predicted> out) const {
  const std::vector<float> none(aggregate_dims(), 0.0f);
  predict_beside(configs, rows, none, out);
}

void AggregatePredictor::predict_beside(std::span<const std::int32_t> configs, std::size_t rows,
                                        std::span<const float> outside,
                                        std::span<Predicted> out) const {
  const std::size_t n = models();
  const std::size_t d = aggregate_dims();
  CORUN_CHECK(outside.size() == d);
  std::vector<float> total(d), mine(d), others(d);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto row = configs.subspan(r * n, n);
    std::copy(outside.begin(), outside.end(), total.begin());
    for (std::size_t m = 0; m < n; ++m) {
      if (row[m] == kAbsent) continue;
      contribution(m, row[m], mine);
      for (std::size_t k = 0; k < d; ++k) total[k] += mine[k];
    }
    for (std::size_t m = 0; m < n; ++m) {
      if (row[m] == kAbsent) {
        out[r * n + m] = Predicted{};
        continue;
      }
      contribution(m, row[m], mine);
      for (std::size_t k = 0; k < d; ++k) others[k] = total[k] - mine[k];
      out[r * n + m] = predict_given(m, row[m], others);
    }
  }
}

}  // namespace corun
