#include "cli/commands.h"

namespace cadenza::cli {

std::vector<Command> all_commands() {
  return {run_command(), generate_command(), bench_command(), info_command(), synth_command(),
          serve_command(), pull_command(), gateway_command(), quantize_command(),
          perplexity_command(), imatrix_command()};
}

}  // namespace cadenza::cli
