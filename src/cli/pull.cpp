// cadenza pull: placeholder registration until the implementation lands.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"

namespace cadenza::cli {

Command pull_command() {
  Command c;
  c.name = "pull";
  c.add = [](CLI::App& app) { app.add_subcommand("pull", "(not implemented yet)"); };
  c.run = [] {
    std::fprintf(stderr, "cadenza pull: not implemented yet\n");
    return 2;
  };
  return c;
}

}  // namespace cadenza::cli
