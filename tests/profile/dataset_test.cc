// The SQLite dataset: round trips, idempotent writes, provenance, resume, failures as data.
#include "corun/profile/dataset.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "../core/temp_dir.h"
#include "corun/catalog/catalog.h"
#include "corun/core/version.h"
#include "corun/profile/campaign.h"

namespace corun::profile::dataset_test {
namespace {

namespace fs = std::filesystem;

fs::path temp_db(const std::string& name) {
  static const testing::TempDir scratch("corun-profile-test");  // removed at exit
  const fs::path& dir = scratch.path();
  const fs::path p = dir / name;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(p.string() + suffix);
  return p;
}

Workload load(const std::string& name) {
  auto w = load_workload(std::string(CORUN_SOURCE_DIR) + "/workloads/" + name,
                         Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().what());
  return std::move(w).value();
}

Dataset open(const fs::path& p) {
  auto ds = Dataset::open(p, Dataset::Mode::kCreate);
  EXPECT_TRUE(ds.ok()) << (ds.ok() ? "" : ds.error().what());
  return std::move(ds).value();
}

// Every stored value of a campaign as text, in key order: what "the same dataset" means.
std::string dump(const Dataset& ds, std::int64_t campaign) {
  auto samples = ds.samples(campaign);
  EXPECT_TRUE(samples.ok());
  std::string out;
  char buf[256];
  for (const auto& s : *samples) {
    out += std::to_string(s.index) + ":" + std::to_string(s.measurement_seed) + ":";
    for (auto c : s.config) out += std::to_string(c) + ",";
    std::snprintf(buf, sizeof buf, "|%.17g %.17g %.17g %.17g|", s.measurement.gpu.sm_util,
                  s.measurement.gpu.mem_bw_util, s.measurement.gpu.power_w,
                  s.measurement.gpu.vram_used_gb);
    out += buf + s.measurement.error;
    for (const auto& m : s.measurement.models) {
      std::snprintf(buf, sizeof buf, "[%zu %s %.17g %.17g %.17g %.17g %.17g %s]", m.model,
                    m.config.c_str(), m.latency_ms_p50, m.latency_ms_p95, m.throughput,
                    m.ttft_ms_p95.value_or(-1), m.tpot_ms_p95.value_or(-1), m.error.c_str());
      out += buf;
    }
    out += "\n";
  }
  return out;
}

TEST(Dataset, StoresAndReadsBackASampleExactly) {
  const Workload w = load("paper-n2.yaml");
  auto testbed = make_testbed("sim");
  ASSERT_TRUE(testbed.ok());
  const fs::path path = temp_db("roundtrip.db");
  Dataset ds = open(path);
  auto id = ds.ensure_campaign({Plan::kMeanField, Context{.seed = 3}, "sim", 10}, w, "text",
                               "rtx3090", 1);
  ASSERT_TRUE(id.ok()) << id.error().what();
  const ConfigSpace space(w);
  const SampleRecord r =
      measure_sample(Context{.seed = 3}, w, space, **testbed, Plan::kMeanField, 10, 0);
  ASSERT_TRUE(r.measurement.ok());
  ASSERT_TRUE(ds.insert(*id, r).ok());
  auto back = ds.samples(*id);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 1u);
  const SampleRecord& b = back->front();
  EXPECT_EQ(b.config, r.config);
  EXPECT_EQ(b.measurement_seed, r.measurement_seed);
  EXPECT_EQ(b.measurement.testbed, "sim");
  EXPECT_EQ(b.measurement.device, "rtx3090");
  EXPECT_EQ(b.measurement.gpu.power_w, r.measurement.gpu.power_w);
  ASSERT_EQ(b.measurement.models.size(), 2u);
  // The LLM keeps TTFT and TPOT; the vision model has none (NULL, not 0).
  EXPECT_EQ(b.measurement.models[0].ttft_ms_p95, r.measurement.models[0].ttft_ms_p95);
  EXPECT_EQ(b.measurement.models[0].tpot_ms_p95, r.measurement.models[0].tpot_ms_p95);
  EXPECT_FALSE(b.measurement.models[1].ttft_ms_p95.has_value());
  EXPECT_EQ(b.measurement.models[1].latency_ms_p95, r.measurement.models[1].latency_ms_p95);
}

TEST(Dataset, InsertingASampleTwiceKeepsOne) {
  const Workload w = load("paper-n2.yaml");
  auto testbed = make_testbed("sim");
  const fs::path path = temp_db("twice.db");
  Dataset ds = open(path);
  auto id =
      ds.ensure_campaign({Plan::kJoint, Context{.seed = 1}, "sim", 10}, w, "text", "rtx3090", 3);
  ASSERT_TRUE(id.ok());
  const ConfigSpace space(w);
  const SampleRecord r =
      measure_sample(Context{.seed = 1}, w, space, **testbed, Plan::kJoint, 10, 2);
  ASSERT_TRUE(ds.insert(*id, r).ok());
  ASSERT_TRUE(ds.insert(*id, r).ok());
  auto idx = ds.stored_indices(*id);
  ASSERT_TRUE(idx.ok());
  EXPECT_EQ(*idx, std::vector<std::uint64_t>{2});
  auto back = ds.samples(*id);
  ASSERT_EQ(back->front().measurement.models.size(), 2u);
}

TEST(Dataset, CampaignIdentityAndProvenance) {
  const Workload w = load("paper-n2.yaml");
  const fs::path path = temp_db("provenance.db");
  Dataset ds = open(path);
  const CampaignSpec spec{Plan::kMeanField, Context{.seed = 42}, "sim", 10};
  auto a = ds.ensure_campaign(spec, w, "workload text", "rtx3090", 10);
  auto b = ds.ensure_campaign(spec, w, "workload text", "rtx3090", 30);
  auto c = ds.ensure_campaign({Plan::kMeanField, Context{.seed = 43}, "sim", 10}, w,
                              "workload text", "rtx3090", 10);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);  // same campaign, extended
  EXPECT_NE(*a, *c);  // another seed is another campaign
  auto cs = ds.campaigns();
  ASSERT_TRUE(cs.ok());
  ASSERT_EQ(cs->size(), 2u);
  const CampaignInfo& info = cs->front();
  EXPECT_EQ(info.total_samples, 30u);
  EXPECT_EQ(info.spec.context.seed, 42u);
  EXPECT_EQ(info.spec.testbed, "sim");
  EXPECT_EQ(info.device, "rtx3090");
  EXPECT_EQ(info.workload_hash, w.hash);
  EXPECT_EQ(info.corun_version, std::string(version()));
  EXPECT_EQ(info.git_hash, std::string(git_hash()));
  EXPECT_EQ(info.schema_version, kDatasetSchemaVersion);
  EXPECT_EQ(*ds.workload_text(w.hash), "workload text");
  // A campaign is bound to its device: the same identity on another device is refused.
  EXPECT_FALSE(ds.ensure_campaign(spec, w, "workload text", "a100-80gb", 10).ok());
}

