#include "corun/core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace corun {

Status write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  const auto dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  // Built by append: GCC 12 reports a false -Wrestrict on `"." + std::string` at -O3.
  std::string tmp_name(".");
  tmp_name.append(path.filename().string()).append(".tmp.").append(std::to_string(::getpid()));
  const std::string tmp = (dir / tmp_name).string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Error("cannot write " + path.string() + ": " + std::strerror(errno), Error::Kind::kIo);
  }
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string reason = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return Error("cannot write " + path.string() + ": " + reason, Error::Kind::kIo);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Error("cannot write " + path.string() + ": " + reason, Error::Kind::kIo);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Error("cannot write " + path.string() + ": " + reason, Error::Kind::kIo);
  }
  return {};
}

Result<std::string> read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Error(path.string() + ": is a directory", Error::Kind::kIo);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Error(path.string() + ": cannot open: " + std::strerror(errno),
                 errno == ENOENT ? Error::Kind::kNotFound : Error::Kind::kIo);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace corun
