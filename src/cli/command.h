#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "corun/core/result.h"

namespace corun::cli {

/// @brief Exit codes of the corun binary.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;    ///< the work ran and failed (e.g. a check did not hold)
inline constexpr int kExitBadInput = 2;   ///< bad flags, bad spec, unknown names
inline constexpr int kExitInternal = 3;   ///< I/O or internal errors, a damaged stored file

/// @brief One verb of the CLI. `path` is the words that select it ("measure", "eval placement").
/// `setup` declares the verb's flags on its CLI11 subcommand and returns the function that runs
/// it once the flags are parsed (capture the flag storage in it).
struct CommandDef {
  std::string path;
  std::string help;
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

/// @brief Adds a verb. Called from a static initialiser in each src/cli/cmd_NAME.cc file:
///   static const bool registered = corun::cli::register_command({...});
/// Each file keeps its flags, its run function and that initialiser in an anonymous namespace
/// inside its own, corun::cli::cmd_NAME: a unity build compiles several files as one, and the
/// verbs' `Flags` and `run` would otherwise collide.
bool register_command(CommandDef def);
const std::vector<CommandDef>& registered_commands();

/// @brief Prints an Error as "corun: error: ..." on stderr and returns its exit code.
int report_error(const corun::Error& e);

}  // namespace corun::cli
