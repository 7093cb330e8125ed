// corun export --from OLD --to NEW: only what changes, and transition.json saying how each stack
// applies it. The plans are served plans of tests/export/golden/workload.yaml; the expected
// classes are catalog/actuation.yaml's, the request shapes Triton's model repository extension
// (POST v2/repository/models/NAME/load with a "config" parameter) and vLLM's engine arguments.

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "corun/core/atomic_file.h"
#include "corun/export/export.h"
#include "corun/export/plan_input.h"

namespace corun::exporting::diff_test {
namespace {

namespace fs = std::filesystem;

const fs::path kGolden = fs::path(CORUN_SOURCE_DIR) / "tests/export/golden";

const Catalog& catalog() { return Catalog::default_catalog(); }

ExportOptions test_options() {
  ExportOptions o;
  o.generator = "corun TEST";
  return o;
}

const std::string kAsr = R"("asr": {"index": 0, "settings": ""})";
const std::string kEnc = R"("enc": {"index": 1, "settings": "batch=8"})";

std::string chat(const std::string& settings) {
  return R"("chat": {"index": 0, "settings": ")" + settings + R"("})";
}
std::string cam(const std::string& settings) {
  return R"("cam": {"index": 0, "settings": ")" + settings + R"("})";
}
const std::string kChatAwq = "precision=awq,request_concurrency=32,prefill_chunk=16";
const std::string kCam640 = "imgsz=640,skip_rate=0.33,batch=4,sm_share=50";

std::string served(const std::string& chat_settings, const std::string& cam_settings) {
  return R"({"id": 3, "device": "rtx3090", "models": {)" + kAsr + ", " + kEnc + ", " +
         chat(chat_settings) + ", " + cam(cam_settings) + "}}";
}

PlanInput plan(const std::string& text, const std::string& file) {
  auto p = parse_plan_input(text, file, (kGolden / "workload.yaml").string(), catalog());
  EXPECT_TRUE(p.ok()) << p.error().what();
  return p.ok() ? std::move(p).value() : PlanInput{};
}

struct Diff {
  std::vector<ExportFile> files;
  nlohmann::json doc;  // transition.json
  [[nodiscard]] std::vector<std::string> paths() const {
    std::vector<std::string> out;
    for (const auto& f : files) out.push_back(f.path);
    return out;
  }
  [[nodiscard]] const nlohmann::json& step(const std::string& model) const {
    for (const auto& s : doc["transition"]["steps"]) {
      if (s["model"] == model) return s;
    }
    ADD_FAILURE() << "no step for " << model;
    static const nlohmann::json none;
    return none;
  }
};

Diff diff(const std::string& from, const std::string& to, ExportFormat f) {
  Diff d;
  auto files = render_export_diff(plan(from, "old.json"), plan(to, "new.json"), f,
                                  test_options(), ActuationTable::builtin());
  EXPECT_TRUE(files.ok()) << files.error().what();
  if (!files.ok()) return d;
  d.files = std::move(*files);
  EXPECT_FALSE(d.files.empty());
  if (d.files.empty()) return d;
  EXPECT_EQ(d.files.back().path, "transition.json");
  d.doc = nlohmann::json::parse(d.files.back().content);
  return d;
}

TEST(ExportDiff, TheSamePlanChangesNothing) {
  const std::string p = served(kChatAwq, kCam640);
  for (ExportFormat f : export_formats()) {
    const Diff d = diff(p, p, f);
    EXPECT_EQ(d.paths(), std::vector<std::string>{"transition.json"}) << to_string(f);
    EXPECT_TRUE(d.doc["transition"]["steps"].empty());
    EXPECT_TRUE(d.doc["files"].empty());
  }
}

// A precision change of the LLM is a vLLM restart: a new `vllm serve` with the AWQ arguments
// gone; only the chat's command is written.
TEST(ExportDiff, AnLlmPrecisionChangeIsANewVllmProcess) {
  const Diff d = diff(served(kChatAwq, kCam640),
                      served("precision=fp16,request_concurrency=32,prefill_chunk=16", kCam640),
                      ExportFormat::kVllm);
  EXPECT_EQ(d.paths(), (std::vector<std::string>{"vllm.sh", "transition.json"}));
  ASSERT_EQ(d.doc["transition"]["steps"].size(), 1u);
  const auto& s = d.step("chat");
  EXPECT_EQ(s["action"], "restart");
  EXPECT_EQ(s["stack"], "vllm");
  EXPECT_EQ(s["knobs"], nlohmann::json::array({"precision"}));
  EXPECT_GT(s["downtime_s"].get<double>(), 0.0);
  const auto& a = s["apply"];
  EXPECT_EQ(a["server"], "vllm");
  const auto before = a["before"]["argv"].get<std::vector<std::string>>();
  const auto after = a["after"]["argv"].get<std::vector<std::string>>();
  ASSERT_GE(before.size(), 3u);
  EXPECT_EQ(before[0], "vllm");
  EXPECT_EQ(before[1], "serve");
  auto has = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  EXPECT_TRUE(has(before, "awq"));
  EXPECT_FALSE(has(after, "awq"));
  EXPECT_NE(before[2], after[2]);  // another checkpoint
  // The port stays the model's port in the full export.
  const std::size_t port = static_cast<std::size_t>(
      std::find(after.begin(), after.end(), "--port") - after.begin());
  ASSERT_LT(port + 1, after.size());
  const std::size_t port_before = static_cast<std::size_t>(
      std::find(before.begin(), before.end(), "--port") - before.begin());
  ASSERT_LT(port_before + 1, before.size());
  EXPECT_EQ(after[port + 1], before[port_before + 1]);
  EXPECT_NE(d.files[0].content.find("--served-model-name chat"), std::string::npos);
}

// An image-size change of a camera is a Triton reload (another TensorRT engine): its
// config.pbtxt, the build script of its new engine, and the load request carrying the same
// configuration as JSON.
TEST(ExportDiff, ACameraImageSizeChangeIsATritonLoadWithTheNewConfig) {
  const Diff d = diff(served(kChatAwq, kCam640),
                      served(kChatAwq, "imgsz=320,skip_rate=0.33,batch=4,sm_share=50"),
                      ExportFormat::kTriton);
  EXPECT_EQ(d.paths(),
            (std::vector<std::string>{"cam/config.pbtxt", "build_engine.sh", "transition.json"}));
  EXPECT_NE(d.files[1].content.find("--maxShapes=\"images:4x3x320x320\""), std::string::npos);
  const auto& s = d.step("cam");
  EXPECT_EQ(s["action"], "reload");
  EXPECT_EQ(s["stack"], "triton");
  const auto& req = s["apply"]["request"];
  EXPECT_EQ(req["method"], "POST");
  EXPECT_EQ(req["path"], "/v2/repository/models/cam/load");
  const auto config = nlohmann::json::parse(req["body"]["parameters"]["config"].get<std::string>());
  EXPECT_EQ(config["name"], "cam");
  EXPECT_EQ(config["platform"], "tensorrt_plan");
  EXPECT_EQ(config["max_batch_size"], 4);
  EXPECT_FALSE(config.contains("default_model_filename"));  // 1/model.plan, Triton's default
  EXPECT_EQ(config["parameters"]["engine"]["string_value"], "yolo11n-fp16-320");
  EXPECT_EQ(config["instance_group"][0]["count"], 1);
  EXPECT_EQ(config["instance_group"][0]["kind"], "KIND_GPU");
  EXPECT_EQ(config["parameters"]["imgsz"]["string_value"], "320");
  EXPECT_EQ(config["parameters"]["vid_stride"]["string_value"], "2");
  // A reload keeps its process and the MPS limits it started with (320 needs less memory).
  EXPECT_FALSE(s["apply"].contains("mps_env"));
  EXPECT_FALSE(s["apply"].contains("warning"));
  // The file says the same.
  const std::string& pbtxt = d.files[0].content;
  EXPECT_NE(pbtxt.find("value: { string_value: \"yolo11n-fp16-320\" }"), std::string::npos);
  EXPECT_NE(pbtxt.find("max_queue_delay_microseconds: " +
                       std::to_string(config["dynamic_batching"]["max_queue_delay_microseconds"]
                                          .get<long long>())),
            std::string::npos);
  // Growing back to 640 in the same process (the GPU's Triton server) needs more than its MPS
  // memory limit: said so.
  const Diff grow = diff(served(kChatAwq, "imgsz=320,skip_rate=0.33,batch=4,sm_share=50"),
                         served(kChatAwq, kCam640), ExportFormat::kTriton);
  const auto& g = grow.step("cam")["apply"];
  EXPECT_EQ(grow.step("cam")["action"], "reload");
  ASSERT_TRUE(g.contains("warning"));
  EXPECT_NE(g["warning"].get<std::string>().find("MPS memory limit"), std::string::npos);
  EXPECT_NE(g["mps_env"]["after"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"],
            g["mps_env"]["before"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"]);
  // Nothing for vLLM: the chat did not change.
  const Diff v = diff(served(kChatAwq, kCam640),
                      served(kChatAwq, "imgsz=320,skip_rate=0.33,batch=4,sm_share=50"),
                      ExportFormat::kVllm);
  EXPECT_EQ(v.paths(), std::vector<std::string>{"transition.json"});
  EXPECT_EQ(v.doc["transition"]["steps"].size(), 1u);
}

// Frame skipping is live (the frame source drops frames); an SM share is fixed when the MPS
// client starts: a restart. The client of a Triton model is the GPU's Triton server, whose
// share is the sum of its models' (at most 100): cam 50 -> 100 beside enc and asr at 100 leaves
// it at 100, so no environment changes and no env file is written. An LLM's share is its own
// process's.
TEST(ExportDiff, FrameSkipIsLiveAndAnSmShareChangesTheMpsEnvironment) {
  const Diff live = diff(served(kChatAwq, kCam640),
                         served(kChatAwq, "imgsz=640,skip_rate=0,batch=4,sm_share=50"),
                         ExportFormat::kMps);
  EXPECT_EQ(live.step("cam")["action"], "live");
  EXPECT_EQ(live.step("cam")["downtime_s"], 0.0);
  EXPECT_FALSE(live.step("cam")["apply"].contains("mps_env"));

  const Diff mps = diff(served(kChatAwq, kCam640),
                        served(kChatAwq, "imgsz=640,skip_rate=0.33,batch=4,sm_share=100"),
                        ExportFormat::kMps);
  EXPECT_EQ(mps.paths(), (std::vector<std::string>{"transition.json"}));
  const auto& s = mps.step("cam");
  EXPECT_EQ(s["action"], "restart");
  EXPECT_FALSE(s["apply"].contains("mps_env"));
}

// A model the new plan stops is unloaded; the compose file is written whole whenever anything
// changes (compose recreates only what changed), with the repository entries of the models
// that changed (none here).
TEST(ExportDiff, AStoppedModelIsUnloadedAndComposeIsTheWholeFile) {
  const std::string from = served(kChatAwq, kCam640);
  const std::string to = R"({"id": 4, "device": "rtx3090", "models": {)" + kAsr + ", " + kEnc +
                         ", " + chat(kChatAwq) + R"(, "cam": {"index": -1}}})";
  const Diff d = diff(from, to, ExportFormat::kCompose);
  EXPECT_EQ(d.paths(), (std::vector<std::string>{"docker-compose.yaml", "transition.json"}));
  const auto& s = d.step("cam");
  EXPECT_EQ(s["action"], "none");
  EXPECT_EQ(s["to"], "");
  EXPECT_EQ(s["apply"]["request"]["path"], "/v2/repository/models/cam/unload");
  EXPECT_EQ(d.files[0].content.find("cam:"), std::string::npos);
  const Diff grown = diff(served(kChatAwq, kCam640),
                          served(kChatAwq, "imgsz=320,skip_rate=0.33,batch=4,sm_share=50"),
                          ExportFormat::kCompose);
  EXPECT_EQ(grown.paths(),
            (std::vector<std::string>{"docker-compose.yaml", "triton/cam/config.pbtxt",
                                      "triton/build_engine.sh", "transition.json"}));
}

TEST(ExportDiff, PlansOfAnotherWorkloadAreNamedErrors) {
  const PlanInput to = plan(served(kChatAwq, kCam640), "new.json");
  PlanInput from = to;
  from.plan_file = "old.json";
  from.workload.models[3].name = "cam9";
  auto r = render_export_diff(from, to, ExportFormat::kTriton, test_options(),
                              ActuationTable::builtin());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.error().what()).find("old.json: models.cam9"), std::string::npos)
      << r.error().what();
  from = to;
  from.plan_file = "old.json";
  from.workload.device.name = "a100";
  r = render_export_diff(from, to, ExportFormat::kTriton, test_options(),
                         ActuationTable::builtin());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.error().what()).find("old.json: device"), std::string::npos)
      << r.error().what();
}

}  // namespace
}  // namespace corun::exporting::diff_test
