#include "kv/block_hash.h"

#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace cadenza::kv {
namespace {

std::string hex(const BlockHash& h) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : h.bytes) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

TEST(BlockHash, Sha256KnownAnswers) {
  // FIPS 180-2 examples.
  const std::string_view abc = "abc";
  EXPECT_EQ(hex(sha256({reinterpret_cast<const uint8_t*>(abc.data()), abc.size()})),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256({})), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(BlockHash, ChainDependsOnParentTokensAndOrder) {
  const BlockHash root = root_hash("");
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {1, 2, 4, 3};
  EXPECT_EQ(chain_hash(root, a), chain_hash(root_hash(""), a));  // deterministic
  EXPECT_NE(chain_hash(root, a), chain_hash(root, b));
  const BlockHash h1 = chain_hash(root, a);
  EXPECT_NE(chain_hash(h1, a), h1);                             // same tokens, later position
  EXPECT_NE(chain_hash(root_hash("lora"), a), chain_hash(root, a));  // extra key
  EXPECT_NE(root_hash("a"), root_hash("b"));
  EXPECT_NE(root_hash(""), root_hash(std::string_view("\0", 1)));
  // Token ids are hashed as 32-bit values, not truncated to bytes.
  EXPECT_NE(chain_hash(root, std::vector<int32_t>{256}), chain_hash(root, std::vector<int32_t>{0}));
  EXPECT_NE(chain_hash(root, std::vector<int32_t>{-1}), chain_hash(root, std::vector<int32_t>{0x7fffffff}));
}

TEST(BlockHash, ContentSpansEnterOnlyTheBlocksTheyOverlap) {
  const BlockHash root = root_hash("");
  const std::vector<int32_t> a = {1, 2, 3, 4};
  ContentSpan img{.begin = 6, .end = 10, .digest = sha256(std::vector<uint8_t>{7})};
  ContentSpan other = img;
  other.digest = sha256(std::vector<uint8_t>{8});
  const std::vector<ContentSpan> one = {img};
  // Block [0, 4) and [12, 16) do not overlap [6, 10): the plain hash, as before spans existed.
  EXPECT_EQ(chain_hash(root, a, 0, one), chain_hash(root, a));
  EXPECT_EQ(chain_hash(root, a, 12, one), chain_hash(root, a));
  // Blocks [4, 8) and [8, 12) do, and depend on the digest and on where the span lies.
  EXPECT_NE(chain_hash(root, a, 4, one), chain_hash(root, a));
  EXPECT_NE(chain_hash(root, a, 8, one), chain_hash(root, a));
  EXPECT_NE(chain_hash(root, a, 4, one), chain_hash(root, a, 4, std::vector<ContentSpan>{other}));
  ContentSpan later = img;
  later.begin += 1;
  later.end += 1;
  EXPECT_NE(chain_hash(root, a, 4, one), chain_hash(root, a, 4, std::vector<ContentSpan>{later}));
  EXPECT_EQ(chain_hash(root, a, 4, one), chain_hash(root, a, 4, std::vector<ContentSpan>{img}));
}

}  // namespace
}  // namespace cadenza::kv
