// run_plan_hook against real /bin/sh hooks: what reaches the hook's stdin, how its exit reads,
// and that a hook which hangs, floods, never reads or dies leaves the caller unharmed: no
// zombie, no open pipe, no SIGPIPE, no process of its group left running, output bounded and
// valid UTF-8. Time bounds are generous (seconds) and only ever upper bounds.
#include "corun/serve/plan_hook.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "serve_test_util.h"

namespace corun::serve::plan_hook_test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * kKiB;

using testing::TempDir;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::size_t open_fd_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

/// A transition-like input of about `bytes` bytes, not a repeat of one short pattern (so a
/// dropped or reordered block would show).
std::string transition_input(std::size_t bytes) {
  std::string s = "{\"from\":17,\"to\":18,\"models\":[";
  for (std::size_t i = 0; s.size() < bytes; ++i) {
    s += "{\"name\":\"model-" + std::to_string(i) + "\",\"gpu\":" + std::to_string(i % 8) +
         ",\"note\":\"caf\xC3\xA9\"},\n";
  }
  s += "{}]}";
  return s;
}

HookOptions hook(std::string command, int timeout_ms = 20000) {
  HookOptions o;
  o.command = std::move(command);
  o.timeout_ms = timeout_ms;
  return o;
}

/// run_plan_hook, then what must hold after every run: the hook's leader was reaped (this
/// process has no child left at all) and no pipe end stayed open here.
HookOutcome run_checked(const HookOptions& o, std::string_view input) {
  const std::size_t fds_before = open_fd_count();
  HookOutcome r = run_plan_hook(o, input);
  EXPECT_EQ(open_fd_count(), fds_before) << "a descriptor was left open";
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1) << "a child was left unreaped";
  EXPECT_EQ(errno, ECHILD);
  return r;
}

/// Whether `pid` has ended: no such process, or a zombie (ended; init reaps it when it will).
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto name_end = line.rfind(')');
  return name_end != std::string::npos && name_end + 2 < line.size() && line[name_end + 2] == 'Z';
}

// Whether `pid` is gone within 2 s (a killed process is reaped by init a moment later).
bool gone_within_2s(pid_t pid) {
  for (int i = 0; i < 100; ++i) {
    if (process_gone(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return process_gone(pid);
}

TEST(PlanHook, HookReadsExactlyTheInputAndExitZeroApplies) {
  TempDir dir;
  const std::string sink = dir.file("received.json");
  // Larger than a pipe's 64 KiB, so the input goes in several writes as the hook reads.
  const std::string input = transition_input(300 * kKiB);
  const HookOutcome r = run_checked(hook("cat > '" + sink + "'"), input);
  EXPECT_TRUE(r.applied);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.signal, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.reason, "exit 0");
  EXPECT_EQ(read_file(sink), input);
}

TEST(PlanHook, NonZeroExitIsNotApplied) {
  const HookOutcome r = run_checked(hook("exit 3"), "{}");
  EXPECT_FALSE(r.applied);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.signal, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.reason, "exited with code 3");
}

TEST(PlanHook, HangingHookTimesOutAndItsWholeGroupIsKilled) {
  TempDir dir;
  const std::string pid_file = dir.file("sleeper.pid");
  // The shell's own child, not the shell, is what must not outlive the time-out.
  HookOptions o = hook("sleep 30 & echo $! > '" + pid_file + "'; wait", 1000);
  const auto t0 = Clock::now();
  const HookOutcome r = run_checked(o, "{}");
  const double wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.applied);
  EXPECT_LT(wall_s, 10.0);
  EXPECT_GE(r.elapsed_ms, 1000.0);
  EXPECT_EQ(r.reason, "timed out after 1000 ms");
  const pid_t sleeper = static_cast<pid_t>(std::atol(read_file(pid_file).c_str()));
  ASSERT_GT(sleeper, 1) << "the hook did not record its child";
  const bool gone = gone_within_2s(sleeper);
  EXPECT_TRUE(gone) << "the hook's child " << sleeper << " survived the time-out";
}

TEST(PlanHook, TimeOutTerminatesTheHookEvenWhenTheCallerBlocksSigterm) {
  // `corun serve` blocks SIGTERM in every thread to sigwait() for it; a hook inheriting that
  // mask would sit out the whole grace and die only of SIGKILL.
  sigset_t term, saved;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, &saved), 0);
  HookOptions o = hook("sleep 30", 300);
  o.kill_grace_ms = 15000;
  const auto t0 = Clock::now();
  const HookOutcome r = run_checked(o, "");
  const double wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &saved, nullptr), 0);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.signal, SIGTERM);
  EXPECT_LT(wall_s, 10.0);
}

