#pragma once

// Helpers for the damaged-state tests of the files corun writes (surrogate.json, dataset.db,
// serve.db): damaged copies of a file's bytes, and the corun binary run in a child process,
// optionally under a file-size limit that makes every write past it fail as on a full disk.
#include <signal.h>
#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "corun/core/rng.h"
#include "temp_dir.h"

namespace corun::testing {

/// The bytes of a file ("" when it cannot be read).
inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Replaces a file's bytes.
inline void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

/// Runs `sql` on the SQLite file at `path` (an alteration no corun version would write).
/// Returns SQLite's error message, "" on success.
inline std::string alter_sqlite(const std::filesystem::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string error;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK ||
      sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    error = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
  }
  sqlite3_close(db);
  return error;
}

/// One damaged version of a file.
struct Damage {
  std::string label;  ///< what was done, for SCOPED_TRACE
  std::string bytes;
};

/// Damaged versions of `original`: empty; cut at 1 byte, at 1/4, 1/2 and 3/4 of it and one
/// byte short; and `flips` copies with one byte XORed by a non-zero mask, at offsets drawn by
/// a generator seeded with `seed` (the same offsets on every run).
inline std::vector<Damage> damaged_copies(const std::string& original, std::uint64_t seed,
                                          int flips) {
  std::vector<Damage> out;
  out.push_back({"empty", ""});
  const std::size_t n = original.size();
  for (std::size_t cut : {std::size_t{1}, n / 4, n / 2, 3 * n / 4, n - 1}) {
    if (cut == 0 || cut >= n) continue;
    out.push_back({"cut at byte " + std::to_string(cut), original.substr(0, cut)});
  }
  Rng rng(seed);
  for (int i = 0; i < flips && n > 0; ++i) {
    const std::size_t at = rng.below(n);
    const auto mask = static_cast<unsigned char>(1 + rng.below(255));
    Damage d{"byte " + std::to_string(at) + " xor " + std::to_string(mask), original};
    d.bytes[at] = static_cast<char>(static_cast<unsigned char>(d.bytes[at]) ^ mask);
    out.push_back(std::move(d));
  }
  return out;
}

/// How a child corun ended.
struct ChildResult {
  int code = -1;       ///< exit code; -1 when it did not exit by itself
  int signal = 0;      ///< the signal that ended it (a crash), 0 if none
  bool ready = false;  ///< `ready_file` appeared: it was stopped with SIGTERM then
  std::string err;     ///< its standard error
};

/// Runs CORUN_BINARY with `args` in a child process, stdout discarded and stderr kept.
/// `file_size_limit` > 0: RLIMIT_FSIZE in the child, with SIGXFSZ ignored, so that a write past
/// that size fails with EFBIG like a write on a full disk (no root, no small filesystem
/// needed). `ready_file` (a server's port file): when it appears the child is stopped with
/// SIGTERM and counted ready. Waits at most `deadline_s`, then kills the child.
inline ChildResult run_corun(const std::vector<std::string>& args,
                             const std::filesystem::path& err_file,
                             std::uint64_t file_size_limit = 0,
                             const std::filesystem::path& ready_file = {},
                             double deadline_s = 120) {
  ChildResult r;
  std::filesystem::remove(err_file);
  if (!ready_file.empty()) std::filesystem::remove(ready_file);
  std::vector<std::string> argv = {CORUN_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildOptions options;
  options.stdout_path = "/dev/null";
  options.stderr_path = err_file;
  options.file_size_limit = file_size_limit;
  ChildProcess child(std::move(argv), options);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(deadline_s));
  for (;;) {
    if (!child.running()) break;
    if (!ready_file.empty() && std::filesystem::exists(ready_file) &&
        std::filesystem::file_size(ready_file) > 0) {
      r.ready = true;
      child.stop(SIGTERM);
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      child.stop(SIGKILL);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!r.ready) {
    const ExitStatus status = child.wait();
    r.code = status.code;
    r.signal = status.signal;
  }
  r.err = read_bytes(err_file);
  return r;
}

}  // namespace corun::testing
