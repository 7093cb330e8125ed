#include "connection_gate.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>

namespace corun::serve {

namespace {

// How long a closing connection may still send before it is cut (see drain()).
constexpr std::chrono::milliseconds kDrainTime{1000};
// Deadlines are checked this often: the resolution of every timeout above.
constexpr std::chrono::milliseconds kSweepInterval{50};
// Bytes read from one connection per wake-up, so that one fast sender cannot starve the rest.
constexpr std::size_t kReadBudget = 256 * 1024;
// A chunk-size line longer than this is no chunk-size line (hex digits plus extensions).
constexpr std::size_t kMaxChunkLine = 1024;

char lower_ascii(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower_ascii(a[i]) != lower_ascii(b[i])) return false;
  }
  return true;
}

// Optional white space around a header value: SP and HTAB only (RFC 9110 OWS).
std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// One header field of a header section: name, value and where its line starts and ends.
struct Field {
  std::string_view name;
  std::string_view value;
  std::size_t begin;  // first byte of the line
  std::size_t end;    // just past its CRLF
};

// The fields between the request line and the blank line that ends the section at `head_end`.
std::vector<Field> fields_of(const std::string& buffered, std::size_t head_end) {
  std::vector<Field> out;
  std::size_t pos = buffered.find("\r\n");
  while (pos != std::string::npos && pos + 4 <= head_end) {
    const std::size_t begin = pos + 2;
    const std::size_t eol = buffered.find("\r\n", begin);
    if (eol == std::string::npos || eol + 2 > head_end || eol == begin) break;
    const std::string_view line(buffered.data() + begin, eol - begin);
    const std::size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
      out.push_back(
          {trim_ows(line.substr(0, colon)), trim_ows(line.substr(colon + 1)), begin, eol + 2});
    }
    pos = eol;
  }
  return out;
}

// RFC 9112 §7.1: chunk = chunk-size [ext] CRLF data CRLF; last-chunk = "0" [ext] CRLF; then
// trailer fields and a blank line. Returns the offset past the body, 0 while incomplete, or
// `buffered.size()` when the framing is broken or the data exceeds the limit (the parser will
// refuse it: hand it over as it is).
std::size_t chunked_extent(const std::string& buffered, std::size_t from, std::size_t max_body) {
  std::size_t pos = from;
  std::size_t data = 0;
  while (true) {
    const std::size_t eol = buffered.find("\r\n", pos);
    if (eol == std::string::npos) {
      return buffered.size() - pos > kMaxChunkLine ? buffered.size() : 0;
    }
    std::size_t size = 0;
    std::size_t digits = 0;
    for (std::size_t i = pos; i < eol; ++i) {
      const char c = lower_ascii(buffered[i]);
      const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (v < 0) break;
      if (++digits > 8) return buffered.size();
      size = size * 16 + static_cast<std::size_t>(v);
    }
    if (digits == 0) return buffered.size();
    if (size == 0) {
      // Trailer section: fields, then an empty line.
      const std::size_t after = eol + 2;
      if (buffered.compare(after, 2, "\r\n") == 0) return after + 2;
      const std::size_t end = buffered.find("\r\n\r\n", after);
      if (end == std::string::npos) return buffered.size() - after > kMaxChunkLine ? buffered.size() : 0;
      return end + 4;
    }
    data += size;
    if (data > max_body) return buffered.size();
    const std::size_t next = eol + 2 + size + 2;
    if (next > buffered.size()) return 0;
    if (buffered.compare(next - 2, 2, "\r\n") != 0) return buffered.size();
    pos = next;
  }
}

}  // namespace

