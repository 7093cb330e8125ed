// End-to-end tests of the corun binary: exit codes, JSON shapes, determinism.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "../spec/malformed_cases.h"
#include "../core/temp_dir.h"

namespace corun::cli_test {
namespace {

struct RunResult {
  int code = -1;
  std::string out;
  std::string err;
};

// The process's scratch directory, removed when the process exits.
std::filesystem::path temp_dir() {
  static const testing::TempDir dir("corun-cli-test");
  return dir.path();
}

RunResult run(const std::string& args) {
  const auto err_path = temp_dir() / "stderr.txt";
  const std::string cmd = std::string(CORUN_BINARY) + " " + args + " 2>" + err_path.string();
  RunResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_path);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  return r;
}

const std::string kSrc = CORUN_SOURCE_DIR;

TEST(Cli, EveryMalformedWorkloadExitsWithCode2AndNamesTheField) {
  const auto cases = testing::malformed_cases();
  ASSERT_GE(cases.size(), 25u);
  const auto dir = temp_dir();
  int i = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    const auto path = dir / ("bad" + std::to_string(i++) + ".yaml");
    {
      std::ofstream f(path, std::ios::binary);
      f << c.text;
    }
    const RunResult r = run("validate " + path.string());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(path.string()), std::string::npos) << r.err;
    for (const auto& frag : c.expect) {
      EXPECT_NE(r.err.find(frag), std::string::npos) << "missing '" << frag << "' in " << r.err;
    }
  }
}

TEST(Cli, MissingFileAndBadFlagsExitWith2) {
  EXPECT_EQ(run("validate /nonexistent/w.yaml").code, 2);
  EXPECT_EQ(run("measure " + kSrc + "/workloads/paper-n2.yaml --seed notanumber").code, 2);
  EXPECT_EQ(run("frobnicate").code, 2);
  const RunResult r = run("measure " + kSrc + "/workloads/paper-n2.yaml --config cam0.imgsize=640");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("did you mean 'imgsz'"), std::string::npos) << r.err;
  EXPECT_EQ(run("measure " + kSrc + "/workloads/paper-n2.yaml --testbed simm").code, 2);
}

// serve's stack-telemetry flags that only mean something with another: exit code 2, naming both.
TEST(Cli, ServeFlagsThatNeedAnotherExitWith2NamingIt) {
  const std::string state = (temp_dir() / "serve-state").string();
  RunResult r = run("serve --state " + state + " --port 0 --dcgm gpu=0");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--dcgm needs --prometheus"), std::string::npos) << r.err;
  r = run("serve --state " + state + " --port 0 --dcgm-report-only");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--dcgm-report-only needs --dcgm"), std::string::npos) << r.err;
}

// The --regressor default each verb shows in its --help ("--regressor TEXT=gbdt ..."): the
// value after the '=' up to the next space.
std::string regressor_default(const std::string& verb) {
  const RunResult r = run(verb + " --help");
  const std::string key = "--regressor TEXT=";
  const auto at = r.out.find(key);
  if (r.code != 0 || at == std::string::npos) return "(no --regressor in " + verb + " --help)";
  const auto from = at + key.size();
  return r.out.substr(from, r.out.find_first_of(" \n", from) - from);
}

TEST(Cli, FitRunAndEvalSchedulerDefaultToTheSameRegressor) {
  const std::string fit = regressor_default("fit");
  EXPECT_EQ(fit, "gbdt");  // docs/results/surrogate-choice.md chose it
  EXPECT_EQ(regressor_default("run"), fit);
  EXPECT_EQ(regressor_default("eval scheduler"), fit);
}

TEST(Cli, PaperN5HasExactly78732JointConfigurations) {
  const RunResult r = run("space " + kSrc + "/workloads/paper-n5.yaml --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["models"], 5);
  EXPECT_EQ(j["joint_configs"], 78732);  // 12 * 9^4, as in the MeanField paper
  EXPECT_EQ(j["local_configs"], nlohmann::json::array({12, 9, 9, 9, 9}));
  EXPECT_EQ(j["feasible_joint_configs"], 78732);
  EXPECT_EQ(j["joint_configs_exact"], true);
  EXPECT_EQ(j["feasible_joint_configs_exact"], true);
}

TEST(Cli, ServeDeviceAutoWithoutNvmlExitsWith2NamingTheFlag) {
  // No NVML library where CORUN_NVML_LIBRARY points (as on a machine without the NVIDIA
  // driver): serve refuses before it writes its state.
  const auto state = temp_dir() / "serve-auto";
  std::filesystem::remove_all(state);
  ::setenv("CORUN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  const RunResult r = run("serve --state " + state.string() + " --device auto --port 0");
  ::unsetenv("CORUN_NVML_LIBRARY");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--device auto"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("NVML unavailable"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(state)) << "nothing written";
}

TEST(Cli, KubernetesFlagsOutsideAClusterExitWith2NamingWhatToGive) {
  // No KUBERNETES_SERVICE_HOST here: the in-cluster configuration is missing, and the error
  // says which flags replace it. Nothing is written before the check.
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  const auto state = temp_dir() / "serve-kube";
  std::filesystem::remove_all(state);
  RunResult r = run("serve --state " + state.string() + " --kube-node gpu-1 --port 0");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--kube-node"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--kube-api URL"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(state)) << "nothing written";
  r = run("serve --state " + state.string() + " --kube-api http://127.0.0.1:1 --port 0");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--kube-api needs --kube-node"), std::string::npos) << r.err;
  r = run("extender --port 0");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--node NAME=URL"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--kube"), std::string::npos) << r.err;
  r = run("extender --kube --port 0");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("KUBERNETES_SERVICE_HOST"), std::string::npos) << r.err;
  r = run("extender --kube-api ftp://api:6443 --port 0");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("http(s)://HOST[:PORT]"), std::string::npos) << r.err;
}

TEST(Cli, SpaceSaysWhichLlmConfigurationsRunKvLimited) {
  // Llama-2-7B on an L4 with 256 + 1,024-token requests: 8 sequences' KV cache (8 x 1,280 x
  // 524,288 bytes = 5.4 GB) fits beside 13.5 GB of weights; 32 (21.5 GB) do not, and the
  // engine's 0.9 of the 24.15 GB holds about 19 at their mean occupancy of 768 tokens.
  const auto file = temp_dir() / "kv.yaml";
  {
    std::ofstream out(file);
    out << "device: l4\nmodels:\n  - {name: chat, model: llama-2-7b, knobs: "
           "{request_concurrency: [8, 32]}, demand: {rps: 0.25, prompt_tokens: 256, "
           "output_tokens: 1024}}\n";
  }
  const RunResult r = run("space " + file.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["kv_limited"].size(), 1u) << r.out;
  EXPECT_EQ(j["kv_limited"][0]["model"], "chat");
  EXPECT_EQ(j["kv_limited"][0]["request_concurrency"], 32);
  EXPECT_GT(j["kv_limited"][0]["sequences"].get<double>(), 15.0);
  EXPECT_LT(j["kv_limited"][0]["sequences"].get<double>(), 23.0);
  const RunResult text = run("space " + file.string());
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("KV-limited: chat (request_concurrency=32)"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find(" of 32 sequences at once"), std::string::npos) << text.out;
}

