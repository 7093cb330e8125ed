#include "corun/serve/store.h"

#include <sqlite3.h>

#include <system_error>

namespace corun::serve {

namespace {

Error db_error(sqlite3* db, const std::string& what) {
  return Error(what + ": " + (db != nullptr ? sqlite3_errmsg(db) : "cannot open"),
               Error::Kind::kIo);
}

// A prepared statement that finalises itself.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK) s_ = nullptr;
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  [[nodiscard]] bool ok() const { return s_ != nullptr; }
  sqlite3_stmt* get() { return s_; }
  void bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void bind(int i, std::int64_t v) { sqlite3_bind_int64(s_, i, v); }
  int step() { return sqlite3_step(s_); }
  std::string text(int col) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return p != nullptr ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, col)))
                        : std::string();
  }
  std::int64_t integer(int col) { return sqlite3_column_int64(s_, col); }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
};

Result<sqlite3*> open_connection(const std::filesystem::path& file, const char* synchronous) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      file.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Error e = db_error(db, "opening " + file.string());
    sqlite3_close(db);
    return e;
  }
  sqlite3_busy_timeout(db, 5000);
  const std::string pragmas =
      std::string("PRAGMA journal_mode=WAL; PRAGMA synchronous=") + synchronous + ";";
  char* msg = nullptr;
  if (sqlite3_exec(db, pragmas.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
    Error e("configuring " + file.string() + ": " + (msg != nullptr ? msg : "?"), Error::Kind::kIo);
    sqlite3_free(msg);
    sqlite3_close(db);
    return e;
  }
  return db;
}

}  // namespace

Status StateStore::exec(sqlite3* db, const std::string& sql) const {
  char* msg = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
    Error e("state database: " + std::string(msg != nullptr ? msg : "?"), Error::Kind::kIo);
    sqlite3_free(msg);
    return e;
  }
  return {};
}

Result<std::unique_ptr<StateStore>> StateStore::open(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Error("creating state directory " + dir.string() + ": " + ec.message(),
                 Error::Kind::kIo);
  const auto file = dir / "serve.db";
  std::unique_ptr<StateStore> s(new StateStore());
  auto d = open_connection(file, "FULL");
  if (!d) return d.error();
  s->durable_ = *d;
  auto st =
      s->exec(s->durable_,
              "BEGIN IMMEDIATE;"
              "CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL);"
              "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
              "CREATE TABLE IF NOT EXISTS models(seq INTEGER PRIMARY KEY AUTOINCREMENT,"
              " name TEXT UNIQUE NOT NULL, spec TEXT NOT NULL);"
              "CREATE TABLE IF NOT EXISTS plans(id INTEGER PRIMARY KEY, record TEXT NOT NULL);"
              "CREATE TABLE IF NOT EXISTS telemetry(model TEXT PRIMARY KEY,"
              " summary TEXT NOT NULL);"
              // Version 2: what online learning was taught, replayed at start.
              "CREATE TABLE IF NOT EXISTS learning(seq INTEGER PRIMARY KEY AUTOINCREMENT,"
              " sample TEXT NOT NULL);"
              "INSERT INTO schema_version(version) SELECT 2"
              " WHERE NOT EXISTS (SELECT 1 FROM schema_version WHERE version >= 2);"
              "COMMIT;");
  if (!st) return st.error().wrap("initialising " + file.string());
  {
    Stmt q(s->durable_, "SELECT MAX(version) FROM schema_version");
    if (!q.ok() || q.step() != SQLITE_ROW) return db_error(s->durable_, "reading schema version");
    const auto v = q.integer(0);
    if (v > kSchemaVersion) {
      return Error(file.string() + " has schema version " + std::to_string(v) +
                       ", newer than this corun (" + std::to_string(kSchemaVersion) + ")",
                   Error::Kind::kInvalidInput);
    }
  }
  auto t = open_connection(file, "NORMAL");
  if (!t) return t.error();
  s->telemetry_ = *t;
  return s;
}

StateStore::~StateStore() {
  sqlite3_close(telemetry_);
  sqlite3_close(durable_);
}

Result<StoredState> StateStore::load(std::size_t max_plans) const {
  std::lock_guard lock(durable_mutex_);
  StoredState out;
  {
    Stmt q(durable_, "SELECT value FROM meta WHERE key='device'");
    if (!q.ok()) return db_error(durable_, "loading state");
    if (q.step() == SQLITE_ROW) out.device = q.text(0);
  }
  {
    Stmt q(durable_, "SELECT seq, name, spec FROM models ORDER BY seq");
    if (!q.ok()) return db_error(durable_, "loading models");
    while (q.step() == SQLITE_ROW) out.models.push_back({q.text(1), q.text(2), q.integer(0)});
  }
  {
    Stmt q(durable_,
           "SELECT id, record FROM (SELECT id, record FROM plans ORDER BY id DESC LIMIT ?)"
           " ORDER BY id");
    if (!q.ok()) return db_error(durable_, "loading plans");
    q.bind(1, static_cast<std::int64_t>(max_plans));
    while (q.step() == SQLITE_ROW) out.plans.push_back({q.integer(0), q.text(1)});
  }
  {
    Stmt q(durable_, "SELECT model, summary FROM telemetry ORDER BY model");
    if (!q.ok()) return db_error(durable_, "loading telemetry");
    while (q.step() == SQLITE_ROW) out.telemetry.emplace_back(q.text(0), q.text(1));
  }
  {
    Stmt q(durable_, "SELECT sample FROM learning ORDER BY seq");
    if (!q.ok()) return db_error(durable_, "loading learning samples");
    while (q.step() == SQLITE_ROW) out.learning.push_back(q.text(0));
  }
  return out;
}

