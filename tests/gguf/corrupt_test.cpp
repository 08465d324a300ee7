// Corrupt and hostile files: truncation and byte-flip sweeps over a small valid file, and
// hand-crafted headers for each validation rule. Every case must parse (and satisfy the
// invariants) or fail with an error that starts with the file name; none may crash.
#include "gguf_test_util.h"

namespace cadenza::gguf {
namespace {

using test::Bytes;
using test::parse_or_named_error;

TEST(GgufCorrupt, TruncatedAtEveryOffset) {
  const std::vector<uint8_t> full = test::sample_writer().to_bytes();
  ASSERT_FALSE(full.empty());
  // Copy each prefix to its own allocation so ASan catches any read past the end.
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
    auto r = GgufFile::parse(prefix, "cut.gguf");
    // Only the trailing padding of the last tensor may go; everything else is needed.
    if (r.ok()) {
      test::check_invariants(**r, prefix);
      EXPECT_GT(n, full.size() - 32) << "prefix of " << n << " bytes parsed";
    } else {
      EXPECT_EQ(r.error().rfind("cut.gguf: ", 0), 0u) << r.error();
    }
  }
}

TEST(GgufCorrupt, ByteFlipsAtEveryOffset) {
  const std::vector<uint8_t> full = test::sample_writer().to_bytes();
  size_t parsed = 0, failed = 0;
  for (uint8_t mask : {0x01, 0x80, 0xff}) {
    for (size_t i = 0; i < full.size(); ++i) {
      std::vector<uint8_t> bad = full;
      bad[i] ^= mask;
      (parse_or_named_error(bad, "flip.gguf") ? parsed : failed)++;
    }
  }
  // Flips in tensor data and in most metadata values parse; flips in structure fail.
  EXPECT_GT(parsed, 0u);
  EXPECT_GT(failed, 0u);
}

TEST(GgufCorrupt, MultiByteGarbage) {
  // Overwrite aligned 8-byte fields with extreme values: counts and lengths become absurd.
  const std::vector<uint8_t> full = test::sample_writer().to_bytes();
  for (uint64_t v : {~0ull, 0x8000000000000000ull, 0x7fffffffffffffffull, 0x100000000ull}) {
    for (size_t i = 0; i + 8 <= full.size(); ++i) {
      std::vector<uint8_t> bad = full;
      std::memcpy(bad.data() + i, &v, 8);
      parse_or_named_error(bad, "garbage.gguf");
    }
  }
}

// Expects `bytes` to fail with an error starting with the name and containing `what`.
void expect_error(const std::vector<uint8_t>& bytes, const std::string& what) {
  auto r = GgufFile::parse(bytes, "bad.gguf");
  ASSERT_FALSE(r.ok()) << "expected an error containing '" << what << "'";
  EXPECT_EQ(r.error().rfind("bad.gguf: ", 0), 0u) << r.error();
  EXPECT_NE(r.error().find(what), std::string::npos) << r.error();
}

// A valid one-tensor file (f32 [4] at offset 0) with the given header pieces swapped in.
std::vector<uint8_t> one_tensor(std::vector<uint64_t> dims = {4}, uint32_t type = 0,
                                uint64_t offset = 0, size_t data_bytes = 16) {
  Bytes b;
  b.header(1, 0).tensor("w", std::move(dims), type, offset).pad_to(32).zeros(data_bytes);
  return b.b;
}

TEST(GgufCorrupt, HeaderFields) {
  expect_error({}, "truncated: magic");
  expect_error({'G', 'G', 'U'}, "truncated: magic");
  expect_error({'G', 'G', 'M', 'L', 0, 0, 0, 0}, "not a GGUF file (magic 'GGML'");
  expect_error({'G', 'G', 'U', 'F'}, "truncated: version");
  expect_error(Bytes().header(0, 0, 1).b, "version 1 is not supported");
  expect_error(Bytes().header(0, 0, 4).b, "unsupported GGUF version 4");
  expect_error(Bytes().header(0, 0, 0x03000000).b, "big-endian");
  expect_error({'G', 'G', 'U', 'F', 3, 0, 0, 0, 0}, "truncated: tensor count");
  expect_error(Bytes().header(~0ull, 0).b, "tensor count 18446744073709551615 cannot fit");
  expect_error(Bytes().header(0, ~0ull).b, "metadata count 18446744073709551615 cannot fit");
  expect_error(Bytes().header(0, 1ull << 60).zeros(1000).b, "metadata count");
  // A plain empty file is valid.
  EXPECT_TRUE(GgufFile::parse(Bytes().header(0, 0).b, "ok.gguf").ok());
}

TEST(GgufCorrupt, MetadataFields) {
  expect_error(Bytes().header(0, 1).u64(~0ull).zeros(20).b, "key length 18446744073709551615");
  expect_error(Bytes().header(0, 1).u64(70000).zeros(70010).b, "exceeds the limit 65535");
  expect_error(Bytes().header(0, 1).u64(100).zeros(20).b, "key length 100 at offset 24 exceeds");
  expect_error(Bytes().header(0, 1).str("").u32(0).zeros(4).b, "empty key");
  expect_error(Bytes().header(0, 1).str("k").u32(13).zeros(4).b, "key \"k\": unknown value type 13");
  expect_error(Bytes().header(0, 1).str("k").u32(~0u).zeros(4).b, "unknown value type 4294967295");
  expect_error(Bytes().header(0, 1).str("k").u32(7).put<uint8_t>(2).b, "bool value 2");
  expect_error(Bytes().header(0, 1).str("k").u32(4).zeros(2).b, "truncated: u32 value");
  expect_error(Bytes().header(0, 1).str("k").u32(8).u64(1ull << 62).zeros(8).b,
               "string length 4611686018427387904");
  expect_error(Bytes().header(0, 2).kv_u32("k", 1).kv_u32("k", 2).b, "duplicate key \"k\"");
  // Arrays: unknown element type, absurd counts, nesting.
  expect_error(Bytes().header(0, 1).str("k").u32(9).u32(99).u64(0).b,
               "unknown array element type 99");
  expect_error(Bytes().header(0, 1).str("k").u32(9).u32(4).u64(1ull << 61).zeros(64).b,
               "array count 2305843009213693952 at offset 41 cannot fit");
  expect_error(Bytes().header(0, 1).str("k").u32(9).u32(8).u64(2).u64(~0ull).zeros(64).b,
               "string length 18446744073709551615");
  expect_error(Bytes().header(0, 1).str("k").u32(9).u32(9).u64(3).u32(0).u64(0).b,
               "array count 3 at offset 41 cannot fit in the 12 bytes left (items of type array");
  Bytes deep;
  deep.header(0, 1).str("k").u32(9);
  for (uint32_t i = 0; i < kMaxArrayDepth; ++i) deep.u32(9).u64(1);
  deep.u32(0).u64(0);
  expect_error(deep.b, "arrays nested deeper than 8");
  // Many items within the bytes but past the file-wide item budget.
  Bytes big;
  big.header(0, 1).str("k").u32(9).u32(0).u64(kMaxArrayElements + 1).zeros(kMaxArrayElements + 1);
  expect_error(big.b, "limit of 16777216 array items");
  // Key and value bytes are escaped in messages.
  expect_error(Bytes().header(0, 1).str("a\nb").u32(13).b, "key \"a\\nb\"");
}

TEST(GgufCorrupt, Alignment) {
  expect_error(Bytes().header(0, 1).kv_u32("general.alignment", 0).b, "general.alignment 0");
  expect_error(Bytes().header(0, 1).kv_u32("general.alignment", 48).b, "not a power of two");
  expect_error(Bytes().header(0, 1).str("general.alignment").u32(8).str("x").b,
               "general.alignment has type string");
  auto r = GgufFile::parse(Bytes().header(0, 1).kv_u32("general.alignment", 64).b, "a.gguf");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ((*r)->alignment(), 64u);
  EXPECT_EQ((*r)->data_offset(), 64u);
}

TEST(GgufCorrupt, TensorInfos) {
  ASSERT_TRUE(GgufFile::parse(one_tensor(), "bad.gguf").ok());
  expect_error(Bytes().header(1, 0).u64(5000).zeros(40).b, "tensor name length 5000");
  expect_error(one_tensor({}), "n_dims 0");
  expect_error(one_tensor({1, 1, 1, 1, 4}), "n_dims 5");
  expect_error(one_tensor({~0ull}), "dimension 0 is -1");
  expect_error(one_tensor({4, 1ull << 63}), "dimension 1 is -9223372036854775808");
  expect_error(one_tensor({1ull << 32, 1ull << 32}), "more elements than fit in int64");
  expect_error(one_tensor({1ull << 62}), "byte size of a row of 4611686018427387904 elements");
  expect_error(one_tensor({4, 1ull << 60}), "byte size of shape");
  expect_error(one_tensor({4}, 5), "unknown tensor type 5");
  expect_error(one_tensor({4}, 1000), "unknown tensor type 1000");
  expect_error(one_tensor({33}, 2), "row of 33 elements is not a multiple of the block size 32");
  expect_error(one_tensor({4}, 0, 8), "offset 8 is not a multiple of the alignment 32");
  expect_error(one_tensor({4}, 0, 32), "runs past the end of the data section");
  expect_error(one_tensor({4}, 0, ~0ull << 5), "runs past the end");
  expect_error(one_tensor({4}, 0, 0, 15), "runs past the end");
  expect_error(one_tensor({1ull << 40}), "runs past the end");
  // Header ends before the aligned data section starts.
  expect_error(Bytes().header(1, 0).tensor("w", {0}, 0, 0).b, "data section starts at offset 64");
  // Duplicates and overlaps.
  expect_error(Bytes().header(2, 0).tensor("w", {4}, 0, 0).tensor("w", {4}, 0, 32).pad_to(32)
                   .zeros(64).b,
               "duplicate tensor name \"w\"");
  expect_error(Bytes().header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {4}, 0, 32).pad_to(32)
                   .zeros(64).b,
               "tensor \"b\" [32, +16) overlaps tensor \"a\" [0, +64)");
  // Empty tensors may share an offset with anything.
  auto r = GgufFile::parse(Bytes().header(2, 0).tensor("a", {4}, 0, 0).tensor("e", {0, 3}, 0, 0)
                               .pad_to(32).zeros(16).b,
                           "ok.gguf");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ((*r)->find_tensor("e")->data, nullptr);
  // Tensor count that only fits if each info were smaller than possible.
  expect_error(Bytes().header(3, 0).zeros(64).b, "tensor count 3 cannot fit");
}

}  // namespace
}  // namespace cadenza::gguf
