#include <CLI/CLI.hpp>

#include "cli/commands.h"

namespace cadenza::cli {

Command info_command() {
  Command c;
  c.name = "info";
  c.add = [](CLI::App& app) { app.add_subcommand("info", "(not implemented yet)"); };
  c.run = [] { return 1; };
  return c;
}

}  // namespace cadenza::cli
