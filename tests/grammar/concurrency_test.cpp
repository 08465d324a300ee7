// One CompiledGrammar shared by matchers on several threads (its caches are the shared, mutable
// part): every thread's masks still equal the brute force.
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "grammar_test_util.h"

namespace cadenza::grammar {
namespace {

TEST(GrammarConcurrency, SharedCompiledGrammarAcrossThreads) {
  auto g = test::compile_or_die(test::json_gbnf(), test::synthetic_index());
  ASSERT_TRUE(g);
  g->set_mask_cache_bytes(64 << 10);  // small, so that threads also evict each other's masks
  std::atomic<int> mismatches{0}, checks{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      GrammarMatcher m(g);
      std::vector<uint32_t> words(m.mask_words());
      for (int step = 0; step < 300; ++step) {
        m.fill_next_token_bitmask(words);
        if (step % 5 == 0) {
          if (words != test::brute_force_mask(m)) ++mismatches;
          ++checks;
        }
        const auto ids = test::allowed_ids(words, g->index().n_vocab());
        if (ids.empty() || m.is_terminated()) {
          m.reset();
          continue;
        }
        if (!m.accept_token(ids[rng() % ids.size()])) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(checks.load(), 4 * 60);
}

}  // namespace
}  // namespace cadenza::grammar
