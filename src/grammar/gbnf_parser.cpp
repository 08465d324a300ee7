#include "grammar/gbnf_parser.h"

namespace cadenza::grammar {

Result<Grammar> parse_gbnf(std::string_view, const CompileLimits&) {
  return Error("gbnf: not implemented yet");
}

}  // namespace cadenza::grammar
