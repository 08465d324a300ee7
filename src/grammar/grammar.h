// The grammar IR: what a GBNF text compiles to, before and independent of any vocabulary.
//
// A Grammar is a set of rules; each rule is a list of alternatives; each alternative is a run of
// Elements in one flat array, ended by an kEnd element. A grammar position is an index into that
// array. Terminals are byte-level: a character class over Unicode code points is lowered to
// alternatives of UTF-8 byte-range sequences (gbnf_parser.cpp, utf8_ranges.h), so the matcher
// advances one byte at a time and a token may end in the middle of a code point.
//
// Ownership: plain values, copyable. Thread-safety: none needed (immutable once built).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace cadenza::grammar {

// Bounds on compilation so that an untrusted grammar (from a request) costs bounded time and
// memory: exceeding any of them is an Error naming the limit, never a stall.
struct CompileLimits {
  size_t max_grammar_bytes = 1 << 20;  // length of the GBNF text
  size_t max_rules = 10000;            // rules after lowering (groups, repetitions, classes)
  size_t max_elements = 1 << 20;       // elements after lowering (x{1000} counts 1000)
  double max_seconds = 2.0;            // wall-clock for parse + analysis + setup
  size_t max_nesting = 256;            // depth of ( ) groups in the text (parser recursion)
};

enum class ElementKind : uint8_t {
  kBytes,  // one byte in byte_sets[arg]
  kRule,   // the rule rules[arg]
  kToken,  // one token in token_sets[arg] (a token terminal: <[id]>, <|text|>, !<[id]>)
  kEnd,    // end of an alternative
};

struct Element {
  ElementKind kind = ElementKind::kEnd;
  int32_t arg = 0;
};

// A set of bytes (256 bits).
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

// A token terminal. `ids` are token ids (from <[id]> or resolved from `texts` at compile time);
// `texts` are the <...> spellings still to resolve against a TokenIndex (empty after compile).
// negated (!<[id]>): any one token except these ids and except end-of-generation ids.
struct TokenSet {
  std::vector<int32_t> ids;
  std::vector<std::string> texts;
  bool negated = false;
  uint32_t line = 0, column = 0;  // where it was written, for resolution errors
};

struct Rule {
  std::string name;                   // GBNF name; generated rules are "<parent>_<n>"
  std::vector<int32_t> alternatives;  // start positions in Grammar::elements
  uint32_t line = 0, column = 0;      // definition (or first use, for generated rules)
};

struct Grammar {
  std::vector<Element> elements;
  std::vector<Rule> rules;
  std::vector<ByteSet> byte_sets;
  std::vector<TokenSet> token_sets;
  int32_t root = -1;  // index of the rule named "root"

  // A readable listing (one line per alternative), for tests and debugging.
  std::string to_string() const;
};

}  // namespace cadenza::grammar