TEST(PlanHook, HookThatIgnoresSigtermIsKilledAfterTheGrace) {
  TempDir dir;
  const std::string pid_file = dir.file("stubborn.pid");
  // `trap '' TERM` makes the shell and the sleep it starts ignore SIGTERM: only SIGKILL works.
  HookOptions o = hook("trap '' TERM; sleep 30 & echo $! > '" + pid_file + "'; wait", 500);
  o.kill_grace_ms = 300;
  const auto t0 = Clock::now();
  const HookOutcome r = run_checked(o, "{}");
  const double wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.applied);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_LT(wall_s, 10.0);
  const pid_t sleeper = static_cast<pid_t>(std::atol(read_file(pid_file).c_str()));
  ASSERT_GT(sleeper, 1) << "the hook did not record its child";
  const bool gone = gone_within_2s(sleeper);
  EXPECT_TRUE(gone) << "the hook's child " << sleeper << " survived SIGKILL";
}

/// The hex mask of `field` ("SigIgn", "SigBlk") in a /proc/PID/status text; 0 when absent.
unsigned long long status_mask(const std::string& status, const std::string& field) {
  const auto at = status.find(field + ":\t");
  if (at == std::string::npos) return 0;
  return std::stoull(status.substr(at + field.size() + 2), nullptr, 16);
}

TEST(PlanHook, HookStartsWithDefaultSignalDispositionsAndNothingBlocked) {
  // `corun serve` ignores SIGPIPE process-wide and blocks SIGTERM in every thread; a hook must
  // not inherit either (its pipelines rely on SIGPIPE, its time-out on SIGTERM).
  sigset_t term, saved_mask;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, &saved_mask), 0);
  struct sigaction ignore = {};
  struct sigaction saved_action = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ASSERT_EQ(::sigaction(SIGPIPE, &ignore, &saved_action), 0);
  const HookOutcome r = run_checked(hook("exec cat /proc/self/status"), "");
  ASSERT_EQ(::sigaction(SIGPIPE, &saved_action, nullptr), 0);
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &saved_mask, nullptr), 0);
  ASSERT_TRUE(r.applied) << r.reason;
  ASSERT_NE(r.output.find("SigIgn:"), std::string::npos) << r.output;
  const unsigned long long bit = 1ull;
  EXPECT_EQ(status_mask(r.output, "SigIgn") & (bit << (SIGPIPE - 1)), 0u) << r.output;
  EXPECT_EQ(status_mask(r.output, "SigBlk") & (bit << (SIGTERM - 1)), 0u) << r.output;
}

TEST(PlanHook, FloodingHookThatNeverReadsIsBoundedAndValidUtf8) {
  const std::string input = transition_input(kMiB);
  HookOptions o =
      hook("head -c 5000000 /dev/urandom; head -c 5000000 /dev/urandom >&2; exit 0", 60000);
  o.max_output_bytes = 4096;
  const HookOutcome r = run_checked(o, input);
  EXPECT_FALSE(r.timed_out) << r.reason;
  EXPECT_TRUE(r.applied) << r.reason;
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_LE(r.output.size(), 4096u);
  EXPECT_GT(r.output.size(), 0u);
  // All 10 MB were read (the hook could not have exited otherwise); all but the tail dropped.
  EXPECT_GE(r.dropped_output_bytes, 10000000u - 4096u);
  EXPECT_LE(r.dropped_output_bytes, 10000000u);
  EXPECT_NO_THROW(static_cast<void>(nlohmann::json(r.output).dump()));
}

TEST(PlanHook, FloodingHookThatFailsIsNotApplied) {
  HookOptions o = hook("head -c 3000000 /dev/urandom; exit 4", 60000);
  o.max_output_bytes = 1000;
  const HookOutcome r = run_checked(o, transition_input(kMiB));
  EXPECT_FALSE(r.applied);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_LE(r.output.size(), 1000u);
  EXPECT_NO_THROW(static_cast<void>(nlohmann::json(r.output).dump()));
}

TEST(PlanHook, HookThatClosesItsStdinRaisesNoSigpipeHere) {
  // The hook closes stdin at once and lives on: our writes of 1 MB then fail with EPIPE. With
  // SIGPIPE's default action (this test program's), a SIGPIPE delivered here would end it.
  sigset_t before, after, pending;
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &before), 0);
  const HookOutcome r = run_checked(hook("exec <&-; sleep 0.3; exit 0"), transition_input(kMiB));
  EXPECT_TRUE(r.applied) << r.reason;
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &after), 0);
  EXPECT_EQ(sigismember(&after, SIGPIPE), sigismember(&before, SIGPIPE));
  sigemptyset(&pending);
  ASSERT_EQ(sigpending(&pending), 0);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0) << "a SIGPIPE was left pending";
}

