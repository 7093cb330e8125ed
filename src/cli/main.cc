// corun's command-line entry point: builds the verb tree from the registry and dispatches.
// Each verb lives in its own src/cli/cmd_*.cc; no logic here.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>

#include "command.h"
#include "corun/core/strings.h"
#include "corun/core/version.h"

namespace corun::cli {

namespace {

std::vector<CommandDef>& registry() {
  static std::vector<CommandDef> commands;
  return commands;
}

}  // namespace

bool register_command(CommandDef def) {
  registry().push_back(std::move(def));
  return true;
}

const std::vector<CommandDef>& registered_commands() { return registry(); }

int report_error(const corun::Error& e) {
  std::fprintf(stderr, "corun: error: %s\n", e.what().c_str());
  switch (e.kind()) {
    case Error::Kind::kInvalidInput:
    case Error::Kind::kNotFound:
      return kExitBadInput;
    case Error::Kind::kResource:
      return kExitFailure;
    case Error::Kind::kIo:
    case Error::Kind::kDamaged:
    case Error::Kind::kInternal:
      return kExitInternal;
  }
  return kExitInternal;
}

}  // namespace corun::cli

int main(int argc, char** argv) {
  using corun::cli::CommandDef;
  CLI::App app{"corun: co-running AI inference models on one shared GPU and its host CPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(corun::version()) + " (" +
                                        std::string(corun::git_hash()) + ")");

  // Build the verb tree: "eval placement" becomes subcommand "placement" of "eval".
  std::map<std::string, CLI::App*> groups;
  std::vector<std::pair<CLI::App*, std::function<int()>>> runners;
  auto commands = corun::cli::registered_commands();
  std::sort(commands.begin(), commands.end(),
            [](const CommandDef& a, const CommandDef& b) { return a.path < b.path; });
  for (const auto& def : commands) {
    const auto words = corun::split(def.path, ' ');
    CLI::App* parent = &app;
    std::string prefix;
    for (std::size_t i = 0; i + 1 < words.size(); ++i) {
      prefix += (prefix.empty() ? "" : " ") + words[i];
      auto it = groups.find(prefix);
      if (it == groups.end()) {
        CLI::App* g = parent->add_subcommand(words[i], words[i] + " commands");
        g->require_subcommand(1);
        it = groups.emplace(prefix, g).first;
      }
      parent = it->second;
    }
    CLI::App* sub = parent->add_subcommand(words.back(), def.help);
    runners.emplace_back(sub, def.setup(*sub));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return corun::cli::kExitBadInput;
  }

  try {
    for (auto& [sub, run] : runners) {
      if (sub->parsed()) return run();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corun: internal error: %s\n", e.what());
    return corun::cli::kExitInternal;
  }
  return corun::cli::kExitBadInput;
}
