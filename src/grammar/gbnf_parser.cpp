// A recursive-descent GBNF parser that lowers as it parses: groups, repetitions and non-ASCII
// classes become generated rules, literals become one kBytes element per byte.
#include "grammar/gbnf_parser.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <unordered_map>

#include "grammar/utf8_ranges.h"
#include "util/utf8.h"

namespace cadenza::grammar {

namespace {

using Sequence = std::vector<Element>;

struct RuleDraft {
  std::string name;
  std::vector<Sequence> alts;
  bool defined = false;
  uint32_t line = 0, column = 0;    // definition
  size_t first_use = std::string::npos;  // offset of the first reference
};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

class Parser {
 public:
  Parser(std::string_view text, const CompileLimits& limits)
      : src_(text), limits_(limits),
        deadline_(std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(limits.max_seconds))) {}

  Result<Grammar> run() {
    if (src_.size() > limits_.max_grammar_bytes) {
      return make_error("1:1: grammar of {} bytes exceeds the limit of {} bytes", src_.size(),
                        limits_.max_grammar_bytes);
    }
    skip_space();
    while (pos_ < src_.size()) {
      if (!parse_rule()) return std::move(*error_);
      skip_space();
    }
    return finish();
  }

 private:
  // --- errors and positions ---
  // Line starts are indexed once so that positions cost a binary search, not a rescan.
  std::pair<uint32_t, uint32_t> line_col(size_t offset) const {
    if (line_starts_.empty()) {
      line_starts_.push_back(0);
      for (size_t k = 0; k < src_.size(); ++k) {
        if (src_[k] == '\n') line_starts_.push_back(k + 1);
      }
    }
    offset = std::min(offset, src_.size());
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    return {static_cast<uint32_t>(it - line_starts_.begin() + 1),
            static_cast<uint32_t>(offset - *it + 1)};
  }
  template <typename... Args>
  bool fail_at(size_t offset, fmt::format_string<Args...> format, Args&&... args) {
    if (!error_) {
      auto [line, col] = line_col(offset);
      error_ = Error(fmt::format("{}:{}: {}", line, col,
                                 fmt::format(format, std::forward<Args>(args)...)));
    }
    return false;
  }
  bool check_budget() {
    if (element_count_ > limits_.max_elements) {
      return fail_at(pos_, "grammar exceeds the limit of {} elements", limits_.max_elements);
    }
    if (drafts_.size() > limits_.max_rules) {
      return fail_at(pos_, "grammar exceeds the limit of {} rules", limits_.max_rules);
    }
    if ((++budget_checks_ & 255) == 0 && std::chrono::steady_clock::now() > deadline_) {
      return fail_at(pos_, "grammar compilation exceeded {} s", limits_.max_seconds);
    }
    return true;
  }

  // --- lexing ---
  bool at_end() const { return pos_ >= src_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }
  void skip_space() {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    return std::string(src_.substr(start, pos_ - start));
  }
  // A rule definition starts here: name ws "::=".
  bool at_definition() const {
    size_t k = pos_;
    if (k >= src_.size() || !is_name_char(src_[k])) return false;
    while (k < src_.size() && is_name_char(src_[k])) ++k;
    while (k < src_.size() && (src_[k] == ' ' || src_[k] == '\t' || src_[k] == '\r' ||
                               src_[k] == '\n')) {
      ++k;
    }
    return src_.substr(k, 3) == "::=";
  }

