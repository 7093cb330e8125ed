// corun export: the numbers every format derives (checked against hand computations), the
// golden files of each format (written by hand from the upstream formats), the knob table's
// completeness, and clear errors for plans that are malformed or made for another workload.
//
// Upstream references for the golden files under tests/export/golden/:
//  - vLLM engine arguments: docs.vllm.ai/en/v0.8.5/serving/engine_args.html (`vllm serve
//    MODEL`, --served-model-name, --port, --dtype {auto,half,float16,bfloat16,float,float32},
//    --quantization awq, --max-num-seqs, --enable-chunked-prefill, --max-num-batched-tokens,
//    --max-model-len, --gpu-memory-utilization "the fraction of GPU memory to be used for the
//    model executor ... a per-instance limit").
//  - Triton model configuration: model_config.proto in github.com/triton-inference-server/
//    common (ModelConfig: name, platform "tensorrt_plan", backend "python", max_batch_size,
//    default_model_filename, instance_group {count, kind KIND_GPU}, dynamic_batching
//    {max_queue_delay_microseconds}, parameters map<string, ModelParameter {string_value}>),
//    text format as in Triton's docs/user_guide/model_configuration.md.
//  - MPS: docs.nvidia.com/deploy/mps, "Environment Variables": CUDA_MPS_ACTIVE_THREAD_PERCENTAGE,
//    CUDA_MPS_PINNED_DEVICE_MEM_LIMIT ("0=1G" form: device=limit, M or G suffix).
//  - Compose Specification (github.com/compose-spec/compose-spec, spec.md and deploy.md).
// The VRAM-derived numbers in them (--gpu-memory-utilization, the MPS memory limits) come from
// the catalog cost model (model_vram_bytes, tested in its own layer); DeploymentRoundsVram
// below checks how each is rounded from it.
#include "corun/export/export.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "corun/core/atomic_file.h"
#include "corun/export/deployment.h"
#include "corun/export/knob_map.h"
#include "corun/export/plan_input.h"
#include "corun/space/space.h"
#include "../core/temp_dir.h"

