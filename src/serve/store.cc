#include "corun/serve/store.h"

#include <sqlite3.h>

#include <nlohmann/json.hpp>
#include <system_error>

#include "corun/profile/sqlite_error.h"

namespace corun::serve {

namespace {

using profile::sqlite_error;

// A prepared statement that finalises itself.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) {
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
  sqlite3_stmt* s_ = nullptr;
};

Result<sqlite3*> open_connection(const std::filesystem::path& file, const char* synchronous) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      file.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Error e = sqlite_error(db, file, "opening the state database");
    sqlite3_close(db);
    return e;
  }
  sqlite3_busy_timeout(db, 5000);
  const std::string pragmas =
      std::string("PRAGMA journal_mode=WAL; PRAGMA synchronous=") + synchronous + ";";
  if (sqlite3_exec(db, pragmas.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    Error e = sqlite_error(db, file, "configuring the state database");
    sqlite3_close(db);
    return e;
  }
  return db;
}

// Steps a query to its end; false when SQLite stopped on an error instead (a damaged page
// met halfway must not pass for the end of the table).
template <class OnRow>
bool read_all(Stmt& q, OnRow on_row) {
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    if (!on_row()) return false;
  }
  return rc == SQLITE_DONE;
}

// What the service stores as JSON must read back as JSON (an object); a row that does not
// is a damaged file, reported before the service interprets any of it.
Status json_object(const std::filesystem::path& file, const std::string& text,
                   const std::string& where) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_object()) return {};
  return Error(file.string() + ": damaged state: " + where + " is not a JSON object",
               Error::Kind::kDamaged);
}

Status exec_sql(sqlite3* db, const std::filesystem::path& file, const char* sql,
                const std::string& what) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return sqlite_error(db, file, what);
  }
  return {};
}

// Runs one statement for rows 0..n-1 (bound by `bind_row`) in one transaction: all rows are
// stored, or none (a full disk at any row or at the commit rolls everything back).
template <class BindRow>
Status insert_all(sqlite3* db, const std::filesystem::path& file, const char* sql, std::size_t n,
                  BindRow bind_row, const std::string& what) {
  if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return sqlite_error(db, file, what);
  }
  auto fail = [&] {
    Error e = sqlite_error(db, file, what);  // before the rollback replaces the message
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    return e;
  };
  {
    Stmt q(db, sql);
    if (!q.ok()) return fail();
    for (std::size_t i = 0; i < n; ++i) {
      sqlite3_reset(q.get());
      bind_row(q, i);
      if (q.step() != SQLITE_DONE) return fail();
    }
  }
  if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) return fail();
  return {};
}

}  // namespace

