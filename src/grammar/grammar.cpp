#include "grammar/grammar.h"

#include <fmt/format.h>

namespace cadenza::grammar {

namespace {

std::string byte_set_string(const ByteSet& set) {
  std::string out = "[";
  for (unsigned b = 0; b < 256; ++b) {
    if (!set.has(static_cast<uint8_t>(b))) continue;
    unsigned e = b;
    while (e + 1 < 256 && set.has(static_cast<uint8_t>(e + 1))) ++e;
    const auto one = [](unsigned v) {
      return v >= 0x21 && v < 0x7F && v != '\\' && v != ']' && v != '-'
                 ? std::string(1, static_cast<char>(v))
                 : fmt::format("\\x{:02X}", v);
    };
    out += one(b);
    if (e > b) {
      out.push_back('-');
      out += one(e);
    }
    b = e;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::to_string() const {
  std::string out;
  for (size_t r = 0; r < rules.size(); ++r) {
    out += rules[r].name;
    out += " ::=";
    for (size_t a = 0; a < rules[r].alternatives.size(); ++a) {
      if (a > 0) out += " |";
      for (int32_t p = rules[r].alternatives[a]; elements[p].kind != ElementKind::kEnd; ++p) {
        const Element& e = elements[p];
        if (e.kind == ElementKind::kBytes) {
          out.push_back(' ');
          out += byte_set_string(byte_sets[e.arg]);
        } else if (e.kind == ElementKind::kRule) {
          out.push_back(' ');
          out += rules[e.arg].name;
        } else {
          const TokenSet& t = token_sets[e.arg];
          out += t.negated ? " !<" : " <";
          for (int32_t id : t.ids) out += fmt::format("[{}]", id);
          for (const auto& s : t.texts) out += s;
          out += ">";
        }
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace cadenza::grammar