namespace corun::exporting::export_test {
namespace {

namespace fs = std::filesystem;
using corun::testing::TempDir;

const fs::path kSource = CORUN_SOURCE_DIR;
const fs::path kGolden = kSource / "tests/export/golden";

std::string read(const fs::path& p) {
  auto t = read_file(p);
  return t ? *t : std::string();
}

ExportOptions test_options() {
  ExportOptions o;
  o.generator = "corun TEST";
  return o;
}

const Catalog& catalog() { return Catalog::default_catalog(); }

// The served plan of tests/export/golden, with the paths its headers print made relative.
PlanInput golden_plan() {
  auto p = parse_plan_input(read(kGolden / "served-plan.json"), "golden/served-plan.json",
                            (kGolden / "workload.yaml").string(), catalog());
  EXPECT_TRUE(p.ok()) << p.error().what();
  PlanInput plan = std::move(p).value();
  plan.workload.file = "golden/workload.yaml";
  return plan;
}

const ModelDeployment& find(const std::vector<ModelDeployment>& ds, const std::string& name) {
  for (const auto& d : ds) {
    if (d.spec->name == name) return d;
  }
  ADD_FAILURE() << "no deployment " << name;
  return ds.front();
}

TEST(Export, FormatsHaveNamesAndSuggestions) {
  EXPECT_EQ(export_format_names(),
            (std::vector<std::string>{"vllm", "triton", "mps", "compose", "k8s"}));
  for (ExportFormat f : export_formats()) EXPECT_EQ(parse_export_format(to_string(f)), f);
  EXPECT_FALSE(parse_export_format("VLLM").has_value());
}

TEST(Export, GoldenPlanResolvesAgainstItsWorkload) {
  const PlanInput plan = golden_plan();
  EXPECT_EQ(plan.kind, PlanKind::kServedPlan);
  EXPECT_EQ(plan.label, "served plan 12 (reason: demand cam)");
  ASSERT_EQ(plan.models.size(), 4u);
  // Workload order, whatever order the served plan listed them in.
  EXPECT_EQ(plan.spec(plan.models[0]).name, "chat");
  EXPECT_EQ(plan.spec(plan.models[3]).name, "asr");
  // The served settings list the knobs alphabetically; the workload numbers them in the order
  // written: precision (awq = 1), request_concurrency (32 = 1), prefill_chunk (16 = 0).
  EXPECT_EQ(plan.models[0].local_index, (1u * 2 + 1) * 2 + 0);
  EXPECT_EQ(plan.models[0].settings.precision, Precision::kAwq);
  EXPECT_EQ(plan.models[1].settings.sm_share, 50);
  // Fixed knobs come from the workload, not the plan.
  EXPECT_EQ(plan.models[2].settings.precision, Precision::kInt8);
  EXPECT_EQ(plan.models[2].settings.request_concurrency, 2);
  EXPECT_EQ(plan.models[3].settings.batch, 2);
}

TEST(Export, DeploymentNumbersMatchHandComputations) {
  const PlanInput plan = golden_plan();
  const auto ds = plan_deployment(plan, test_options());
  ASSERT_EQ(ds.size(), 4u);
  const auto& chat = find(ds, "chat");
  const auto& cam = find(ds, "cam");
  const auto& enc = find(ds, "enc");
  const auto& asr = find(ds, "asr");
  // Ports: base 8000 + position in the plan for vLLM; the Triton models share the one Triton
  // server of the GPU, on the port of the first of them (cam, position 1).
  EXPECT_EQ(chat.port, 8000);
  EXPECT_EQ(cam.port, 8001);
  EXPECT_EQ(enc.port, 8001);
  EXPECT_EQ(asr.port, 8001);
  EXPECT_EQ(chat.server, Server::kVllm);
  EXPECT_EQ(asr.server, Server::kTriton);
  // Gateways: 8000 + 1000 + position.
  EXPECT_EQ(chat.gateway_port, 9000);
  EXPECT_EQ(enc.gateway_port, 9002);
  // Admitted shares as the served plan states them; 1 when it does not.
  EXPECT_EQ(chat.admitted, 0.5);
  EXPECT_EQ(enc.admitted, 0.8);
  EXPECT_EQ(cam.admitted, 1.0);
  // chat: max_prompt_tokens 1792 + max_output_tokens 256 = 2048, a multiple of 256 already.
  EXPECT_EQ(chat.max_model_len, 2048);
  // Its KV cache at that length: 32 sequences x (2048 - 320) more tokens x 12288 bytes a token
  // (Qwen2.5-0.5B: 2 (K and V) x 24 layers x 2 KV heads x 64 dims x 2 bytes, FP16 activations
  // of AWQ) = 679,477,248 bytes above the plan's budget.
  EXPECT_NEAR(chat.kv_bytes_at_max_len - chat.vram_bytes, 679477248.0, 1.0);
  EXPECT_TRUE(chat.warnings.empty());
  // cam: 30 fps, skip 0.33 -> 30 x 0.67 = 20.1 frames/s reach Triton; a batch of 4 fills in
  // 3 / 20.1 s = 0.14925373 s = 149254 us; 1 / 0.67 = 1.49 -> stride 2; sm_share 50 -> 50 %.
  EXPECT_NEAR(cam.input_rate_per_s, 20.1, 1e-9);
  EXPECT_EQ(cam.queue_delay_us, 149254);
  EXPECT_EQ(cam.vid_stride, 2);
  EXPECT_EQ(cam.mps_active_thread_percentage, 50);
  EXPECT_EQ(chat.mps_active_thread_percentage, 100);  // sm_share not searched: 100
  // enc: 50 requests/s, batch 8: 7 / 50 s = 140000 us.
  EXPECT_EQ(enc.queue_delay_us, 140000);
  // asr: 2 requests/s, batch 2: 1 / 2 s = 500000 us.
  EXPECT_EQ(asr.queue_delay_us, 500000);
  EXPECT_EQ(asr.vid_stride, 1);
}

TEST(Export, VidStrideRoundsUp) {
  // Keep 1 frame in ceil(1 / (1 - skip)): never more frames than planned.
  const std::vector<std::pair<double, int>> cases = {
      {0, 1}, {0.2, 2}, {0.33, 2}, {0.5, 2}, {0.6, 3}, {0.75, 4}, {0.8, 5}, {0.9, 10}, {0.95, 20}};
  for (const auto& [skip, stride] : cases) {
    PlanInput plan = golden_plan();
    plan.models[1].settings.skip_rate = skip;
    EXPECT_EQ(plan_deployment(plan, test_options())[1].vid_stride, stride) << skip;
  }
}

TEST(Export, DeploymentRoundsVram) {
  const PlanInput plan = golden_plan();
  const double total = plan.workload.device.vram_bytes();
  const double mib = 1048576.0;
  double fractions = 0;
  double vllm_headroom = 0;
  double triton_bytes = 0;
  for (const auto& d : plan_deployment(plan, test_options())) {
    const double v = model_vram_bytes(*d.spec, d.settings, total);
    EXPECT_DOUBLE_EQ(d.vram_bytes, v);
    if (d.server == Server::kVllm) {
      // Raised to hold the KV cache at --max-model-len (the GPU has room: no warning), rounded
      // up to 0.001; the MPS cap adds the 512 MiB of CUDA graphs and is never below 1 GiB.
      ASSERT_TRUE(d.warnings.empty());
      EXPECT_GE(d.vram_fraction * total, d.kv_bytes_at_max_len - 1e-3);
      EXPECT_LT((d.vram_fraction - 0.001) * total, d.kv_bytes_at_max_len);
      EXPECT_GE(static_cast<double>(d.mps_mem_limit_mib) * mib,
                d.vram_fraction * total + kCudaGraphHeadroomBytes);
      EXPECT_LT(static_cast<double>(d.mps_mem_limit_mib - 1) * mib,
                d.vram_fraction * total + kCudaGraphHeadroomBytes);
      EXPECT_GE(d.mps_mem_limit_mib, kMpsMemoryFloorMib);
      vllm_headroom += kCudaGraphHeadroomBytes;
    } else {
      // Fraction rounded down to 0.001, limit rounded up to MiB.
      EXPECT_LE(d.vram_fraction, v / total + 1e-12);
      EXPECT_GT(d.vram_fraction + 0.001, v / total);
      EXPECT_GE(static_cast<double>(d.mps_mem_limit_mib) * mib, v);
      EXPECT_LT(static_cast<double>(d.mps_mem_limit_mib - 1) * mib, v);
      triton_bytes += static_cast<double>(d.mps_mem_limit_mib) * mib;
    }
    EXPECT_NEAR(d.vram_fraction * 1000, std::round(d.vram_fraction * 1000), 1e-9);
    if (d.server == Server::kVllm) fractions += d.vram_fraction;
  }
  // What the servers may use still fits the GPU: vLLM's fractions and graph headroom, and the
  // Triton server's limit.
  EXPECT_LE(fractions * total + vllm_headroom + triton_bytes, total);
}

TEST(Export, MpsLimitsAboveTheGpuAreAWarning) {
  // The golden plan's budgets (about 2.97 GB) on a 3 GB GPU: the 1 GiB floor of the vLLM
  // process and its 512 MiB of CUDA graphs push the limits past the GPU's memory.
  PlanInput plan = golden_plan();
  plan.workload.device.vram_gb = 3.0;
  for (ExportFormat f : {ExportFormat::kMps, ExportFormat::kCompose}) {
    auto files = render_export(plan, f, test_options());
    ASSERT_TRUE(files.ok());
    EXPECT_NE(files->front().content.find("# WARNING: the MPS memory limits add up to"),
              std::string::npos)
        << to_string(f);
  }
  // The golden plan on its 24 GiB RTX 3090: no such warning.
  auto files = render_export(golden_plan(), ExportFormat::kCompose, test_options());
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->front().content.find("WARNING"), std::string::npos);
}

TEST(Export, MaxModelLenDefaultsToAMultipleOfTheMeanRoundedTo256) {
  // Without maxima: 4 x (300 + 50) = 1400 tokens, rounded up to 6 x 256 = 1536.
  PlanInput plan = golden_plan();
  Demand& demand = plan.workload.models[0].demand;
  demand.prompt_tokens = 300;
  demand.output_tokens = 50;
  demand.max_prompt_tokens = 0;
  demand.max_output_tokens = 0;
  EXPECT_EQ(plan_deployment(plan, test_options())[0].max_model_len, 1536);
  // Only the prompt's maximum: 1000 + 4 x 50 = 1200 -> 1280.
  demand.max_prompt_tokens = 1000;
  EXPECT_EQ(plan_deployment(plan, test_options())[0].max_model_len, 1280);
  // Both: 1000 + 50 = 1050 -> 1280; exactly 1024 + 512 stays 1536.
  demand.max_output_tokens = 50;
  EXPECT_EQ(plan_deployment(plan, test_options())[0].max_model_len, 1280);
  demand.max_prompt_tokens = 1024;
  demand.max_output_tokens = 512;
  EXPECT_EQ(plan_deployment(plan, test_options())[0].max_model_len, 1536);
  // A context event that raised the mean prompt past its maximum: the mean bounds it,
  // 2000 + 512 = 2512 -> 2560.
  demand.prompt_tokens = 2000;
  EXPECT_EQ(plan_deployment(plan, test_options())[0].max_model_len, 2560);
  demand.prompt_tokens = 300;
  auto files = render_export(plan, ExportFormat::kVllm, test_options());
  ASSERT_TRUE(files.ok());
  EXPECT_NE(files->front().content.find("--max-model-len 1536"), std::string::npos);
}

TEST(Export, AKvCacheTheGpuCannotHoldIsAWarning) {
  PlanInput plan = golden_plan();
  Demand& demand = plan.workload.models[0].demand;
  // 200,000 + 1,000 -> 201,216 tokens (786 x 256): 32 such sequences need 79 GB of KV cache.
  demand.max_prompt_tokens = 200000;
  demand.max_output_tokens = 1000;
  const auto ds = plan_deployment(plan, test_options());
  const ModelDeployment& chat = ds[0];
  EXPECT_EQ(chat.max_model_len, 201216);
  ASSERT_EQ(chat.warnings.size(), 1u);
  // 24.x GB free for it hold 9 sequences of 201216 x 12288 bytes (2.47 GB each).
  EXPECT_NE(chat.warnings[0].find("holds 9 full-length sequences"), std::string::npos)
      << chat.warnings[0];
  // It takes the memory nobody budgets, and no more: the servers still fit the GPU.
  const double total = plan.workload.device.vram_bytes();
  double used = chat.vram_fraction * total + kCudaGraphHeadroomBytes;
  for (std::size_t i = 1; i < ds.size(); ++i) used += ds[i].vram_bytes;
  EXPECT_LE(used, total);
  EXPECT_GT(used, total - 0.001 * total - 1);
  auto files = render_export(plan, ExportFormat::kVllm, test_options());
  ASSERT_TRUE(files.ok());
  EXPECT_NE(files->front().content.find("# WARNING: the KV cache of 32 sequences"),
            std::string::npos);
  // Not even one sequence fits: vLLM would not start, and the warning says so.
  demand.max_prompt_tokens = 1 << 20;
  demand.max_output_tokens = 1 << 20;
  const auto none = plan_deployment(plan, test_options());
  ASSERT_EQ(none[0].warnings.size(), 1u);
  EXPECT_NE(none[0].warnings[0].find("refuse to start"), std::string::npos) << none[0].warnings[0];
}

// A plan that runs an LLM KV-limited (space.h: its concurrency's cache does not fit beside the
// weights, so the engine takes 0.9 of the GPU): the warning counts the sequences the cache it
// does have holds. Llama-2-7B keeps 2 x 32 layers x 4,096 x 2 bytes = 524,288 bytes of KV a
// token, so a 1,280-token sequence takes 671 MB; 32 of them (21.5 GB) beside 13.5 GB of
// weights do not fit the RTX 3090's 25.77 GB.
TEST(Export, AKvLimitedBudgetCountsTheSequencesItsCacheHolds) {
  PlanInput plan = golden_plan();
  ASSERT_EQ(plan.spec(plan.models[0]).name, "chat");
  plan.models.resize(1);
  ModelSpec& chat = plan.workload.models[plan.models[0].model];
  chat.arch = *catalog().find_model("llama-2-7b");
  chat.demand.prompt_tokens = chat.demand.max_prompt_tokens = 1024;
  chat.demand.output_tokens = chat.demand.max_output_tokens = 256;
  plan.models[0].settings.precision = Precision::kFp16;
  plan.models[0].settings.request_concurrency = 32;
  const double total = plan.workload.device.vram_bytes();
  const ModelDeployment d = plan_deployment(plan, test_options())[0];
  EXPECT_EQ(d.max_model_len, 1280);
  EXPECT_NEAR(d.vram_bytes, 0.9 * total, 1.0);
  ASSERT_EQ(d.warnings.size(), 1u);
  const std::string& w = d.warnings[0];
  const auto at = w.find("which holds ");
  ASSERT_NE(at, std::string::npos) << w;
  const int fits = std::stoi(w.substr(at + 12));
  // At least what its budget's cache holds, at most that plus the GPU's 10 % it leaves.
  const double sequence = 1280.0 * 524288;
  const double cache = llm_kv_cache_bytes(chat, plan.models[0].settings, total);
  EXPECT_GE(fits, static_cast<int>(cache / sequence)) << w;
  EXPECT_LE(fits, static_cast<int>((cache + 0.1 * total) / sequence)) << w;
  EXPECT_LT(fits, 32) << w;
}

// Lines that are not comments: what a server reads.
std::string strip_comments(const std::string& text) {
  std::istringstream in(text);
  std::string out, line;
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(' ');
    if (first != std::string::npos && line[first] == '#') continue;
    out += line + "\n";
  }
  return out;
}

