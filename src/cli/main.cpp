// cadenza: one binary, one subcommand per file in this folder (see cli/commands.h).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/cfg/env.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/parallel.h"

int main(int argc, char** argv) {
  // Every log line goes to stderr, whatever the subcommand: stdout carries only the command's
  // output (the generated text of `run`, the JSON of `bench --json`, the path of `pull`), so it can
  // be piped and parsed. spdlog's own default logger writes to stdout.
  // (Unnamed and unregistered, as spdlog's default: the line format stays the same.)
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  // SPDLOG_LEVEL=debug (or warn, error, off) sets how much is logged; default info.
  spdlog::cfg::load_env_levels();
  CLI::App app{"Cadenza: LLM inference server and tools"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cadenza 0.1.0");
  std::vector<cadenza::cli::Command> commands = cadenza::cli::all_commands();
  for (auto& c : commands) c.add(app);
  // argv[1..] as strings, with vLLM's -tp / -pp spelled as the long options (cli/parallel.h).
  std::vector<std::string> args(argv + 1, argv + argc);
  cadenza::cli::expand_short_parallel_flags(args);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last-first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& c : commands)
    if (c.run && app.got_subcommand(c.name)) return c.run();
  return 2;
}
