// A Tokenizer is immutable after construction: concurrent encode/decode calls give the results
// of sequential ones (per-call PCRE2 match data and merge scratch).
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "vocab_builder.h"

namespace cadenza {
namespace {

using test::VocabBuilder;

TEST(Tokenizer, ConcurrentEncodeAndDecodeAgree) {
  VocabBuilder b("gpt2", "llama-bpe");
  b.byte_alphabet();
  b.merge("a", "b");
  b.merge("ab", "c");
  auto t = b.build_ok();
  ASSERT_TRUE(t);
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "abc abd 123 \xE4\xBD\xA0 ";
  const auto expected = t->encode(text, true, true);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      bool all = true;
      for (int k = 0; k < 5; ++k) {
        all = all && t->encode(text, true, true) == expected && t->decode(expected) == text;
      }
      ok[i] = all ? 1 : 0;
    });
  }
  for (auto& th : threads) th.join();
  for (int v : ok) EXPECT_EQ(v, 1);
}

}  // namespace
}  // namespace cadenza