std::string concat(const std::vector<ExportFile>& files) {
  std::string out;
  for (const auto& f : files) out += "==> " + f.path + "\n" + f.content;
  return out;
}

TEST(Export, GoldenFiles) {
  const PlanInput plan = golden_plan();
  const std::vector<std::pair<ExportFormat, std::vector<std::string>>> expected = {
      {ExportFormat::kVllm, {"vllm.sh", "admission.conf"}},
      {ExportFormat::kTriton,
       {"cam/config.pbtxt", "enc/config.pbtxt", "asr/config.pbtxt", "asr/1/model.py",
        "build_engine.sh", "admission.conf"}},
      {ExportFormat::kMps, {"chat.env", "triton.env"}},
      {ExportFormat::kCompose,
       {"docker-compose.yaml", "triton/cam/config.pbtxt", "triton/enc/config.pbtxt",
        "triton/asr/config.pbtxt", "triton/asr/1/model.py", "triton/build_engine.sh",
        "admission.conf"}},
      {ExportFormat::kK8s,
       {"kubernetes.yaml", "triton/cam/config.pbtxt", "triton/enc/config.pbtxt",
        "triton/asr/config.pbtxt", "triton/asr/1/model.py", "triton/build_engine.sh"}},
  };
  for (const auto& [format, paths] : expected) {
    SCOPED_TRACE(std::string(to_string(format)));
    auto files = render_export(plan, format, test_options());
    ASSERT_TRUE(files.ok()) << files.error().what();
    std::vector<std::string> got;
    for (const auto& f : *files) got.push_back(f.path);
    EXPECT_EQ(got, paths);
    for (const auto& f : *files) {
      // compose mounts the Triton repository: the same configurations as --format triton.
      std::string golden = f.path;
      if (golden.rfind("triton/", 0) == 0)
        golden = "triton/" + golden.substr(7);
      else
        golden = std::string(to_string(format)) + "/" + golden;
      // CORUN_UPDATE_GOLDEN=1 rewrites the golden files: review every changed line (git diff).
      if (std::getenv("CORUN_UPDATE_GOLDEN") != nullptr) {
        fs::create_directories((kGolden / golden).parent_path());
        std::ofstream(kGolden / golden, std::ios::binary) << f.content;
      }
      EXPECT_EQ(f.content, read(kGolden / golden)) << "golden " << golden;
    }
  }
}

