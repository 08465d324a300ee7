// cadenza: one binary, one subcommand per file in this folder (see cli/commands.h).
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Cadenza: LLM inference server and tools"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cadenza 0.1.0");
  std::vector<cadenza::cli::Command> commands = cadenza::cli::all_commands();
  for (auto& c : commands) c.add(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& c : commands)
    if (c.run && app.got_subcommand(c.name)) return c.run();
  return 2;
}
