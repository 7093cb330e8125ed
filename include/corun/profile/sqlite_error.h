#pragma once

#include <filesystem>
#include <string_view>

#include "corun/core/result.h"

struct sqlite3;

namespace corun::profile {

/// @brief The error of a failed SQLite call on `file`, for the datasets here and serve's
/// state database: it names the file, what was being done, SQLite's reason with its code name
/// and the system's (errno), e.g. "out/d.db: storing sample 4: database or disk is full
/// (SQLITE_FULL; File too large)". A full disk is called one whichever way it surfaced
/// (SQLITE_FULL, or a write error with ENOSPC, EFBIG or EDQUOT); a failed write whose errno
/// SQLite no longer holds is said to be one that may be.
/// @return kind kDamaged when SQLite finds the file malformed or not a database, kIo
/// otherwise.
/// Thread-safety: reads the connection's last error; call it on the thread that made the call.
Error sqlite_error(sqlite3* db, const std::filesystem::path& file, std::string_view what);

/// @brief Runs `PRAGMA quick_check` (the structure of every table and index, not the values
/// in them): a file cut short or with altered pages is refused before anything is read from
/// it or written to it.
/// @return an error of kind kDamaged naming the file and SQLite's first finding.
Status check_structure(sqlite3* db, const std::filesystem::path& file);

}  // namespace corun::profile
