// `corun profile` killed with SIGKILL mid-campaign and rerun with the same arguments ends with
// exactly the dataset of an uninterrupted run: no sample lost, none duplicated, none partial.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace corun {
namespace {

namespace fs = std::filesystem;

constexpr int kBudget = 3000;  // a few seconds of the simulator: long enough to kill twice

fs::path temp_db(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("corun_kill_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path p = dir / name;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(p.string() + suffix);
  return p;
}

pid_t spawn_profile(const fs::path& db) {
  const std::string workload = std::string(CORUN_SOURCE_DIR) + "/workloads/paper-n4.yaml";
  const std::string budget = std::to_string(kBudget);
  std::vector<std::string> args = {CORUN_BINARY, "profile",  workload,   "--plan",
                                   "meanfield",  "--budget", budget,     "--seed",
                                   "7",          "--out",    db.string()};
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
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
  const pid_t pid = spawn_profile(db);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return -1;
    if (count(db, "samples") >= at_least) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  return count(db, "samples");
}

int run_to_end(const fs::path& db) {
  const pid_t pid = spawn_profile(db);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

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

}  // namespace
}  // namespace corun
