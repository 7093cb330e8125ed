// From a dataset to a model file and a prediction: load_training_data, and the `corun fit` /
// `corun predict` / `corun profile` verbs end to end (exit codes, messages, JSON).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../core/temp_dir.h"
#include "corun/catalog/catalog.h"
#include "corun/core/atomic_file.h"
#include "corun/profile/campaign.h"
#include "corun/surrogate/training.h"

namespace corun::surrogate::training_cli_test {
namespace {

namespace fs = std::filesystem;

// The process's scratch directory, removed when the process exits.
fs::path temp_dir() {
  static const testing::TempDir dir("corun-training-test");
  return dir.path();
}

struct CliRun {
  int code = -1;
  std::string out, err;
};

CliRun corun(const std::string& args) {
  const fs::path err = temp_dir() / "stderr.txt";
  const std::string cmd = std::string(CORUN_BINARY) + " " + args + " 2>" + err.string();
  CliRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  return r;
}

const std::string kN2 = std::string(CORUN_SOURCE_DIR) + "/workloads/paper-n2.yaml";
const std::string kN3 = std::string(CORUN_SOURCE_DIR) + "/workloads/paper-n3.yaml";

// paper-n2, the simulator and a new dataset file `name`: what writing campaigns needs.
struct FreshN2 {
  Result<Workload> w = load_workload(kN2, Catalog::default_catalog());
  Result<std::string> text = read_file(kN2);
  Result<std::unique_ptr<Testbed>> tb = make_testbed("sim");
  Result<profile::Dataset> ds;

  explicit FreshN2(const std::string& name)
      : ds((fs::remove(temp_dir() / name),
            profile::Dataset::open(temp_dir() / name, profile::Dataset::Mode::kCreate))) {}
  [[nodiscard]] bool ok() const { return w.ok() && text.ok() && tb.ok() && ds.ok(); }
};

TEST(TrainingData, ReadsTheWorkloadStandaloneAndCoRunSamplesBack) {
  FreshN2 n2("training.db");
  ASSERT_TRUE(n2.ok());
  auto& [w, text, tb, ds] = n2;
  // Co-run samples only: MeanField needs the standalone profile; the joint surrogate does not.
  ASSERT_TRUE(profile::run_campaign(*ds, *w, *text, **tb,
                                    {profile::Plan::kJoint, Context{.seed = 1}, "sim", 10}, 15,
                                    nullptr)
                  .ok());
  auto missing = load_training_data(*ds, Catalog::default_catalog(), "", true);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().what().find("no standalone campaign"), std::string::npos);
  auto joint_only = load_training_data(*ds, Catalog::default_catalog(), "", false);
  ASSERT_TRUE(joint_only.ok()) << joint_only.error().what();
  EXPECT_EQ(joint_only->standalone.measurements(), 0u);

  ASSERT_TRUE(profile::run_campaign(*ds, *w, *text, **tb,
                                    {profile::Plan::kStandalone, Context{.seed = 1}, "sim", 10}, 2,
                                    nullptr)
                  .ok());
  ASSERT_TRUE(profile::run_campaign(*ds, *w, *text, **tb,
                                    {profile::Plan::kMeanField, Context{.seed = 1}, "sim", 10}, 25,
                                    nullptr)
                  .ok());
  auto data = load_training_data(*ds, Catalog::default_catalog(), "", true);
  ASSERT_TRUE(data.ok()) << data.error().what();
  EXPECT_EQ(data->workload.hash, w->hash);
  EXPECT_EQ(data->workload.models.size(), 2u);
  EXPECT_EQ(data->corun.size(), 40u);  // 15 joint + 25 meanfield
  EXPECT_EQ(data->standalone.measurements(), 2u * 21);
  EXPECT_EQ(data->provenance.testbed, "sim");
  EXPECT_EQ(data->provenance.device, "rtx3090");

