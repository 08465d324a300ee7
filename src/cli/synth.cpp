#include <CLI/CLI.hpp>

#include "cli/commands.h"

namespace cadenza::cli {

Command synth_command() {
  Command c;
  c.name = "synth";
  c.add = [](CLI::App& app) { app.add_subcommand("synth", "(not implemented yet)"); };
  c.run = [] { return 1; };
  return c;
}

}  // namespace cadenza::cli