  // --- rules ---
  int32_t rule_id(const std::string& name) {
    auto [it, inserted] = by_name_.try_emplace(name, static_cast<int32_t>(drafts_.size()));
    if (inserted) {
      drafts_.push_back({});
      drafts_.back().name = name;
    }
    return it->second;
  }
  int32_t new_rule(const std::string& base, size_t offset) {
    const int32_t id = static_cast<int32_t>(drafts_.size());
    drafts_.push_back({});
    drafts_.back().name = fmt::format("{}_{}", base, id);
    drafts_.back().defined = true;
    auto [line, col] = line_col(offset);
    drafts_.back().line = line;
    drafts_.back().column = col;
    return id;
  }
  void add_alt(int32_t rule, Sequence seq) {
    element_count_ += seq.size() + 1;
    drafts_[rule].alts.push_back(std::move(seq));
  }
  int32_t byte_set(const ByteSet& set) {
    auto [it, inserted] = byte_set_ids_.try_emplace(set.bits, static_cast<int32_t>(byte_sets_.size()));
    if (inserted) byte_sets_.push_back(set);
    return it->second;
  }

  bool parse_rule() {
    const size_t start = pos_;
    if (!is_name_char(peek())) return fail_at(pos_, "expected a rule name, found '{}'", peek());
    const std::string name = parse_name();
    skip_space();
    if (src_.substr(pos_, 3) != "::=") return fail_at(pos_, "expected '::=' after '{}'", name);
    pos_ += 3;
    const int32_t id = rule_id(name);
    if (drafts_[id].defined) return fail_at(start, "rule '{}' is defined twice", name);
    drafts_[id].defined = true;
    auto [line, col] = line_col(start);
    drafts_[id].line = line;
    drafts_[id].column = col;
    current_rule_ = name;
    std::vector<Sequence> alts;
    if (!parse_alternatives(alts, 0)) return false;
    for (auto& seq : alts) add_alt(id, std::move(seq));
    return check_budget();
  }

  // alternatives := sequence ('|' sequence)*; ends at ')' (depth > 0), a definition or EOF.
  bool parse_alternatives(std::vector<Sequence>& alts, size_t depth) {
    alts.emplace_back();
    if (!parse_sequence(alts.back(), depth)) return false;
    while (peek() == '|') {
      ++pos_;
      alts.emplace_back();
      if (!parse_sequence(alts.back(), depth)) return false;
    }
    return true;
  }

  bool parse_sequence(Sequence& seq, size_t depth) {
    skip_space();
    while (!at_end()) {
      const char c = peek();
      if (c == '|' || c == ')') break;
      if (at_definition()) break;
      const size_t item_start = pos_;
      Sequence item;
      if (!parse_item(item, depth)) return false;
      skip_space();
      if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') {
        if (!parse_repetition(item, item_start)) return false;
        skip_space();
      }
      seq.insert(seq.end(), item.begin(), item.end());
      if (!check_budget()) return false;
    }
    if (depth > 0 && at_end()) return fail_at(pos_, "expected ')' before the end of the grammar");
    return true;
  }

  bool parse_item(Sequence& item, size_t depth) {
    const char c = peek();
    if (c == '"') return parse_literal(item);
    if (c == '[') return parse_class(item);
    if (c == '.') {
      ++pos_;
      return emit_class({{0, 0x10FFFF}}, false, item, pos_ - 1);
    }
    if (c == '<' || (c == '!' && peek(1) == '<')) return parse_token(item);
    if (c == '(') {
      if (depth + 1 > limits_.max_nesting) {
        return fail_at(pos_, "groups nested deeper than the limit of {}", limits_.max_nesting);
      }
      const size_t open = pos_++;
      std::vector<Sequence> alts;
      if (!parse_alternatives(alts, depth + 1)) return false;
      if (peek() != ')') return fail_at(open, "unclosed '('");
      ++pos_;
      const int32_t rule = new_rule(current_rule_, open);
      for (auto& seq : alts) add_alt(rule, std::move(seq));
      item.push_back({ElementKind::kRule, rule});
      return true;
    }
    if (is_name_char(c)) {
      const size_t start = pos_;
      const int32_t rule = rule_id(parse_name());
      if (drafts_[rule].first_use == std::string::npos) drafts_[rule].first_use = start;
      item.push_back({ElementKind::kRule, rule});
      return true;
    }
    return fail_at(pos_, "unexpected character '{}'", c);
  }

