// The subcommands of the `cadenza` binary. Each lives in its own file and exposes one factory
// returning a Command; all_commands() (commands.cpp) lists them.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace cadenza::cli {

struct Command {
  std::string name;
  // Registers the subcommand and its options on `app`; options bind to state captured by `run`.
  std::function<void(CLI::App& app)> add;
  // Runs after parsing when this subcommand was chosen; returns the process exit code.
  std::function<int()> run;
};

Command info_command();   // cli/info.cpp
Command run_command();    // cli/run.cpp
Command synth_command();  // cli/synth.cpp
Command bench_command();  // cli/bench.cpp
Command generate_command();  // cli/generate.cpp
Command serve_command();     // cli/serve.cpp
Command pull_command();      // cli/pull.cpp
Command gateway_command();   // cli/gateway.cpp
Command quantize_command();  // cli/quantize.cpp
Command perplexity_command();  // cli/perplexity.cpp
Command imatrix_command();     // cli/imatrix.cpp

std::vector<Command> all_commands();

}  // namespace cadenza::cli