  // A second workload in the same file makes the choice explicit.
  auto w3 = load_workload(kN3, Catalog::default_catalog());
  auto text3 = read_file(kN3);
  ASSERT_TRUE(profile::run_campaign(*ds, *w3, *text3, **tb,
                                    {profile::Plan::kJoint, Context{.seed = 1}, "sim", 10}, 3,
                                    nullptr)
                  .ok());
  auto ambiguous = load_training_data(*ds, Catalog::default_catalog(), "", true);
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_NE(ambiguous.error().what().find("--workload-hash"), std::string::npos);
  EXPECT_TRUE(load_training_data(*ds, Catalog::default_catalog(), w->hash, true).ok());
}

TEST(TrainingData, CoTenantSamplesComeBackWithTheirCoTenantInAggregateUnits) {
  FreshN2 n2("cotenant.db");
  ASSERT_TRUE(n2.ok());
  auto& [w, text, tb, ds] = n2;
  for (const auto& [plan, budget] :
       {std::pair{profile::Plan::kStandalone, 1}, std::pair{profile::Plan::kMeanField, 10},
        std::pair{profile::Plan::kCoTenant, 12}}) {
    ASSERT_TRUE(profile::run_campaign(*ds, *w, *text, **tb, {plan, Context{.seed = 4}, "sim", 10},
                                      static_cast<std::uint64_t>(budget), nullptr)
                    .ok());
  }
  auto data = load_training_data(*ds, Catalog::default_catalog(), "", true);
  ASSERT_TRUE(data.ok()) << data.error().what();
  ASSERT_EQ(data->corun.size(), 22u);
  ASSERT_EQ(data->cotenants.size(), 22u);
  // Hand calculation of one co-tenant on the RTX 3090 (catalog: TDP 350 W, idle 25 W): count 1,
  // the SM share itself, dynamic power (350 - 25) x SM share, occupancy 1, no VRAM.
  const Device& d = w->device;
  std::size_t loaded = 0;
  for (std::size_t i = 0; i < data->corun.size(); ++i) {
    const Totals& t = data->cotenants[i];
    if (t.count == 0) {
      EXPECT_EQ(t.sm, 0.0);
      continue;
    }
    ++loaded;
    const Interference c =
        profile::plan_cotenant(Context{.seed = 4}, profile::Plan::kCoTenant, data->corun[i].index);
    EXPECT_EQ(t.count, 1.0);
    EXPECT_DOUBLE_EQ(t.sm, c.sm_util);
    EXPECT_DOUBLE_EQ(t.power_w, c.sm_util * (350.0 - 25.0));
    EXPECT_EQ(t.occupancy, 1.0);
    EXPECT_EQ(t.vram_gb, 0.0);
    EXPECT_GT(t.bw, 0.0);
  }
  EXPECT_EQ(loaded, 12u);  // every co-tenant sample, and only those
  EXPECT_EQ(d.tdp_w, 350.0);
}

TEST(Cli, ProfileFitPredictEndToEnd) {
  const fs::path dir = temp_dir();
  const std::string db = (dir / "cli.db").string();
  const std::string model = (dir / "model.json").string();
  fs::remove(db);
  CliRun r = corun("profile " + kN2 + " --plan standalone --repeats 2 --out " + db + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["total"], 42);
  EXPECT_EQ(j["measured"], 42);
  // Not a terminal: plain progress lines, no carriage returns.
  EXPECT_NE(r.err.find("profile standalone: 42/42 done"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos);
  r = corun("profile " + kN2 + " --plan meanfield --budget 30 --out " + db + " --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  // Rerunning measures nothing new.
  r = corun("profile " + kN2 + " --plan meanfield --budget 30 --out " + db + " --json --quiet");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(nlohmann::json::parse(r.out)["measured"], 0);

  // The defaults are corun run's surrogate: MeanField, GBDT, monotone in the co-runners.
  r = corun("fit " + db + " --out " + model + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["corun_samples"], 30);
  EXPECT_EQ(j["surrogate"], "meanfield");
  EXPECT_EQ(j["regressor"], "gbdt");
  EXPECT_EQ(j["monotone"], true);
  ASSERT_TRUE(fs::exists(model));
  const std::string free_model = (dir / "unconstrained.json").string();
  r = corun("fit " + db + " --unconstrained --out " + free_model + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["monotone"], false);
  r = corun("fit " + db + " --monotone --unconstrained --out " + free_model);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--unconstrained"), std::string::npos) << r.err;

  r = corun("predict " + model + " " + kN2 +
            " --config chat.precision=awq,chat.request_concurrency=4,cam0.imgsz=640 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["surrogate"], "meanfield");
  EXPECT_EQ(j["regressor"], "gbdt");
  ASSERT_EQ(j["models"].size(), 2u);
  EXPECT_EQ(j["models"][0]["config"], "precision=awq,request_concurrency=4,prefill_chunk=512");
  const double ttft = j["models"][0]["ttft_ms_p95"];
  EXPECT_GT(ttft, 0);
  const double tpot = j["models"][0]["tpot_ms_p95"];
  const double tpot_upper = j["models"][0]["tpot_ms_p95_upper95"];
  const double latency = j["models"][1]["latency_ms_p95"];
  EXPECT_GT(tpot_upper, tpot * 0.999);
  EXPECT_GT(latency, 0);
  EXPECT_TRUE(j["models"][1]["ttft_ms_p95"].is_null() || !j["models"][1].contains("ttft_ms_p95"));

  // One model alone: the other is absent from the output.
  r = corun("predict " + model + " " + kN2 + " --models cam0 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["models"].size(), 1u);
}

TEST(Cli, BadInputExitsWithCode2AndNamesTheField) {
  const fs::path dir = temp_dir();
  const std::string db = (dir / "bad.db").string();
  fs::remove(db);
  CliRun r = corun("profile " + kN2 + " --plan meanfeild --budget 3 --out " + db);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("did you mean 'meanfield'"), std::string::npos) << r.err;
  r = corun("profile " + kN2 + " --plan joint --out " + db);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--budget"), std::string::npos) << r.err;
  r = corun("profile " + kN2 + " --plan joint --budget 5 --out " + db + " --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  r = corun("fit " + db + " --surrogate meanfield --out " + (dir / "m.json").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no standalone campaign"), std::string::npos) << r.err;
  r = corun("fit " + db + " --surrogate joint --regressor svm --out " + (dir / "m.json").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--regressor"), std::string::npos) << r.err;
  r = corun("fit " + db + " --surrogate joint --regressor linear --out " +
            (dir / "m.json").string() + " --folds 0");
  ASSERT_EQ(r.code, 0) << r.err;
  // A model fitted for paper-n2 does not apply to paper-n3.
  r = corun("predict " + (dir / "m.json").string() + " " + kN3);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("2 models"), std::string::npos) << r.err;
  r = corun("predict " + (dir / "m.json").string() + " " + kN2 + " --config cam0.imgsz=999");
  EXPECT_EQ(r.code, 2);
  std::ofstream(dir / "garbage.json") << "{\"kind\": \"corun-surrogate\", \"schema_version\": 1}";
  r = corun("predict " + (dir / "garbage.json").string() + " " + kN2);
  EXPECT_EQ(r.code, 3);  // a model file that does not read back is a damaged file
  EXPECT_NE(r.err.find("damaged surrogate model"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("garbage.json"), std::string::npos) << r.err;
  r = corun("fit " + (dir / "nothing.db").string() + " --out " + (dir / "m2.json").string());
  EXPECT_EQ(r.code, 2);
}

}  // namespace
}  // namespace corun::surrogate::training_cli_test