Result<std::unique_ptr<StateStore>> StateStore::open(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Error("creating state directory " + dir.string() + ": " + ec.message(),
                 Error::Kind::kIo);
  const auto file = dir / "serve.db";
  // SQLite reads a file shorter than its 100-byte header as an empty database: a new state
  // would silently replace what was there.
  if (const auto bytes = std::filesystem::file_size(file, ec); !ec && bytes > 0 && bytes < 100) {
    return Error(file.string() + ": damaged state: " + std::to_string(bytes) +
                     " bytes, shorter than an SQLite header",
                 Error::Kind::kDamaged);
  }
  std::unique_ptr<StateStore> s(new StateStore());
  s->file_ = file;
  auto d = open_connection(file, "FULL");
  if (!d) return d.error();
  s->durable_ = *d;
  // Refuse a file cut short or with altered pages before creating tables in it.
  if (auto st = profile::check_structure(s->durable_, file); !st.ok()) return st.error();
  auto st =
      exec_sql(s->durable_, file,
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
               "COMMIT;",
               "initialising the state database");
  if (!st) {
    sqlite3_exec(s->durable_, "ROLLBACK", nullptr, nullptr, nullptr);
    return st.error();
  }
  {
    Stmt q(s->durable_, "SELECT MAX(version) FROM schema_version");
    if (!q.ok() || q.step() != SQLITE_ROW) {
      return sqlite_error(s->durable_, file, "reading the schema version");
    }
    const auto v = q.integer(0);
    if (v > kSchemaVersion) {
      return Error(file.string() + " has schema version " + std::to_string(v) +
                       ", newer than this corun (" + std::to_string(kSchemaVersion) + ")",
                   Error::Kind::kDamaged);
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
    if (!q.ok()) return sqlite_error(durable_, file_, "loading the device");
    const int rc = q.step();
    if (rc == SQLITE_ROW) {
      out.device = q.text(0);
    } else if (rc != SQLITE_DONE) {
      return sqlite_error(durable_, file_, "loading the device");
    }
  }
  Status bad;  // the first row that is not what the service wrote
  {
    Stmt q(durable_, "SELECT seq, name, spec FROM models ORDER BY seq");
    const bool whole = q.ok() && read_all(q, [&] {
                         out.models.push_back({q.text(1), q.text(2), q.integer(0)});
                         bad = json_object(file_, out.models.back().spec_json,
                                           "model '" + out.models.back().name + "'");
                         return bad.ok();
                       });
    if (!bad) return bad.error();
    if (!whole) return sqlite_error(durable_, file_, "loading models");
  }
  {
    Stmt q(durable_,
           "SELECT id, record FROM (SELECT id, record FROM plans ORDER BY id DESC LIMIT ?)"
           " ORDER BY id");
    if (q.ok()) q.bind(1, static_cast<std::int64_t>(max_plans));
    const bool whole = q.ok() && read_all(q, [&] {
                         out.plans.push_back({q.integer(0), q.text(1)});
                         bad = json_object(file_, out.plans.back().record_json,
                                           "plan " + std::to_string(out.plans.back().id));
                         return bad.ok();
                       });
    if (!bad) return bad.error();
    if (!whole) return sqlite_error(durable_, file_, "loading plans");
  }
  {
    // A telemetry summary is a running count the next samples rebuild: the service skips one
    // that does not read back (documented), so it is not checked here.
    Stmt q(durable_, "SELECT model, summary FROM telemetry ORDER BY model");
    const bool whole = q.ok() && read_all(q, [&] {
                         out.telemetry.emplace_back(q.text(0), q.text(1));
                         return true;
                       });
    if (!whole) return sqlite_error(durable_, file_, "loading telemetry");
  }
  {
    Stmt q(durable_, "SELECT sample FROM learning ORDER BY seq");
    const bool whole = q.ok() && read_all(q, [&] {
                         out.learning.push_back(q.text(0));
                         bad =
                             json_object(file_, out.learning.back(),
                                         "learning sample " + std::to_string(out.learning.size()));
                         return bad.ok();
                       });
    if (!bad) return bad.error();
    if (!whole) return sqlite_error(durable_, file_, "loading learning samples");
  }
  return out;
}

Status StateStore::append_learning(const std::vector<std::string>& samples) {
  if (samples.empty()) return {};
  std::lock_guard lock(telemetry_mutex_);
  return insert_all(
      telemetry_, file_, "INSERT INTO learning(sample) VALUES(?)", samples.size(),
      [&](Stmt& q, std::size_t i) { q.bind(1, samples[i]); }, "storing learning samples");
}

Status StateStore::set_device(const std::string& device) {
  std::lock_guard lock(durable_mutex_);
  Stmt q(durable_, "INSERT OR IGNORE INTO meta(key, value) VALUES('device', ?)");
  if (!q.ok()) return sqlite_error(durable_, file_, "storing device");
  q.bind(1, device);
  if (q.step() != SQLITE_DONE) return sqlite_error(durable_, file_, "storing device");
  return {};
}

Status StateStore::insert_model(const std::string& name, const std::string& spec_json) {
  std::lock_guard lock(durable_mutex_);
  Stmt q(durable_, "INSERT INTO models(name, spec) VALUES(?, ?)");
  if (!q.ok()) return sqlite_error(durable_, file_, "storing model " + name);
  q.bind(1, name);
  q.bind(2, spec_json);
  const int rc = q.step();
  if (rc == SQLITE_CONSTRAINT) return Error("model '" + name + "' exists");
  if (rc != SQLITE_DONE) return sqlite_error(durable_, file_, "storing model " + name);
  return {};
}

Status StateStore::update_model(const std::string& name, const std::string& spec_json) {
  std::lock_guard lock(durable_mutex_);
  Stmt q(durable_, "UPDATE models SET spec=? WHERE name=?");
  if (!q.ok()) return sqlite_error(durable_, file_, "updating model " + name);
  q.bind(1, spec_json);
  q.bind(2, name);
  if (q.step() != SQLITE_DONE) return sqlite_error(durable_, file_, "updating model " + name);
  return {};
}

Status StateStore::delete_model(const std::string& name) {
  std::lock_guard lock(durable_mutex_);
  Stmt q(durable_, "DELETE FROM models WHERE name=?");
  if (!q.ok()) return sqlite_error(durable_, file_, "removing model " + name);
  q.bind(1, name);
  if (q.step() != SQLITE_DONE) return sqlite_error(durable_, file_, "removing model " + name);
  return {};
}

Status StateStore::append_plan(std::int64_t decision, const std::string& record_json) {
  std::lock_guard lock(durable_mutex_);
  Stmt q(durable_, "INSERT OR REPLACE INTO plans(id, record) VALUES(?, ?)");
  if (!q.ok()) return sqlite_error(durable_, file_, "storing plan");
  q.bind(1, decision);
  q.bind(2, record_json);
  if (q.step() != SQLITE_DONE) return sqlite_error(durable_, file_, "storing plan");
  return {};
}

Status StateStore::save_telemetry(
    const std::vector<std::pair<std::string, std::string>>& summaries) {
  std::lock_guard lock(telemetry_mutex_);
  return insert_all(
      telemetry_, file_, "INSERT OR REPLACE INTO telemetry(model, summary) VALUES(?, ?)",
      summaries.size(),
      [&](Stmt& q, std::size_t i) {
        q.bind(1, summaries[i].first);
        q.bind(2, summaries[i].second);
      },
      "storing telemetry");
}

}  // namespace corun::serve
