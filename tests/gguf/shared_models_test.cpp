// The reader on the real files in ../shared: every model and vocabulary opens, and truncation and
// byte-flip sweeps over each model never crash. The sweeps sample offsets (all of the first bytes,
// a spread over the metadata, the tensor-info tail and the data) to stay affordable under ASan.
#include <algorithm>
#include <filesystem>
#include <random>

#include "gguf_test_util.h"
#include "shared_data.h"
#include "util/mapped_file.h"

namespace cadenza::gguf {
namespace {

namespace fs = std::filesystem;
using test::parse_or_named_error;

std::vector<fs::path> gguf_files(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".gguf") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GgufShared, EveryModelAndVocabularyOpens) {
  CADENZA_REQUIRE_SHARED();
  const fs::path shared = cadenza::test::shared_dir();
  const auto models = gguf_files(shared / "models");
  const auto vocabs = gguf_files(shared / "tokenizer");
  EXPECT_FALSE(models.empty());
  EXPECT_FALSE(vocabs.empty());
  for (const auto& list : {models, vocabs}) {
    for (const auto& p : list) {
      SCOPED_TRACE(p.string());
      auto mapped = MappedFile::open(p.string());
      ASSERT_TRUE(mapped.ok()) << mapped.error();
      auto r = GgufFile::parse((*mapped)->bytes(), p.string());
      ASSERT_TRUE(r.ok()) << r.error();
      test::check_invariants(**r, (*mapped)->bytes());
      EXPECT_TRUE((*r)->get_string("general.architecture").ok());
      EXPECT_TRUE((*r)->get_string_array("tokenizer.ggml.tokens").ok());
      auto opened = GgufFile::open(p.string());
      ASSERT_TRUE(opened.ok()) << opened.error();
      EXPECT_EQ((*opened)->metadata().size(), (*r)->metadata().size());
      if (list == models) {
        EXPECT_FALSE((*r)->tensors().empty());
      }
    }
  }
}

// `n` offsets drawn uniformly from [lo, hi).
void spread(std::vector<size_t>& out, size_t lo, size_t hi, int n, std::mt19937_64& rng) {
  if (hi <= lo) return;
  std::uniform_int_distribution<size_t> d(lo, hi - 1);
  for (int i = 0; i < n; ++i) out.push_back(d(rng));
}

// Parses cost ~10 ms each on these files (big vocabularies), so the sweep samples: cuts at every
// offset of the fixed header and first keys (cheap: parsing stops at the cut), and a few cuts and
// flips in the metadata, the tensor infos (the header's last 2 KiB) and the data.
TEST(GgufShared, TruncationAndFlipSweepsOnModels) {
  CADENZA_REQUIRE_SHARED();
  const auto models = gguf_files(cadenza::test::shared_dir() / "models");
  ASSERT_FALSE(models.empty()) << "no *.gguf in ../shared/models: the sweep would test nothing";
  std::mt19937_64 rng(1234);
  for (const auto& p : models) {
    SCOPED_TRACE(p.string());
    auto mapped = MappedFile::open(p.string());
    ASSERT_TRUE(mapped.ok()) << mapped.error();
    const auto bytes = (*mapped)->bytes();
    auto r = GgufFile::parse(bytes, "m");
    ASSERT_TRUE(r.ok()) << r.error();
    const size_t header_end = (*r)->data_offset();
    ASSERT_GT(header_end, 2048u);
    ASSERT_GT(bytes.size(), header_end + 64);
    const std::string name = p.filename().string();

    std::vector<size_t> cuts;
    for (size_t i = 0; i < 256; ++i) cuts.push_back(i);
    spread(cuts, 256, header_end, 6, rng);
    spread(cuts, header_end - 2048, header_end, 6, rng);
    spread(cuts, header_end, bytes.size() - 64, 2, rng);  // not in the trailing padding
    for (size_t n : cuts)
      EXPECT_FALSE(parse_or_named_error(bytes.first(n), name)) << "cut at " << n;

    std::vector<size_t> flips;
    spread(flips, 0, 256, 4, rng);
    spread(flips, 256, header_end, 4, rng);
    spread(flips, header_end - 2048, header_end, 4, rng);
    std::vector<uint8_t> copy(bytes.begin(), bytes.end());
    for (size_t k = 0; k < flips.size(); ++k) {
      const uint8_t mask = k % 2 ? 0xff : 0x01;
      copy[flips[k]] ^= mask;
      parse_or_named_error(copy, name);
      copy[flips[k]] ^= mask;
    }
  }
}

}  // namespace
}  // namespace cadenza::gguf
