#include "corun/profile/sqlite_error.h"

#include <sqlite3.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace corun::profile {

namespace {

// The code names people search for; SQLite has no API for them.
const char* code_name(int primary) {
  switch (primary) {
    case SQLITE_FULL:
      return "SQLITE_FULL";
    case SQLITE_IOERR:
      return "SQLITE_IOERR";
    case SQLITE_CORRUPT:
      return "SQLITE_CORRUPT";
    case SQLITE_NOTADB:
      return "SQLITE_NOTADB";
    case SQLITE_CANTOPEN:
      return "SQLITE_CANTOPEN";
    case SQLITE_READONLY:
      return "SQLITE_READONLY";
    case SQLITE_BUSY:
      return "SQLITE_BUSY";
    case SQLITE_LOCKED:
      return "SQLITE_LOCKED";
    case SQLITE_PERM:
      return "SQLITE_PERM";
    case SQLITE_NOMEM:
      return "SQLITE_NOMEM";
    default:
      return nullptr;
  }
}

// The extended codes of a failed write: with the errno SQLite read (its last error, which a
// later call may have replaced) they say whether the disk filled up.
const char* write_code_name(int code) {
  switch (code) {
    case SQLITE_IOERR_WRITE:
      return "SQLITE_IOERR_WRITE";
    case SQLITE_IOERR_FSYNC:
      return "SQLITE_IOERR_FSYNC";
    case SQLITE_IOERR_TRUNCATE:
      return "SQLITE_IOERR_TRUNCATE";
    case SQLITE_IOERR_SHMSIZE:
      return "SQLITE_IOERR_SHMSIZE";
    default:
      return nullptr;
  }
}

bool disk_full(int system_errno) {
  return system_errno == ENOSPC || system_errno == EFBIG || system_errno == EDQUOT;
}

}  // namespace

Error sqlite_error(sqlite3* db, const std::filesystem::path& file, std::string_view what) {
  std::string message = file.string() + ": " + std::string(what) + ": ";
  if (db == nullptr) return Error(message + "out of memory", Error::Kind::kIo);
  const int code = sqlite3_extended_errcode(db);
  const int primary = code & 0xff;
  const int system_errno = sqlite3_system_errno(db);
  message += sqlite3_errmsg(db);
  std::string detail;
  const char* write_name = write_code_name(code);
  if (const char* name = write_name != nullptr ? write_name : code_name(primary)) detail = name;
  if (system_errno != 0) {
    detail += (detail.empty() ? "" : "; ") + std::string(std::strerror(system_errno));
  }
  if (!detail.empty()) message += " (" + detail + ")";
  if (primary != SQLITE_FULL) {
    if (disk_full(system_errno)) {
      message += ": the disk is full";
    } else if (write_name != nullptr) {
      message += ": a write failed, the disk may be full";
    }
  }
  const bool damaged = primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
  return Error(message, damaged ? Error::Kind::kDamaged : Error::Kind::kIo);
}

Status check_structure(sqlite3* db, const std::filesystem::path& file) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &stmt, nullptr) != SQLITE_OK) {
    return sqlite_error(db, file, "checking the file").as(Error::Kind::kDamaged);
  }
  const int rc = sqlite3_step(stmt);
  std::string finding;
  if (rc == SQLITE_ROW) {
    const auto* p = sqlite3_column_text(stmt, 0);
    finding = p != nullptr ? reinterpret_cast<const char*>(p) : "";
  }
  if (rc != SQLITE_ROW) {
    Error e = sqlite_error(db, file, "checking the file");
    const int primary = sqlite3_extended_errcode(db) & 0xff;
    sqlite3_finalize(stmt);
    // A lock another process holds longer than the busy timeout is not damage.
    const bool locked = primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
    return locked ? e : e.as(Error::Kind::kDamaged);
  }
  sqlite3_finalize(stmt);
  if (finding != "ok") {
    return Error(file.string() + ": damaged database (quick_check: " + finding + ")",
                 Error::Kind::kDamaged);
  }
  return {};
}

}  // namespace corun::profile
