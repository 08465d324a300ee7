// cadenza gateway: placeholder registration until the implementation lands.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"

namespace cadenza::cli {

Command gateway_command() {
  Command c;
  c.name = "gateway";
  c.add = [](CLI::App& app) { app.add_subcommand("gateway", "(not implemented yet)"); };
  c.run = [] {
    std::fprintf(stderr, "cadenza gateway: not implemented yet\n");
    return 2;
  };
  return c;
}

}  // namespace cadenza::cli