TEST(Cli, SpaceBeyondTwoToThe64IsNeverPrintedAsExact) {
  // 30 cameras x (8 image sizes x 16 skip rates) = 128^30 = 2^210 joint configurations, a
  // power of two and so exactly a double; a saturated 64-bit counter would print 2^64 - 1.
  const auto file = temp_dir() / "wide.yaml";
  {
    std::ofstream out(file);
    out << "device: rtx3090\nmodels:\n";
    for (int i = 0; i < 30; ++i) {
      out << "  - {name: cam" << i
          << ", model: yolo11n, knobs: {imgsz: [320, 352, 384, 416, 448, 480, 512, 544], "
             "skip_rate: [0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, "
             "0.65, 0.7, 0.75]}, demand: {fps: 1}}\n";
    }
  }
  const RunResult r = run("space " + file.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("18446744073709551615"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["joint_configs"].is_number_float()) << r.out;
  EXPECT_EQ(j["joint_configs"].get<double>(), std::ldexp(1.0, 210));
  EXPECT_EQ(j["joint_configs_exact"], false);
  EXPECT_EQ(j["feasible_joint_configs_exact"], false);
  const RunResult text = run("space " + file.string());
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("joint configurations: about 1.646e+63 (not exact)"), std::string::npos)
      << text.out;
  // The exhaustive solver refuses the space with exit code 2; the run log says the count is
  // approximate.
  const auto out = temp_dir() / "run-wide";
  std::filesystem::remove_all(out);
  const RunResult ex = run("run " + file.string() +
                           " --no-profile --solver exhaustive --quiet --out " + out.string());
  EXPECT_EQ(ex.code, 2) << ex.err;
  EXPECT_NE(ex.err.find("exhaustive search cannot enumerate about 1.646e+63 joint configurations "
                        "(more than 2^64)"),
            std::string::npos)
      << ex.err;
  EXPECT_NE(ex.out.find("30 models, about 1.646e+63 (not exact) joint configurations"),
            std::string::npos)
      << ex.out;
  EXPECT_EQ(ex.out.find("18446744073709551615"), std::string::npos) << ex.out;
  const RunResult valid = run("validate " + file.string());
  EXPECT_EQ(valid.code, 0) << valid.err;
  EXPECT_NE(
      valid.out.find("30 models on rtx3090, about 1.646e+63 (not exact) joint configurations"),
      std::string::npos)
      << valid.out;
  // eval scheduler refuses the scenario before profiling it, naming what enumerates the space.
  const RunResult eval = run("eval scheduler " + file.string() + " --quiet --no-oracle --out " +
                             (temp_dir() / "eval-wide").string());
  EXPECT_EQ(eval.code, 2) << eval.err;
  EXPECT_NE(eval.err.find("about 1.646e+63 joint configurations (more than 2^64) cannot be "
                          "enumerated; turn off the exhaustive gap (--no-exhaustive) and the "
                          "exhaustive solver (--solvers)"),
            std::string::npos)
      << eval.err;
  EXPECT_FALSE(std::filesystem::exists(temp_dir() / "eval-wide"));
}

TEST(Cli, PaperFamilyGrowsByNinePerStream) {
  std::uint64_t expected = 12;
  for (int n = 2; n <= 6; ++n) {
    expected *= 9;
    const RunResult r = run("space " + kSrc + "/workloads/paper-n" + std::to_string(n) + ".yaml --json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["joint_configs"].get<std::uint64_t>(),
              expected)
        << n;
  }
}

TEST(Cli, MeasureIsDeterministicBySeedAndDiffersAcrossSeeds) {
  const std::string base = "measure " + kSrc + "/workloads/paper-n5.yaml --json";
  const RunResult a = run(base + " --seed 7");
  const RunResult b = run(base + " --seed 7");
  const RunResult c = run(base + " --seed 8");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  const auto j = nlohmann::json::parse(a.out);
  EXPECT_EQ(j["testbed"], "sim");
  EXPECT_EQ(j["device"], "rtx3090");
  ASSERT_EQ(j["models"].size(), 5u);
  for (const char* key : {"name", "config", "latency_ms_p50", "latency_ms_p95", "throughput",
                          "ttft_ms_p95", "tpot_ms_p95", "error"}) {
    EXPECT_TRUE(j["models"][0].contains(key)) << key;
  }
  EXPECT_TRUE(j["models"][0]["ttft_ms_p95"].is_number());  // chat is the LLM
  EXPECT_TRUE(j["models"][1]["ttft_ms_p95"].is_null());    // cam0 is vision
  for (const char* key : {"sm_util", "mem_bw_util", "vram_used_gb", "power_w", "clock_mhz"}) {
    EXPECT_TRUE(j["gpu"][key].is_number()) << key;
  }
}

TEST(Cli, ConfigFlagSelectsKnobValues) {
  const std::string base = "measure " + kSrc + "/workloads/paper-n2.yaml --json --seed 3";
  const RunResult small = run(base + " --config cam0.imgsz=320 --models cam0");
  const RunResult large = run(base + " --config cam0.imgsz=640 --models cam0");
  ASSERT_EQ(small.code, 0) << small.err;
  ASSERT_EQ(large.code, 0) << large.err;
  const auto s = nlohmann::json::parse(small.out);
  const auto l = nlohmann::json::parse(large.out);
  ASSERT_EQ(s["models"].size(), 1u);
  EXPECT_EQ(s["models"][0]["config"], "imgsz=320,skip_rate=0");
  EXPECT_LT(s["models"][0]["latency_ms_p50"].get<double>(),
            l["models"][0]["latency_ms_p50"].get<double>());
}

