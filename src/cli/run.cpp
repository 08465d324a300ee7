#include <CLI/CLI.hpp>

#include "cli/commands.h"

namespace cadenza::cli {

Command run_command() {
  Command c;
  c.name = "run";
  c.add = [](CLI::App& app) { app.add_subcommand("run", "(not implemented yet)"); };
  c.run = [] { return 1; };
  return c;
}

}  // namespace cadenza::cli