TEST(Export, ComposeRunsOneTritonPerGpuWithHealthchecksAndMpsFloors) {
  const PlanInput plan = golden_plan();
  auto files = render_export(plan, ExportFormat::kCompose, test_options());
  ASSERT_TRUE(files.ok());
  const YAML::Node doc = YAML::Load(files->front().content);
  const YAML::Node services = doc["services"];
  ASSERT_TRUE(services.IsMap());
  // mps-control, the one LLM's vLLM, one Triton for cam, enc and asr, the admission gateway.
  std::set<std::string> names;
  for (const auto& s : services) names.insert(s.first.as<std::string>());
  EXPECT_EQ(names, (std::set<std::string>{"mps-control", "chat", "triton", "gateway"}));
  int tritons = 0;
  for (const auto& s : services) {
    const std::string name = s.first.as<std::string>();
    const YAML::Node svc = s.second;
    // Every service has a healthcheck, and the GPU servers wait for a healthy MPS daemon.
    ASSERT_TRUE(svc["healthcheck"].IsMap()) << name;
    EXPECT_EQ(svc["healthcheck"]["test"][0].as<std::string>(), "CMD-SHELL") << name;
    if (svc["image"].as<std::string>().find("tritonserver") != std::string::npos) ++tritons;
    if (!svc["environment"] || !svc["environment"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"]) continue;
    EXPECT_EQ(svc["depends_on"]["mps-control"]["condition"].as<std::string>(), "service_healthy");
    // "0=NM" with N at least the 1 GiB floor of a process with a CUDA context and TensorRT.
    const std::string limit =
        svc["environment"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"].as<std::string>();
    ASSERT_EQ(limit.rfind("0=", 0), 0u) << limit;
    EXPECT_GE(std::stoll(limit.substr(2)), kMpsMemoryFloorMib) << name;
  }
  EXPECT_EQ(tritons, 1);
  EXPECT_NE(services["chat"]["healthcheck"]["test"][1].as<std::string>().find(
                "http://localhost:8000/health"),
            std::string::npos);
  EXPECT_NE(services["triton"]["healthcheck"]["test"][1].as<std::string>().find(
                "http://localhost:8000/v2/health/ready"),
            std::string::npos);
  const auto ds = plan_deployment(plan, test_options());
  const TritonServer triton = triton_server(ds);
  // One Triton: its limit is the sum of the three models' budgets, its SM share the sum of
  // theirs (cam 50 + enc 100 + asr 100, at most 100).
  EXPECT_EQ(
      services["triton"]["environment"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"].as<std::string>(),
      "0=" +
          std::to_string(find(ds, "cam").mps_mem_limit_mib + find(ds, "enc").mps_mem_limit_mib +
                         find(ds, "asr").mps_mem_limit_mib) +
          "M");
  EXPECT_EQ(triton.mps_active_thread_percentage, 100);
  std::vector<std::string> cmd;
  for (const auto& a : services["triton"]["command"]) cmd.push_back(a.as<std::string>());
  for (const char* m : {"--load-model=cam", "--load-model=enc", "--load-model=asr"}) {
    EXPECT_NE(std::find(cmd.begin(), cmd.end(), m), cmd.end()) << m;
  }
  EXPECT_EQ(services["triton"]["ports"][0].as<std::string>(), "8001:8000");
  std::vector<std::string> chat;
  for (const auto& a : services["chat"]["command"]) chat.push_back(a.as<std::string>());
  EXPECT_EQ(chat.front(), "--model=Qwen/Qwen2.5-0.5B-Instruct-AWQ");
  EXPECT_NE(std::find(chat.begin(), chat.end(), "--max-num-seqs=32"), chat.end());
  EXPECT_NE(std::find(chat.begin(), chat.end(), "--max-model-len=2048"), chat.end());
  // The gateway publishes the admitted models' gateway ports.
  EXPECT_EQ(services["gateway"]["ports"][0].as<std::string>(), "9000:9000");
  EXPECT_EQ(services["gateway"]["ports"][1].as<std::string>(), "9002:9002");
}

// --format k8s: the servers of --format compose as Deployments sharing one GPU through one
// DRA claim, each pod with compose's arguments and MPS environment, the LLM's pod annotated
// with its workload entry (what corun serve --kube-node registers).
TEST(Export, K8sSharesOneClaimAndCarriesTheComposeServers) {
  const PlanInput plan = golden_plan();
  auto k8s = render_export(plan, ExportFormat::kK8s, test_options());
  ASSERT_TRUE(k8s.ok()) << k8s.error().what();
  auto compose = render_export(plan, ExportFormat::kCompose, test_options());
  ASSERT_TRUE(compose.ok());
  const YAML::Node services = YAML::Load(compose->front().content)["services"];
  std::map<std::string, YAML::Node> deployments, svcs;
  std::vector<YAML::Node> claims;
  for (const auto& doc : YAML::LoadAll(k8s->front().content)) {
    if (!doc.IsMap()) continue;
    const std::string kind = doc["kind"].as<std::string>();
    const std::string name = doc["metadata"]["name"].as<std::string>();
    if (kind == "Deployment") deployments[name] = doc;
    if (kind == "Service") svcs[name] = doc;
    if (kind == "ResourceClaim") claims.push_back(doc);
  }
  ASSERT_EQ(claims.size(), 1U);
  const std::string claim = claims[0]["metadata"]["name"].as<std::string>();
  const YAML::Node opaque = claims[0]["spec"]["devices"]["config"][0]["opaque"];
  EXPECT_EQ(opaque["driver"].as<std::string>(), "gpu.nvidia.com");
  EXPECT_EQ(opaque["parameters"]["sharing"]["strategy"].as<std::string>(), "MPS");
  ASSERT_EQ(deployments.size(), 2U);
  const std::map<std::string, std::string> compose_of = {{"chat", "chat"},
                                                         {"corun-triton", "triton"}};
  for (const auto& [name, d] : deployments) {
    SCOPED_TRACE(name);
    ASSERT_EQ(compose_of.count(name), 1U);
    const YAML::Node svc = services[compose_of.at(name)];
    const YAML::Node pod = d["spec"]["template"]["spec"];
    EXPECT_EQ(pod["resourceClaims"][0]["resourceClaimName"].as<std::string>(), claim);
    const YAML::Node c = pod["containers"][0];
    EXPECT_EQ(c["resources"]["claims"][0]["name"].as<std::string>(),
              pod["resourceClaims"][0]["name"].as<std::string>());
    // The same process as compose's service: its arguments (or command) and MPS limits.
    const YAML::Node args = c["args"] ? c["args"] : c["command"];
    ASSERT_EQ(args.size(), svc["command"].size());
    for (std::size_t i = 0; i < args.size(); ++i) {
      EXPECT_EQ(args[i].as<std::string>(), svc["command"][i].as<std::string>());
    }
    for (const auto& e : c["env"]) {
      const std::string var = e["name"].as<std::string>();
      EXPECT_EQ(e["value"].as<std::string>(), svc["environment"][var].as<std::string>()) << var;
    }
    EXPECT_EQ(c["env"].size(), 2U);
    // Its Service selects it, on the port the container names http.
    EXPECT_EQ(svcs[name]["spec"]["selector"]["app.kubernetes.io/name"].as<std::string>(),
              d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"]
                  .as<std::string>());
    EXPECT_EQ(c["ports"][0]["name"].as<std::string>(), "http");
    EXPECT_EQ(d["spec"]["strategy"]["type"].as<std::string>(), "Recreate");
  }
  // The LLM's pod carries its workload entry, as written in the workload file.
  const std::string note = deployments["chat"]["spec"]["template"]["metadata"]["annotations"]
                                      [kModelAnnotation]
                                          .as<std::string>();
  const auto entry = nlohmann::json::parse(note);
  EXPECT_EQ(entry["name"], "chat");
  EXPECT_EQ(entry["model"], plan.workload.models[plan.models[0].model].arch.name) << note;
  EXPECT_TRUE(entry.contains("sla")) << note;
  // Admission shares have no gateway here: said, not dropped silently.
  EXPECT_NE(k8s->front().content.find("no admission gateway is written for Kubernetes"),
            std::string::npos);
}

TEST(Export, AdmissionSharesBecomeNginxRateLimits) {
  PlanInput plan = golden_plan();
  auto files = render_export(plan, ExportFormat::kCompose, test_options());
  ASSERT_TRUE(files.ok());
  const std::string conf = files->back().content;
  ASSERT_EQ(files->back().path, "admission.conf");
  // chat: 0.5 x 1 request/s = 30 requests a minute; enc: 0.8 x 50 = 40/s = 2400 a minute.
  EXPECT_NE(conf.find("zone=corun_chat:1m rate=30r/m;"), std::string::npos) << conf;
  EXPECT_NE(conf.find("zone=corun_enc:1m rate=2400r/m;"), std::string::npos) << conf;
  EXPECT_NE(conf.find("limit_req zone=corun_chat burst=32 nodelay;"), std::string::npos);
  EXPECT_NE(conf.find("proxy_pass http://chat:8000;"), std::string::npos);
  EXPECT_NE(conf.find("location /v2/models/enc/ {"), std::string::npos);
  EXPECT_NE(conf.find("proxy_pass http://triton:8000;"), std::string::npos);
  EXPECT_EQ(conf.find("corun_cam"), std::string::npos);  // admitted in full: no limit
  // A paused model (admitted 0) is refused outright.
  plan.models[0].admitted = 0;
  auto paused = render_export(plan, ExportFormat::kVllm, test_options());
  ASSERT_TRUE(paused.ok());
  ASSERT_EQ(paused->back().path, "admission.conf");
  EXPECT_NE(paused->back().content.find("return 503;"), std::string::npos);
  EXPECT_EQ(paused->back().content.find("corun_chat"), std::string::npos);
  // Everything admitted: no gateway.
  for (auto& m : plan.models) m.admitted = 1;
  auto none = render_export(plan, ExportFormat::kCompose, test_options());
  ASSERT_TRUE(none.ok());
  for (const auto& f : *none) EXPECT_NE(f.path, "admission.conf");
  EXPECT_EQ(none->front().content.find("gateway:"), std::string::npos);
}

// The flag names of `vllm serve` in vLLM v0.8.5, the version the compose file pins
// (vllm/vllm-openai:v0.8.5): the engine arguments of vllm/engine/arg_utils.py
// (EngineArgs.add_cli_args), as listed at https://docs.vllm.ai/en/v0.8.5/serving/engine_args.html,
// and the OpenAI server's own arguments of vllm/entrypoints/openai/cli_args.py (--host, --port,
// ...). Only the names are copied, not the help texts or the code. Cross-checked against the
// server-argument list of Red Hat AI Inference Server 3.0 (a vLLM 0.8 build). A flag vLLM
// renames or drops fails this test once the list is updated for a newer pinned image.
const std::set<std::string>& vllm_v085_flags() {
  static const std::set<std::string> flags = {
      // vllm/entrypoints/openai/cli_args.py (make_arg_parser)
      "--host", "--port", "--uvicorn-log-level", "--disable-uvicorn-access-log",
      "--allow-credentials", "--allowed-origins", "--allowed-methods", "--allowed-headers",
      "--api-key", "--lora-modules", "--prompt-adapters", "--chat-template",
      "--chat-template-content-format", "--response-role", "--ssl-keyfile", "--ssl-certfile",
      "--ssl-ca-certs", "--enable-ssl-refresh", "--ssl-cert-reqs", "--root-path", "--middleware",
      "--return-tokens-as-token-ids", "--disable-frontend-multiprocessing",
      "--enable-request-id-headers", "--enable-auto-tool-choice", "--tool-call-parser",
      "--tool-parser-plugin", "--disable-fastapi-docs", "--enable-prompt-tokens-details",
      "--enable-server-load-tracking",
      // vllm/engine/arg_utils.py (EngineArgs.add_cli_args)
      "--model", "--task", "--tokenizer", "--hf-config-path", "--skip-tokenizer-init", "--revision",
      "--code-revision", "--tokenizer-revision", "--tokenizer-mode", "--trust-remote-code",
      "--allowed-local-media-path", "--load-format", "--download-dir",
      "--model-loader-extra-config", "--use-tqdm-on-load", "--config-format", "--dtype",
      "--max-model-len", "--guided-decoding-backend", "--reasoning-parser",
      "--logits-processor-pattern", "--model-impl", "--distributed-executor-backend",
      "--pipeline-parallel-size", "--tensor-parallel-size", "--data-parallel-size",
      "--enable-expert-parallel", "--max-parallel-loading-workers", "--ray-workers-use-nsight",
      "--disable-custom-all-reduce", "--block-size", "--gpu-memory-utilization", "--swap-space",
      "--kv-cache-dtype", "--num-gpu-blocks-override", "--enable-prefix-caching",
      "--prefix-caching-hash-algo", "--cpu-offload-gb", "--calculate-kv-scales",
      "--disable-sliding-window", "--use-v2-block-manager", "--seed", "--max-logprobs",
      "--disable-log-stats", "--quantization", "--rope-scaling", "--rope-theta", "--hf-token",
      "--hf-overrides", "--enforce-eager", "--max-seq-len-to-capture", "--tokenizer-pool-size",
      "--tokenizer-pool-type", "--tokenizer-pool-extra-config", "--limit-mm-per-prompt",
      "--mm-processor-kwargs", "--disable-mm-preprocessor-cache", "--enable-lora",
      "--enable-lora-bias", "--max-loras", "--max-lora-rank", "--lora-extra-vocab-size",
      "--lora-dtype", "--long-lora-scaling-factors", "--max-cpu-loras", "--fully-sharded-loras",
      "--enable-prompt-adapter", "--max-prompt-adapters", "--max-prompt-adapter-token", "--device",
      "--speculative-config", "--ignore-patterns", "--served-model-name",
      "--qlora-adapter-name-or-path", "--show-hidden-metrics-for-version", "--otlp-traces-endpoint",
      "--collect-detailed-traces", "--disable-async-output-proc", "--max-num-batched-tokens",
      "--max-num-seqs", "--max-num-partial-prefills", "--max-long-partial-prefills",
      "--long-prefill-token-threshold", "--num-lookahead-slots", "--scheduler-delay-factor",
      "--preemption-mode", "--num-scheduler-steps", "--multi-step-stream-outputs",
      "--scheduling-policy", "--enable-chunked-prefill", "--disable-chunked-mm-input",
      "--scheduler-cls", "--override-neuron-config", "--override-pooler-config",
      "--compilation-config", "--kv-transfer-config", "--worker-cls", "--worker-extension-cls",
      "--generation-config", "--override-generation-config", "--enable-sleep-mode",
      "--additional-config", "--enable-reasoning", "--disable-cascade-attn",
      "--disable-log-requests", "--max-log-len"};
  return flags;
}

// Triton's model repository layout (github.com/triton-inference-server/server,
// docs/user_guide/model_repository.md, "Repository Layout"): <repository>/<model>/config.pbtxt
// beside numeric version directories <model>/<version>/, each holding the model file under its
// backend's default name ("TensorRT Models": model.plan; "ONNX Models": model.onnx; "Python
// Models": model.py).
const std::map<std::string, std::string>& triton_default_model_file() {
  static const std::map<std::string, std::string> names = {
      {"tensorrt_plan", "model.plan"}, {"onnxruntime_onnx", "model.onnx"}, {"python", "model.py"}};
  return names;
}

TEST(Export, TheTritonRepositoryHasTheLayoutTritonRequires) {
  TempDir dir;
  const fs::path repo = dir.path() / "repo";
  ExportRequest request;
  request.plan_file = (kGolden / "served-plan.json").string();
  request.workload_file = (kGolden / "workload.yaml").string();
  request.format = "triton";
  request.out_dir = repo.string();
  auto r = run_export(request, catalog(), test_options());
  ASSERT_TRUE(r.ok()) << r.error().what();
  const std::string script = read(repo / "build_engine.sh");
  int models = 0;
  for (const auto& entry : fs::directory_iterator(repo)) {
    if (!entry.is_directory()) continue;
    const std::string model = entry.path().filename().string();
    SCOPED_TRACE(model);
    ++models;
    const std::string config = read(entry.path() / "config.pbtxt");
    ASSERT_FALSE(config.empty()) << "no " << model << "/config.pbtxt";
    EXPECT_NE(config.find("name: \"" + model + "\""), std::string::npos);
    // The backend decides the file name in the version directory.
    std::string backend;
    if (config.find("platform: \"tensorrt_plan\"") != std::string::npos) backend = "tensorrt_plan";
    if (config.find("backend: \"python\"") != std::string::npos) backend = "python";
    ASSERT_TRUE(triton_default_model_file().count(backend)) << config;
    const std::string file = triton_default_model_file().at(backend);
    // A default name needs no default_model_filename.
    EXPECT_EQ(config.find("default_model_filename"), std::string::npos);
    // Nothing beside config.pbtxt but numeric version directories.
    for (const auto& e : fs::directory_iterator(entry.path())) {
      const std::string name = e.path().filename().string();
      if (name == "config.pbtxt") continue;
      ASSERT_TRUE(e.is_directory()) << name;
      EXPECT_EQ(name.find_first_not_of("0123456789"), std::string::npos) << name;
    }
    if (backend == "python") {
      // corun writes the Python model (a template), in version 1.
      const std::string py = read(entry.path() / "1" / file);
      ASSERT_FALSE(py.empty());
      for (const char* part : {"class TritonPythonModel:", "def initialize(self, args):",
                               "def execute(self, requests):", "def finalize(self):", "TEMPLATE",
                               "FILL IN", "raise NotImplementedError"}) {
        EXPECT_NE(py.find(part), std::string::npos) << part;
      }
      // Its tensors are declared in the configuration (no engine to complete them from).
      EXPECT_NE(config.find("input ["), std::string::npos);
      EXPECT_NE(config.find("output ["), std::string::npos);
    } else {
      // The engine is built into version 1 under the default name, by build_engine.sh.
      EXPECT_NE(script.find("--saveEngine=\"$REPO/" + model + "/1/" + file + "\""),
                std::string::npos);
    }
  }
  EXPECT_EQ(models, 3);
  // The script is valid POSIX shell (parsed, not run: it needs TensorRT).
  EXPECT_EQ(std::system(("sh -n " + (repo / "build_engine.sh").string()).c_str()), 0);
  // The script builds from ONNX with trtexec and an optimisation profile; not Ultralytics'
  // format=engine, whose metadata header the tensorrt_plan backend cannot read.
  EXPECT_EQ(strip_comments(script).find("format=engine"), std::string::npos);
  EXPECT_NE(script.find("yolo export model=yolo11n.pt format=onnx imgsz=640 dynamic=True"),
            std::string::npos);
  EXPECT_NE(script.find("--minShapes=\"images:1x3x640x640\""), std::string::npos);
  EXPECT_NE(script.find("--optShapes=\"images:4x3x640x640\""), std::string::npos);
  EXPECT_NE(script.find("--maxShapes=\"images:4x3x640x640\""), std::string::npos);
}

// Several camera streams of one model are one Triton model: one configuration that names the
// streams, its queue delay at their total rate ((4 - 1) / 90 s = 33,333 us for batch 4 at 90
// fps).
TEST(Export, StreamsOfOneModelAreOneTritonModel) {
  auto w = parse_workload(
      "device: l4\nmodels:\n  - name: cams\n    model: yolo11s\n    streams: [gate, dock, lot]\n"
      "    knobs: {batch: [4]}\n    demand: {fps: 90}\n    sla: {latency_ms_p95: 200}\n",
      "streams.yaml", catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  PlanInput plan;
  plan.plan_file = "plan.json";
  plan.label = "test";
  plan.workload = *w;
  plan.models.push_back({0, 0, w->models[0].settings(0), 1.0});
  auto files = render_export(plan, ExportFormat::kTriton, test_options());
  ASSERT_TRUE(files.ok()) << files.error().what();
  std::vector<std::string> configs;
  for (const auto& f : *files) {
    if (f.path.find("config.pbtxt") != std::string::npos) configs.push_back(f.content);
  }
  ASSERT_EQ(configs.size(), 1U);
  EXPECT_NE(configs[0].find("key: \"streams\"\n  value: { string_value: \"gate,dock,lot\" }"),
            std::string::npos)
      << configs[0];
  EXPECT_NE(configs[0].find("max_queue_delay_microseconds: 33333"), std::string::npos)
      << configs[0];
}

TEST(Export, EveryVllmFlagCorunWritesIsAnUpstreamFlag) {
  // Every precision vLLM can load and both ends of every knob: the flags of all of them.
  PlanInput plan = golden_plan();
  std::set<std::string> written;
  for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16, Precision::kAwq}) {
    for (int seqs : {1, 256}) {
      plan.models[0].settings.precision = p;
      plan.models[0].settings.request_concurrency = seqs;
      auto files = render_export(plan, ExportFormat::kVllm, test_options());
      if (!files.ok()) continue;  // no checkpoint of that precision in the catalog
      std::istringstream words(strip_comments(files->front().content));
      std::string w;
      while (words >> w) {
        if (w.rfind("--", 0) == 0) written.insert(w);
      }
    }
  }
  // And the compose file's form, --flag=value.
  auto compose = render_export(golden_plan(), ExportFormat::kCompose, test_options());
  ASSERT_TRUE(compose.ok());
  const YAML::Node chat = YAML::Load(compose->front().content)["services"]["chat"]["command"];
  for (const auto& a : chat) {
    const std::string arg = a.as<std::string>();
    written.insert(arg.substr(0, arg.find('=')));
  }
  EXPECT_GE(written.size(), 9u);
  for (const auto& flag : written) {
    EXPECT_TRUE(vllm_v085_flags().count(flag)) << flag << " is not a vllm serve flag of v0.8.5";
  }
}

// A workload where every knob is searched for every family that has it, and where each knob
// changes the model's VRAM when it should (a 2048-token prompt makes the prefill chunk matter).
// The Triton models' SM shares add up to less than 100: their one Triton process gets the sum,
// so each model's share still shows.
constexpr const char* kAllKnobs = R"(device: rtx3090
models:
  - name: llm
    model: qwen2.5-0.5b
    knobs: {precision: [fp16, awq], request_concurrency: [2, 8], prefill_chunk: [256, 1024],
            sm_share: [50, 100]}
    demand: {rps: 1, prompt_tokens: 2048, output_tokens: 64}
  - name: cam
    model: yolo11s
    knobs: {precision: [fp16, int8], batch: [1, 4], sm_share: [20, 30], imgsz: [320, 640],
            skip_rate: [0, 0.5]}
    demand: {fps: 30}
  - name: enc
    model: bert-base
    knobs: {precision: [fp16, int8], batch: [1, 4], sm_share: [20, 30],
            request_concurrency: [1, 4]}
    demand: {rps: 20}
  - name: asr
    model: whisper-small
    knobs: {precision: [fp32, fp16], batch: [1, 2], sm_share: [20, 30],
            request_concurrency: [1, 2]}
    demand: {rps: 2}
)";

bool serves(ExportFormat f, ModelFamily fam) {
  switch (f) {
    case ExportFormat::kVllm:
      return fam == ModelFamily::kLlm;
    case ExportFormat::kTriton:
      return fam != ModelFamily::kLlm;
    case ExportFormat::kMps:
    case ExportFormat::kCompose:
    case ExportFormat::kK8s:
      return true;
  }
  return false;
}

TEST(Export, EveryKnobIsExportedOrDeclaredNotApplicable) {
  // One entry per (format, knob) of the vocabulary: a knob added to spec/knobs.cc fails here
  // until the table says where it goes in each format.
  for (ExportFormat f : export_formats()) {
    for (const KnobDecl& k : knob_decls()) {
      const auto n =
          std::count_if(knob_exports().begin(), knob_exports().end(),
                        [&](const KnobExport& e) { return e.format == f && e.knob == k.id; });
      EXPECT_EQ(n, 1) << to_string(f) << " " << k.name;
    }
  }
  EXPECT_EQ(knob_exports().size(), export_formats().size() * knob_decls().size());
  for (const auto& e : knob_exports()) EXPECT_FALSE(e.note.empty()) << knob_decl(e.knob).name;
}

TEST(Export, TheKnobTableTellsTheTruth) {
  // For each entry and each family the format serves and the knob applies to: changing only
  // that knob changes what the servers read (comments aside) exactly when the table says the
  // knob is exported.
  auto w = parse_workload(kAllKnobs, "all-knobs.yaml", catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  PlanInput base;
  base.plan_file = "plan.json";
  base.label = "test";
  base.workload = *w;
  for (std::size_t m = 0; m < w->models.size(); ++m) {
    base.models.push_back({m, 0, w->models[m].settings(0), 1.0});
  }
  for (const auto& e : knob_exports()) {
    const KnobDecl& decl = knob_decl(e.knob);
    int checked = 0;
    for (std::size_t m = 0; m < w->models.size(); ++m) {
      const ModelSpec& spec = w->models[m];
      if (!serves(e.format, spec.arch.family)) continue;
      if (std::find(decl.families.begin(), decl.families.end(), spec.arch.family) ==
          decl.families.end()) {
        continue;
      }
      // The local configuration that differs from 0 only in this knob (its second value).
      std::size_t stride = 1;
      std::size_t pos = spec.knobs.size();
      for (std::size_t k = spec.knobs.size(); k-- > 0;) {
        if (spec.knobs[k].id == e.knob) {
          pos = k;
          break;
        }
        stride *= spec.knobs[k].values.size();
      }
      ASSERT_LT(pos, spec.knobs.size()) << spec.name << " does not search " << decl.name;
      PlanInput changed = base;
      changed.models[m] = {m, stride, spec.settings(stride), 1.0};
      auto a = render_export(base, e.format, test_options());
      auto b = render_export(changed, e.format, test_options());
      ASSERT_TRUE(a.ok() && b.ok());
      const bool differs = strip_comments(concat(*a)) != strip_comments(concat(*b));
      EXPECT_EQ(differs, e.exported())
          << to_string(e.format) << " " << decl.name << " on " << spec.name << ": the table says "
          << (e.exported() ? e.target : "not applicable");
      ++checked;
    }
    // An exported knob must reach some model the format serves.
    if (e.exported()) {
      EXPECT_GT(checked, 0) << to_string(e.format) << " " << decl.name;
    }
  }
}

TEST(Export, DocsCarryTheKnobTable) {
  const std::string doc = read(kSource / "docs/export.md");
  const std::string begin = "<!-- export-knobs:begin -->\n";
  const std::string end = "<!-- export-knobs:end -->";
  const auto b = doc.find(begin);
  const auto e = doc.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), knob_export_table_markdown());
}

TEST(Export, FormatsThatServeNothingInThePlanSayWhy) {
  PlanInput plan = golden_plan();
  PlanInput llm_only = plan;
  llm_only.models = {plan.models[0]};
  auto t = render_export(llm_only, ExportFormat::kTriton, test_options());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().what().find("no vision, encoder or speech model"), std::string::npos);
  PlanInput vision_only = plan;
  vision_only.models = {plan.models[1]};
  auto v = render_export(vision_only, ExportFormat::kVllm, test_options());
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().what().find("the plan has no LLM"), std::string::npos);
  // A precision without a catalogued checkpoint cannot be loaded by vLLM.
  PlanInput int8 = plan;
  int8.models = {plan.models[0]};
  int8.models[0].settings.precision = Precision::kInt8;
  auto i = render_export(int8, ExportFormat::kVllm, test_options());
  ASSERT_FALSE(i.ok());
  EXPECT_NE(i.error().what().find("no checkpoint for precision int8"), std::string::npos)
      << i.error().what();
}