// Benchmark mode: one measurement per number of requests in flight, overriding the demand of
// the measured models. chat runs at request_concurrency 4, so throughput grows up to 4 in
// flight and then only the wait for a slot grows.
TEST(Cli, MeasureSweepsConcurrencyLevels) {
  const std::string base = "measure " + kSrc +
                           "/workloads/paper-n2.yaml --models chat --config "
                           "chat.request_concurrency=4 --concurrency 1,4,8";
  const RunResult r = run(base + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["testbed"], "sim");
  ASSERT_EQ(j["levels"].size(), 3u);
  std::vector<double> thr, ttft;
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& l = j["levels"][i];
    EXPECT_EQ(l["concurrency"], std::vector<int>({1, 4, 8})[i]);
    ASSERT_EQ(l["models"].size(), 1u);  // cam0 is not measured
    EXPECT_EQ(l["models"][0]["name"], "chat");
    thr.push_back(l["models"][0]["throughput"].get<double>());
    ttft.push_back(l["models"][0]["ttft_ms_p95"].get<double>());
    EXPECT_TRUE(l["gpu"]["sm_util"].is_number());
  }
  EXPECT_GT(thr[1], 2 * thr[0]);          // four sequences decode together
  EXPECT_NEAR(thr[2] / thr[1], 1, 0.15);  // no fifth slot
  EXPECT_GT(ttft[2], 2 * ttft[1]);        // the other four are waited for
  const RunResult table = run(base);
  ASSERT_EQ(table.code, 0) << table.err;
  for (const char* s : {"concurrency", "throughput", "TTFT p95", "chat"}) {
    EXPECT_NE(table.out.find(s), std::string::npos) << s << "\n" << table.out;
  }
  for (const char* bad : {"0", "1,x", "2,2", "1025", ""}) {
    const RunResult e = run("measure " + kSrc + "/workloads/paper-n2.yaml --concurrency '" +
                            std::string(bad) + "'");
    EXPECT_EQ(e.code, 2) << bad << ": " << e.err;
    EXPECT_NE(e.err.find("--concurrency"), std::string::npos) << e.err;
  }
}