std::size_t request_extent(const std::string& buffered, std::size_t max_body_bytes,
                           std::size_t& head_end) {
  head_end = 0;
  const std::size_t blank = buffered.find("\r\n\r\n");
  if (blank == std::string::npos) return 0;
  head_end = blank + 4;
  std::optional<std::uint64_t> length;
  bool chunked = false;
  for (const Field& f : fields_of(buffered, head_end)) {
    if (iequals(f.name, "Transfer-Encoding")) {
      chunked = true;
    } else if (iequals(f.name, "Content-Length")) {
      // Anything but 1*DIGIT that fits, or two different values: the parser answers 400
      // without reading a body (server.cc), so there is nothing more to wait for.
      const bool digits = !f.value.empty() && f.value.size() <= 18 &&
                          std::all_of(f.value.begin(), f.value.end(),
                                      [](char c) { return c >= '0' && c <= '9'; });
      if (!digits) return buffered.size();
      const std::uint64_t n = std::stoull(std::string(f.value));
      if (length && *length != n) return buffered.size();
      length = n;
    }
  }
  if (chunked) return chunked_extent(buffered, head_end, max_body_bytes);
  if (!length) return head_end;
  if (*length > max_body_bytes) return buffered.size();  // the parser answers 413 at once
  return buffered.size() >= head_end + *length ? head_end + static_cast<std::size_t>(*length) : 0;
}

ConnectionGate::ConnectionGate(GateOptions options, Dispatch dispatch, Refuse refuse)
    : options_(options), dispatch_(std::move(dispatch)), refuse_(std::move(refuse)) {}

