// surrogate.json damaged on disk (cut short, bytes altered at seeded offsets, emptied, another
// schema version) and written on a full disk, through the corun binary: `corun predict`
// refuses a damaged model with exit code 3 and its name, never crashes; `corun fit` on a full
// disk exits 3 naming the file and leaves the previous model as it was, with no temporary file.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "../core/damaged_files.h"

namespace corun::surrogate::damaged_model_test {
namespace {

namespace fs = std::filesystem;
using corun::testing::read_bytes;
using corun::testing::run_corun;
using corun::testing::write_bytes;

const std::string kN2 = std::string(CORUN_SOURCE_DIR) + "/workloads/paper-n2.yaml";

// A dataset of paper-n2 and a linear model fitted on it, made once for the suite.
class DamagedModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new corun::testing::TempDir("corun-damaged-model");
    dir_ = &scratch_->path();
    const std::string db = (*dir_ / "d.db").string();
    ok_ =
        run_corun(
            {"profile", kN2, "--plan", "standalone", "--repeats", "1", "--out", db, "--quiet"},
            *dir_ / "stderr.txt")
                .code == 0 &&
        run_corun({"profile", kN2, "--plan", "meanfield", "--budget", "12", "--out", db, "--quiet"},
                  *dir_ / "stderr.txt")
                .code == 0 &&
        run_corun({"fit", db, "--regressor", "linear", "--folds", "0", "--out",
                   (*dir_ / "model.json").string()},
                  *dir_ / "stderr.txt")
                .code == 0;
  }
  static void TearDownTestSuite() { delete scratch_; }
  void SetUp() override { ASSERT_TRUE(ok_) << read_bytes(*dir_ / "stderr.txt"); }

  static corun::testing::ChildResult predict(const fs::path& model) {
    return run_corun({"predict", model.string(), kN2, "--json"}, *dir_ / "stderr.txt");
  }

  static corun::testing::TempDir* scratch_;
  static const fs::path* dir_;
  static bool ok_;
};

corun::testing::TempDir* DamagedModel::scratch_ = nullptr;
const fs::path* DamagedModel::dir_ = nullptr;
bool DamagedModel::ok_ = false;

TEST_F(DamagedModel, PredictRefusesEveryDamagedCopyWithExit3NamingTheFileOrLoadsIt) {
  const std::string original = read_bytes(*dir_ / "model.json");
  ASSERT_EQ(predict(*dir_ / "model.json").code, 0);
  const fs::path damaged = *dir_ / "damaged.json";
  int refused = 0;
  for (const auto& d : corun::testing::damaged_copies(original, 14, 32)) {
    SCOPED_TRACE(d.label);
    write_bytes(damaged, d.bytes);
    const auto r = predict(damaged);
    EXPECT_EQ(r.signal, 0) << r.err;  // never a crash
    // 0: an altered digit is still a model (a number cannot tell it was changed); 2: an
    // altered name loads but no longer matches the workload, and the message says which.
    EXPECT_TRUE(r.code == 0 || r.code == 2 || r.code == 3) << r.code << ": " << r.err;
    if (r.code == 3) {
      ++refused;
      EXPECT_NE(r.err.find(damaged.string() + ": damaged surrogate model"), std::string::npos)
          << r.err;
    }
    if (r.code == 2) {
      EXPECT_NE(r.err.find(damaged.string()), std::string::npos) << r.err;
    }
    // Emptied, or cut before its closing brace, it is not a JSON document any more (the last
    // byte is the newline after it).
    if (d.label == "empty" || (d.label.rfind("cut at", 0) == 0 &&
                               d.label != "cut at byte " + std::to_string(original.size() - 1))) {
      EXPECT_EQ(r.code, 3) << r.err;
    }
  }
  EXPECT_GT(refused, 10);
}

TEST_F(DamagedModel, AnotherSchemaVersionIsRefusedWithExit3) {
  auto j = nlohmann::json::parse(read_bytes(*dir_ / "model.json"));
  j["schema_version"] = 99;
  const fs::path other = *dir_ / "other-version.json";
  write_bytes(other, j.dump());
  const auto r = predict(other);
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(
      r.err.find(other.string() + ": damaged surrogate model: schema_version: the file has 99"),
      std::string::npos)
      << r.err;
}

// `corun fit` under a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) below the size of the
// GBDT model it writes: the write fails with EFBIG as on a full disk.
TEST_F(DamagedModel, AFullDiskLeavesThePreviousModelAndNoTemporaryFile) {
  const fs::path out = *dir_ / "kept.json";
  fs::copy_file(*dir_ / "model.json", out, fs::copy_options::overwrite_existing);
  const std::string before = read_bytes(out);
  const auto r = run_corun({"fit", (*dir_ / "d.db").string(), "--regressor", "gbdt", "--folds", "0",
                            "--out", out.string()},
                           *dir_ / "stderr.txt", 96 * 1024);
  EXPECT_EQ(r.signal, 0) << r.err;
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("cannot write " + out.string() + ": File too large"), std::string::npos)
      << r.err;
  EXPECT_EQ(read_bytes(out), before);
  for (const auto& e : fs::directory_iterator(*dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".kept.json.tmp"), std::string::npos) << e.path();
  }
  // Without the limit the same command replaces it.
  ASSERT_EQ(run_corun({"fit", (*dir_ / "d.db").string(), "--regressor", "gbdt", "--folds", "0",
                       "--out", out.string()},
                      *dir_ / "stderr.txt")
                .code,
            0);
  EXPECT_NE(read_bytes(out), before);
  EXPECT_EQ(predict(out).code, 0);
}

}  // namespace
}  // namespace corun::surrogate::damaged_model_test
