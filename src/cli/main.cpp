// cadenza: one binary, one subcommand per file in this folder (see cli/commands.h).
#include <memory>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"

int main(int argc, char** argv) {
  // Every log line goes to stderr, whatever the subcommand: stdout carries only the command's
  // output (the generated text of `run`, the JSON of `bench --json`, the path of `pull`), so it can
  // be piped and parsed. spdlog's own default logger writes to stdout.
  // (Unnamed and unregistered, as spdlog's default: the line format stays the same.)
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
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