Status StateStore::append_learning(const std::vector<std::string>& samples) {
  if (samples.empty()) return {};
  std::lock_guard lock(telemetry_mutex_);
  auto st = exec(telemetry_, "BEGIN IMMEDIATE");
  if (!st) return st;
  {
    Stmt q(telemetry_, "INSERT INTO learning(sample) VALUES(?)");
    if (!q.ok()) {
      (void)exec(telemetry_, "ROLLBACK");
      return db_error(telemetry_, "storing learning samples");
    }
    for (const auto& s : samples) {
      sqlite3_reset(q.get());
      q.bind(1, s);
      if (q.step() != SQLITE_DONE) {
        (void)exec(telemetry_, "ROLLBACK");
        return db_error(telemetry_, "storing learning samples");
      }
    }
  }
  return exec(telemetry_, "COMMIT");
}

Status StateStore::set_device(const std::string& device) {
  std::lock_guard lock(durable_mutex_);
  Stmt q(durable_, "INSERT OR IGNORE INTO meta(key, value) VALUES('device', ?)");
  if (!q.ok()) return db_error(durable_, "storing device");
  q.bind(1, device);
  if (q.step() != SQLITE_DONE) return db_error(durable_, "storing device");
  return {};
}

Status StateStore::insert_model(const std::string& name, const std::string& spec_json) {
  std::lock_guard lock(durable_mutex_);
  Stmt q(durable_, "INSERT INTO models(name, spec) VALUES(?, ?)");
  if (!q.ok()) return db_error(durable_, "storing model " + name);
  q.bind(1, name);
  q.bind(2, spec_json);
  const int rc = q.step();
  if (rc == SQLITE_CONSTRAINT) return Error("model '" + name + "' exists");
  if (rc != SQLITE_DONE) return db_error(durable_, "storing model " + name);
  return {};
}

Status StateStore::update_model(const std::string& name, const std::string& spec_json) {
  std::lock_guard lock(durable_mutex_);
  Stmt q(durable_, "UPDATE models SET spec=? WHERE name=?");
  if (!q.ok()) return db_error(durable_, "updating model " + name);
  q.bind(1, spec_json);
  q.bind(2, name);
  if (q.step() != SQLITE_DONE) return db_error(durable_, "updating model " + name);
  return {};
}

Status StateStore::delete_model(const std::string& name) {
  std::lock_guard lock(durable_mutex_);
  Stmt q(durable_, "DELETE FROM models WHERE name=?");
  if (!q.ok()) return db_error(durable_, "removing model " + name);
  q.bind(1, name);
  if (q.step() != SQLITE_DONE) return db_error(durable_, "removing model " + name);
  return {};
}

Status StateStore::append_plan(std::int64_t id, const std::string& record_json) {
  std::lock_guard lock(durable_mutex_);
  Stmt q(durable_, "INSERT OR REPLACE INTO plans(id, record) VALUES(?, ?)");
  if (!q.ok()) return db_error(durable_, "storing plan");
  q.bind(1, id);
  q.bind(2, record_json);
  if (q.step() != SQLITE_DONE) return db_error(durable_, "storing plan");
  return {};
}

Status StateStore::save_telemetry(
    const std::vector<std::pair<std::string, std::string>>& summaries) {
  std::lock_guard lock(telemetry_mutex_);
  auto st = exec(telemetry_, "BEGIN IMMEDIATE");
  if (!st) return st;
  {
    Stmt q(telemetry_, "INSERT OR REPLACE INTO telemetry(model, summary) VALUES(?, ?)");
    if (!q.ok()) {
      (void)exec(telemetry_, "ROLLBACK");
      return db_error(telemetry_, "storing telemetry");
    }
    for (const auto& [model, summary] : summaries) {
      sqlite3_reset(q.get());
      q.bind(1, model);
      q.bind(2, summary);
      if (q.step() != SQLITE_DONE) {
        (void)exec(telemetry_, "ROLLBACK");
        return db_error(telemetry_, "storing telemetry");
      }
    }
  }
  return exec(telemetry_, "COMMIT");
}

}  // namespace corun::serve
