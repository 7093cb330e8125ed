// corun predict MODEL.json FILE --config ...: what a fitted surrogate predicts for one joint
// configuration (no measurement).
#include <cmath>
#include <cstdio>

#include "command.h"
#include "common.h"
#include "corun/surrogate/surrogate.h"

namespace corun::cli::cmd_predict {
namespace {

nlohmann::json value_or_null(float v) {
  return std::isfinite(v) ? nlohmann::json(static_cast<double>(v)) : nlohmann::json(nullptr);
}

const bool registered = register_command({
    "predict",
    "Predict each model's metrics for a joint configuration with a fitted surrogate",
    [](CLI::App& sub) {
      struct Flags {
        std::string model, file, config, only, catalog;
        bool json = false;
      };
      auto f = std::make_shared<Flags>();
      sub.add_option("model", f->model, "surrogate model file written by corun fit")->required();
      sub.add_option("file", f->file, "workload YAML")->required();
      sub.add_option("--config", f->config,
                     "knob values, e.g. cam0.imgsz=640,chat.precision=awq (others: first value)");
      sub.add_option("--models", f->only, "comma list of running models (default: all)");
      sub.add_option("--catalog", f->catalog, kCatalogFlagHelp);
      sub.add_flag("--json", f->json, "print JSON");
      return std::function<int()>([f] {
        auto s = surrogate::Surrogate::load(f->model);
        if (!s) return report_error(s.error());
        auto w = load_workload_file(f->file, f->catalog);
        if (!w) return report_error(w.error());
        if (auto st = require_one_gpu(*w, "predict"); !st.ok()) return report_error(st.error());
        auto config = parse_config_flag(*w, f->config, f->only);
        if (!config) return report_error(config.error());
        auto compiled = surrogate::CompiledSurrogate::compile(*s, *w);
        if (!compiled) return report_error(compiled.error().wrap(f->model));
        auto ws = compiled->make_workspace();
        std::vector<float> out(w->models.size() * surrogate::kTargetCount);
        compiled->predict(*config, out, ws);
        nlohmann::json models = nlohmann::json::array();
        Table t({"model", "config", "target", "predicted", "upper 95%"});
        for (std::size_t m = 0; m < w->models.size(); ++m) {
          if ((*config)[m] == kAbsent) continue;
          const auto local = static_cast<std::size_t>((*config)[m]);
          nlohmann::json jm = {{"name", w->models[m].name},
                               {"config", w->models[m].describe(local)}};
          for (auto target : surrogate::family_targets(w->models[m].arch.family)) {
            const float v = out[m * surrogate::kTargetCount + static_cast<std::size_t>(target)];
            const std::string key(surrogate::to_string(target));
            // Throughput's conservative side is the lower one; latency's the upper one.
            const float factor = compiled->upper95_factor(m, target);
            const float bound = surrogate::is_latency(target) ? v * factor : v;
            jm[key] = value_or_null(v);
            if (surrogate::is_latency(target)) jm[key + "_upper95"] = value_or_null(bound);
            t.add({w->models[m].name, w->models[m].describe(local), key, fixed(v, 2),
                   surrogate::is_latency(target) ? fixed(bound, 2) : "-"});
          }
          models.push_back(std::move(jm));
        }
        if (f->json) {
          std::printf("%s\n",
                      nlohmann::json({{"surrogate", surrogate::to_string(s->kind())},
                                      {"regressor", surrogate::to_string(s->regressor_kind())},
                                      {"testbed", s->provenance().testbed},
                                      {"device", s->provenance().device},
                                      {"models", models}})
                          .dump()
                          .c_str());
        } else {
          std::printf("%s", t.render().c_str());
        }
        return kExitOk;
      });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_predict
