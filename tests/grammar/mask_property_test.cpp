// The key property: for states reached by random walks, fill_next_token_bitmask equals the
// brute-force mask (every token tried by accept_bytes / accept_token), fresh and from the cache,
// on the synthetic vocabulary for many grammars and on the real Qwen2 vocabulary for JSON.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "grammar_test_util.h"

namespace cadenza::grammar {
namespace {

// Walks `steps` random allowed tokens (restarting when the walk terminates, from one of
// `prefixes` forced as text so that walks reach nested states), checking the mask against the
// brute force every `check_every` steps.
void check_random_walks(const std::shared_ptr<const CompiledGrammar>& g, uint32_t seed, int steps,
                        int check_every, const std::vector<std::string>& prefixes = {""}) {
  std::mt19937 rng(seed);
  GrammarMatcher m(g);
  const auto restart = [&] {
    m.reset();
    ASSERT_TRUE(m.accept_bytes(prefixes[rng() % prefixes.size()]));
  };
  restart();
  const int32_t n_vocab = g->index().n_vocab();
  std::vector<uint32_t> fast(m.mask_words()), cached(m.mask_words());
  for (int step = 0; step < steps; ++step) {
    if (step % check_every == 0) {
      const std::vector<uint32_t> brute = test::brute_force_mask(m);
      g->set_mask_cache_bytes(0);  // a fresh walk, not a cached copy
      m.fill_next_token_bitmask(fast);
      g->set_mask_cache_bytes(CompiledGrammar::kDefaultMaskCacheBytes);
      m.fill_next_token_bitmask(cached);  // computes and stores
      m.fill_next_token_bitmask(cached);  // from the cache
      ASSERT_EQ(fast, brute) << "step " << step << " seed " << seed << " stacks " << m.num_stacks() << "\n" << g->grammar().to_string();
      ASSERT_EQ(cached, brute) << "step " << step;
    }
    m.fill_next_token_bitmask(fast);
    const std::vector<int32_t> ids = test::allowed_ids(fast, n_vocab);
    if (ids.empty() || m.is_terminated()) {
      restart();
      continue;
    }
    // Prefer non-eog tokens so that walks go deep.
    int32_t id = ids[rng() % ids.size()];
    for (int retry = 0; retry < 3 && g->index().is_eog(id) && rng() % 16 != 0; ++retry) {
      id = ids[rng() % ids.size()];
    }
    ASSERT_TRUE(m.accept_token(id)) << "the mask allowed " << id << " but accept_token refused it";
    if (rng() % 8 == 0 && m.rollback_depth() > 1) m.rollback(1);
  }
}

const char* const kGrammars[] = {
    "root ::= \"ab\" | \"abc\" | \"a\"+ \"b\"",
    "root ::= [a-c]* \"\\\"\" [^\"]{0,3} \"\\\"\"",
    "root ::= (\"{\\\"\" [a-z]+ \"\\\": \" [0-9]{1,3} \"}\")+",
    "root ::= (. | \"日本\")+",
    "root ::= \"x\" [\\u00e0-\\u00ff]* \"y\" | [\\U0001F600-\\U0001F64F]+",
    "root ::= \"ab\" <|tool|> (\"c\" | <[97]>)* | !<[98]> \"z\"",
    "root ::= s\ns ::= \"a\" s \"b\" | \"\"",
    "root ::= (\"a\"?)* (\"b\" | \"\") \"c\"?",
};

TEST(MaskProperty, SyntheticVocabularyManyGrammars) {
  auto index = test::synthetic_index();
  uint32_t seed = 1;
  for (const char* gbnf : kGrammars) {
    auto g = test::compile_or_die(gbnf, index);
    ASSERT_TRUE(g);
    for (int walk = 0; walk < 4; ++walk) check_random_walks(g, seed++, 60, 3);
  }
}

const std::vector<std::string>& json_prefixes() {
  static const std::vector<std::string> p = {
      "", "{", "{\"a\": [", "[{\"k\": \"", "{\"x\": {\"y\": [1, ", "[[[\"\\u00", "{\"n\": -1."};
  return p;
}

TEST(MaskProperty, SyntheticVocabularyJson) {
  auto g = test::compile_or_die(test::json_gbnf(), test::synthetic_index());
  ASSERT_TRUE(g);
  for (uint32_t seed = 100; seed < 110; ++seed) check_random_walks(g, seed, 200, 2, json_prefixes());
}

TEST(MaskProperty, Qwen2VocabularyJson) {
  CADENZA_REQUIRE_SHARED();
  auto index = test::qwen2_index();
  if (!index) GTEST_SKIP() << "SKIPPED: ../shared/models/tiny-qwen2-f16.gguf not loadable";
  auto g = test::compile_or_die(test::json_gbnf(), index);
  ASSERT_TRUE(g);
  // Each check tries all ~152k tokens; a few walks with a sample of their states.
  for (uint32_t seed = 7; seed < 10; ++seed) check_random_walks(g, seed, 80, 8, json_prefixes());
}

}  // namespace
}  // namespace cadenza::grammar

namespace cadenza::grammar {
namespace {

// Random grammars (literals, classes, references that may recurse, groups, repetition, token
// terminals): compiling never crashes or stalls, and every grammar that compiles has masks equal
// to the brute force along random walks.
std::string random_expr(std::mt19937& rng, int depth) {
  static const char* const kAtoms[] = {"\"a\"", "\"b\"", "\"ab\"", "\"\"", "\"é\"", "[a-c]",
                                       "[^a]", ".", "x", "y", "\"\\\"\"", "<|tool|>", "<[97]>",
                                       "[é-ê]", "\"日\""};
  static const char* const kPostfix[] = {"", "", "", "*", "+", "?", "{2}", "{0,2}", "{1,}"};
  std::string out;
  const int n = 1 + static_cast<int>(rng() % 3);
  for (int k = 0; k < n; ++k) {
    if (depth > 0 && rng() % 4 == 0) {
      out += "(";
      const int alts = 1 + static_cast<int>(rng() % 3);
      for (int a = 0; a < alts; ++a) {
        if (a) out += " | ";
        out += random_expr(rng, depth - 1);
      }
      out += ")";
    } else {
      out += kAtoms[rng() % (sizeof(kAtoms) / sizeof(kAtoms[0]))];
    }
    out += kPostfix[rng() % (sizeof(kPostfix) / sizeof(kPostfix[0]))];
    out += " ";
  }
  return out;
}

TEST(MaskProperty, RandomGrammars) {
  auto index = test::synthetic_index();
  std::mt19937 rng(2024);
  int compiled = 0;
  for (int k = 0; k < 400; ++k) {
    std::string gbnf = "root ::= " + random_expr(rng, 2) + "| " + random_expr(rng, 2) +
                       "\nx ::= " + random_expr(rng, 2) + "| \"q\"\ny ::= " + random_expr(rng, 1);
    auto g = compile_gbnf(gbnf, index);
    if (!g) continue;
    ++compiled;
    check_random_walks(*g, static_cast<uint32_t>(k), 12, 3);
    if (HasFatalFailure()) {
      ADD_FAILURE() << "grammar:\n" << gbnf;
      return;
    }
  }
  EXPECT_GT(compiled, 100);
  std::printf("random grammars: %d of 400 compiled\n", compiled);
}

}  // namespace
}  // namespace cadenza::grammar