TEST(Dataset, RefusesOtherSchemaVersionsAndForeignFiles) {
  const fs::path path = temp_db("version.db");
  { Dataset ds = open(path); }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "UPDATE meta SET value = '99' WHERE key = 'schema_version'", nullptr,
                           nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto ds = Dataset::open(path, Dataset::Mode::kReadOnly);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.error().what().find("schema version 99"), std::string::npos) << ds.error().what();

  const fs::path text = temp_db("not_a_db.db");
  std::ofstream(text) << "hello";
  EXPECT_FALSE(Dataset::open(text, Dataset::Mode::kCreate).ok());
  EXPECT_FALSE(Dataset::open(temp_db("missing.db"), Dataset::Mode::kReadOnly).ok());
  // Somebody else's SQLite database is left alone.
  const fs::path foreign = temp_db("foreign.db");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(foreign.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto f = Dataset::open(foreign, Dataset::Mode::kCreate);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().kind(), Error::Kind::kInvalidInput);
  EXPECT_NE(f.error().what().find("not a corun dataset"), std::string::npos);
}

TEST(Campaign, ResumeMeasuresOnlyWhatIsMissingAndEndsEqual) {
  const Workload w = load("paper-n3.yaml");
  auto testbed = make_testbed("sim");
  const CampaignSpec spec{Plan::kMeanField, Context{.seed = 5}, "sim", 10};
  const fs::path full_path = temp_db("full.db");
  const fs::path part_path = temp_db("part.db");
  Dataset full = open(full_path);
  auto rf = run_campaign(full, w, "t", **testbed, spec, 40, nullptr);
  ASSERT_TRUE(rf.ok()) << rf.error().what();
  EXPECT_EQ(rf->measured, 40u);

  Dataset part = open(part_path);
  // A smaller budget first, then the full one: the campaign is extended, not duplicated.
  auto r1 = run_campaign(part, w, "t", **testbed, spec, 15, nullptr);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->measured, 15u);
  // Lose some samples in the middle, as an interrupted run with gaps would.
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(part_path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "DELETE FROM rows WHERE sample IN (3, 7); "
                           "DELETE FROM samples WHERE sample IN (3, 7);",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto r2 = run_campaign(part, w, "t", **testbed, spec, 40, nullptr);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->already_stored, 13u);
  EXPECT_EQ(r2->measured, 27u);
  auto r3 = run_campaign(part, w, "t", **testbed, spec, 40, nullptr);
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3->measured, 0u);
  EXPECT_EQ(dump(part, r2->campaign), dump(full, rf->campaign));
}