// ---------------------------------------------------------------------------------------------
// Reading plans

struct BadPlan {
  std::string label;
  std::string text;
  std::vector<std::string> expect;  // fragments of the error
  bool with_workload = true;
};

std::string served(const std::string& models, const std::string& device = "rtx3090") {
  return R"({"id": 3, "device": ")" + device + R"(", "models": {)" + models + "}}";
}

const std::string kAsr = R"("asr": {"index": 0, "settings": ""})";
const std::string kEnc = R"("enc": {"index": 1, "settings": "batch=8"})";
const std::string kChat =
    R"("chat": {"index": 6, "settings": "precision=awq,request_concurrency=32,prefill_chunk=16"})";
std::string cam(const std::string& settings) {
  return R"("cam": {"index": 0, "settings": ")" + settings + R"("})";
}
std::string all_but_cam() { return kAsr + ", " + kEnc + ", " + kChat; }

TEST(Export, BadPlansNameFileFieldAndReason) {
  const std::string ok_cam = "imgsz=640,skip_rate=0.33,batch=4,sm_share=50";
  const std::vector<BadPlan> cases = {
      {"truncated", "{\"models\": [", {"bad.json: malformed JSON"}},
      {"not an object", "[]", {"bad.json: expected a JSON object"}},
      {"unknown shape", R"({"plan": 1})", {"bad.json: not a corun plan"}},
      {"served without workload",
       served(all_but_cam() + ", " + cam(ok_cam)),
       {"bad.json: workload: a served plan does not name its workload file; pass --workload"},
       false},
      {"unknown model",
       served(all_but_cam() + ", " + cam(ok_cam) + R"(, "camm": {"index": 0,
        "settings": ""})"),
       {"bad.json: models.camm: model 'camm' is not in", "(did you mean 'cam'?)",
        "a plan for another workload?"}},
      {"value not in the workload",
       served(all_but_cam() + ", " +
              cam("imgsz=800,skip_rate=0.33,"
                  "batch=4,sm_share=50")),
       {"bad.json: models.cam.settings:",
        "imgsz=800 is not one of the workload's values (320, 640)"}},
      {"missing knob",
       served(all_but_cam() + ", " + cam("imgsz=640,batch=4,sm_share=50")),
       {"bad.json: models.cam.settings:", "does not set skip_rate"}},
      {"unknown knob",
       served(all_but_cam() + ", " + cam(ok_cam + ",imgsize=640")),
       {"bad.json: models.cam.settings:", "no searched knob 'imgsize' (did you mean 'imgsz'?)"}},
      {"not knob=value",
       served(all_but_cam() + ", " + cam("imgsz640")),
       {"bad.json: models.cam.settings: 'imgsz640' is not knob=value"}},
      {"model missing from the plan",
       served(all_but_cam()),
       {"bad.json: models: model 'cam' of", "is not in the plan"}},
      {"admitted share out of range",
       served(all_but_cam() + R"(, "cam": {"index": 14, "settings": ")" + ok_cam +
              R"(", "admitted": 1.5})"),
       {"bad.json: models.cam.admitted: expected a number in [0, 1], got 1.5"}},
      {"another device",
       served(all_but_cam() + ", " + cam(ok_cam), "l4"),
       {"bad.json: device: the plan is for device 'l4'"}},
      {"plan id", R"({"id": "x", "models": {}})", {"bad.json: id: expected an integer plan id"}},
      {"plan json config type",
       R"({"models": [{"name": "chat", "config": 7}]})",
       {"bad.json: models[0].config: expected a string, got number"}},
      {"plan json missing name",
       R"({"models": [{"config": "batch=8"}]})",
       {"bad.json: models[0].name: missing required field"}},
      {"report without intervals",
       R"({"workload": "w.yaml", "intervals": []})",
       {"bad.json: intervals: the run has no interval"}},
      {"report schema",
       R"({"schema_version": 3, "workload": "w.yaml", "intervals": [{}]})",
       {"bad.json: schema_version: version 3 is not supported (this corun reads 1 and 2)"}},
      {"report hash",
       R"({"workload": "w.yaml", "workload_hash": "0123", "intervals": [
        {"t_s": 0, "models": [{"name": "asr", "config": ""}]}]})",
       {"bad.json: workload_hash: the plan was made for a workload whose text hashes to 0123"}},
      {"report interval models",
       R"({"workload": "w.yaml", "intervals": [{"t_s": 0}]})",
       {"bad.json: intervals[0].models: missing or not a list"}},
  };
  const std::string workload = (kGolden / "workload.yaml").string();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    auto p = parse_plan_input(c.text, "bad.json", c.with_workload ? workload : "", catalog());
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.error().kind(), Error::Kind::kInvalidInput);
    for (const auto& frag : c.expect) {
      EXPECT_NE(p.error().what().find(frag), std::string::npos)
          << "missing '" << frag << "' in " << p.error().what();
    }
  }
}

