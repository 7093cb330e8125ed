#include "corun/profile/dataset.h"

#include <sqlite3.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>
#include <utility>

#include "corun/core/clock.h"
#include "corun/core/strings.h"
#include "corun/core/version.h"
#include "corun/profile/sqlite_error.h"

namespace corun::profile {

namespace {

// Campaign identity and provenance; samples and rows are keyed so that INSERT OR IGNORE makes
// every write idempotent. Seeds are stored as decimal text: SQLite integers are signed.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS workloads(
  hash TEXT PRIMARY KEY, name TEXT NOT NULL, file TEXT NOT NULL, text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS campaigns(
  id INTEGER PRIMARY KEY,
  key TEXT UNIQUE NOT NULL,
  plan TEXT NOT NULL,
  seed TEXT NOT NULL,
  testbed TEXT NOT NULL,
  window_s REAL NOT NULL,
  device TEXT NOT NULL,
  workload_hash TEXT NOT NULL REFERENCES workloads(hash),
  total_samples INTEGER NOT NULL,
  corun_version TEXT NOT NULL,
  git_hash TEXT NOT NULL,
  schema_version INTEGER NOT NULL,
  created_utc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS samples(
  campaign INTEGER NOT NULL REFERENCES campaigns(id),
  sample INTEGER NOT NULL,
  config TEXT NOT NULL,
  measurement_seed TEXT NOT NULL,
  testbed TEXT NOT NULL,
  device TEXT NOT NULL,
  sm_util REAL, mem_bw_util REAL, vram_used_gb REAL, power_w REAL, clock_mhz REAL,
  error TEXT,
  PRIMARY KEY(campaign, sample)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rows(
  campaign INTEGER NOT NULL,
  sample INTEGER NOT NULL,
  model INTEGER NOT NULL,
  name TEXT NOT NULL,
  local_config INTEGER NOT NULL,
  config TEXT NOT NULL,
  latency_ms_p50 REAL, latency_ms_p95 REAL, throughput REAL, ttft_ms_p95 REAL,
  tpot_ms_p95 REAL,
  error TEXT,
  PRIMARY KEY(campaign, sample, model)) WITHOUT ROWID;
)sql";

// A prepared statement that finalises itself.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  [[nodiscard]] bool ok() const { return rc_ == SQLITE_OK; }
  [[nodiscard]] std::string error() const { return sqlite3_errmsg(db_); }

  void bind(int i, std::int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void bind(int i, double v) {
    // NaN and infinities have no SQL value; they mean "not measured".
    if (std::isfinite(v)) {
      sqlite3_bind_double(stmt_, i, v);
    } else {
      sqlite3_bind_null(stmt_, i);
    }
  }
  void bind(int i, const std::optional<double>& v) {
    if (v) {
      bind(i, *v);
    } else {
      sqlite3_bind_null(stmt_, i);
    }
  }
  void bind(int i, std::string_view s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void bind_error(int i, const std::string& e) {
    if (e.empty()) {
      sqlite3_bind_null(stmt_, i);
    } else {
      bind(i, std::string_view(e));
    }
  }

  /// Makes the statement runnable again with fresh bindings.
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  /// SQLITE_ROW, SQLITE_DONE or an error code.
  int step() { return sqlite3_step(stmt_); }

  [[nodiscard]] std::int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  [[nodiscard]] double real(int col) const {
    return sqlite3_column_type(stmt_, col) == SQLITE_NULL ? std::nan("")
                                                          : sqlite3_column_double(stmt_, col);
  }
  [[nodiscard]] std::optional<double> optional_real(int col) const {
    if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_double(stmt_, col);
  }
  [[nodiscard]] std::string text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
};

std::string format_config(std::span<const std::int32_t> c) {
  std::string out;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(c[i]);
  }
  return out;
}

Result<JointConfig> parse_joint(const std::string& s) {
  JointConfig c;
  for (const auto& part : split(s, ',')) {
    std::int32_t v = 0;
    const auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec != std::errc() || p != part.data() + part.size()) {
      return Error("damaged dataset: malformed joint configuration '" + s + "'",
                   Error::Kind::kDamaged);
    }
    c.push_back(v);
  }
  return c;
}

Result<std::uint64_t> parse_u64(const std::string& s) {
  std::uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) {
    return Error("damaged dataset: malformed unsigned integer '" + s + "'", Error::Kind::kDamaged);
  }
  return v;
}

std::string campaign_key(const CampaignSpec& spec, std::string_view workload_hash) {
  char window[64];
  std::snprintf(window, sizeof window, "%.17g", spec.window_s);
  return std::string(to_string(spec.plan)) + "|" + std::to_string(spec.context.seed) + "|" +
         spec.testbed + "|" + std::string(workload_hash) + "|" + window;
}

// Runs a write transaction; rolls back on failure so that nothing half-written stays.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {
    ok_ = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  ~Transaction() {
    if (ok_ && !committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  [[nodiscard]] bool ok() const { return ok_; }
  bool commit() {
    committed_ = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK;
    return committed_;
  }

 private:
  sqlite3* db_;
  bool ok_ = false;
  bool committed_ = false;
};

}  // namespace

Result<Dataset> Dataset::open(const std::filesystem::path& path, Mode mode) {
  sqlite3* db = nullptr;
  const int flags =
      mode == Mode::kCreate ? (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) : SQLITE_OPEN_READONLY;
  if (mode == Mode::kReadOnly) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      return Error("dataset " + path.string() + " does not exist", Error::Kind::kNotFound);
    }
    // SQLite reads an empty file as an empty database; for a reader it is a lost dataset.
    // A writer (kCreate) starts a new dataset there: what a crash while creating one leaves.
    if (std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) == 0) {
      return Error(path.string() + ": damaged dataset: the file is empty", Error::Kind::kDamaged);
    }
  }
  // SQLite reads a file shorter than its 100-byte header as an empty database too.
  {
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(path, ec);
    if (!ec && bytes > 0 && bytes < 100) {
      return Error(path.string() + ": damaged dataset: " + std::to_string(bytes) +
                       " bytes, shorter than an SQLite header",
                   Error::Kind::kDamaged);
    }
  }
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    Error e = sqlite_error(db, path, "cannot open the dataset");
    sqlite3_close(db);
    return e;
  }
  Dataset ds(db, path);
  // Several processes may read while a campaign writes; wait rather than fail on a lock.
  sqlite3_busy_timeout(db, 10000);
  // A file cut short or with altered pages is refused before a campaign adds to it.
  if (auto s = check_structure(db, path); !s.ok()) return s.error();
  if (mode == Mode::kCreate) {
    // WAL keeps a committed sample across kill -9; NORMAL sync only risks the last commits on
    // power loss, which a rerun measures again.
    if (auto s = ds.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"); !s.ok()) {
      return Error(path.string() + " is not a corun dataset (" + s.error().message() + ")");
    }
    // Never add corun's tables to somebody else's database.
    Stmt tables(db, "SELECT COUNT(*), SUM(name = 'meta') FROM sqlite_master WHERE type = 'table'");
    if (!tables.ok() || tables.step() != SQLITE_ROW) {
      return Error(path.string() + " is not a corun dataset (" + tables.error() + ")");
    }
    if (tables.int64(0) > 0 && tables.int64(1) == 0) {
      return Error(path.string() +
                   " is an SQLite database but not a corun dataset (no meta table)");
    }
    if (auto s = ds.exec(kSchema); !s.ok()) return s.error().wrap(path.string());
    Stmt put(db,
             "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?1), "
             "('kind', 'corun-dataset'), ('created_by', ?2)");
    put.bind(1, std::string_view(std::to_string(kDatasetSchemaVersion)));
    put.bind(2, std::string_view("corun " + std::string(version()) + " (" +
                                 std::string(git_hash()) + ")"));
    if (!put.ok() || put.step() != SQLITE_DONE) {
      return sqlite_error(db, path, "writing the dataset's identity");
    }
  }
  Stmt get(db, "SELECT key, value FROM meta WHERE key IN ('schema_version', 'kind')");
  if (!get.ok()) {
    return Error(path.string() + " is not a corun dataset (" + get.error() + ")");
  }
  std::map<std::string, std::string> meta;
  while (get.step() == SQLITE_ROW) meta[get.text(0)] = get.text(1);
  // A meta table that does not say so: a corun dataset whose identity was altered, or a
  // stranger's; either way nothing here can be trusted (exit code 3).
  if (meta["kind"] != "corun-dataset") {
    return Error(
        path.string() + ": damaged dataset or not a corun dataset (no meta.kind = corun-dataset)",
        Error::Kind::kDamaged);
  }
  if (meta["schema_version"] != std::to_string(kDatasetSchemaVersion)) {
    return Error(path.string() + ": dataset schema version " + meta["schema_version"] +
                     ", this corun reads version " + std::to_string(kDatasetSchemaVersion),
                 Error::Kind::kDamaged);
  }
  return ds;
}

