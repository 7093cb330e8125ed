// Regressor JSON: to_json, and from_json, which checks a model read from a file before use.
#include "corun/surrogate/regressor.h"

#include <nlohmann/json.hpp>
#include <variant>

#include "corun/core/json_number.h"
#include "regressor_internal.h"

namespace corun::surrogate {

using detail::Overloaded;

nlohmann::json Regressor::to_json() const {
  nlohmann::json j;
  j["kind"] = std::string(to_string(kind()));
  std::visit(Overloaded{[&](const MlpModel& m) {
                          j["layers"] = {m.in, m.h1, m.h2, m.out};
                          j["activation"] = "relu";
                          j["w1"] = m.w1;
                          j["b1"] = m.b1;
                          j["w2"] = m.w2;
                          j["b2"] = m.b2;
                          j["w3"] = m.w3;
                          j["b3"] = m.b3;
                          if (!m.skip.empty()) j["skip"] = m.skip;
                        },
                        [&](const Forest& f) {
                          const GbdtModel& m = f.trees;
                          j["inputs"] = m.in;
                          j["outputs"] = m.out;
                          j["base_score"] = m.base_score;
                          j["tree_begin"] = m.tree_begin;
                          j["output_tree_begin"] = m.output_tree_begin;
                          j["feature"] = m.feature;
                          j["threshold"] = m.threshold;
                          j["left"] = m.left;
                          j["right"] = m.right;
                          j["default_left"] = m.default_left;
                        },
                        [&](const LinearModel& m) {
                          j["inputs"] = m.in;
                          j["outputs"] = m.out;
                          j["w"] = m.w;
                          j["b"] = m.b;
                        }},
             model_);
  return j;
}

Result<Regressor> Regressor::from_json(const nlohmann::json& j) {
  try {
    Regressor r;
    const auto kind = parse_regressor(j.at("kind").get<std::string>());
    if (!kind) return Error("regressor.kind: unknown '" + j.at("kind").get<std::string>() + "'");
    switch (*kind) {
      case RegressorKind::kMlp: {
        const auto layers = json_numbers<int>(j.at("layers"));
        if (layers.size() != 4) return Error("regressor.layers: expected 4 sizes");
        MlpModel m;
        m.in = layers[0];
        m.h1 = layers[1];
        m.h2 = layers[2];
        m.out = layers[3];
        m.w1 = json_numbers<float>(j.at("w1"));
        m.b1 = json_numbers<float>(j.at("b1"));
        m.w2 = json_numbers<float>(j.at("w2"));
        m.b2 = json_numbers<float>(j.at("b2"));
        m.w3 = json_numbers<float>(j.at("w3"));
        m.b3 = json_numbers<float>(j.at("b3"));
        if (j.contains("skip")) m.skip = json_numbers<float>(j.at("skip"));
        const auto sz = [](int a, int b) {
          return static_cast<std::size_t>(a) * static_cast<std::size_t>(b);
        };
        if (m.w1.size() != sz(m.in, m.h1) || m.b1.size() != sz(1, m.h1) ||
            m.w2.size() != sz(m.h1, m.h2) || m.b2.size() != sz(1, m.h2) ||
            m.w3.size() != sz(m.h2, m.out) || m.b3.size() != sz(1, m.out) ||
            (!m.skip.empty() && m.skip.size() != sz(m.in, m.out))) {
          return Error("regressor: MLP weight arrays do not match its layer sizes");
        }
        r.model_ = std::move(m);
        break;
      }
      case RegressorKind::kGbdt: {
        GbdtModel m;
        m.in = json_number<int>(j.at("inputs"));
        m.out = json_number<int>(j.at("outputs"));
        m.base_score = json_numbers<float>(j.at("base_score"));
        m.tree_begin = json_numbers<std::int32_t>(j.at("tree_begin"));
        m.output_tree_begin = json_numbers<std::int32_t>(j.at("output_tree_begin"));
        m.feature = json_numbers<std::int32_t>(j.at("feature"));
        m.threshold = json_numbers<float>(j.at("threshold"));
        m.left = json_numbers<std::int32_t>(j.at("left"));
        m.right = json_numbers<std::int32_t>(j.at("right"));
        m.default_left = json_numbers<std::uint8_t>(j.at("default_left"));
        const std::size_t nodes = m.feature.size();
        bool ok = m.threshold.size() == nodes && m.left.size() == nodes &&
                  m.right.size() == nodes && m.default_left.size() == nodes &&
                  m.base_score.size() == static_cast<std::size_t>(m.out) &&
                  m.output_tree_begin.size() == static_cast<std::size_t>(m.out) + 1;
        for (std::size_t k = 0; ok && k < nodes; ++k) {
          if (m.feature[k] >= m.in) ok = false;
          if (m.feature[k] >= 0 &&
              (m.left[k] < 0 || m.right[k] < 0 || static_cast<std::size_t>(m.left[k]) >= nodes ||
               static_cast<std::size_t>(m.right[k]) >= nodes)) {
            ok = false;
          }
        }
        for (auto t : m.tree_begin) ok = ok && t >= 0 && static_cast<std::size_t>(t) < nodes;
        for (std::size_t k = 0; ok && k < m.output_tree_begin.size(); ++k) {
          const auto t = m.output_tree_begin[k];
          ok = t >= 0 && static_cast<std::size_t>(t) <= m.tree_begin.size() &&
               (k == 0 || t >= m.output_tree_begin[k - 1]);
        }
        // Every tree must be a tree: a node reached twice from one root means a cycle or a
        // shared subtree, which a malformed file could use to make prediction loop forever.
        std::vector<std::size_t> seen(nodes, 0), stack;
        for (std::size_t t = 0; ok && t < m.tree_begin.size(); ++t) {
          stack.assign(1, static_cast<std::size_t>(m.tree_begin[t]));
          while (ok && !stack.empty()) {
            const std::size_t k = stack.back();
            stack.pop_back();
            if (seen[k] == t + 1) {
              ok = false;
              break;
            }
            seen[k] = t + 1;
            if (m.feature[k] >= 0) {
              stack.push_back(static_cast<std::size_t>(m.left[k]));
              stack.push_back(static_cast<std::size_t>(m.right[k]));
            }
          }
        }
        if (!ok) return Error("regressor: GBDT node arrays are inconsistent");
        PackedForest packed = PackedForest::pack(m);
        r.model_ = Forest{std::move(m), std::move(packed)};
        break;
      }
      case RegressorKind::kLinear: {
        LinearModel m;
        m.in = json_number<int>(j.at("inputs"));
        m.out = json_number<int>(j.at("outputs"));
        m.w = j.at("w").get<std::vector<double>>();
        m.b = j.at("b").get<std::vector<double>>();
        if (m.w.size() != static_cast<std::size_t>(m.in) * static_cast<std::size_t>(m.out) ||
            m.b.size() != static_cast<std::size_t>(m.out)) {
          return Error("regressor: linear weights do not match its sizes");
        }
        r.model_ = std::move(m);
        break;
      }
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    return Error(std::string("regressor: ") + e.what());
  }
}

}  // namespace corun::surrogate
