#pragma once

// The plan hook of `corun serve --on-plan CMD`: when a new plan is decided, serve hands its
// transition (JSON) to the user's deployer command on standard input and learns from the exit
// status whether the deployer applied it. The deployer is arbitrary code: it may hang, never
// read its input, flood its output with binary garbage, or fork helpers that outlive it. The
// hook bounds each of these (time, captured bytes, the whole process group) so that the
// server's planner thread always gets an answer, and a misbehaving deployer reads as "not
// applied" rather than as a stuck or crashed server.

#include <cstddef>
#include <string>
#include <string_view>

namespace corun::serve {

/// @brief How to run the plan hook. Each field says its unit and range.
struct HookOptions {
  /// Run as `/bin/sh -c command`; empty: no hook (run_plan_hook starts nothing).
  std::string command;
  /// Wall-clock bound on the hook, from start to exit, in ms; > 0. On expiry the hook's whole
  /// process group gets SIGTERM, then SIGKILL after kill_grace_ms.
  int timeout_ms = 30000;
  /// Time a timed-out hook's process group has between SIGTERM and SIGKILL, in ms; >= 0.
  int kill_grace_ms = 1000;
  /// Bytes of stdout+stderr kept (the tail); what comes before is read and dropped, so a hook
  /// that writes without end neither blocks on a full pipe nor grows the server's memory.
  std::size_t max_output_bytes = std::size_t{64} * 1024;
};

/// @brief What became of one run of the plan hook. Only `applied` decides; the rest explains.
struct HookOutcome {
  bool applied = false;    ///< the hook exited with status 0 before its time-out
  int exit_code = -1;      ///< the exit status when the hook exited; -1 otherwise
  int signal = 0;          ///< the signal that ended the hook, when one did; 0 otherwise
  bool timed_out = false;  ///< the hook outlived timeout_ms and was killed (never applied)
  double elapsed_ms = 0;   ///< from start to the hook's process being reaped
  /// The tail of the hook's stdout and stderr (interleaved as written), at most
  /// max_output_bytes, valid UTF-8 (each invalid byte became U+FFFD): safe in JSON and logs.
  std::string output;
  std::size_t dropped_output_bytes = 0;  ///< bytes of output read before the kept tail
  /// One line for people: "exit 0", "exited with code 3", "killed by signal 9", "timed out
  /// after 2000 ms", "could not start: ...", "no hook configured".
  std::string reason;
};

/// @brief Runs `options.command` with `input` on its standard input, waits for it at most
/// options.timeout_ms (plus the kill grace), and says whether it applied the plan.
///
/// The hook runs in a process group of its own (so a time-out also ends what it started),
/// with an empty signal mask and default signal dispositions (whatever the server blocks or
/// ignores), and inherits no descriptor of the server but its three standard streams: stdin
/// a pipe carrying `input`, stdout and stderr one pipe whose tail is kept. A hook that exits
/// without reading its input is not an error. The hook's leader is always reaped; helpers it
/// leaves running after a normal exit are its own business, those alive at a time-out are
/// killed with it.
///
/// @code
///   HookOptions o;
///   o.command = "kubectl apply -f -";
///   o.timeout_ms = 10000;
///   const HookOutcome r = run_plan_hook(o, transition.dump());
///   if (!r.applied) log("plan not applied: " + r.reason + ": " + r.output);
/// @endcode
///
/// @param options the command and its bounds; an empty command starts nothing and returns
///   "no hook configured"; a non-positive timeout or negative grace returns "could not start".
/// @param input bytes written to the hook's stdin, which is then closed.
/// @return never an error: every failure (cannot start, non-zero exit, signal, time-out) is an
///   outcome with applied == false and its reason.
///
/// Thread-safety: safe to call from several threads at once; it keeps no state. Blocks the
/// calling thread for up to timeout_ms + kill_grace_ms. While it runs, SIGPIPE is blocked on
/// the calling thread only (a SIGPIPE that its own writes raise is consumed before the mask is
/// restored); no process-wide signal disposition changes. Hazard: it needs SIGCHLD not set to
/// SIG_IGN and no other thread calling waitpid(-1, ...), either of which would take the hook's
/// exit status (the outcome then says so and is not applied).
[[nodiscard]] HookOutcome run_plan_hook(const HookOptions& options, std::string_view input);

}  // namespace corun::serve
