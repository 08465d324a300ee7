#include "grammar/compiled_grammar.h"

namespace cadenza::grammar {

Result<std::shared_ptr<const CompiledGrammar>> compile_gbnf(std::string_view,
                                                            std::shared_ptr<const TokenIndex>,
                                                            const CompileLimits&) {
  return Error("gbnf: not implemented yet");
}

}  // namespace cadenza::grammar
