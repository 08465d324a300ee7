#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "grammar/gbnf_parser.h"
#include "grammar/stack_arena.h"

namespace cadenza::grammar {

namespace {

Status resolve_tokens(Grammar& g, const TokenIndex& index) {
  for (TokenSet& t : g.token_sets) {
    for (int32_t id : t.ids) {
      if (id < 0 || id >= index.n_vocab()) {
        return make_error("{}:{}: token id {} is outside the vocabulary of {} tokens", t.line,
                          t.column, id, index.n_vocab());
      }
    }
    for (const std::string& text : t.texts) {
      auto id = index.find_by_text(text);
      if (!id) return make_error("{}:{}: no token has the text '{}'", t.line, t.column, text);
      t.ids.push_back(*id);
    }
    t.texts.clear();
    std::sort(t.ids.begin(), t.ids.end());
    t.ids.erase(std::unique(t.ids.begin(), t.ids.end()), t.ids.end());
  }
  return {};
}

// Fixpoint over the rules; each round is linear in the grammar, and a chain of n rules can need n
// rounds, so the rounds are checked against the deadline.
Result<std::vector<uint8_t>> compute_nullable(const Grammar& g,
                                              std::chrono::steady_clock::time_point deadline,
                                              double max_seconds) {
  std::vector<uint8_t> nullable(g.rules.size(), 0);
  for (bool changed = true; changed;) {
    if (std::chrono::steady_clock::now() > deadline) {
      return make_error("1:1: grammar compilation exceeded {} s", max_seconds);
    }
    changed = false;
    for (size_t r = 0; r < g.rules.size(); ++r) {
      if (nullable[r]) continue;
      for (int32_t start : g.rules[r].alternatives) {
        bool all = true;
        for (int32_t p = start; g.elements[p].kind != ElementKind::kEnd; ++p) {
          const Element& e = g.elements[p];
          if (e.kind != ElementKind::kRule || !nullable[e.arg]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

// Left recursion that grows the stack: a cycle of "calls before consuming input" in which some
// call is not in tail position (a tail call replaces the caller's frame, see stack_arena.h, so a
// cycle of tail calls alone only revisits a state, which the matcher deduplicates). Found as a
// non-tail edge inside a strongly connected component of the left-call graph (Tarjan, iterative).
Status check_left_recursion(const Grammar& g, const std::vector<uint8_t>& nullable,
                            std::chrono::steady_clock::time_point deadline, double max_seconds) {
  const size_t n = g.rules.size();
  struct Edge {
    int32_t to;
    bool tail;
  };
  std::vector<std::vector<Edge>> edges(n);
  for (size_t r = 0; r < n; ++r) {
    for (int32_t start : g.rules[r].alternatives) {
      for (int32_t p = start; g.elements[p].kind != ElementKind::kEnd; ++p) {
        const Element& e = g.elements[p];
        if (e.kind != ElementKind::kRule) break;
        edges[r].push_back({e.arg, g.elements[p + 1].kind == ElementKind::kEnd});
        if (!nullable[e.arg]) break;
      }
    }
  }
  std::vector<int32_t> index(n, -1), low(n, 0), comp(n, -1), stack;
  std::vector<uint8_t> on_stack(n, 0);
  int32_t counter = 0, n_comp = 0;
  struct Frame {
    int32_t v;
    size_t next;
  };
  std::vector<Frame> call;
  for (size_t s = 0; s < n; ++s) {
    if (index[s] >= 0) continue;
    call.push_back({static_cast<int32_t>(s), 0});
    index[s] = low[s] = counter++;
    stack.push_back(static_cast<int32_t>(s));
    on_stack[s] = 1;
    while (!call.empty()) {
      Frame& f = call.back();
      if (f.next < edges[f.v].size()) {
        const int32_t w = edges[f.v][f.next++].to;
        if (index[w] < 0) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          on_stack[w] = 1;
          call.push_back({w, 0});
        } else if (on_stack[w]) {
          low[f.v] = std::min(low[f.v], index[w]);
        }
        continue;
      }
      const int32_t v = f.v;
      call.pop_back();
      if (!call.empty()) low[call.back().v] = std::min(low[call.back().v], low[v]);
      if (low[v] == index[v]) {
        while (true) {
          const int32_t w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          comp[w] = n_comp;
          if (w == v) break;
        }
        ++n_comp;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return make_error("1:1: grammar compilation exceeded {} s", max_seconds);
    }
  }
  for (size_t r = 0; r < n; ++r) {
    for (const Edge& e : edges[r]) {
      if (!e.tail && comp[e.to] == comp[r]) {
        const Rule& rule = g.rules[r];
        return make_error(
            "{}:{}: rule '{}' is left-recursive (it can reach '{}' before consuming any input); "
            "rewrite it with repetition, e.g. a ::= b (\"+\" b)*",
            rule.line, rule.column, rule.name, g.rules[e.to].name);
      }
    }
  }
  return {};
}

}  // namespace

Result<std::shared_ptr<const CompiledGrammar>> compile_gbnf(std::string_view gbnf,
                                                            std::shared_ptr<const TokenIndex> index,
                                                            const CompileLimits& limits) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(limits.max_seconds));
  if (!index) return Error("grammar: no token index");
  auto parsed = parse_gbnf(gbnf, limits);
  if (!parsed) return parsed.error_value();
  Grammar g = std::move(*parsed);
  if (Status s = resolve_tokens(g, *index); !s) return s.error_value();
  auto nullable = compute_nullable(g, deadline, limits.max_seconds);
  if (!nullable) return nullable.error_value();
  if (Status s = check_left_recursion(g, *nullable, deadline, limits.max_seconds); !s) {
    return s.error_value();
  }
  // A grammar whose start alone has more parse stacks than a matcher may hold would match
  // nothing: say so here rather than let every request fail.
  {
    StackArena arena(&g);
    const size_t n = arena.start_stacks().size();
    if (n > kMaxLiveStacks) {
      return make_error("1:1: the grammar is too ambiguous: {} parse stacks at its start (limit {})",
                        n, kMaxLiveStacks);
    }
  }
  return std::shared_ptr<const CompiledGrammar>(
      std::make_shared<CompiledGrammar>(std::move(g), std::move(index), std::move(*nullable)));
}

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenIndex> index,
                                 std::vector<uint8_t> nullable)
    : grammar_(std::move(grammar)), index_(std::move(index)), nullable_(std::move(nullable)) {}

bool CompiledGrammar::lookup_mask(std::string_view key, std::span<uint32_t> words) const {
  auto hit = state_cache_.get(key);
  if (!hit || hit->size() != words.size()) return false;
  std::memcpy(words.data(), hit->data(), hit->size() * sizeof(uint32_t));
  return true;
}

void CompiledGrammar::store_mask(std::string key, std::span<const uint32_t> words) const {
  state_cache_.put(std::move(key),
                   std::make_shared<const std::vector<uint32_t>>(words.begin(), words.end()),
                   words.size() * sizeof(uint32_t));
}

void CompiledGrammar::store_head(std::string key, std::shared_ptr<const HeadMask> head) const {
  size_t bytes = head->accepted.size() * sizeof(uint32_t) + head->boundary_nodes.size() * 40;
  for (const auto& p : head->boundary_paths) bytes += p.size();
  head_cache_.put(std::move(key), std::move(head), bytes);
}

}  // namespace cadenza::grammar