TEST(Campaign, CoTenantSamplesAreMeasuredNextToTheirCoTenant) {
  // The testbed really runs each co-tenant sample next to its co-tenant: the same
  // configuration with the same noise seed and no co-tenant is never slower.
  const Workload w = load("paper-n3.yaml");
  auto testbed = make_testbed("sim");
  const ConfigSpace space(w);
  int slower = 0;
  for (std::uint64_t i = 0; i < 10; ++i) {
    const SampleRecord r =
        measure_sample(Context{.seed = 5}, w, space, **testbed, Plan::kCoTenant, 10, i);
    const Interference c = plan_cotenant(Context{.seed = 5}, Plan::kCoTenant, i);
    ASSERT_GT(c.sm_util + c.bandwidth_util, 0.0);
    const Measurement alone =
        (*testbed)->measure(Context{.seed = r.measurement_seed}, w, r.config, MeasureOptions(10));
    ASSERT_EQ(alone.models.size(), r.measurement.models.size());
    for (std::size_t k = 0; k < alone.models.size(); ++k) {
      if (!alone.models[k].ok() || !r.measurement.models[k].ok()) continue;
      EXPECT_GE(r.measurement.models[k].latency_ms_p95, alone.models[k].latency_ms_p95) << i;
      slower += r.measurement.models[k].latency_ms_p95 > alone.models[k].latency_ms_p95 ? 1 : 0;
    }
  }
  EXPECT_GT(slower, 0);
}

TEST(Campaign, FailedConfigurationsAreStoredWithTheirReason) {
  // One 24,000-token conversation of a 7B model with full multi-head attention keeps 12.6 GB of
  // KV cache (524,288 bytes per token); beside 13.5 GB of FP16 weights it does not fit a
  // 24 GiB card even alone, at any concurrency. AWQ's 3.9 GB of weights leave room for it (64
  // sequences run KV-limited, space.h).
  const std::string text = R"(
device: rtx3090
models:
  - name: chat
    model: llama-2-7b
    knobs: {precision: [fp16, awq], request_concurrency: [1, 64]}
    demand: {rps: 0.5, prompt_tokens: 20000, output_tokens: 4000}
)";
  auto w = parse_workload(text, "oom.yaml", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  auto testbed = make_testbed("sim");
  Dataset ds = open(temp_db("oom.db"));
  auto r = run_campaign(ds, *w, text, **testbed, {Plan::kStandalone, Context{.seed = 1}, "sim", 10},
                        0, nullptr);
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->total, 4u);
  EXPECT_EQ(r->failed, 2u);
  auto samples = ds.samples(r->campaign);
  ASSERT_EQ(samples->size(), 4u);
  int failed = 0;
  for (const auto& s : *samples) {
    if (s.measurement.ok()) continue;
    ++failed;
    EXPECT_NE(s.measurement.error.find("out of memory"), std::string::npos) << s.measurement.error;
    ASSERT_EQ(s.measurement.models.size(), 1u);
    EXPECT_EQ(s.measurement.models[0].error, s.measurement.error);
  }
  EXPECT_EQ(static_cast<std::uint64_t>(failed), r->failed);
}

TEST(Progress, PlainLinesWhenNotATerminal) {
  const fs::path path = temp_db("progress.txt");
  std::FILE* f = std::fopen(path.c_str(), "w+");
  ASSERT_NE(f, nullptr);
  Progress p(f, false, "profile meanfield", 200, 40, /*min_line_interval_s=*/0);
  for (std::uint64_t i = 41; i <= 200; ++i) p.update(i);
  p.finish();
  std::fclose(f);
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  // Header, one line per tenth from 30 % to 90 %, final line; no carriage returns.
  ASSERT_EQ(lines.size(), 9u);
  EXPECT_EQ(lines.front(), "profile meanfield: 200 samples, 40 already stored");
  EXPECT_NE(lines[1].find("60/200 (30%)"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("eta"), std::string::npos);
  EXPECT_NE(lines.back().find("200/200 done"), std::string::npos);
  for (const auto& l : lines) EXPECT_EQ(l.find('\r'), std::string::npos);
}

TEST(Progress, PlainLinesAreThrottledToRealProgress) {
  // A job that finishes well within the interval (an hour) prints its header and its final
  // line, none of the tenths in between.
  const fs::path path = temp_db("progress-throttled.txt");
  std::FILE* f = std::fopen(path.c_str(), "w+");
  ASSERT_NE(f, nullptr);
  Progress p(f, false, "profile meanfield", 200, 0, /*min_line_interval_s=*/3600);
  for (std::uint64_t i = 1; i <= 200; ++i) p.update(i);
  p.finish();
  std::fclose(f);
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines.back().find("200/200 done"), std::string::npos);
}

TEST(Progress, FormatsDurations) {
  EXPECT_EQ(Progress::format_duration(7.2), "7s");
  EXPECT_EQ(Progress::format_duration(245), "4:05");
  EXPECT_EQ(Progress::format_duration(3723), "1:02:03");
  EXPECT_EQ(Progress::format_duration(-1), "?");
}

}  // namespace
}  // namespace corun::profile::dataset_test
