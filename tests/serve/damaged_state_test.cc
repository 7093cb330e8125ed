// serve.db, the state a restarted `corun serve` reloads, damaged on disk (cut short, bytes
// altered at seeded offsets, emptied, from a newer schema) and written on a full disk. A damaged
// file stops the start with exit code 3 and a message naming it; what the server writes on a
// full disk is refused whole, and everything acknowledged before stays readable.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "../core/child_process.h"
#include "../core/damaged_files.h"
#include "corun/catalog/catalog.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/service.h"
#include "corun/serve/store.h"
#include "serve_test_util.h"

namespace corun::serve::damaged_state_test {
namespace {

using nlohmann::json;
using testing::TempDir;

constexpr const char* kToken = "damaged-state-token-0123456789";

// The options of every service here: state in `dir`, the greedy solver, no replan delay.
ServiceOptions options(const std::filesystem::path& dir) {
  ServiceOptions o;
  o.state_dir = dir;
  o.token = kToken;
  o.solver = "greedy";
  o.min_replan_interval_ms = 0;
  return o;
}

// A state directory with two models, plans and a learned sample, written by a service that
// then stopped (its last connection checkpoints the WAL into serve.db).
std::string stored_state(const std::filesystem::path& dir) {
  {
    auto s = Service::open(Context{}, options(dir), Catalog::default_catalog(),
                           std::make_unique<TwinSource>());
    if (!s.ok()) return "";
    for (const char* m : {testing::kCam0, testing::kChat}) {
      if (testing::call_service(**s, kToken, "POST", "/v1/models", m).status != 201) return "";
    }
    json plan;
    for (int i = 0; i < 200 && plan["models"].size() != 2; ++i) {
      (*s)->wait_for_plan((*s)->plan_id() - 1, 10000);
      plan =
          json::parse(testing::call_service(**s, kToken, "GET", "/v1/plan").body, nullptr, false);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (plan["models"].size() != 2) return "";
    // Let a registration's re-plan still queued run first: the next decision is the breach's.
    if (!testing::settle(**s, kToken)) return "";
    plan = json::parse(testing::call_service(**s, kToken, "GET", "/v1/plan").body, nullptr, false);
    const json breach = {{"model", "cam0"}, {"plan_id", plan["id"]}, {"latency_ms_p95", 500.0}};
    const std::int64_t decided = (*s)->decision();
    if (testing::call_service(**s, kToken, "POST", "/v1/telemetry", breach.dump()).status != 202)
      return "";
    (*s)->wait_for_decision(decided, 30000);
  }
  if (std::filesystem::exists(dir / "serve.db-wal")) return "";
  return corun::testing::read_bytes(dir / "serve.db");
}

// Whether the corun binary can be started here: the sanitizer build runs the in-process
// checks only.
bool binary_usable() {
#if defined(__SANITIZE_ADDRESS__)
  return false;
#else
  return std::filesystem::exists(CORUN_BINARY);
#endif
}

// Places `bytes` as the serve.db of a fresh state directory dir/state.
std::filesystem::path state_with(const std::filesystem::path& dir, const std::string& bytes) {
  const auto state = dir / "state";
  std::filesystem::remove_all(state);
  std::filesystem::create_directories(state);
  corun::testing::write_bytes(state / "serve.db", bytes);
  return state;
}

// Service::open on a state directory holding `bytes` as serve.db: the error, or "" when it
// opened.
std::string open_in_process(const std::filesystem::path& dir, const std::string& bytes,
                            Error::Kind* kind) {
  auto s = Service::open(Context{}, options(state_with(dir, bytes)), Catalog::default_catalog(),
                         std::make_unique<TwinSource>());
  if (s.ok()) return "";
  *kind = s.error().kind();
  return s.error().what();
}

// `corun serve` on a state directory holding `bytes` as serve.db.
corun::testing::ChildResult serve_on(const std::filesystem::path& dir, const std::string& bytes) {
  const auto state = state_with(dir, bytes);
  corun::testing::write_bytes(dir / "token", std::string(kToken) + "\n");
  return corun::testing::run_corun(
      {"serve", "--state", state.string(), "--port", "0", "--port-file", (dir / "port").string(),
       "--token-file", (dir / "token").string(), "--solver", "greedy"},
      dir / "stderr.txt", 0, dir / "port", 60);
}

TEST(DamagedServeState, EveryDamagedCopyIsRefusedNamingTheFileOrIsServed) {
  TempDir dir;
  const std::string original = stored_state(dir.path() / "original");
  ASSERT_FALSE(original.empty());
  const std::string db = (dir.path() / "state" / "serve.db").string();
  const bool cli = binary_usable();
  int refused = 0;
  for (const auto& d : corun::testing::damaged_copies(original, 14, 24)) {
    SCOPED_TRACE(d.label);
    Error::Kind kind = Error::Kind::kInternal;
    const std::string error = open_in_process(dir.path(), d.bytes, &kind);
    if (!error.empty()) {
      ++refused;
      EXPECT_EQ(kind, Error::Kind::kDamaged) << error;
      EXPECT_NE(error.find(db), std::string::npos) << error;
    }
    // An empty file is what a crash while creating the state leaves: a new state.
    if (d.label == "empty") {
      EXPECT_EQ(error, "");
    }
    // The binary exits 3 on what the service refused (a start that succeeds is the pristine
    // case below: starting a server for every copy would take minutes).
    if (!cli || error.empty()) continue;
    const auto r = serve_on(dir.path(), d.bytes);
    EXPECT_EQ(r.signal, 0) << r.err;  // never a crash
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_NE(r.err.find(db), std::string::npos) << r.err;
  }
  EXPECT_GT(refused, 0);
  // Cut short before its last page, the file is refused: its pages are missing.
  for (std::size_t cut : {std::size_t{1}, original.size() / 2}) {
    Error::Kind kind = Error::Kind::kInternal;
    const std::string error = open_in_process(dir.path(), original.substr(0, cut), &kind);
    EXPECT_EQ(kind, Error::Kind::kDamaged) << "cut at " << cut << ": " << error;
    EXPECT_NE(error.find(db), std::string::npos) << error;
  }
  // The pristine copy is served.
  Error::Kind kind = Error::Kind::kInternal;
  EXPECT_EQ(open_in_process(dir.path(), original, &kind), "");
  if (cli) {
    EXPECT_TRUE(serve_on(dir.path(), original).ready);
  }
}

TEST(DamagedServeState, ANewerSchemaVersionIsRefusedAsDamaged) {
  TempDir dir;
  const std::string original = stored_state(dir.path() / "original");
  ASSERT_FALSE(original.empty());
  const auto newer = dir.path() / "newer.db";
  corun::testing::write_bytes(newer, original);
  ASSERT_EQ(corun::testing::alter_sqlite(newer, "INSERT INTO schema_version(version) VALUES (9)"),
            "");
  Error::Kind kind = Error::Kind::kInternal;
  const std::string error = open_in_process(dir.path(), corun::testing::read_bytes(newer), &kind);
  EXPECT_EQ(kind, Error::Kind::kDamaged);
  EXPECT_NE(error.find("serve.db has schema version 9"), std::string::npos) << error;
  if (!binary_usable()) return;
  const auto r = serve_on(dir.path(), corun::testing::read_bytes(newer));
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("serve.db has schema version 9"), std::string::npos) << r.err;
}

TEST(DamagedServeState, ARowThatIsNotJsonNamesTheFileAndTheRow) {
  TempDir dir;
  const std::string original = stored_state(dir.path() / "original");
  ASSERT_FALSE(original.empty());
  const auto path = dir.path() / "altered.db";
  corun::testing::write_bytes(path, original);
  ASSERT_EQ(corun::testing::alter_sqlite(
                path, "UPDATE models SET spec = '{\"name\": \"cam0\"' WHERE name = 'cam0'"),
            "");
  Error::Kind kind = Error::Kind::kInternal;
  const std::string error = open_in_process(dir.path(), corun::testing::read_bytes(path), &kind);
  EXPECT_EQ(kind, Error::Kind::kDamaged);
  EXPECT_NE(error.find("serve.db: damaged state: model 'cam0' is not a JSON object"),
            std::string::npos)
      << error;
}

// Runs `child` in a forked process whose files may not grow past `limit_bytes` (RLIMIT_FSIZE,
// SIGXFSZ ignored: a write past it fails with EFBIG as on a full disk) and returns the report
// it wrote ("" when the child failed before writing one).
std::string report_of_child_under_file_limit(const std::filesystem::path& dir,
                                             std::uint64_t limit_bytes,
                                             const std::function<std::string()>& child) {
  const auto report = dir / "child.txt";
  corun::testing::ChildOptions options;
  options.file_size_limit = limit_bytes;
  auto process = corun::testing::ChildProcess::fork_and_run(
      [&] {
        const std::string text = child();
        if (text.empty()) return 20;
        corun::testing::write_bytes(report, text);
        return 0;
      },
      options);
  if (process.wait().code != 0) return "";
  return corun::testing::read_bytes(report);
}

// Registrations written under a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored): a write past
// it fails with EFBIG as on a full disk. The child registers until the store refuses; the
// parent then reads back exactly what was acknowledged.
TEST(DamagedServeState, AFullDiskRefusesTheWriteWholeAndKeepsWhatWasAcknowledged) {
  TempDir dir;
  {
    auto store = StateStore::open(dir.path());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->insert_model("m0", R"({"name": "m0"})").ok());
  }
  const std::string padding(2000, 'p');
  const std::string report = report_of_child_under_file_limit(dir.path(), 96 * 1024, [&] {
    auto store = StateStore::open(dir.path());
    if (!store.ok()) return std::string();
    int acknowledged = 0;
    Status st;
    for (int i = 1; i <= 1000 && st.ok(); ++i) {
      const std::string name = "m" + std::to_string(i);
      st = (*store)->insert_model(name,
                                  R"({"name": ")" + name + R"(", "pad": ")" + padding + R"("})");
      if (st.ok()) ++acknowledged;
    }
    if (st.ok()) return std::string();
    return std::to_string(acknowledged) + "\n" +
           std::to_string(static_cast<int>(st.error().kind())) + "\n" + st.error().what();
  });
  ASSERT_FALSE(report.empty());
  std::istringstream in(report);
  int acknowledged = 0, kind = 0;
  std::string message;
  in >> acknowledged >> kind;
  std::getline(in >> std::ws, message);
  EXPECT_GT(acknowledged, 0);
  EXPECT_EQ(kind, static_cast<int>(Error::Kind::kIo));
  EXPECT_NE(message.find((dir.path() / "serve.db").string()), std::string::npos) << message;
  // SQLITE_FULL on a short write, SQLITE_IOERR_WRITE on a write refused whole (EFBIG).
  EXPECT_TRUE(message.find("disk is full") != std::string::npos ||
              message.find("disk may be full") != std::string::npos)
      << message;

