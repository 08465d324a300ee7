#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"

namespace cadenza::grammar {
namespace {

TEST(GbnfParser, ParsesRoot) {
  auto g = parse_gbnf("root ::= \"a\"");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error());
}

}  // namespace
}  // namespace cadenza::grammar
