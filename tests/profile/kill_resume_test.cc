// `corun profile` killed with SIGKILL mid-campaign and rerun with the same arguments ends with
// exactly the dataset of an uninterrupted run: no sample lost, none duplicated, none partial.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../core/child_process.h"
#include "../core/temp_dir.h"

namespace corun::kill_resume_test {
namespace {

namespace fs = std::filesystem;
using testing::ChildOptions;
using testing::ChildProcess;
using testing::ExitStatus;

constexpr int kBudget = 3000;  // a few seconds of the simulator: long enough to kill twice

fs::path temp_db(const std::string& name) {
  static const testing::TempDir scratch("corun-kill-test");  // removed at exit
  const fs::path& dir = scratch.path();
  const fs::path p = dir / name;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(p.string() + suffix);
  return p;
}

// The children's output goes nowhere: the datasets they write are what is checked.
ChildOptions quiet() {
  ChildOptions o;
  o.stdout_path = o.stderr_path = "/dev/null";
  return o;
}

ChildProcess spawn_profile(const fs::path& db) {
  const std::string workload = std::string(CORUN_SOURCE_DIR) + "/workloads/paper-n4.yaml";
  const std::string budget = std::to_string(kBudget);
  return ChildProcess({CORUN_BINARY, "profile", workload, "--plan", "meanfield", "--budget", budget,
                       "--seed", "7", "--out", db.string()},
                      quiet());
}

// Runs a query on a read-only connection; every value as text (REALs with 17 digits so that
// equal text means equal doubles). Returns "" when the file or table does not exist yet.
std::string query(const fs::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(h);
    return "";
  }
  sqlite3_busy_timeout(h, 5000);
  sqlite3_stmt* st = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        char buf[64];
        switch (sqlite3_column_type(st, c)) {
          case SQLITE_NULL:
            out += "NULL";
            break;
          case SQLITE_INTEGER:
            out += std::to_string(sqlite3_column_int64(st, c));
            break;
          case SQLITE_FLOAT:
            std::snprintf(buf, sizeof buf, "%.17g", sqlite3_column_double(st, c));
            out += buf;
            break;
          default:
            out += reinterpret_cast<const char*>(sqlite3_column_text(st, c));
        }
        out += '|';
      }
      out += '\n';
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}

long count(const fs::path& db, const std::string& table) {
  const std::string r = query(db, "SELECT COUNT(*) FROM " + table);
  return r.empty() ? 0 : std::stol(r);
}

// Starts a campaign and SIGKILLs it once `at_least` samples are stored. Returns the number of
// samples stored at the kill, or -1 if the process ended by itself first.
long run_and_kill(const fs::path& db, long at_least) {
  ChildProcess profile = spawn_profile(db);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!profile.running()) return -1;
    if (count(db, "samples") >= at_least) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const ExitStatus status = profile.stop(SIGKILL);
  EXPECT_TRUE(status.signal == SIGKILL);
  return count(db, "samples");
}

// The exit code, -1 when it did not exit by itself.
int run_to_end(const fs::path& db) { return spawn_profile(db).wait().code; }

std::string dataset_dump(const fs::path& db) {
  return query(db,
               "SELECT plan, seed, testbed, window_s, device, workload_hash, total_samples, "
               "corun_version, git_hash, schema_version FROM campaigns ORDER BY id") +
         query(db, "SELECT * FROM samples ORDER BY campaign, sample") +
         query(db, "SELECT * FROM rows ORDER BY campaign, sample, model");
}

TEST(KillResume, SigkillMidCampaignThenRerunEqualsUninterruptedRun) {
  const fs::path killed = temp_db("killed.db");
  const fs::path clean = temp_db("clean.db");

  const long first = run_and_kill(killed, 40);
  ASSERT_GT(first, 0) << "the campaign ended before it could be killed";
  ASSERT_LT(first, kBudget);
  // Whole samples only: every stored sample has its 4 model rows.
  EXPECT_EQ(count(killed, "rows"), 4 * first);

  // Kill the rerun too, later in the campaign, before letting a third run finish.
  const long second = run_and_kill(killed, first + 1000);
  if (second >= 0) {
    EXPECT_GT(second, first);
    EXPECT_EQ(count(killed, "rows"), 4 * second);
  }
  ASSERT_EQ(run_to_end(killed), 0);
  ASSERT_EQ(run_to_end(clean), 0);

  EXPECT_EQ(count(killed, "samples"), kBudget);
  EXPECT_EQ(count(killed, "rows"), 4 * kBudget);
  const std::string a = dataset_dump(killed);
  const std::string b = dataset_dump(clean);
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "the resumed dataset differs from the uninterrupted one";
}

