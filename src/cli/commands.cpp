#include "cli/commands.h"

namespace cadenza::cli {

std::vector<Command> all_commands() {
  return {};
}

}  // namespace cadenza::cli