TEST(Export, RunReportExportsTheLastIntervalWithTheDemandThen) {
  TempDir dir;
  // Demand 10 -> 30 requests/s at t=10 and -> 60 at t=25: the last interval (t=20) ran under
  // 30, so a batch of 4 fills in 3 / 30 s = 100000 us (not 3 / 10 or 3 / 60).
  const auto workload = dir.write("w.yaml", R"(device: rtx3090
models:
  - name: enc
    model: bert-base
    knobs: {batch: [2, 4]}
    demand: {rps: 10}
timeline:
  duration_s: 30
  interval_s: 10
  events:
    - {at_s: 10, demand: {model: enc, rps: 30}}
    - {at_s: 25, demand: {model: enc, rps: 60}}
)");
  const nlohmann::json report = {
      {"schema_version", 1},
      {"workload", workload.string()},
      {"device", "rtx3090"},
      {"intervals",
       {{{"t_s", 0}, {"models", {{{"name", "enc"}, {"config", "batch=2"}}}}},
        {{"t_s", 10}, {"models", {{{"name", "enc"}, {"config", "batch=2"}}}}},
        {{"t_s", 20},
         {"models", {{{"name", "enc"}, {"config", "batch=4"}}}},
         {"admitted", {0.25}}}}}};
  auto p = parse_plan_input(report.dump(), "report.json", "", catalog());
  ASSERT_TRUE(p.ok()) << p.error().what();
  EXPECT_EQ(p->kind, PlanKind::kRunReport);
  ASSERT_EQ(p->models.size(), 1u);
  EXPECT_EQ(p->models[0].settings.batch, 4);
  const auto d = plan_deployment(*p, test_options());
  EXPECT_DOUBLE_EQ(d[0].input_rate_per_s, 30);
  EXPECT_EQ(d[0].queue_delay_us, 100000);
  // The interval's admitted shares, one per workload model: enc admits a quarter, which the
  // gateway limits to 0.25 x 30 requests/s = 450 a minute.
  EXPECT_EQ(p->models[0].admitted, 0.25);
  auto files = render_export(*p, ExportFormat::kTriton, test_options());
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->back().path, "admission.conf");
  EXPECT_NE(files->back().content.find("rate=450r/m;"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The binary

struct RunResult {
  int code = -1;
  std::string out;
  std::string err;
};

RunResult run(const std::string& args, const fs::path& dir) {
  const auto err_path = dir / "stderr.txt";
  const std::string cmd = std::string(CORUN_BINARY) + " " + args + " 2>" + err_path.string();
  RunResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read(err_path);
  return r;
}

// What does not deploy as planned is said on stderr too, not only in the files.
TEST(ExportCli, WarningsGoToStderr) {
  TempDir dir;
  std::string text = read(kGolden / "workload.yaml");
  const std::string from = "max_prompt_tokens: 1792";
  ASSERT_NE(text.find(from), std::string::npos);
  const std::string plain =
      "export " + (kGolden / "served-plan.json").string() + " --format vllm --workload ";
  auto r = run(plain + (kGolden / "workload.yaml").string(), dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  text.replace(text.find(from), from.size(), "max_prompt_tokens: 200000");
  const auto long_prompts = dir.write("long.yaml", text);
  r = run(plain + long_prompts.string() + " --out " + (dir.path() / "out").string(), dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: chat: the KV cache of 32 sequences of --max-model-len"),
            std::string::npos)
      << r.err;
}

// corun export --from/--to (the cases of tests/export/diff_test.cc, through the binary).
TEST(ExportCli, FromToWritesOnlyWhatChangesAndBadInputExitsWith2) {
  TempDir dir;
  const std::string chat = R"("chat": {"index": 0, "settings": "precision=awq,request_concurrency=32,prefill_chunk=16"})";
  auto plan = [&](const std::string& cam_settings) {
    return served(kAsr + ", " + kEnc + ", " + chat + ", " + cam(cam_settings));
  };
  const auto old_plan = dir.write("old.json", plan("imgsz=640,skip_rate=0.33,batch=4,sm_share=50"));
  const auto new_plan = dir.write("new.json", plan("imgsz=320,skip_rate=0.33,batch=4,sm_share=50"));
  const std::string workload = (kGolden / "workload.yaml").string();
  const fs::path out = dir.path() / "out";
  const auto r = run("export --from " + old_plan.string() + " --to " + new_plan.string() +
                         " --workload " + workload + " --format triton --out " + out.string(),
                     dir.path());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out / "cam/config.pbtxt"));
  EXPECT_TRUE(fs::exists(out / "transition.json"));
  EXPECT_FALSE(fs::exists(out / "enc/config.pbtxt"));
  EXPECT_FALSE(fs::exists(out / "asr/config.pbtxt"));
  // Neither PLAN nor --to: exit 2, nothing written.
  const auto missing =
      run("export --from " + old_plan.string() + " --format triton --workload " + workload,
          dir.path());
  EXPECT_EQ(missing.code, 2) << missing.err;
  EXPECT_NE(missing.err.find("PLAN"), std::string::npos) << missing.err;
  // Both: a usage error.
  const auto both = run("export " + new_plan.string() + " --to " + new_plan.string() +
                            " --format triton --workload " + workload,
                        dir.path());
  EXPECT_EQ(both.code, 2) << both.err;
}

TEST(ExportCli, BadInputExitsWith2AndWritesNothing) {
  TempDir dir;
  const std::string plan = (kGolden / "served-plan.json").string();
  const std::string workload = (kGolden / "workload.yaml").string();
  const auto out = dir.path() / "out";

  auto r = run("export " + plan + " --workload " + workload + " --format vlm --out " + out.string(),
               dir.path());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--format: unknown format 'vlm' (did you mean 'vllm'?)"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));

  const auto bad = dir.write("bad.json", R"({"id": 1, "models": {"cam": {"settings": "x"}}})");
  r = run("export " + bad.string() + " --workload " + workload + " --format triton --out " +
              out.string(),
          dir.path());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(bad.string() + ": models.cam.settings: 'x' is not knob=value"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));

  // A plan for another workload: the golden plan against paper-n3.
  r = run("export " + plan + " --workload " + (kSource / "workloads/paper-n3.yaml").string() +
              " --format compose --out " + out.string(),
          dir.path());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("a plan for another workload?"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));

  r = run("export " + (dir.path() / "missing.json").string() + " --format mps", dir.path());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("missing.json: cannot open"), std::string::npos) << r.err;

  r = run("export " + plan + " --format mps", dir.path());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("pass --workload FILE"), std::string::npos) << r.err;
}