  // One escape after '\' (at pos_), as a code point.
  bool parse_escape(uint32_t& cp) {
    const size_t start = pos_ - 1;
    const char c = peek();
    ++pos_;
    switch (c) {
      case 'n': cp = '\n'; return true;
      case 'r': cp = '\r'; return true;
      case 't': cp = '\t'; return true;
      case '\\': case '"': case '\'': case '[': case ']': case '-': case '^':
        cp = static_cast<uint8_t>(c);
        return true;
      case 'x': case 'u': case 'U': {
        const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        cp = 0;
        for (size_t k = 0; k < n; ++k) {
          const char h = peek();
          uint32_t v;
          if (h >= '0' && h <= '9') v = h - '0';
          else if (h >= 'a' && h <= 'f') v = h - 'a' + 10;
          else if (h >= 'A' && h <= 'F') v = h - 'A' + 10;
          else return fail_at(start, "\\{} needs {} hex digits", c, n);
          cp = cp * 16 + v;
          ++pos_;
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
          return fail_at(start, "escape U+{:X} is not a Unicode scalar value", cp);
        }
        return true;
      }
      default:
        return fail_at(start, "unknown escape '\\{}'", c);
    }
  }

  // One character of a literal or class (escape or raw UTF-8) as a code point.
  bool parse_char(uint32_t& cp) {
    if (at_end()) return fail_at(pos_, "unexpected end of the grammar");
    if (peek() == '\\') {
      ++pos_;
      return parse_escape(cp);
    }
    const std::string rest(src_.substr(pos_, 4));
    size_t k = 0;
    if (!decode_utf8(rest, k, cp)) return fail_at(pos_, "invalid UTF-8 in the grammar");
    pos_ += k;
    return true;
  }

  bool parse_literal(Sequence& item) {
    const size_t open = pos_++;
    while (true) {
      if (at_end()) return fail_at(open, "unterminated string literal");
      if (peek() == '"') break;
      uint32_t cp;
      if (!parse_char(cp)) return false;
      std::string bytes;
      append_utf8(bytes, cp);
      for (char b : bytes) {
        ByteSet set;
        set.add(static_cast<uint8_t>(b));
        item.push_back({ElementKind::kBytes, byte_set(set)});
      }
    }
    ++pos_;
    return true;
  }

