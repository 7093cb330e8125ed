// The JSON form of a learning sample: serve's stored state, a resumed run's replay.

#include "corun/runtime/learning_sample.h"

#include <cmath>

#include "corun/core/json_number.h"

namespace corun {

nlohmann::json to_json(const LearningSample& s) {
  nlohmann::json y = nlohmann::json::array();
  for (double v : s.log_ratio) y.push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json());
  nlohmann::json measured = nlohmann::json::array();
  for (double v : s.measured) {
    measured.push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json());
  }
  return {{"model", s.model},
          {"key", s.model_key},
          {"local", s.local},
          {"others_load",
           std::isfinite(s.others_load) ? nlohmann::json(s.others_load) : nlohmann::json()},
          {"hint", static_cast<int>(s.hint)},
          {"log_ratio", y},
          {"under_prediction", s.under_prediction},
          {"breach", s.breach},
          {"error", std::isfinite(s.error) ? nlohmann::json(s.error) : nlohmann::json()},
          {"reopen", s.reopen},
          {"share", s.share},
          {"measured", measured}};
}

Result<LearningSample> learning_sample_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Error("a learning sample must be a JSON object");
  LearningSample s;
  try {
    s.model = j.at("model").get<std::string>();
    s.model_key = j.at("key").get<std::string>();
    s.local = json_number<std::int32_t>(j.at("local"));
    s.others_load = j.contains("others_load") && j["others_load"].is_number()
                        ? j["others_load"].get<double>()
                        : NAN;
    const int hint = json_number_or(j, "hint", 0);
    if (hint < 0 || hint > 2) return Error("hint: expected 0, 1 or 2");
    s.hint = static_cast<TargetLearner::ChangeHint>(hint);
    const auto& y = j.at("log_ratio");
    if (!y.is_array() || y.size() != kTargetCount) return Error("log_ratio: expected 4 values");
    for (std::size_t k = 0; k < kTargetCount; ++k) {
      s.log_ratio[k] = y[k].is_number() ? y[k].get<double>() : NAN;
    }
    s.under_prediction = j.at("under_prediction").get<double>();
    s.breach = j.at("breach").get<bool>();
    s.error = j.at("error").is_number() ? j.at("error").get<double>() : NAN;
    s.reopen = j.value("reopen", false);  // absent in state stored before it existed
    // Absent in state stored before they existed: served whole, nothing measured.
    s.share = json_number_or(j, "share", 1.0);
    if (!(s.share >= 0 && s.share <= 1)) return Error("share: expected a number in [0, 1]");
    if (j.contains("measured")) {
      const auto& v = j.at("measured");
      if (!v.is_array() || v.size() != kTargetCount) return Error("measured: expected 4 values");
      for (std::size_t k = 0; k < kTargetCount; ++k) {
        if (v[k].is_null()) continue;
        if (!v[k].is_number() || !(v[k].get<double>() >= 0)) {
          return Error("measured[" + std::to_string(k) + "]: expected a number >= 0 or null");
        }
        s.measured[k] = v[k].get<double>();
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return Error(std::string("malformed learning sample: ") + e.what());
  }
  return s;
}

}  // namespace corun