TEST(ExportCli, OutWritesTheTritonRepositoryAndStdoutMatches) {
  TempDir dir;
  const std::string args = "export " + (kGolden / "served-plan.json").string() + " --workload " +
                           (kGolden / "workload.yaml").string() + " --format triton";
  const auto out = dir.path() / "repo";
  auto r = run(args + " --out " + out.string(), dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  std::set<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(out)) {
    if (e.is_regular_file()) files.insert(fs::relative(e.path(), out).string());
  }
  EXPECT_EQ(files,
            (std::set<std::string>{"asr/config.pbtxt", "asr/1/model.py", "cam/config.pbtxt",
                                   "enc/config.pbtxt", "build_engine.sh", "admission.conf"}));
  EXPECT_NE(r.out.find("wrote " + (out / "cam/config.pbtxt").string()), std::string::npos);
  // Without --out the same files go to stdout, each after a header line.
  r = run(args, dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("# ==> cam/config.pbtxt <==\n" + read(out / "cam/config.pbtxt")),
            std::string::npos);
}

TEST(ExportCli, RunReportToVllmAndTriton) {
  // The acceptance path: corun run, then export the plan in force at the end of the run.
  TempDir dir;
  const auto run_dir = dir.path() / "run";
  auto r =
      run("run " + (kSource / "workloads/paper-n3.yaml").string() + " --out " + run_dir.string(),
          dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto report = nlohmann::json::parse(read(run_dir / "report.json"));
  std::string chat_config;
  for (const auto& m : report["intervals"].back()["models"]) {
    if (m["name"] == "chat") chat_config = m["config"].get<std::string>();
  }
  ASSERT_FALSE(chat_config.empty());
  r = run("export " + (run_dir / "report.json").string() + " --format vllm", dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  // The plan's knobs, as the report states them, in the launch arguments.
  const bool awq = chat_config.find("precision=awq") != std::string::npos;
  const auto rc = chat_config.find("request_concurrency=");
  ASSERT_NE(rc, std::string::npos);
  const std::string seqs = chat_config.substr(rc + 20, chat_config.find(',', rc) - rc - 20);
  EXPECT_NE(r.out.find("--max-num-seqs " + seqs + " \\\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--quantization awq") != std::string::npos, awq) << r.out;
  EXPECT_NE(r.out.find(awq ? "vllm serve Qwen/Qwen2.5-1.5B-Instruct-AWQ \\\n"
                           : "vllm serve Qwen/Qwen2.5-1.5B-Instruct \\\n"),
            std::string::npos)
      << r.out;
  const auto repo = dir.path() / "triton";
  r = run(
      "export " + (run_dir / "report.json").string() + " --format triton --out " + repo.string(),
      dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(repo / "cam0/config.pbtxt"));
  EXPECT_TRUE(fs::exists(repo / "cam1/config.pbtxt"));
  EXPECT_FALSE(fs::exists(repo / "chat"));
}

}  // namespace
}  // namespace corun::exporting::export_test
