#include "server/output_grammar.h"

#include <chrono>

#include <fmt/format.h>

#include "grammar/json_grammar.h"
#include "grammar/json_schema_to_gbnf.h"
#include "grammar/regex_to_gbnf.h"
#include "toolcall/tool_call_grammar.h"

namespace cadenza::server {

namespace {

ApiError field_error(const std::string& field, const std::string& message) {
  return bad_request(fmt::format("{}: {}", field, message), field);
}

std::variant<std::string, ApiError> constraint_gbnf(const OutputConstraint& c) {
  using Kind = OutputConstraint::Kind;
  switch (c.kind) {
    case Kind::kNone:
      return std::string();
    case Kind::kJsonObject:
      return json_object_gbnf();
    case Kind::kJsonSchema: {
      SchemaGrammarOptions opt;
      opt.strict = c.strict;
      auto g = json_schema_to_gbnf(c.schema, opt);
      if (!g) return field_error(c.field, g.error());
      return std::move(*g);
    }
    case Kind::kGrammar:
      return c.text;
    case Kind::kRegex: {
      auto g = regex_to_gbnf(c.text);
      if (!g) return field_error(c.field, g.error());
      return std::move(*g);
    }
    case Kind::kChoice: {
      std::string root = "root ::= ";
      for (size_t i = 0; i < c.choices.size(); ++i)
        root += (i ? " | " : "") + gbnf_literal(c.choices[i]);
      return root + "\n";
    }
  }
  return std::string();
}

std::variant<std::string, ApiError> tools_gbnf(const ToolRequest& t,
                                               toolcall::ToolCallFormat format,
                                               const toolcall::SpecialTokenLookup& special) {
  std::string rules;
  std::vector<toolcall::ToolGrammarEntry> entries;
  for (size_t i = 0; i < t.functions.size(); ++i) {
    const ToolFunction& f = t.functions[i];
    if (t.choice == ToolRequest::Choice::kNamed && f.name != t.named) continue;
    SchemaGrammarOptions opt;
    opt.rule_prefix = fmt::format("tool{}-", i);
    opt.root_name = "args";
    opt.strict = f.strict;
    auto g = json_schema_to_gbnf(f.parameters, opt);
    if (!g)
      return bad_request(fmt::format("tools[{}].function.parameters: {}", i, g.error()), "tools");
    rules += *g;
    rules += '\n';
    entries.push_back({f.name, opt.rule_prefix + opt.root_name});
  }
  return toolcall::tool_call_gbnf(format, entries, t.parallel, /*required=*/true, special) + "\n" +
         rules;
}

}  // namespace

std::variant<std::string, ApiError> output_gbnf(const StructuredOutput& so,
                                                toolcall::ToolCallFormat format,
                                                const toolcall::SpecialTokenLookup& special) {
  if (so.tools.constrained()) return tools_gbnf(so.tools, format, special);
  return constraint_gbnf(so.constraint);
}

GrammarCache::GrammarCache(std::shared_ptr<const grammar::TokenIndex> index, size_t capacity)
    : index_(std::move(index)), capacity_(capacity < 1 ? 1 : capacity) {}

std::variant<std::shared_ptr<const grammar::CompiledGrammar>, ApiError> GrammarCache::get(
    const std::string& gbnf, const std::string& field) {
  {
    std::lock_guard lock(mu_);
    if (auto it = entries_.find(gbnf); it != entries_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.position);
      ++stats_.hits;
      return it->second.grammar;
    }
  }
  // Compiled outside the lock: a large grammar must not hold up requests for cached ones (two
  // first requests for the same text may both compile it; the second result is kept).
  const auto start = std::chrono::steady_clock::now();
  auto compiled = grammar::compile_gbnf(gbnf, index_);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard lock(mu_);
  stats_.compile_seconds += took;
  if (!compiled) {
    ++stats_.errors;
    return field_error(field, compiled.error());
  }
  ++stats_.misses;
  if (auto it = entries_.find(gbnf); it != entries_.end()) return it->second.grammar;
  lru_.push_front(gbnf);
  entries_.emplace(gbnf, Entry{*compiled, lru_.begin()});
  while (entries_.size() > capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
  return *compiled;
}

GrammarCache::Stats GrammarCache::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace cadenza::server