TEST(PlanHook, MissingCommandIsShellExit127) {
  const HookOutcome r = run_checked(hook("/nonexistent/hook"), "{}");
  EXPECT_FALSE(r.applied);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.reason, "exited with code 127");
  EXPECT_NE(r.output.find("/nonexistent/hook"), std::string::npos) << r.output;
}

TEST(PlanHook, DeathBySignalIsReported) {
  const HookOutcome r = run_checked(hook("kill -9 $$"), "{}");
  EXPECT_FALSE(r.applied);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.signal, 9);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_EQ(r.reason, "killed by signal 9");
}

TEST(PlanHook, StdoutAndStderrAreKeptInTheOrderWritten) {
  const HookOutcome r = run_checked(hook("echo out; echo err >&2; echo out2"), "");
  EXPECT_TRUE(r.applied);
  EXPECT_EQ(r.output, "out\nerr\nout2\n");
  EXPECT_EQ(r.dropped_output_bytes, 0u);
}

TEST(PlanHook, InvalidUtf8BytesBecomeReplacementCharacters) {
  // \377 and \376 never occur in UTF-8; \303\251 is a well-formed "é" and stays.
  const HookOutcome r = run_checked(hook("printf 'ok \\377\\376 caf\\303\\251'"), "");
  EXPECT_EQ(r.output, "ok \xEF\xBF\xBD\xEF\xBF\xBD caf\xC3\xA9");
}

TEST(PlanHook, OutputTailIsCutAtWholeCharactersWithinTheLimit) {
  HookOptions ascii = hook("printf abcdefgh");
  ascii.max_output_bytes = 5;
  HookOutcome r = run_checked(ascii, "");
  EXPECT_EQ(r.output, "defgh");
  EXPECT_EQ(r.dropped_output_bytes, 3u);

  // Three "é" (6 bytes), limit 5: the raw tail starts inside the first; it is dropped whole.
  HookOptions accents = hook("printf '\\303\\251\\303\\251\\303\\251'");
  accents.max_output_bytes = 5;
  r = run_checked(accents, "");
  EXPECT_EQ(r.output, "\xC3\xA9\xC3\xA9");
  EXPECT_EQ(r.dropped_output_bytes, 2u);

  // "ab\377" fits raw (3 bytes) but not once \377 is replaced (5 bytes): the front gives way.
  HookOptions growing = hook("printf 'ab\\377'");
  growing.max_output_bytes = 4;
  r = run_checked(growing, "");
  EXPECT_EQ(r.output, "b\xEF\xBF\xBD");
  EXPECT_EQ(r.dropped_output_bytes, 1u);
}

TEST(PlanHook, HookInheritsNoOtherDescriptorOfTheCaller) {
  // Opened without O_CLOEXEC, as a careless library would.
  const int leaky = ::open("/dev/null", O_RDONLY);  // NOLINT(android-cloexec-open)
  ASSERT_GE(leaky, 3);
  const HookOutcome r = run_checked(
      hook("if [ -e /proc/$$/fd/" + std::to_string(leaky) + " ]; then exit 9; fi; exit 0"), "");
  ::close(leaky);
  EXPECT_TRUE(r.applied) << "descriptor " << leaky << " reached the hook: " << r.reason;
}

TEST(PlanHook, ConcurrentCallsEachFeedTheirOwnHook) {
  TempDir dir;
  const std::string input_a = transition_input(200 * kKiB);
  const std::string input_b = "{\"from\":1,\"to\":2}";
  HookOutcome a, b;
  std::thread ta([&] { a = run_plan_hook(hook("cat > '" + dir.file("a") + "'"), input_a); });
  std::thread tb(
      [&] { b = run_plan_hook(hook("cat > '" + dir.file("b") + "'; exit 5"), input_b); });
  ta.join();
  tb.join();
  EXPECT_TRUE(a.applied);
  EXPECT_EQ(b.exit_code, 5);
  EXPECT_EQ(read_file(dir.file("a")), input_a);
  EXPECT_EQ(read_file(dir.file("b")), input_b);
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(PlanHook, NoCommandOrBadBoundsStartNothing) {
  HookOutcome r = run_checked(HookOptions{}, "{}");
  EXPECT_FALSE(r.applied);
  EXPECT_EQ(r.reason, "no hook configured");

  r = run_checked(hook("exit 0", 0), "{}");
  EXPECT_FALSE(r.applied);
  EXPECT_EQ(r.reason.rfind("could not start: ", 0), 0u) << r.reason;

  HookOptions negative_grace = hook("exit 0");
  negative_grace.kill_grace_ms = -1;
  r = run_checked(negative_grace, "{}");
  EXPECT_FALSE(r.applied);
  EXPECT_EQ(r.reason.rfind("could not start: ", 0), 0u) << r.reason;
}

}  // namespace
}  // namespace corun::serve::plan_hook_test