ConnectionGate::~ConnectionGate() {
  stop();
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

Status ConnectionGate::start() {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    return Error(std::string("cannot create the connection poller: ") + std::strerror(errno),
                 Error::Kind::kIo);
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  next_sweep_ = Clock::now() + kSweepInterval;
  thread_ = std::thread([this] { loop(); });
  return {};
}

void ConnectionGate::admit(int fd) {
  {
    MutexLock lock(inbox_mutex_);
    if (!stopped_) {
      ++open_;
      inbox_.push_back({fd, true, false, {}});
      fd = -1;
    }
  }
  if (fd >= 0) {
    ::close(fd);
    return;
  }
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void ConnectionGate::finish(int fd, bool keep_open, std::string leftover) {
  {
    MutexLock lock(inbox_mutex_);
    if (!stopped_) {
      inbox_.push_back({fd, false, keep_open, std::move(leftover)});
      fd = -1;
    } else {
      --open_;
    }
  }
  if (fd >= 0) {
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
    return;
  }
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void ConnectionGate::stop() {
  {
    MutexLock lock(inbox_mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (wake_fd_ >= 0) {
    const std::uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
}

std::size_t ConnectionGate::open_connections() const {
  MutexLock lock(inbox_mutex_);
  return open_;
}

void ConnectionGate::watch(int fd, Conn& c, bool on) {
  if (c.watched == on) return;
  c.watched = on;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  ::epoll_ctl(epoll_fd_, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, on ? &ev : nullptr);
}

void ConnectionGate::loop() {
  std::array<epoll_event, 64> events{};
  bool stopping = false;
  while (!stopping) {
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()),
                               static_cast<int>(kSweepInterval.count()));
    for (int i = 0; i < n; ++i) {
      const int fd = events[static_cast<std::size_t>(i)].data.fd;
      if (fd == wake_fd_) {
        std::uint64_t count = 0;
        (void)!::read(wake_fd_, &count, sizeof count);
        continue;
      }
      const auto it = conns_.find(fd);
      if (it != conns_.end() && it->second.state != State::kDispatched) on_readable(fd, it->second);
    }
    {
      MutexLock lock(inbox_mutex_);
      stopping = stopped_;
    }
    take_inbox();
    if (Clock::now() >= next_sweep_) sweep();
  }
  // Whatever a worker still holds is closed by finish(); the rest is closed here.
  std::vector<int> held;
  for (const auto& [fd, c] : conns_) {
    if (c.state != State::kDispatched) held.push_back(fd);
  }
  for (int fd : held) close_now(fd);
}

void ConnectionGate::take_inbox() {
  std::vector<Handback> items;
  {
    MutexLock lock(inbox_mutex_);
    items.swap(inbox_);
  }
  const auto now = Clock::now();
  for (auto& item : items) {
    const int fd = item.fd;
    if (item.admit) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      // Small JSON answers: without TCP_NODELAY, Nagle's algorithm and delayed ACKs add ~40 ms.
      const int yes = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
      Conn& c = conns_[fd];
      watch(fd, c, true);
      if (conns_.size() > options_.max_connections) {
        refuse(fd, c, 503,
               "more than " + std::to_string(options_.max_connections) +
                   " open connections; retry later");
        continue;
      }
      c.deadline = now + options_.idle_timeout;
      continue;
    }
    const auto it = conns_.find(fd);
    if (it == conns_.end()) continue;
    Conn& c = it->second;
    if (!item.keep_open) {
      watch(fd, c, true);
      drain(fd, c);
      continue;
    }
    c.buffer = std::move(item.leftover);
    c.state = c.buffer.empty() ? State::kIdle : State::kReading;
    c.deadline = now + (c.buffer.empty() ? options_.idle_timeout : options_.request_timeout);
    watch(fd, c, true);
    if (c.state == State::kReading) advance(fd, c);
  }
}

void ConnectionGate::on_readable(int fd, Conn& c) {
  char buf[16384];
  std::size_t got = 0;
  bool eof = false;
  while (got < kReadBudget) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
      if (c.state == State::kDraining) continue;
      if (c.state == State::kIdle) {
        c.state = State::kReading;
        c.deadline = Clock::now() + options_.request_timeout;
      }
      c.buffer.append(buf, static_cast<std::size_t>(n));
      // Never more than one request's worth: the limits decide before this grows further.
      if (c.buffer.size() > options_.max_head_bytes + options_.max_body_bytes) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    eof = true;  // closed (n == 0) or failed
    break;
  }
  if (c.state == State::kReading) advance(fd, c);
  // A client that half-closed after a whole request still gets its answer (the worker owns the
  // connection now); any other end of input ends the connection.
  if (eof && c.state != State::kDispatched) close_now(fd);
}

void ConnectionGate::advance(int fd, Conn& c) {
  std::size_t head_end = 0;
  const std::size_t extent = request_extent(c.buffer, options_.max_body_bytes, head_end);
  if (extent == 0) {
    if (head_end == 0 && c.buffer.size() > options_.max_head_bytes) {
      refuse(fd, c, 431,
             "the request header section exceeds " + std::to_string(options_.max_head_bytes) +
                 " bytes");
      return;
    }
    if (head_end != 0) {
      // RFC 9110 §10.1.1: a client that sent "Expect: 100-continue" waits for an interim
      // answer before its body. The gate gives it (the body is what it waits for) and removes
      // the field, so that the parser does not answer it a second time.
      for (const Field& f : fields_of(c.buffer, head_end)) {
        if (iequals(f.name, "Expect") && iequals(f.value, "100-continue")) {
          c.buffer.erase(f.begin, f.end - f.begin);
          static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
          (void)!::send(fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL);
          break;
        }
      }
    }
    return;
  }
  watch(fd, c, false);
  c.state = State::kDispatched;
  std::string request;
  request.swap(c.buffer);
  dispatch_(fd, std::move(request));
}

void ConnectionGate::refuse(int fd, Conn& c, int status, const std::string& reason) {
  const std::string response = refuse_(status, reason);
  // Best effort: the answer is small and the socket's send buffer empty; a client that does
  // not read it loses it.
  (void)!::send(fd, response.data(), response.size(), MSG_NOSIGNAL);
  watch(fd, c, true);
  drain(fd, c);
}

void ConnectionGate::drain(int fd, Conn& c) {
  ::shutdown(fd, SHUT_WR);
  c.state = State::kDraining;
  std::string().swap(c.buffer);
  c.deadline = Clock::now() + kDrainTime;
}

void ConnectionGate::close_now(int fd) {
  const auto it = conns_.find(fd);
  if (it != conns_.end()) watch(fd, it->second, false);
  ::close(fd);
  conns_.erase(fd);
  MutexLock lock(inbox_mutex_);
  --open_;
}

void ConnectionGate::sweep() {
  const auto now = Clock::now();
  next_sweep_ = now + kSweepInterval;
  std::vector<int> expired;
  for (const auto& [fd, c] : conns_) {
    if (c.state != State::kDispatched && now >= c.deadline) expired.push_back(fd);
  }
  for (int fd : expired) {
    Conn& c = conns_.at(fd);
    if (c.state == State::kReading) {
      refuse(fd, c, 408,
             "the request did not arrive whole within " +
                 std::to_string(options_.request_timeout.count()) + " ms");
    } else {
      close_now(fd);  // idle past the keep-alive time, or done draining
    }
  }
}

}  // namespace corun::serve