  bool parse_class(Sequence& item) {
    const size_t open = pos_++;
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodePointRange> ranges;
    while (true) {
      if (at_end()) return fail_at(open, "unterminated character class");
      if (peek() == ']') break;
      uint32_t lo, hi;
      if (!parse_char(lo)) return false;
      hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
        ++pos_;
        if (!parse_char(hi)) return false;
        if (hi < lo) return fail_at(open, "class range U+{:X}-U+{:X} is reversed", lo, hi);
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    return emit_class(std::move(ranges), negated, item, open);
  }

  // Lowers a class: ASCII-only to one kBytes element, otherwise to a rule of UTF-8 sequences
  // (shared by every use of the same set).
  bool emit_class(std::vector<CodePointRange> ranges, bool negated, Sequence& item, size_t at) {
    ranges = normalize_ranges(std::move(ranges));
    if (negated) ranges = complement_ranges(ranges);
    if (!ranges.empty() && ranges.back().hi < 0x80) {
      ByteSet set;
      for (const auto& r : ranges) set.add_range(static_cast<uint8_t>(r.lo), static_cast<uint8_t>(r.hi));
      item.push_back({ElementKind::kBytes, byte_set(set)});
      return true;
    }
    std::vector<uint32_t> key;
    for (const auto& r : ranges) {
      key.push_back(r.lo);
      key.push_back(r.hi);
    }
    if (auto it = class_rules_.find(key); it != class_rules_.end()) {
      item.push_back({ElementKind::kRule, it->second});
      return true;
    }
    const int32_t rule = new_rule("class", at);
    ByteSet ascii;
    bool has_ascii = false;
    for (const auto& seq : utf8_sequences(ranges)) {
      if (seq.size() == 1) {
        ascii.add_range(seq[0].lo, seq[0].hi);
        has_ascii = true;
        continue;
      }
      Sequence alt;
      for (const ByteRange& br : seq) {
        ByteSet set;
        set.add_range(br.lo, br.hi);
        alt.push_back({ElementKind::kBytes, byte_set(set)});
      }
      add_alt(rule, std::move(alt));
    }
    if (has_ascii) add_alt(rule, Sequence{{ElementKind::kBytes, byte_set(ascii)}});
    // An empty class matches nothing: a rule with no alternatives.
    class_rules_.emplace(std::move(key), rule);
    item.push_back({ElementKind::kRule, rule});
    return check_budget();
  }

  bool parse_token(Sequence& item) {
    const size_t start = pos_;
    TokenSet set;
    auto [line, col] = line_col(start);
    set.line = line;
    set.column = col;
    if (peek() == '!') {
      set.negated = true;
      ++pos_;
    }
    ++pos_;  // '<'
    if (peek() == '[') {
      ++pos_;
      uint64_t id = 0;
      size_t digits = 0;
      while (peek() >= '0' && peek() <= '9') {
        id = id * 10 + static_cast<uint64_t>(peek() - '0');
        if (id > INT32_MAX) return fail_at(start, "token id too large");
        ++pos_;
        ++digits;
      }
      if (digits == 0 || peek() != ']' || peek(1) != '>') {
        return fail_at(start, "expected a token id as <[123]>");
      }
      pos_ += 2;
      set.ids.push_back(static_cast<int32_t>(id));
    } else {
      const size_t text_start = pos_;
      while (!at_end() && peek() != '>' && peek() != '\n') ++pos_;
      if (peek() != '>' || pos_ == text_start) return fail_at(start, "unterminated token terminal '<...>'");
      ++pos_;
      set.texts.emplace_back(src_.substr(start + (set.negated ? 1 : 0),
                                         pos_ - start - (set.negated ? 1 : 0)));
    }
    token_sets_.push_back(std::move(set));
    item.push_back({ElementKind::kToken, static_cast<int32_t>(token_sets_.size() - 1)});
    return true;
  }

  bool parse_number(size_t& value) {
    const size_t start = pos_;
    value = 0;
    if (!(peek() >= '0' && peek() <= '9')) return fail_at(pos_, "expected a number");
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + static_cast<size_t>(peek() - '0');
      if (value > limits_.max_elements) {
        return fail_at(start, "repetition count exceeds the limit of {} elements", limits_.max_elements);
      }
      ++pos_;
    }
    return true;
  }

