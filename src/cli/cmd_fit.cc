// corun fit RUN.db: fits a surrogate (meanfield, joint, pairwise, crossmodel) on a dataset.
#include <cstdio>

#include "command.h"
#include "common.h"
#include "corun/core/strings.h"
#include "corun/surrogate/training.h"
#include "surrogate_flags.h"

namespace corun::cli::cmd_fit {
namespace {

const bool registered = register_command({
    "fit",
    "Fit a surrogate model on a profiling dataset and write it as JSON",
    [](CLI::App& sub) {
      struct Flags {
        std::string dataset, surrogate = "meanfield", regressor = default_regressor(), out,
                             catalog, workload_hash;
        std::uint64_t seed = kDefaultSeed;
        int folds = 5;
        bool json = false, monotone = false, unconstrained = false;
      };
      auto f = std::make_shared<Flags>();
      sub.add_option("dataset", f->dataset, "dataset written by corun profile")->required();
      sub.add_option("--surrogate", f->surrogate, "meanfield | joint | pairwise | crossmodel")
          ->capture_default_str();
      sub.add_option("--regressor", f->regressor, "mlp | gbdt | linear")->capture_default_str();
      sub.add_option("--out", f->out, "model file (JSON)")->required();
      sub.add_flag("--monotone", f->monotone,
                   "require latencies to grow (throughput to fall) with the co-runners' "
                   "aggregate demand: an error unless the regressor is gbdt or linear and the "
                   "surrogate meanfield or pairwise, where it is the default (as in corun run); "
                   "exact search then proves optimality");
      sub.add_flag("--unconstrained", f->unconstrained,
                   "do not constrain a gbdt or linear meanfield or pairwise surrogate to be "
                   "monotone");
      add_seed_flag(sub, f->seed, "the training");
      sub.add_option("--folds", f->folds,
                     "cross-validation folds of the error model (0: in-sample residuals)")
          ->check(CLI::Range(0, 50))
          ->capture_default_str();
      sub.add_option("--workload-hash", f->workload_hash,
                     "which workload, when the dataset holds several");
      sub.add_option("--catalog", f->catalog, kCatalogFlagHelp);
      sub.add_flag("--json", f->json, "print a summary as JSON");
      return std::function<int()>([f] {
        const auto kind = surrogate::parse_surrogate(f->surrogate);
        if (!kind) {
          return report_error(Error("--surrogate: unknown '" + f->surrogate + "'" +
                                    did_you_mean(f->surrogate, surrogate::surrogate_names())));
        }
        const auto reg = parse_regressor_flag(f->regressor);
        if (!reg) return report_error(reg.error());
        auto catalog = load_catalog(f->catalog);
        if (!catalog) return report_error(catalog.error());
        auto ds = profile::Dataset::open(f->dataset, profile::Dataset::Mode::kReadOnly);
        if (!ds) return report_error(ds.error());
        auto data = surrogate::load_training_data(*ds, **catalog, f->workload_hash,
                                                  surrogate::predicts_ratio(*kind));
        if (!data) return report_error(data.error());
        surrogate::FitOptions options;
        options.kind = *kind;
        options.regressor = *reg;
        if (f->monotone && f->unconstrained) {
          return report_error(Error("--monotone and --unconstrained exclude each other"));
        }
        options.monotone =
            f->monotone || (!f->unconstrained && surrogate::can_fit_monotone(*kind, *reg));
        options.calibration_folds = f->folds;
        const Context ctx{.seed = f->seed};  // --seed; the fit starts no threads
        data->provenance.context = ctx;
        auto s = surrogate::Surrogate::fit(ctx, data->workload, data->standalone, data->corun,
                                           options, data->provenance, data->cotenants);
        if (!s) return report_error(s.error());
        if (auto st = s->save(f->out); !st.ok()) return report_error(st.error());
        nlohmann::json heads = nlohmann::json::array();
        for (const auto& h : s->heads()) {
          for (std::size_t k = 0; k < h.targets.size(); ++k) {
            heads.push_back({{"model", data->workload.models[h.model].name},
                             {"target", std::string(surrogate::to_string(h.targets[k]))},
                             {"train_rows", h.train_rows},
                             {"error_q95", h.error[k].q95},
                             {"error_rmse", h.error[k].rmse},
                             {"error_source", h.error[k].source}});
          }
        }
        if (f->json) {
          std::printf("%s\n",
                      nlohmann::json({{"model_file", f->out},
                                      {"surrogate", f->surrogate},
                                      {"regressor", f->regressor},
                                      {"monotone", options.monotone},
                                      {"corun_samples", data->corun.size()},
                                      {"standalone_measurements", data->standalone.measurements()},
                                      {"heads", heads}})
                          .dump()
                          .c_str());
          return kExitOk;
        }
        std::printf("fitted %s/%s%s on %zu co-run samples and %zu standalone measurements -> %s\n",
                    f->surrogate.c_str(), f->regressor.c_str(),
                    options.monotone ? " (monotone)" : "", data->corun.size(),
                    data->standalone.measurements(), f->out.c_str());
        Table t({"model", "target", "rows", "log-error q95", "log-error rmse", "from"});
        for (const auto& h : heads) {
          t.add({h["model"].get<std::string>(), h["target"].get<std::string>(),
                 std::to_string(h["train_rows"].get<std::size_t>()),
                 fixed(h["error_q95"].get<double>(), 3), fixed(h["error_rmse"].get<double>(), 3),
                 h["error_source"].get<std::string>()});
        }
        std::printf("%s", t.render().c_str());
        return kExitOk;
      });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_fit