Dataset::Dataset(Dataset&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

Dataset& Dataset::operator=(Dataset&& other) noexcept {
  if (this != &other) {
    sqlite3_close(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

Dataset::~Dataset() { sqlite3_close(db_); }

Status Dataset::exec(const char* sql) const {
  char* msg = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
    Error e(std::string("sqlite: ") + (msg ? msg : "unknown error"), Error::Kind::kIo);
    sqlite3_free(msg);
    return e;
  }
  return {};
}

Result<std::int64_t> Dataset::ensure_campaign(const CampaignSpec& spec, const Workload& w,
                                              std::string_view workload_text,
                                              std::string_view device_name,
                                              std::uint64_t total_samples) {
  Transaction tx(db_);
  if (!tx.ok()) return sqlite_error(db_, path_, "starting a transaction");
  {
    Stmt put(db_, "INSERT OR IGNORE INTO workloads(hash, name, file, text) VALUES (?1,?2,?3,?4)");
    put.bind(1, std::string_view(w.hash));
    put.bind(2, std::string_view(std::filesystem::path(w.file).stem().string()));
    put.bind(3, std::string_view(w.file));
    put.bind(4, workload_text);
    if (!put.ok() || put.step() != SQLITE_DONE)
      return sqlite_error(db_, path_, "storing the workload");
  }
  const std::string key = campaign_key(spec, w.hash);
  {
    Stmt put(db_,
             "INSERT OR IGNORE INTO campaigns(key, plan, seed, testbed, window_s, device, "
             "workload_hash, total_samples, corun_version, git_hash, schema_version, "
             "created_utc) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)");
    put.bind(1, std::string_view(key));
    put.bind(2, to_string(spec.plan));
    put.bind(3, std::string_view(std::to_string(spec.context.seed)));
    put.bind(4, std::string_view(spec.testbed));
    put.bind(5, spec.window_s);
    put.bind(6, device_name);
    put.bind(7, std::string_view(w.hash));
    put.bind(8, static_cast<std::int64_t>(total_samples));
    put.bind(9, version());
    put.bind(10, git_hash());
    put.bind(11, static_cast<std::int64_t>(kDatasetSchemaVersion));
    put.bind(12, std::string_view(utc_now_rfc3339()));
    if (!put.ok() || put.step() != SQLITE_DONE)
      return sqlite_error(db_, path_, "creating the campaign");
  }
  {
    Stmt grow(db_, "UPDATE campaigns SET total_samples = MAX(total_samples, ?1) WHERE key = ?2");
    grow.bind(1, static_cast<std::int64_t>(total_samples));
    grow.bind(2, std::string_view(key));
    if (!grow.ok() || grow.step() != SQLITE_DONE)
      return sqlite_error(db_, path_, "updating the campaign");
  }
  Stmt get(db_, "SELECT id, device FROM campaigns WHERE key = ?1");
  get.bind(1, std::string_view(key));
  if (!get.ok() || get.step() != SQLITE_ROW)
    return sqlite_error(db_, path_, "reading the campaign");
  const std::int64_t id = get.int64(0);
  if (get.text(1) != device_name) {
    return Error("campaign " + key + " in " + path_.string() + " was measured on device '" +
                 get.text(1) + "', not '" + std::string(device_name) + "'");
  }
  if (!tx.commit()) return sqlite_error(db_, path_, "committing the campaign");
  return id;
}

Result<std::vector<std::uint64_t>> Dataset::stored_indices(std::int64_t campaign) const {
  Stmt q(db_, "SELECT sample FROM samples WHERE campaign = ?1 ORDER BY sample");
  if (!q.ok()) return sqlite_error(db_, path_, "reading stored samples");
  q.bind(1, campaign);
  std::vector<std::uint64_t> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) out.push_back(static_cast<std::uint64_t>(q.int64(0)));
  if (rc != SQLITE_DONE) return sqlite_error(db_, path_, "reading stored samples");
  return out;
}

Status Dataset::insert(std::int64_t campaign, const SampleRecord& r) {
  Transaction tx(db_);
  if (!tx.ok()) return sqlite_error(db_, path_, "starting a transaction");
  const Measurement& m = r.measurement;
  {
    Stmt put(db_,
             "INSERT OR IGNORE INTO samples(campaign, sample, config, measurement_seed, testbed, "
             "device, sm_util, mem_bw_util, vram_used_gb, power_w, clock_mhz, error) VALUES "
             "(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)");
    if (!put.ok()) return sqlite_error(db_, path_, "preparing a sample insert");
    put.bind(1, campaign);
    put.bind(2, static_cast<std::int64_t>(r.index));
    put.bind(3, std::string_view(format_config(r.config)));
    put.bind(4, std::string_view(std::to_string(r.measurement_seed)));
    put.bind(5, std::string_view(m.testbed));
    put.bind(6, std::string_view(m.device));
    put.bind(7, m.gpu.sm_util);
    put.bind(8, m.gpu.mem_bw_util);
    put.bind(9, m.gpu.vram_used_gb);
    put.bind(10, m.gpu.power_w);
    put.bind(11, m.gpu.clock_mhz);
    put.bind_error(12, m.error);
    if (put.step() != SQLITE_DONE) {
      return sqlite_error(db_, path_, "storing sample " + std::to_string(r.index));
    }
  }
  Stmt row(db_,
           "INSERT OR IGNORE INTO rows(campaign, sample, model, name, local_config, config, "
           "latency_ms_p50, latency_ms_p95, throughput, ttft_ms_p95, tpot_ms_p95, error) VALUES "
           "(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)");
  if (!row.ok()) return sqlite_error(db_, path_, "preparing a row insert");
  for (const ModelMetrics& mm : m.models) {
    row.bind(1, campaign);
    row.bind(2, static_cast<std::int64_t>(r.index));
    row.bind(3, static_cast<std::int64_t>(mm.model));
    row.bind(4, std::string_view(mm.name));
    const std::int32_t local = mm.model < r.config.size() ? r.config[mm.model] : kAbsent;
    row.bind(5, static_cast<std::int64_t>(local));
    row.bind(6, std::string_view(mm.config));
    const bool ok = mm.ok();
    row.bind(7, ok ? mm.latency_ms_p50 : std::nan(""));
    row.bind(8, ok ? mm.latency_ms_p95 : std::nan(""));
    row.bind(9, ok ? mm.throughput : std::nan(""));
    row.bind(10, ok ? mm.ttft_ms_p95 : std::nullopt);
    row.bind(11, ok ? mm.tpot_ms_p95 : std::nullopt);
    row.bind_error(12, mm.error);
    if (row.step() != SQLITE_DONE) {
      return sqlite_error(db_, path_, "storing a row of sample " + std::to_string(r.index));
    }
    row.reset();
  }
  if (!tx.commit()) return sqlite_error(db_, path_, "committing sample " + std::to_string(r.index));
  return {};
}

Result<std::vector<CampaignInfo>> Dataset::campaigns() const {
  Stmt q(db_,
         "SELECT c.id, c.plan, c.seed, c.testbed, c.window_s, c.device, c.workload_hash, "
         "c.total_samples, c.corun_version, c.git_hash, c.schema_version, c.created_utc, "
         "w.name, (SELECT COUNT(*) FROM samples s WHERE s.campaign = c.id), w.file "
         "FROM campaigns c LEFT JOIN workloads w ON w.hash = c.workload_hash ORDER BY c.id");
  if (!q.ok()) return sqlite_error(db_, path_, "reading campaigns");
  std::vector<CampaignInfo> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    CampaignInfo c;
    c.id = q.int64(0);
    const auto plan = parse_plan(q.text(1));
    if (!plan) {
      return Error(path_.string() + ": damaged dataset: unknown plan '" + q.text(1) + "'",
                   Error::Kind::kDamaged);
    }
    c.spec.plan = *plan;
    auto seed = parse_u64(q.text(2));
    if (!seed) return seed.error().wrap(path_.string());
    c.spec.context.seed = *seed;
    c.spec.testbed = q.text(3);
    c.spec.window_s = q.real(4);
    c.device = q.text(5);
    c.workload_hash = q.text(6);
    c.total_samples = static_cast<std::uint64_t>(q.int64(7));
    c.corun_version = q.text(8);
    c.git_hash = q.text(9);
    c.schema_version = static_cast<int>(q.int64(10));
    c.created_utc = q.text(11);
    c.workload_name = q.text(12);
    c.stored_samples = static_cast<std::uint64_t>(q.int64(13));
    c.workload_file = q.text(14);
    out.push_back(std::move(c));
  }
  if (rc != SQLITE_DONE) return sqlite_error(db_, path_, "reading campaigns");
  return out;
}

Result<std::vector<SampleRecord>> Dataset::samples(std::int64_t campaign) const {
  std::vector<SampleRecord> out;
  std::map<std::uint64_t, std::size_t> at;
  {
    Stmt q(db_,
           "SELECT sample, config, measurement_seed, testbed, device, sm_util, mem_bw_util, "
           "vram_used_gb, power_w, clock_mhz, error FROM samples WHERE campaign = ?1 "
           "ORDER BY sample");
    if (!q.ok()) return sqlite_error(db_, path_, "reading samples");
    q.bind(1, campaign);
    int rc;
    while ((rc = q.step()) == SQLITE_ROW) {
      SampleRecord r;
      r.index = static_cast<std::uint64_t>(q.int64(0));
      auto config = parse_joint(q.text(1));
      if (!config) return config.error().wrap(path_.string());
      r.config = std::move(*config);
      auto seed = parse_u64(q.text(2));
      if (!seed) return seed.error().wrap(path_.string());
      r.measurement_seed = *seed;
      r.measurement.testbed = q.text(3);
      r.measurement.device = q.text(4);
      r.measurement.gpu = {q.real(5), q.real(6), q.real(7), q.real(8), q.real(9)};
      r.measurement.error = q.text(10);
      at[r.index] = out.size();
      out.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return sqlite_error(db_, path_, "reading samples");
  }
  Stmt q(db_,
         "SELECT sample, model, name, config, latency_ms_p50, latency_ms_p95, throughput, "
         "ttft_ms_p95, tpot_ms_p95, error FROM rows WHERE campaign = ?1 ORDER BY sample, model");
  if (!q.ok()) return sqlite_error(db_, path_, "reading rows");
  q.bind(1, campaign);
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    const auto it = at.find(static_cast<std::uint64_t>(q.int64(0)));
    if (it == at.end()) {
      return Error(path_.string() + ": damaged dataset: row of sample " +
                       std::to_string(q.int64(0)) + " has no sample record",
                   Error::Kind::kDamaged);
    }
    ModelMetrics mm;
    mm.model = static_cast<std::size_t>(q.int64(1));
    mm.name = q.text(2);
    mm.config = q.text(3);
    mm.latency_ms_p50 = q.real(4);
    mm.latency_ms_p95 = q.real(5);
    mm.throughput = q.real(6);
    mm.ttft_ms_p95 = q.optional_real(7);
    mm.tpot_ms_p95 = q.optional_real(8);
    mm.error = q.text(9);
    out[it->second].measurement.models.push_back(std::move(mm));
  }
  if (rc != SQLITE_DONE) return sqlite_error(db_, path_, "reading rows");
  return out;
}

Result<std::string> Dataset::workload_text(std::string_view hash) const {
  Stmt q(db_, "SELECT text FROM workloads WHERE hash = ?1");
  if (!q.ok()) return sqlite_error(db_, path_, "reading workloads");
  q.bind(1, hash);
  if (q.step() != SQLITE_ROW) {
    return Error(path_.string() + " holds no workload with hash " + std::string(hash),
                 Error::Kind::kNotFound);
  }
  return q.text(0);
}

}  // namespace corun::profile