  auto store = StateStore::open(dir.path());  // quick_check passes: no half-written page
  ASSERT_TRUE(store.ok()) << store.error().what();
  auto st = (*store)->load(10);
  ASSERT_TRUE(st.ok()) << st.error().what();
  ASSERT_EQ(st->models.size(), static_cast<std::size_t>(acknowledged) + 1);
  for (std::size_t i = 1; i < st->models.size(); ++i) {
    EXPECT_EQ(st->models[i].name, "m" + std::to_string(i));
    EXPECT_EQ(json::parse(st->models[i].spec_json)["pad"], padding);
  }
}

// The API on a full disk (RLIMIT_FSIZE in a forked child, SIGXFSZ ignored): a registration
// the store cannot write is answered 503 `storage_unavailable` with a Retry-After (the
// client may retry once room was made; it is not the client's fault, so not a 4xx, and not
// a crash of the server, so not a 500), and every registration answered 201 before is in
// serve.db when the service is opened again without the limit.
TEST(DamagedServeState, AFullDiskIsA503WithRetryAfterAndLosesNoAcknowledgedRegistration) {
  TempDir dir;
  const std::string report = report_of_child_under_file_limit(dir.path(), 128 * 1024, [&] {
    auto s = Service::open(Context{}, options(dir.path()), Catalog::default_catalog(),
                           std::make_unique<TwinSource>());
    if (!s.ok()) return std::string();
    int acknowledged = 0;
    HttpResponse last;
    for (int i = 0; i < 60; ++i) {
      json entry = json::parse(testing::kCam0);
      entry["name"] = "cam" + std::to_string(i);
      last = testing::call_service(**s, kToken, "POST", "/v1/models", entry.dump());
      if (last.status != 201) break;
      ++acknowledged;
    }
    std::string retry_after = "-";
    for (const auto& [k, v] : last.headers) {
      if (k == "Retry-After") retry_after = v;
    }
    const json body = json::parse(last.body, nullptr, false);
    const json err = body.is_object() && body.contains("error") ? body["error"] : json::object();
    return std::to_string(acknowledged) + " " + std::to_string(last.status) + " " + retry_after +
           " " + err.value("code", "-") + "\n" + err.value("message", "");
  });
  ASSERT_FALSE(report.empty());
  std::istringstream in(report);
  int acknowledged = 0, http_status = 0;
  std::string retry_after, code, message;
  in >> acknowledged >> http_status >> retry_after >> code;
  std::getline(in >> std::ws, message);
  EXPECT_GT(acknowledged, 0);
  EXPECT_EQ(http_status, 503);
  EXPECT_EQ(retry_after, "5");
  EXPECT_EQ(code, "storage_unavailable");
  EXPECT_NE(message.find("serve.db"), std::string::npos) << message;

  auto s = Service::open(Context{}, options(dir.path()), Catalog::default_catalog(),
                         std::make_unique<TwinSource>());
  ASSERT_TRUE(s.ok()) << s.error().what();
  const json models =
      json::parse(testing::call_service(**s, kToken, "GET", "/v1/models").body, nullptr, false);
  ASSERT_TRUE(models["models"].is_array()) << models.dump();
  EXPECT_EQ(models["models"].size(), static_cast<std::size_t>(acknowledged));
}

}  // namespace
}  // namespace corun::serve::damaged_state_test