  // Applies * + ? {m} {m,} {m,n} to `item`, replacing it.
  bool parse_repetition(Sequence& item, size_t item_start) {
    const size_t op_at = pos_;
    size_t min = 0, max = 0;
    bool unbounded = false;
    const char op = peek();
    ++pos_;
    if (op == '*') {
      unbounded = true;
    } else if (op == '+') {
      min = 1, unbounded = true;
    } else if (op == '?') {
      max = 1;
    } else {
      skip_space();
      if (!parse_number(min)) return false;
      skip_space();
      if (peek() == '}') {
        max = min;
      } else if (peek() == ',') {
        ++pos_;
        skip_space();
        if (peek() == '}') {
          unbounded = true;
        } else {
          if (!parse_number(max)) return false;
          skip_space();
          if (max < min) return fail_at(op_at, "repetition {{{},{}}} has max < min", min, max);
        }
      }
      if (peek() != '}') return fail_at(op_at, "expected '}}' to close the repetition");
      ++pos_;
    }
    // The repeated unit as one element.
    Element unit;
    if (item.size() == 1) {
      unit = item[0];
    } else {
      const int32_t rule = new_rule(current_rule_, item_start);
      add_alt(rule, item);
      unit = {ElementKind::kRule, rule};
    }
    Sequence out;
    if (min > limits_.max_elements || (!unbounded && max > limits_.max_elements)) {
      return fail_at(op_at, "repetition exceeds the limit of {} elements", limits_.max_elements);
    }
    for (size_t k = 0; k < min; ++k) {
      out.push_back(unit);
      if ((k & 1023) == 0 && (element_count_ + out.size() > limits_.max_elements || !check_budget())) {
        return fail_at(op_at, "repetition exceeds the limit of {} elements", limits_.max_elements);
      }
    }
    if (unbounded) {
      // star ::= unit star | ε  (the self-reference is a tail call: the stack stays flat)
      const int32_t star = new_rule(current_rule_, item_start);
      add_alt(star, Sequence{unit, {ElementKind::kRule, star}});
      add_alt(star, Sequence{});
      out.push_back({ElementKind::kRule, star});
    } else if (max > min) {
      // opt_1 ::= unit | ε ; opt_k ::= unit opt_{k-1} | ε
      int32_t prev = -1;
      for (size_t k = 0; k < max - min; ++k) {
        const int32_t opt = new_rule(current_rule_, item_start);
        if (prev < 0) {
          add_alt(opt, Sequence{unit});
        } else {
          add_alt(opt, Sequence{unit, {ElementKind::kRule, prev}});
        }
        add_alt(opt, Sequence{});
        prev = opt;
        if (!check_budget()) return false;
      }
      out.push_back({ElementKind::kRule, prev});
    }
    item = std::move(out);
    return check_budget();
  }

  Result<Grammar> finish() {
    if (drafts_.empty()) return Error("1:1: empty grammar (no rules)");
    for (const RuleDraft& d : drafts_) {
      if (!d.defined) {
        fail_at(d.first_use, "undefined rule '{}'", d.name);
        return std::move(*error_);
      }
    }
    auto root = by_name_.find("root");
    if (root == by_name_.end()) return Error("1:1: the grammar has no rule named 'root'");
    Grammar g;
    g.root = root->second;
    g.byte_sets = std::move(byte_sets_);
    g.token_sets = std::move(token_sets_);
    g.rules.resize(drafts_.size());
    for (size_t r = 0; r < drafts_.size(); ++r) {
      Rule& rule = g.rules[r];
      rule.name = std::move(drafts_[r].name);
      rule.line = drafts_[r].line;
      rule.column = drafts_[r].column;
      for (const Sequence& seq : drafts_[r].alts) {
        rule.alternatives.push_back(static_cast<int32_t>(g.elements.size()));
        g.elements.insert(g.elements.end(), seq.begin(), seq.end());
        g.elements.push_back({ElementKind::kEnd, 0});
      }
    }
    if (g.elements.size() > limits_.max_elements) {
      return make_error("1:1: grammar exceeds the limit of {} elements", limits_.max_elements);
    }
    return g;
  }

  std::string_view src_;
  CompileLimits limits_;
  std::chrono::steady_clock::time_point deadline_;
  size_t pos_ = 0;
  mutable std::vector<size_t> line_starts_;
  std::optional<Error> error_;
  std::vector<RuleDraft> drafts_;
  std::unordered_map<std::string, int32_t> by_name_;
  std::vector<ByteSet> byte_sets_;
  std::map<std::array<uint64_t, 4>, int32_t> byte_set_ids_;
  std::vector<TokenSet> token_sets_;
  std::map<std::vector<uint32_t>, int32_t> class_rules_;
  std::string current_rule_;
  size_t element_count_ = 0;
  uint64_t budget_checks_ = 0;
};

}  // namespace

Result<Grammar> parse_gbnf(std::string_view text, const CompileLimits& limits) {
  return Parser(text, limits).run();
}

}  // namespace cadenza::grammar
