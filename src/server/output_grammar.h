// From what a request asks of its output (structured_output.h) to a compiled grammar:
// output_gbnf() writes the GBNF (JSON Schema and regular expressions through src/grammar's
// converters, constrained tool calls through the model family's call syntax from src/toolcall),
// and GrammarCache compiles it once per distinct text for this model's vocabulary.
//
// Errors are the client's (a schema with an unknown keyword, a grammar that does not parse, one
// over the compile budget): 400s naming the request field, with the converter's path or the
// parser's line:column in the message.
// Thread-safety: output_gbnf is a pure function; GrammarCache is safe to share between threads.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <variant>

#include "grammar/compiled_grammar.h"
#include "server/openai_protocol.h"
#include "server/structured_output.h"
#include "toolcall/tool_call.h"
#include "toolcall/tool_call_grammar.h"

namespace cadenza::server {

// The GBNF text for `so`: empty when nothing constrains the output (no constraint, and tools
// with tool_choice none or auto). `format`: the tool-call syntax of the model (used only for
// constrained tool calls).
// `special`: the vocabulary's control tokens by text (tool-call markers that are control tokens
// become token terminals).
std::variant<std::string, ApiError> output_gbnf(const StructuredOutput& so,
                                                toolcall::ToolCallFormat format,
                                                const toolcall::SpecialTokenLookup& special = {});

class GrammarCache {
 public:
  // `index`: the model's vocabulary as grammar::TokenIndex; `capacity`: compiled grammars kept
  // (least recently used ones go).
  explicit GrammarCache(std::shared_ptr<const grammar::TokenIndex> index, size_t capacity = 64);

  // The compiled grammar of `gbnf`, from the cache or compiled now (bounded by
  // grammar::CompileLimits). `field` names the request field in the error.
  std::variant<std::shared_ptr<const grammar::CompiledGrammar>, ApiError> get(
      const std::string& gbnf, const std::string& field);

  struct Stats {
    int64_t hits = 0, misses = 0, errors = 0;
    double compile_seconds = 0;  // total over misses
  };
  Stats stats() const;

 private:
  std::shared_ptr<const grammar::TokenIndex> index_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;  // most recent first
  struct Entry {
    std::shared_ptr<const grammar::CompiledGrammar> grammar;
    std::list<std::string>::iterator position;
  };
  std::unordered_map<std::string, Entry> entries_;
  Stats stats_;
};

}  // namespace cadenza::server
