// The surrogate model itself: the workload check, the model file (JSON) and its loading.
#include "corun/surrogate/surrogate.h"

#include <nlohmann/json.hpp>

#include "corun/core/atomic_file.h"
#include "corun/core/json_number.h"
#include "corun/core/version.h"

namespace corun::surrogate {

namespace {

nlohmann::json error_json(const ErrorQuantiles& e, Target t) {
  return {{"target", std::string(to_string(t))},
          {"q05", e.q05},
          {"q50", e.q50},
          {"q95", e.q95},
          {"rmse", e.rmse},
          {"rows", e.rows},
          {"source", e.source}};
}

/// Reads one entry of "models": a model's name, catalog entry, family, knobs and demand.
Result<ModelSignature> signature_from_json(const nlohmann::json& m) {
  ModelSignature sig;
  sig.name = m.at("name").get<std::string>();
  sig.catalog_model = m.at("catalog_model").get<std::string>();
  const std::string family = m.at("family").get<std::string>();
  bool found = false;
  for (auto f :
       {ModelFamily::kVision, ModelFamily::kEncoder, ModelFamily::kSpeech, ModelFamily::kLlm}) {
    if (corun::to_string(f) == family) {
      sig.family = f;
      found = true;
    }
  }
  if (!found) return Error("models[].family: unknown '" + family + "'");
  for (const auto& k : m.at("knobs")) {
    const auto id = find_knob(k.at("knob").get<std::string>());
    if (!id) return Error("models[].knobs: unknown knob '" + k.at("knob").get<std::string>() + "'");
    sig.knobs.push_back({*id, k.at("values").get<std::vector<double>>()});
  }
  if (m.contains("demand")) {  // absent in files written before demands were recorded
    const auto& d = m.at("demand");
    sig.demand.fps = d.value("fps", 0.0);
    sig.demand.rps = d.value("rps", 0.0);
    sig.demand.prompt_tokens = json_number_or(d, "prompt_tokens", 0);
    sig.demand.output_tokens = json_number_or(d, "output_tokens", 0);
    sig.demand.concurrency = json_number_or(d, "concurrency", 0);
  }
  return sig;
}

/// Reads one entry of "heads", checked against the models and regressors read before it.
Result<Head> head_from_json(const nlohmann::json& hj, std::size_t models,
                            const std::vector<Regressor>& regressors) {
  Head h;
  h.model = json_number<std::size_t>(hj.at("model"));
  for (const auto& t : hj.at("targets")) {
    const auto tg = parse_target(t.get<std::string>());
    if (!tg) return Error("heads[].targets: unknown target '" + t.get<std::string>() + "'");
    h.targets.push_back(*tg);
  }
  h.x_mean = hj.at("x_mean").get<std::vector<double>>();
  h.x_scale = hj.at("x_scale").get<std::vector<double>>();
  h.y_mean = hj.at("y_mean").get<std::vector<double>>();
  h.y_scale = hj.at("y_scale").get<std::vector<double>>();
  h.regressor = json_number<std::size_t>(hj.at("regressor"));
  h.train_rows = json_number_or(hj, "train_rows", std::size_t{0});
  for (const auto& e : hj.at("error")) {
    ErrorQuantiles q;
    q.q05 = e.at("q05").get<double>();
    q.q50 = e.at("q50").get<double>();
    q.q95 = e.at("q95").get<double>();
    q.rmse = e.at("rmse").get<double>();
    q.rows = json_number<std::size_t>(e.at("rows"));
    q.source = e.at("source").get<std::string>();
    h.error.push_back(std::move(q));
  }
  if (h.model >= models || h.regressor >= regressors.size() || h.targets.empty() ||
      h.error.size() != h.targets.size() || h.y_mean.size() != h.targets.size() ||
      h.y_scale.size() != h.targets.size() || h.x_mean.size() != h.x_scale.size() ||
      static_cast<int>(h.x_mean.size()) != regressors[h.regressor].inputs() ||
      regressors[h.regressor].outputs() != static_cast<int>(h.targets.size())) {
    return Error("heads[]: inconsistent sizes (model, regressor, targets, standardisation)");
  }
  for (double v : h.x_scale) {
    if (!(v > 0)) return Error("heads[].x_scale: must be positive");
  }
  for (double v : h.y_scale) {
    if (!(v > 0)) return Error("heads[].y_scale: must be positive");
  }
  return h;
}

}  // namespace

Status Surrogate::check_workload(const Workload& w) const {
  if (w.models.size() != signature_.size()) {
    return Error("the surrogate was fitted for " + std::to_string(signature_.size()) +
                 " models, the workload has " + std::to_string(w.models.size()));
  }
  for (std::size_t m = 0; m < signature_.size(); ++m) {
    const ModelSignature& sig = signature_[m];
    const ModelSpec& spec = w.models[m];
    const std::string where = "models[" + std::to_string(m) + "]";
    if (spec.name != sig.name) {
      return Error(where + ".name: the surrogate expects '" + sig.name + "', the workload has '" +
                   spec.name + "'");
    }
    if (spec.arch.name != sig.catalog_model) {
      return Error(where + ".model: the surrogate was fitted on '" + sig.catalog_model +
                   "', the workload runs '" + spec.arch.name + "'");
    }
    bool same = spec.knobs.size() == sig.knobs.size();
    for (std::size_t k = 0; same && k < sig.knobs.size(); ++k) {
      same = spec.knobs[k].id == sig.knobs[k].id && spec.knobs[k].values == sig.knobs[k].values;
    }
    if (!same) {
      return Error(where + ".knobs: differ from the knobs the surrogate was fitted on");
    }
  }
  return {};
}

nlohmann::json Surrogate::to_json() const {
  nlohmann::json j;
  j["kind"] = "corun-surrogate";
  j["schema_version"] = kModelSchemaVersion;
  j["corun_version"] = std::string(version());
  j["git_hash"] = std::string(git_hash());
  j["surrogate"] = std::string(to_string(kind_));
  j["regressor"] = std::string(to_string(regressor_kind_));
  j["monotone"] = monotone_;
  j["testbed"] = provenance_.testbed;
  j["device"] = provenance_.device;
  j["seed"] = provenance_.context.seed;
  j["workload"] = {{"hash", provenance_.workload_hash}, {"name", provenance_.workload_name}};
  j["dataset"] = provenance_.dataset;
  j["standalone_measurements"] = provenance_.standalone_measurements;
  j["corun_samples"] = provenance_.corun_samples;
  j["models"] = nlohmann::json::array();
  for (const auto& sig : signature_) {
    nlohmann::json knobs = nlohmann::json::array();
    for (const auto& k : sig.knobs) {
      knobs.push_back({{"knob", knob_decl(k.id).name}, {"values", k.values}});
    }
    j["models"].push_back({{"name", sig.name},
                           {"catalog_model", sig.catalog_model},
                           {"family", std::string(corun::to_string(sig.family))},
                           {"knobs", knobs},
                           {"demand",
                            {{"fps", sig.demand.fps},
                             {"rps", sig.demand.rps},
                             {"prompt_tokens", sig.demand.prompt_tokens},
                             {"output_tokens", sig.demand.output_tokens}}}});
    // Written only for closed-loop demands, so that files of rate demands stay as they were.
    if (sig.demand.closed_loop()) {
      j["models"].back()["demand"]["concurrency"] = sig.demand.concurrency;
    }
  }
  j["feature_names"] = feature_names_;
  j["standalone"] = standalone_.to_json();
  j["heads"] = nlohmann::json::array();
  for (const auto& h : heads_) {
    nlohmann::json targets = nlohmann::json::array(), error = nlohmann::json::array();
    for (std::size_t k = 0; k < h.targets.size(); ++k) {
      targets.push_back(std::string(to_string(h.targets[k])));
      error.push_back(error_json(h.error[k], h.targets[k]));
    }
    j["heads"].push_back({{"model", h.model},
                          {"targets", targets},
                          {"x_mean", h.x_mean},
                          {"x_scale", h.x_scale},
                          {"y_mean", h.y_mean},
                          {"y_scale", h.y_scale},
                          {"regressor", h.regressor},
                          {"train_rows", h.train_rows},
                          {"error", error}});
  }
  j["regressors"] = nlohmann::json::array();
  for (const auto& r : regressors_) j["regressors"].push_back(r.to_json());
  return j;
}

Result<Surrogate> Surrogate::from_json(const nlohmann::json& j) {
  try {
    if (!j.is_object() || j.value("kind", "") != "corun-surrogate") {
      return Error("not a corun surrogate model (kind must be 'corun-surrogate')");
    }
    const int version = json_number<int>(j.at("schema_version"));
    if (version != kModelSchemaVersion) {
      return Error("schema_version: the file has " + std::to_string(version) +
                   ", this corun reads " + std::to_string(kModelSchemaVersion));
    }
    Surrogate s;
    const auto kind = parse_surrogate(j.at("surrogate").get<std::string>());
    if (!kind)
      return Error("surrogate: unknown kind '" + j.at("surrogate").get<std::string>() + "'");
    s.kind_ = *kind;
    const auto reg = parse_regressor(j.at("regressor").get<std::string>());
    if (!reg) return Error("regressor: unknown '" + j.at("regressor").get<std::string>() + "'");
    s.regressor_kind_ = *reg;
    s.monotone_ = j.value("monotone", false);
    s.provenance_.testbed = j.at("testbed").get<std::string>();
    s.provenance_.device = j.at("device").get<std::string>();
    s.provenance_.context.seed = json_number<std::uint64_t>(j.at("seed"));
    s.provenance_.workload_hash = j.at("workload").at("hash").get<std::string>();
    s.provenance_.workload_name = j.at("workload").at("name").get<std::string>();
    s.provenance_.dataset = j.value("dataset", "");
    s.provenance_.standalone_measurements =
        json_number_or(j, "standalone_measurements", std::size_t{0});
    s.provenance_.corun_samples = json_number_or(j, "corun_samples", std::size_t{0});
    for (const auto& m : j.at("models")) {
      auto sig = signature_from_json(m);
      if (!sig) return sig.error();
      s.signature_.push_back(std::move(*sig));
    }
    s.feature_names_ = j.value("feature_names", std::vector<std::string>{});
    auto table = StandaloneTable::from_json(j.at("standalone"));
    if (!table) return table.error();
    s.standalone_ = std::move(*table);
    if (s.standalone_.models() != s.signature_.size()) {
      return Error("standalone: " + std::to_string(s.standalone_.models()) +
                   " models, models: " + std::to_string(s.signature_.size()));
    }
    for (const auto& r : j.at("regressors")) {
      auto reg_r = Regressor::from_json(r);
      if (!reg_r) return reg_r.error().wrap("regressors[]");
      s.regressors_.push_back(std::move(*reg_r));
    }
    for (const auto& hj : j.at("heads")) {
      auto h = head_from_json(hj, s.signature_.size(), s.regressors_);
      if (!h) return h.error();
      s.heads_.push_back(std::move(*h));
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return Error(std::string("surrogate model: ") + e.what());
  }
}

Status Surrogate::save(const std::filesystem::path& path) const {
  return write_file_atomic(path, to_json().dump() + "\n");
}

Result<Surrogate> Surrogate::load(const std::filesystem::path& path) {
  auto text = read_file(path);
  if (!text) return text.error();
  // Whatever is wrong inside the file (cut short, altered bytes, another schema) makes it a
  // damaged model, exit code 3: refitting it from its dataset is the recovery
  // (docs/formats.md, "Damaged files").
  if (text->empty()) {
    return Error(path.string() + ": damaged surrogate model: the file is empty",
                 Error::Kind::kDamaged);
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::parse_error& e) {
    return Error(path.string() + ": damaged surrogate model: not valid JSON at byte " +
                     std::to_string(e.byte) + " of " + std::to_string(text->size()),
                 Error::Kind::kDamaged);
  } catch (const nlohmann::json::out_of_range& e) {
    // The parser reports a number too large for a double (a damaged digit or exponent) as
    // out_of_range, not as a parse error.
    return Error(path.string() + ": damaged surrogate model: " + e.what(), Error::Kind::kDamaged);
  }
  auto s = from_json(j);
  if (!s)
    return s.error().wrap(path.string() + ": damaged surrogate model").as(Error::Kind::kDamaged);
  return s;
}

}  // namespace corun::surrogate
