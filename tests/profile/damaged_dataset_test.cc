// dataset.db damaged on disk (cut short, bytes altered at seeded offsets, emptied, another
// schema version) and written on a full disk, through the corun binary: `corun fit` refuses a
// damaged file with exit code 3 and its name, never crashes; `corun profile` on a full disk
// stops with exit code 3 naming the file, keeps every sample stored before, and resumes once
// there is room.
#include <gtest/gtest.h>

#include <filesystem>

#include "../core/damaged_files.h"
#include "corun/profile/dataset.h"

namespace corun::profile::damaged_dataset_test {
namespace {

namespace fs = std::filesystem;
using corun::testing::read_bytes;
using corun::testing::run_corun;
using corun::testing::write_bytes;

const std::string kN2 = std::string(CORUN_SOURCE_DIR) + "/workloads/paper-n2.yaml";

class DamagedDataset : public ::testing::Test {
 protected:
  // corun profile of paper-n2 into `db`: `plan` with `budget` samples (standalone: 1 repeat).
  corun::testing::ChildResult profile(const fs::path& db, const std::string& plan, int budget,
                                      std::uint64_t file_size_limit = 0) {
    std::vector<std::string> args = {"profile", kN2,         "--plan", plan,
                                     "--out",   db.string(), "--quiet"};
    if (plan == "standalone") {
      args.insert(args.end(), {"--repeats", "1"});
    } else {
      args.insert(args.end(), {"--budget", std::to_string(budget)});
    }
    return run_corun(args, dir_ / "stderr.txt", file_size_limit);
  }
  corun::testing::ChildResult fit(const fs::path& db) {
    return run_corun({"fit", db.string(), "--regressor", "linear", "--folds", "0", "--out",
                      (dir_ / "model.json").string()},
                     dir_ / "stderr.txt");
  }
  corun::testing::TempDir scratch_{"corun-damaged-dataset"};
  const fs::path& dir_ = scratch_.path();
};

TEST_F(DamagedDataset, FitRefusesEveryDamagedCopyWithExit3NamingTheFileOrReadsItWhole) {
  const fs::path db = dir_ / "d.db";
  ASSERT_EQ(profile(db, "standalone", 0).code, 0);
  ASSERT_EQ(profile(db, "meanfield", 12).code, 0);
  // The last connection checkpointed the WAL: the file alone holds everything.
  ASSERT_FALSE(fs::exists(dir_ / "d.db-wal"));
  const std::string original = read_bytes(db);
  const fs::path damaged = dir_ / "damaged.db";
  int refused = 0;
  for (const auto& d : corun::testing::damaged_copies(original, 14, 24)) {
    SCOPED_TRACE(d.label);
    for (const char* extra : {"-wal", "-shm"}) fs::remove(damaged.string() + extra);
    write_bytes(damaged, d.bytes);
    const auto r = fit(damaged);
    EXPECT_EQ(r.signal, 0) << r.err;  // never a crash
    // 0: an altered value SQLite cannot tell from a real one, still a valid dataset.
    EXPECT_TRUE(r.code == 0 || r.code == 3) << r.code << ": " << r.err;
    if (r.code == 3) {
      ++refused;
      EXPECT_NE(r.err.find(damaged.string()), std::string::npos) << r.err;
    }
    // Empty or cut before its last page, the file is refused: its pages are missing.
    if (d.label == "empty" || d.label == "cut at byte 1" ||
        d.label == "cut at byte " + std::to_string(original.size() / 2)) {
      EXPECT_EQ(r.code, 3) << r.err;
    }
  }
  EXPECT_GT(refused, 3);
  EXPECT_EQ(fit(db).code, 0);
}

TEST_F(DamagedDataset, AnotherSchemaVersionIsRefusedWithExit3) {
  const fs::path db = dir_ / "d.db";
  ASSERT_EQ(profile(db, "standalone", 0).code, 0);
  ASSERT_EQ(profile(db, "meanfield", 6).code, 0);
  ASSERT_EQ(
      corun::testing::alter_sqlite(db, "UPDATE meta SET value = '7' WHERE key = 'schema_version'"),
      "");
  const auto r = fit(db);
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find(db.string() + ": dataset schema version 7, this corun reads version 1"),
            std::string::npos)
      << r.err;
  // A writer refuses it too: nothing is added to a file this corun does not understand.
  const auto p = profile(db, "meanfield", 8);
  EXPECT_EQ(p.code, 3) << p.err;
}

// A configuration index no workload model has: before the check, a fit indexed the feature
// tables with it (an out-of-bounds read).
TEST_F(DamagedDataset, AConfigurationOutOfRangeIsRefusedBeforeAnyTableIsIndexed) {
  const fs::path db = dir_ / "d.db";
  ASSERT_EQ(profile(db, "standalone", 0).code, 0);
  ASSERT_EQ(profile(db, "meanfield", 6).code, 0);
  for (const char* config : {"0,99999", "-7,0", "0", "0,0,0"}) {
    SCOPED_TRACE(config);
    const std::string campaign = "(SELECT id FROM campaigns WHERE plan = 'meanfield')";
    const std::string sql =
        std::string("UPDATE samples SET config = '") + config + "' WHERE campaign = " + campaign +
        " AND sample = (SELECT MIN(sample) FROM samples WHERE campaign = " + campaign + ")";
    ASSERT_EQ(corun::testing::alter_sqlite(db, sql), "");
    const auto r = fit(db);
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_NE(r.err.find(db.string() + ": damaged dataset: sample"), std::string::npos) << r.err;
  }
}

// `corun profile` under a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored): the WAL cannot grow
// past it, and the write of a sample fails with EFBIG as on a full disk.
TEST_F(DamagedDataset, AFullDiskStopsProfilingWithExit3AndKeepsEverySampleStoredBefore) {
  const fs::path db = dir_ / "d.db";
  ASSERT_EQ(profile(db, "standalone", 0).code, 0);
  auto dump = [&] {
    auto ds = Dataset::open(db, Dataset::Mode::kReadOnly);  // quick_check passes
    EXPECT_TRUE(ds.ok()) << (ds.ok() ? "" : ds.error().what());
    std::vector<std::pair<CampaignInfo, std::vector<SampleRecord>>> out;
    if (!ds.ok()) return out;
    const auto campaigns = ds->campaigns();
    EXPECT_TRUE(campaigns.ok());
    if (!campaigns.ok()) return out;
    for (const auto& c : *campaigns) out.emplace_back(c, *ds->samples(c.id));
    return out;
  };
  const auto before = dump();
  ASSERT_EQ(before.size(), 1u);
  const std::size_t standalone = before[0].second.size();
  ASSERT_GT(standalone, 0u);

  const auto full = profile(db, "meanfield", 400, 64 * 1024);
  EXPECT_EQ(full.signal, 0) << full.err;
  EXPECT_EQ(full.code, 3) << full.err;
  EXPECT_NE(full.err.find(db.string()), std::string::npos) << full.err;
  // SQLITE_FULL on a short write, SQLITE_IOERR_WRITE on a write refused whole (EFBIG).
  EXPECT_TRUE(full.err.find("disk is full") != std::string::npos ||
              full.err.find("disk may be full") != std::string::npos)
      << full.err;

  const auto after = dump();
  ASSERT_EQ(after.size(), 2u);
  // The samples stored before are intact, and the campaign holds whole samples only.
  ASSERT_EQ(after[0].second.size(), standalone);
  for (std::size_t i = 0; i < standalone; ++i) {
    EXPECT_EQ(after[0].second[i].config, before[0].second[i].config);
    EXPECT_EQ(after[0].second[i].measurement.models.size(),
              before[0].second[i].measurement.models.size());
  }
  const std::size_t stored = after[1].second.size();
  EXPECT_LT(stored, 400u);
  for (const auto& s : after[1].second) EXPECT_EQ(s.measurement.models.size(), 2u);

  // With room again, the same command resumes and completes the campaign.
  const auto resumed = profile(db, "meanfield", 400);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  const auto done = dump();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[1].second.size(), 400u);
}

}  // namespace
}  // namespace corun::profile::damaged_dataset_test