// `corun run` killed with SIGKILL mid-timeline and rerun with the same arguments reads the
// intervals it had measured back from its dataset and reaches the same report as an uninterrupted
// run: the same plans, the same measurements, the same learning.
ChildProcess spawn_run(const fs::path& workload, const fs::path& out) {
  return ChildProcess({CORUN_BINARY, "run", workload.string(), "--quiet", "--out", out.string()},
                      quiet());
}

std::string online_dump(const fs::path& db) {
  return query(db, "SELECT s.sample, s.config, s.measurement_seed FROM samples s JOIN campaigns c "
                   "ON s.campaign = c.id WHERE c.plan = 'online' ORDER BY s.sample") +
         query(db, "SELECT r.sample, r.model, r.latency_ms_p95, r.ttft_ms_p95, r.tpot_ms_p95 FROM "
                   "rows r JOIN campaigns c ON r.campaign = c.id WHERE c.plan = 'online' ORDER BY "
                   "r.sample, r.model");
}

TEST(KillResume, SigkillMidRunThenRerunEqualsUninterruptedRun) {
  const fs::path dir = temp_db("run").parent_path() / "run";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // A long timeline started from the catalog twin (nothing to profile): two seconds of work.
  const fs::path workload = dir / "long.yaml";
  {
    std::ofstream f(workload);
    f << "device: rtx3090\nprofiling: none\nmodels:\n"
         "  - {name: chat, model: qwen2.5-0.5b, knobs: {precision: [fp16, awq], "
         "request_concurrency: [1, 2, 4]}, demand: {rps: 2, prompt_tokens: 256, output_tokens: "
         "64}, sla: {ttft_ms_p95: 600, tpot_ms_p95: 40}}\n"
         "  - {name: cam0, model: yolo11s, knobs: {imgsz: [320, 480, 640]}, demand: {fps: 30}, "
         "sla: {latency_ms_p95: 60}}\n"
         "timeline:\n  duration_s: 4000\n  interval_s: 10\n  events:\n"
         "    - {at_s: 1000, demand: {model: chat, rps: 3}}\n"
         "    - {at_s: 2000, interference: {sm_util: 0.2, bandwidth_util: 0.3}}\n";
  }
  const fs::path killed = dir / "killed";
  const fs::path clean = dir / "clean";
  ChildProcess run = spawn_run(workload, killed);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!run.running()) break;
    const std::string n = query(killed / "dataset.db", "SELECT COUNT(*) FROM samples");
    if (!n.empty() && std::stol(n) >= 20) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  run.stop(SIGKILL);  // nothing to kill if it ended by itself
  const std::string n = query(killed / "dataset.db", "SELECT COUNT(*) FROM samples");
  const long stored = n.empty() ? 0 : std::stol(n);
  EXPECT_GT(stored, 0);
  // Rerun to the end, and an uninterrupted run elsewhere.
  for (const fs::path& out : {killed, clean}) {
    const ExitStatus status = spawn_run(workload, out).wait();
    ASSERT_TRUE(status.exited() && status.code <= 1) << out;
  }
  const std::string a = online_dump(killed / "dataset.db");
  const std::string b = online_dump(clean / "dataset.db");
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "the resumed run measured something else than the uninterrupted one";
  std::ifstream ra(killed / "report.json"), rb(clean / "report.json");
  std::stringstream sa, sb;
  sa << ra.rdbuf();
  sb << rb.rdbuf();
  // The reports agree on every decision and measurement (they differ in decision times and in
  // how many intervals were read back).
  auto plans = [](const std::string& text) {
    std::string out;
    for (std::size_t at = text.find("\"config\""); at != std::string::npos;
         at = text.find("\"config\"", at + 1)) {
      out += text.substr(at, text.find(',', at) - at) + ";";
    }
    return out;
  };
  EXPECT_EQ(plans(sa.str()), plans(sb.str()));
}

}  // namespace
}  // namespace corun::kill_resume_test