// The main job end to end on the paper-like workload (no timeline: one interval): profiles,
// fits, plans, measures, writes the reports; a second run reuses the dataset and the model.
TEST(Cli, RunProfilesFitsPlansAndReports) {
  const auto out = temp_dir() / "run-paper-n5";
  std::filesystem::remove_all(out);
  const RunResult r = run("run " + kSrc + "/workloads/paper-n5.yaml --quiet --out " + out.string());
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  for (const char* s : {"78,732 joint configurations", "144 standalone + 100 co-run", "fitted",
                        "t=0", "start", "summary:", "report.html"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  EXPECT_TRUE(std::filesystem::exists(out / "report.html"));
  std::ifstream f(out / "report.json");
  const auto j = nlohmann::json::parse(f);
  ASSERT_EQ(j.at("intervals").size(), 1u);
  EXPECT_EQ(j.at("intervals")[0].at("models").size(), 5u);
  EXPECT_EQ(r.code == 0, j.at("summary").at("sla_violations").get<int>() == 0);

  const RunResult again =
      run("run " + kSrc + "/workloads/paper-n5.yaml --quiet --out " + out.string());
  EXPECT_NE(again.out.find("(0 + 0 taken now"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("reused"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("1 intervals read back from the dataset"), std::string::npos)
      << again.out;

  // One decision with the fitted surrogate: exact agrees with exhaustive on N = 5.
  const std::string model = (out / "surrogate.json").string();
  const RunResult ex = run("plan " + kSrc + "/workloads/paper-n5.yaml --surrogate " + model +
                           " --solver exhaustive --json");
  const RunResult ga = run("plan " + kSrc + "/workloads/paper-n5.yaml --surrogate " + model +
                           " --solver ga --measure --json");
  ASSERT_NE(ex.code, 2) << ex.err;
  ASSERT_NE(ga.code, 2) << ga.err;
  const auto je = nlohmann::json::parse(ex.out);
  const auto jg = nlohmann::json::parse(ga.out);
  EXPECT_EQ(je.at("search").at("evaluated").get<std::uint64_t>(), 78732u);
  EXPECT_TRUE(je.at("search").at("proved_optimal").get<bool>());
  EXPECT_LE(jg.at("predicted_utility").get<double>(),
            je.at("predicted_utility").get<double>() + 1e-9);
  EXPECT_TRUE(jg.at("measured").contains("sla_violations"));
  EXPECT_EQ(jg.at("models").size(), 5u);
}

// A workload that declares a recurring tool burst: profiled with the co-tenant campaign, it
// is planned to hold every SLA during the burst, and --measure checks that on the testbed
// (the verdict is the measurement's, not the planner's). The same surrogate told to ignore
// the burst plans for the steady state alone.
TEST(Cli, PlanLeavesRoomForADeclaredToolBurstAndMeasuresItDuringTheBurst) {
  const auto dir = temp_dir() / "tool-burst";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string w = kSrc + "/workloads/tools-burst/paper-n2-voice.yaml";
  const std::string ds = (dir / "dataset.db").string();
  for (const std::string plan :
       {"--plan standalone --repeats 2", "--plan meanfield --budget 40",
        "--plan cotenant --budget 40"}) {
    const RunResult p = run("profile " + w + " " + plan + " --out " + ds);
    ASSERT_EQ(p.code, 0) << plan << "\n" << p.err;
  }
  const std::string model = (dir / "surrogate.json").string();
  const RunResult fit = run("fit " + ds + " --regressor gbdt --monotone --out " + model);
  ASSERT_EQ(fit.code, 0) << fit.err;

  const RunResult aware = run("plan " + w + " --surrogate " + model + " --measure --json");
  ASSERT_NE(aware.code, 2) << aware.err;
  const auto ja = nlohmann::json::parse(aware.out);
  const auto& tools = ja.at("tools");
  EXPECT_EQ(tools.at("calls").get<int>(), 4);  // transcribe, summarize, translate, speak
  EXPECT_EQ(tools.at("every_s").get<double>(), 20.0);
  EXPECT_TRUE(tools.at("planned_for").get<bool>());
  // The tools' SM share goes down the ladder (1, 3/4, 1/2, 1/4, 1/8) until the burst leaves
  // room; the share chosen is the last one tried.
  const auto tried = tools.at("shares_tried").get<std::vector<double>>();
  ASSERT_FALSE(tried.empty());
  EXPECT_EQ(tried.front(), 1.0);
  for (std::size_t i = 1; i < tried.size(); ++i) EXPECT_LT(tried[i], tried[i - 1]);
  EXPECT_EQ(tools.at("gpu_share").get<double>(), tried.back());
  EXPECT_TRUE(tools.at("room").is_boolean());
  EXPECT_LE(tools.at("sm_util").get<double>(), tried.back() + 1e-9);
  EXPECT_GT(tools.at("sm_util").get<double>(), 0.0);
  EXPECT_LE(tools.at("sm_util").get<double>(), 1.0);
  EXPECT_GT(tools.at("makespan_ms").get<double>(), 0.0);
  ASSERT_TRUE(ja.at("measured").contains("during_tools"));
  // The exit code is the measurement's verdict on both windows.
  const auto steady = ja.at("measured").at("sla_violations").get<int>();
  const auto during = ja.at("measured").at("during_tools").at("sla_violations").get<int>();
  EXPECT_EQ(aware.code == 0, ja.at("feasible").get<bool>() && steady == 0 && during == 0);
  for (const auto& m : ja.at("models")) {
    if (m.at("config").is_null()) continue;
    EXPECT_TRUE(m.contains("meets_sla_during_tools")) << m.dump();
  }

  const RunResult blind =
      run("plan " + w + " --surrogate " + model + " --ignore-tools --json");
  ASSERT_NE(blind.code, 2) << blind.err;
  const auto jb = nlohmann::json::parse(blind.out);
  EXPECT_FALSE(jb.at("tools").at("planned_for").get<bool>());
  EXPECT_EQ(jb.at("tools").at("gpu_share").get<double>(), 1.0);
  const RunResult bad = run("plan " + w + " --surrogate " + model + " --tool-shares 0.5,1.5");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--tool-shares"), std::string::npos) << bad.err;

  // The verbs that measure steady windows refuse a declared burst instead of ignoring it.
  const RunResult r = run("run " + w + " --quiet --out " + (dir / "run").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("tools"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("corun plan --measure"), std::string::npos) << r.err;
}

// A declared burst whose scenario cannot be read is an error naming the workload's field.
TEST(Cli, PlanNamesTheToolsFieldWhenTheBurstScenarioIsMissing) {
  const auto dir = temp_dir() / "tool-burst-missing";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string text;
  {
    std::ifstream in(kSrc + "/workloads/tools-burst/paper-n2-voice.yaml");
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const auto path = dir / "w.yaml";
  {
    std::ofstream out(path);
    out << text.substr(0, text.find("tools:")) << "tools: {scenario: nowhere.yaml, every_s: 20}\n";
  }
  const RunResult p = run("plan " + path.string() + " --surrogate " + (dir / "none.json").string());
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("tools.scenario"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("nowhere.yaml"), std::string::npos) << p.err;
  const RunResult v = run("validate " + path.string());
  EXPECT_EQ(v.code, 0) << v.err;  // the shape is valid; the file is read where it is used
}

TEST(Cli, PlanRejectsASurrogateOfAnotherWorkload) {
  const auto out = temp_dir() / "run-paper-n2";
  std::filesystem::remove_all(out);
  const RunResult r = run("run " + kSrc + "/workloads/paper-n2.yaml --quiet --regressor linear --out " +
                          out.string());
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  const RunResult p = run("plan " + kSrc + "/workloads/paper-n5.yaml --surrogate " +
                          (out / "surrogate.json").string());
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("does not fit"), std::string::npos) << p.err;
  const RunResult bad = run("plan " + kSrc + "/workloads/paper-n2.yaml --surrogate " +
                            (out / "surrogate.json").string() + " --solver gaa");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("ga"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace corun::cli_test

namespace corun::cli_test {
namespace {

TEST(Cli, FormatsDocShowsTheDeclaredKnobTable) {
  const RunResult r = run("knobs");
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream f(kSrc + "/docs/formats.md");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- knobs:begin -->\n";
  const auto a = doc.find(begin);
  const auto b = doc.find("<!-- knobs:end -->");
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  EXPECT_EQ(doc.substr(a + begin.size(), b - a - begin.size()), r.out)
      << "docs/formats.md is stale: paste the output of `corun knobs` between the markers";
}

TEST(Cli, MakeRunExitsZeroWhenTheTestbedMeasuresNoBreach) {
  // make run's workload: arrivals, departures and three changes of the chat model's demand;
  // the testbed measures every plan within every SLA, so the run exits 0 (exit 1 is for
  // measured breaches).
  const auto out = temp_dir() / "run-random-churn";
  std::filesystem::remove_all(out);
  const RunResult r = run("run " + kSrc + "/workloads/scenarios/random-churn.yaml --quiet --out " +
                          out.string());
  EXPECT_NE(r.out.find(" 0 measured SLA violation(s)"), std::string::npos) << r.out;
  EXPECT_EQ(r.code, 0) << r.err;
}

// Restart-class changes per model in a run's report.json, after interval `after` (arrivals of
// a model are not changes of it: their step starts from nothing).
std::map<std::string, int> restarts_after(const std::filesystem::path& report, std::size_t after) {
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in);
  std::map<std::string, int> out;
  const auto& intervals = j.at("intervals");
  for (std::size_t k = after; k < intervals.size(); ++k) {
    if (!intervals[k].contains("transition")) continue;
    for (const auto& s : intervals[k]["transition"]["steps"]) {
      if (s["action"] == "restart" && !s["from"].get<std::string>().empty()) {
        ++out[s["model"].get<std::string>()];
      }
    }
  }
  return out;
}

TEST(Cli, MakeRunRestartsTheChatModelRarelyAndReportsTransitions) {
  // make run's workload, planned transition-aware (the default): the chat model's vLLM knobs
  // (precision, concurrency, prefill chunk) cost a server restart each time they change, so
  // they change at most 3 times in 5 minutes; the summary says what the testbed charged.
  const auto out = temp_dir() / "run-random-churn-transitions";
  std::filesystem::remove_all(out);
  const RunResult r = run("run " + kSrc + "/workloads/scenarios/random-churn.yaml --quiet --out " +
                          out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("transitions (aware): "), std::string::npos) << r.out;
  EXPECT_LE(restarts_after(out / "report.json", 0)["chat"], 3) << r.out;
  std::ifstream in(out / "report.json");
  const auto j = nlohmann::json::parse(in);
  ASSERT_TRUE(j["summary"]["transitions"].contains("chat")) << j["summary"].dump();
  EXPECT_TRUE(j["summary"]["transitions"]["chat"].contains("downtime_s"));
}

TEST(Cli, ASteadyWorkloadMakesNoRestartClassChangeAfterItsThirdInterval) {
  // workloads/transitions/steady-l4.yaml has no event for 10 minutes (written before it was
  // run): what the planner learns from noisy windows must not restart a model once the first
  // windows have taught it the GPU. Planned as if changes were free, the same run restarts the
  // LLM (checked too, so that the workload keeps provoking what the rule prevents).
  const auto aware = temp_dir() / "steady-aware";
  const auto ignore = temp_dir() / "steady-ignore";
  std::filesystem::remove_all(aware);
  std::filesystem::remove_all(ignore);
  const std::string file = kSrc + "/workloads/transitions/steady-l4.yaml --quiet --out ";
  const RunResult a = run("run " + file + aware.string());
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_TRUE(restarts_after(aware / "report.json", 3).empty()) << a.out;
  // Ignoring the costs may breach (exit 1): the testbed charges every swap it plans.
  const RunResult i = run("run " + file + ignore.string() + " --transitions ignore");
  ASSERT_TRUE(i.code == 0 || i.code == 1) << i.code << " " << i.err;
  EXPECT_FALSE(restarts_after(ignore / "report.json", 3).empty()) << i.out;
}

TEST(Cli, RunSaysWhichSlaCannotBeMetAndWhy) {
  const auto out = temp_dir() / "run-overloaded";
  std::filesystem::remove_all(out);
  const RunResult r =
      run("run " + kSrc + "/workloads/overloaded-llm.yaml --quiet --degrade best-effort --out " +
          out.string());
  EXPECT_EQ(r.code, 1) << r.err;  // the assistant's SLA breaches: measured, so counted
  EXPECT_NE(r.out.find("infeasible: assistant: ttft_ms_p95 1500 cannot be met: best "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("demand 6 requests/s exceeds the"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the largest request_concurrency (4) serves"), std::string::npos) << r.out;
  std::ifstream f(out / "report.json");
  const auto j = nlohmann::json::parse(f);
  for (const auto& iv : j.at("intervals")) {
    EXPECT_FALSE(iv.at("feasible").get<bool>());
    ASSERT_FALSE(iv.at("infeasible").empty());
    EXPECT_NE(iv.at("infeasible")[0].get<std::string>().find("assistant: ttft_ms_p95"),
              std::string::npos);
    // The cameras keep their SLAs: the degraded plan still holds them.
    for (const auto& m : iv.at("models")) {
      if (m.at("name") != "assistant") {
        EXPECT_FALSE(m.at("sla_breach").get<bool>()) << m.dump();
      }
    }
  }
  EXPECT_EQ(j.at("summary").at("infeasible_intervals"), j.at("intervals").size());
  std::ifstream h(out / "report.html");
  std::stringstream html;
  html << h.rdbuf();
  EXPECT_NE(html.str().find("Infeasible: not every SLA can be held"), std::string::npos);
  EXPECT_NE(html.str().find("assistant: ttft_ms_p95 1500 cannot be met"), std::string::npos);
}

TEST(Cli, RunRefusesWhatAnOverloadedModelCannotServeByDefault) {
  const auto out = temp_dir() / "run-overloaded-shed";
  std::filesystem::remove_all(out);
  const RunResult r =
      run("run " + kSrc + "/workloads/overloaded-llm.yaml --quiet --out " + out.string());
  // 6 requests/s of 8,192-token prompts: one request's prefill alone takes longer than the TTFT
  // limit (the workload file's hand calculation), so no share of the demand holds and the
  // assistant is paused instead of breaching.
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("infeasible: assistant: ttft_ms_p95 1500 cannot be met"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("paused: no share of its demand holds it"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 0 measured SLA violation(s)"), std::string::npos) << r.out;
  std::ifstream f(out / "report.json");
  const auto j = nlohmann::json::parse(f);
  for (const auto& iv : j.at("intervals")) {
    EXPECT_FALSE(iv.at("feasible").get<bool>());
    ASSERT_TRUE(iv.contains("admitted")) << iv.dump();
    EXPECT_EQ(iv.at("admitted")[0].get<double>(), 0.0);
  }
  EXPECT_EQ(j.at("summary").at("shed_model_intervals"), j.at("intervals").size());
  const RunResult bad = run("run " + kSrc + "/workloads/overloaded-llm.yaml --degrade maybe");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--degrade"), std::string::npos) << bad.err;
}

TEST(Cli, RunStartsFromTheTwinWithoutProfilingWhenAsked) {
  const auto out = temp_dir() / "run-noprofile";
  std::filesystem::remove_all(out);
  const RunResult r = run("run " + kSrc + "/workloads/paper-n3.yaml --quiet --no-profile --out " +
                          out.string());
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  EXPECT_NE(r.out.find("profile: none"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("twin"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out / "surrogate.json"));
  const RunResult both = run("run " + kSrc + "/workloads/paper-n3.yaml --no-profile --surrogate x.json");
  EXPECT_EQ(both.code, 2) << both.err;
  const RunResult bad_target = run("run " + kSrc + "/workloads/paper-n3.yaml --breach-target 2");
  EXPECT_EQ(bad_target.code, 2);
  const RunResult bad_mode = run("run " + kSrc + "/workloads/paper-n3.yaml --learning maybe");
  EXPECT_EQ(bad_mode.code, 2);
  EXPECT_NE(bad_mode.err.find("--learning"), std::string::npos) << bad_mode.err;
}

// A node of two GPUs and three light camera streams, one pinned to GPU 1.
std::filesystem::path write_node_workload(const std::string& pin) {
  const auto path = temp_dir() / ("node" + pin + ".yaml");
  std::ofstream f(path, std::ios::binary);
  f << "device: a100-80gb\n"
       "gpus: 2\n"
       "models:\n"
       "  - {name: c0, model: yolo11n, knobs: {imgsz: [320, 640]}, demand: {fps: 15},"
       " sla: {latency_ms_p95: 200}, gpu: "
    << pin
    << "}\n"
       "  - {name: c1, model: yolo11n, knobs: {imgsz: [320, 640]}, demand: {fps: 15},"
       " sla: {latency_ms_p95: 200}}\n"
       "  - {name: c2, model: yolo11s, knobs: {imgsz: [320, 640]}, demand: {fps: 15},"
       " sla: {latency_ms_p95: 200}}\n";
  return path;
}

TEST(Cli, PlanOnANodeNamesEachModelsGpuAndHoldsPins) {
  const auto path = write_node_workload("1");
  const auto r = run("plan " + path.string() + " --measure --json");
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpus"], 2);
  EXPECT_TRUE(j["feasible"].get<bool>());
  ASSERT_EQ(j["models"].size(), 3u);
  for (const auto& m : j["models"]) {
    ASSERT_TRUE(m["gpu"].is_number()) << m.dump();
    EXPECT_LT(m["gpu"].get<int>(), 2);
    EXPECT_EQ(m["unit"], "gpu" + std::to_string(m["gpu"].get<int>()));
    EXPECT_TRUE(m["meets_sla"].get<bool>());
  }
  EXPECT_EQ(j["models"][0]["gpu"], 1);
  EXPECT_EQ(j["measured"]["sla_violations"], 0);
  // The same command prints the same plan and measurement.
  auto again = nlohmann::json::parse(run("plan " + path.string() + " --measure --json").out);
  EXPECT_EQ(again["models"], j["models"]);
  EXPECT_EQ(again["measured"]["utility"], j["measured"]["utility"]);
}

// An infeasible node plan names the models that miss an SLA as predicted. The chat model
// (Qwen2.5-7B at 20 requests/s of 1,024-token prompts and 256-token answers, TTFT <= 1.5 s) has
// at most 8 sequences in flight, so each would have to finish within 8 / 20 = 0.4 s: 256 decode
// steps of 1.56 ms. One decode step reads the weights at least once: 7.6 B parameters at 4 bits
// are about 3.8 GB, 1.9 ms at the A100-80GB's 2.04 TB/s (datasheet). The queue cannot be stable
// on any GPU, so the TTFT grows far past the SLA (excess above 1: more than twice the SLA with
// the twin's 10 % margin); the camera next to it holds.
TEST(Cli, AnInfeasibleNodePlanNamesTheModelsThatMissTheirSla) {
  const auto path = temp_dir() / "node-chat.yaml";
  {
    std::ofstream f(path, std::ios::binary);
    f << "device: a100-80gb\n"
         "gpus: 2\n"
         "models:\n"
         "  - {name: chat, model: qwen2.5-7b, knobs: {precision: [fp16, awq],"
         " request_concurrency: [2, 8]}, demand: {rps: 20, prompt_tokens: 1024,"
         " output_tokens: 256}, sla: {ttft_ms_p95: 1500, tpot_ms_p95: 50}}\n"
         "  - {name: cam, model: yolo11n, knobs: {imgsz: [320, 640]}, demand: {fps: 15},"
         " sla: {latency_ms_p95: 200}}\n";
  }
  const auto r = run("plan " + path.string() + " --json");
  EXPECT_EQ(r.code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["feasible"].get<bool>());
  ASSERT_EQ(j["breaks"].size(), 1u) << j["breaks"].dump();
  const auto& b = j["breaks"][0];
  EXPECT_EQ(b["model"], "chat");
  EXPECT_NEAR(b["margin"].get<double>(), 0.1, 1e-9);
  EXPECT_GT(b["excess"].get<double>(), 1.0);
  const auto text = run("plan " + path.string());
  EXPECT_NE(text.out.find("breaks: chat on gpu"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("breaks: cam"), std::string::npos) << text.out;
  // No node of more GPUs holds a model whose SLA no single GPU holds: the capacity answer says
  // so after trying up to 8.
  ASSERT_TRUE(j.contains("capacity")) << j.dump();
  EXPECT_TRUE(j["capacity"]["gpus_needed"].is_null()) << j["capacity"].dump();
  EXPECT_EQ(j["capacity"]["tried_up_to"], 8);
  EXPECT_NE(text.out.find("capacity: no node of up to 8"), std::string::npos) << text.out;
}

// Three Qwen2.5-7B served in FP16 only: 2 bytes x 7.6 B parameters = 15.2 GB of weights each,
// so no two (30.4 GB) share one RTX 3090's 24 GB (datasheet), while each alone holds a light
// chat SLA. On the two GPUs the workload names the plan is infeasible, and `corun plan` answers
// how many GPUs would hold it: 3, one model each.
TEST(Cli, AnInfeasibleNodePlanSaysHowManyGpusWouldHoldIt) {
  const auto path = temp_dir() / "three-7b.yaml";
  {
    std::ofstream f(path, std::ios::binary);
    f << "device: rtx3090\ngpus: 2\nmodels:\n";
    for (const char* name : {"a", "b", "c"}) {
      f << "  - {name: " << name
        << ", model: qwen2.5-7b, knobs: {precision: [fp16], request_concurrency: [1, 2]},"
           " demand: {rps: 0.5, prompt_tokens: 256, output_tokens: 64},"
           " sla: {ttft_ms_p95: 3000, tpot_ms_p95: 200}}\n";
    }
  }
  const auto r = run("plan " + path.string() + " --solver greedy --json");
  EXPECT_EQ(r.code, 1) << r.err << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["feasible"].get<bool>());
  // The best the two GPUs can do: two of the models, one on each, the third left out.
  std::set<int> gpus;
  for (const auto& m : j["models"]) {
    if (m["gpu"].is_number()) gpus.insert(m["gpu"].get<int>());
  }
  EXPECT_EQ(gpus, (std::set<int>{0, 1})) << j["models"].dump();
  ASSERT_TRUE(j.contains("capacity")) << j.dump();
  const auto& c = j["capacity"];
  EXPECT_EQ(c["gpus_needed"], 3) << c.dump();
  EXPECT_EQ(c["device"], "rtx3090");
  ASSERT_TRUE(c["placement"].is_object()) << c.dump();
  const std::set<std::string> units = {c["placement"]["a"].get<std::string>(),
                                       c["placement"]["b"].get<std::string>(),
                                       c["placement"]["c"].get<std::string>()};
  EXPECT_EQ(units, (std::set<std::string>{"gpu0", "gpu1", "gpu2"}));
  const auto text = run("plan " + path.string() + " --solver greedy");
  EXPECT_NE(text.out.find("capacity: 3 x NVIDIA GeForce RTX 3090"), std::string::npos)
      << text.out;
}

TEST(Cli, NodeWorkloadsAreRefusedByOneGpuVerbsAndMigByServeAndBadPinsNameTheirField) {
  const auto bad = run("plan " + write_node_workload("2").string());
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("models[0].gpu"), std::string::npos) << bad.err;
  const auto node = write_node_workload("0").string();
  const auto state = temp_dir() / "node-serve-state";
  std::filesystem::remove_all(state);
  const auto measured = run("measure " + node);
  EXPECT_EQ(measured.code, 2);
  EXPECT_NE(measured.err.find("node of 2 GPU(s)"), std::string::npos) << measured.err;
  // serve runs a node of whole GPUs (tests/serve: ServeProcess), not MIG slices, and a GPU
  // count that disagrees with the workload's is refused before anything is created.
  const auto mig = run("serve --port 0 --state " + state.string() + " --workload " +
                       std::string(CORUN_SOURCE_DIR) + "/workloads/mig-a100-n5-v3.yaml");
  EXPECT_EQ(mig.code, 2);
  EXPECT_NE(mig.err.find("mig: corun serve runs whole GPUs"), std::string::npos) << mig.err;
  const auto count =
      run("serve --port 0 --gpus 3 --state " + state.string() + " --workload " + node);
  EXPECT_EQ(count.code, 2);
  EXPECT_NE(count.err.find("--gpus says 3 GPU(s), --workload 2"), std::string::npos) << count.err;
  EXPECT_FALSE(std::filesystem::exists(state));  // refused before anything is written
  const auto eval = run("eval node " + node + " --repeats 1 --json");
  ASSERT_EQ(eval.code, 0) << eval.err;
  const auto j = nlohmann::json::parse(eval.out);
  ASSERT_EQ(j["layouts"].size(), 1u);
  EXPECT_EQ(j["layouts"][0]["strategies"].size(), 5u);  // corun and four baselines
}

// corun run on a node: the node plan places the models (c0 pinned to GPU 1), then each GPU
// with models runs online on its own, from its own workload file holding its models and the
// events that concern them or the GPU, with its own dataset and reports.
TEST(Cli, RunOnANodeRunsEachGpuOnlineWithItsOwnModelsAndEvents) {
  const auto path = temp_dir() / "node-run.yaml";
  {
    std::ofstream f(path, std::ios::binary);
    f << "device: a100-80gb\n"
         "gpus: 2\n"
         "models:\n"
         "  - {name: c0, model: yolo11n, knobs: {imgsz: [320, 640]}, demand: {fps: 15},"
         " sla: {latency_ms_p95: 200}, gpu: 1}\n"
         "  - {name: c1, model: yolo11n, knobs: {imgsz: [320, 640]}, demand: {fps: 15},"
         " sla: {latency_ms_p95: 200}}\n"
         "  - {name: c2, model: yolo11s, knobs: {imgsz: [320, 640]}, demand: {fps: 15},"
         " sla: {latency_ms_p95: 200}}\n"
         "profiling: none\n"
         "timeline:\n"
         "  duration_s: 30\n"
         "  events:\n"
         "    - {at_s: 10, demand: {model: c0, fps: 30}}\n"
         "    - {at_s: 20, power_cap_w: 300}\n";
  }
  const auto out = temp_dir() / "node-run";
  std::filesystem::remove_all(out);
  const auto r = run("run " + path.string() + " --quiet --out " + out.string());
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("node: "), std::string::npos) << r.out;
  std::ifstream in(out / "node.json");
  const auto j = nlohmann::json::parse(in);
  std::map<std::string, std::string> unit_of;
  double utility = 0;
  for (const auto& u : j["units"]) {
    for (const auto& m : u["models"]) unit_of[m.get<std::string>()] = u["unit"];
    const std::filesystem::path dir = u["dir"].get<std::string>();
    std::ifstream report(dir / "report.json");
    const auto rj = nlohmann::json::parse(report);
    ASSERT_EQ(rj["intervals"].size(), 3u);
    EXPECT_EQ(rj["intervals"][0]["models"].size(), u["models"].size());
    // The demand change of c0 reaches GPU 1 only; the power cap reaches both (as drift).
    const auto& events = rj["intervals"][1]["events"];
    EXPECT_EQ(events.size(), u["unit"] == "gpu1" ? 1u : 0u) << rj["intervals"][1].dump();
    EXPECT_EQ(rj["intervals"][2]["drift"].size(), 1u);
    utility += u["mean_measured_utility"].get<double>();
  }
  EXPECT_EQ(unit_of.size(), 3u);
  EXPECT_EQ(unit_of["c0"], "gpu1");
  EXPECT_DOUBLE_EQ(j["summary"]["mean_measured_utility"].get<double>(), utility);
  EXPECT_EQ(j["summary"]["sla_violations"], 0);
  const auto given = run("run " + path.string() + " --surrogate x.json");
  EXPECT_EQ(given.code, 2);
  EXPECT_NE(given.err.find("one surrogate per GPU"), std::string::npos) << given.err;
}

// A 2-node x 2-GPU cluster, 6 arrivals. By hand: bin-packing puts each arrival on the fullest
// GPU where its largest configuration fits; the first arrival finds every GPU empty (ties go to
// the lower GPU: node 0 GPU 0), the second finds node 0 GPU 0 the fullest, and any model of the
// mix needs far less than an A100's 80 GB, so it goes there too. Spread puts each arrival on the
// emptiest GPU (ties lower): the first on node 0 GPU 0. (Later ones depend on departures.)
TEST(Cli, EvalClusterBinpackIsHandCheckableAndSameSeedSameJson) {
  const std::string mix = kSrc + "/workloads/cluster/a100-mix.yaml";
  const std::string cmd =
      "eval cluster " + mix + " --nodes 2 --gpus 2 --arrivals 6 --residents 4 --json";
  const auto a = run(cmd);
  ASSERT_EQ(a.code, 0) << a.err;
  const auto j = nlohmann::json::parse(a.out);
  ASSERT_EQ(j["schedulers"].size(), 4u);
  EXPECT_EQ(j["events"], 12);
  const auto& binpack = j["schedulers"][2];
  ASSERT_EQ(binpack["scheduler"], "binpack");
  EXPECT_EQ(binpack["placements"][0], nlohmann::json::array({0, 0}));
  EXPECT_EQ(binpack["placements"][1], nlohmann::json::array({0, 0}));
  const auto& spread = j["schedulers"][3];
  ASSERT_EQ(spread["scheduler"], "spread");
  EXPECT_EQ(spread["placements"][0], nlohmann::json::array({0, 0}));
  // The consolidating rule opens the lowest GPU of the lowest node for the first arrival (no
  // GPU is in use; any model of the mix holds its SLAs alone on an A100 but the chat, which
  // it then refuses).
  const auto& pack = j["schedulers"][1];
  ASSERT_EQ(pack["scheduler"], "corun-pack");
  if (!pack["placements"][0].is_null()) {
    EXPECT_EQ(pack["placements"][0], nlohmann::json::array({0, 0}));
  }
  for (const auto& s : j["schedulers"]) {  // the breakdown by template adds up to the total
    EXPECT_LE(s["utility_held_mean"].get<double>(), s["utility_mean"].get<double>() + 1e-9);
    std::size_t sum = 0;
    for (const auto& [name, count] : s["sla_violations_by_template"].items()) {
      sum += count.get<std::size_t>();
    }
    EXPECT_EQ(sum, s["sla_violations"].get<std::size_t>()) << s["scheduler"];
    std::size_t refused = 0;
    for (const auto& [name, count] : s["rejected_by_template"].items()) {
      refused += count.get<std::size_t>();
    }
    EXPECT_EQ(refused, s["rejected"].get<std::size_t>()) << s["scheduler"];
  }
  const auto b = run(cmd);
  ASSERT_EQ(b.code, 0) << b.err;
  // Everything but the decision times (wall clock) is the same for the same seed.
  auto without_times = [](nlohmann::json out) {
    for (auto& s : out["schedulers"]) {
      EXPECT_GE(s["decision_ms_total"].get<double>(), 0.0);
      s.erase("decision_ms_total");
    }
    return out;
  };
  EXPECT_EQ(without_times(j), without_times(nlohmann::json::parse(b.out)));
}

// A budget of one GPU holds for every scheduler: none ever has models on two GPUs, however the
// arrivals come (6 arrivals with 4 residents on average would spread over several otherwise).
TEST(Cli, EvalClusterGpuBudgetHoldsForEveryScheduler) {
  const std::string mix = kSrc + "/workloads/cluster/a100-mix.yaml";
  const auto r = run("eval cluster " + mix +
                     " --nodes 2 --gpus 2 --arrivals 6 --residents 4 --gpu-budget 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpu_budget"], 1);
  ASSERT_EQ(j["schedulers"].size(), 4u);
  for (const auto& s : j["schedulers"]) {
    EXPECT_LE(s["gpus_used_max"].get<std::size_t>(), 1u) << s["scheduler"];
    if (s["scheduler"] == "corun") continue;  // its node planner chooses the GPU
    // The rules open the lowest GPU of the lowest node (ties), and never a second one.
    for (const auto& at : s["placements"]) {
      if (!at.is_null()) {
        EXPECT_EQ(at, nlohmann::json::array({0, 0})) << s["scheduler"];
      }
    }
  }
  const auto one = run("eval cluster " + mix +
                       " --nodes 2 --gpus 2 --arrivals 6 --residents 4 --schedulers binpack --json");
  ASSERT_EQ(one.code, 0) << one.err;
  const auto k = nlohmann::json::parse(one.out);
  ASSERT_EQ(k["schedulers"].size(), 1u);
  EXPECT_EQ(k["schedulers"][0]["scheduler"], "binpack");
}

TEST(Cli, EvalClusterBadFlagsAndFilesExitWith2) {
  const std::string mix = kSrc + "/workloads/cluster/a100-mix.yaml";
  EXPECT_EQ(run("eval cluster " + mix + " --nodes 0").code, 2);
  EXPECT_EQ(run("eval cluster " + mix + " --arrivals -3").code, 2);
  EXPECT_EQ(run("eval cluster " + mix + " --gpu-budget -1").code, 2);
  const auto unknown = run("eval cluster " + mix + " --schedulers corun,hami");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("--schedulers"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("hami"), std::string::npos) << unknown.err;
  const auto missing = run("eval cluster /nonexistent/mix.yaml");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/mix.yaml"), std::string::npos) << missing.err;
  const auto node = run("eval cluster " + kSrc + "/workloads/node-4gpu-n12.yaml");
  EXPECT_EQ(node.code, 2);
  EXPECT_NE(node.err.find("gpus"), std::string::npos) << node.err;
}

// A custom model on a custom device through a catalog overlay (examples/catalog-overlay, the
// worked example of docs/catalog.md): validate and run take --catalog once; export reads the
// overlay from the run's report.json and says so when it has changed or gone.
TEST(Cli, CatalogOverlayTravelsFromRunToExport) {
  namespace fs = std::filesystem;
  const fs::path dir = temp_dir() / "overlay-flow";
  fs::remove_all(dir);
  const fs::path overlay = dir / "my-catalog";
  fs::create_directories(overlay);
  for (const char* name : {"devices.yaml", "models.yaml"}) {
    fs::copy_file(fs::path(kSrc) / "examples/catalog-overlay" / name, overlay / name);
  }
  const std::string workload = kSrc + "/examples/catalog-overlay/workload.yaml";

  const RunResult builtin = run("validate " + workload);
  EXPECT_EQ(builtin.code, 2) << builtin.err;
  EXPECT_NE(builtin.err.find("qwen2.5-14b"), std::string::npos) << builtin.err;
  const RunResult valid = run("validate " + workload + " --catalog " + overlay.string());
  EXPECT_EQ(valid.code, 0) << valid.err;

  const fs::path out = dir / "run";
  const RunResult ran = run("run " + workload + " --quiet --no-profile --catalog " +
                            overlay.string() + " --out " + out.string());
  ASSERT_TRUE(ran.code == 0 || ran.code == 1) << ran.err;
  std::ifstream in(out / "report.json");
  const nlohmann::json report = nlohmann::json::parse(in);
  ASSERT_TRUE(report.contains("catalog")) << report.dump().substr(0, 400);
  EXPECT_EQ(report["catalog"]["overlay"], overlay.string());
  const std::string hash = report["catalog"]["hash"];
  EXPECT_EQ(hash.size(), 16u);

  // No --catalog: the report's overlay is used, and the custom model's checkpoint exported.
  const std::string report_path = (out / "report.json").string();
  const RunResult exported = run("export " + report_path + " --format vllm");
  EXPECT_EQ(exported.code, 0) << exported.err;
  EXPECT_NE(exported.out.find("Qwen/Qwen2.5-14B-Instruct"), std::string::npos) << exported.out;
  EXPECT_EQ(exported.err.find("warning"), std::string::npos) << exported.err;

  // The overlay edited since the run: a warning naming both hashes, and the export goes on.
  std::ofstream(overlay / "models.yaml", std::ios::app) << "# edited after the run\n";
  const RunResult changed = run("export " + report_path + " --format vllm");
  EXPECT_EQ(changed.code, 0) << changed.err;
  EXPECT_NE(changed.err.find("changed since the plan was written (hash " + hash + ", now "),
            std::string::npos)
      << changed.err;

  // The overlay gone: exit 2, naming the directory and the way out.
  fs::remove_all(overlay);
  const RunResult gone = run("export " + report_path + " --format vllm");
  EXPECT_EQ(gone.code, 2) << gone.err;
  EXPECT_NE(gone.err.find(overlay.string()), std::string::npos) << gone.err;
  EXPECT_NE(gone.err.find("no longer there; give --catalog DIR"), std::string::npos) << gone.err;

  // A bad overlay: exit 2 with the file, the line, the field path and the reason.
  fs::create_directories(overlay);
  std::ofstream(overlay / "devices.yaml") << "devices:\n  l40s:\n    sm_count: lots\n";
  const RunResult bad = run("validate " + workload + " --catalog " + overlay.string());
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find((overlay / "devices.yaml").string() + ":3:"), std::string::npos)
      << bad.err;
  EXPECT_NE(bad.err.find("devices.l40s.sm_count"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace corun::cli_test
