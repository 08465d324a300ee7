// eval/kl_base_file.h: a written file reads back as written; missing, foreign, truncated and
// damaged files are clear errors.
#include "eval/kl_base_file.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace cadenza::eval {
namespace {

KlBaseHeader small_header() {
  KlBaseHeader h;
  h.n_vocab = 50;
  h.ctx = 8;
  h.n_chunks = 2;
  h.first = 4;  // rows 4..6 scored: 3 per chunk
  h.top_k = 3;
  h.bos_id = 1;
  h.tail_samples = 2;
  for (int i = 0; i < 16; ++i) h.tokens.push_back(3 + i);
  return h;
}

KlBaseRecord record(int i) {
  KlBaseRecord r;
  r.target_logprob = -0.5f * static_cast<float>(i);
  r.rest_logmass = i == 0 ? -std::numeric_limits<float>::infinity() : -3.0f - static_cast<float>(i);
  r.top = {{.id = i, .logprob = -0.1f}, {.id = 10 + i, .logprob = -2.0f}, {.id = 49, .logprob = -4.0f}};
  r.tail = {{.id = 20 + i, .logprob = -5.0f}, {.id = 30 + i, .logprob = -6.5f}};
  return r;
}

std::string write_file(const std::filesystem::path& path, const KlBaseHeader& h, int records) {
  auto w = KlBaseWriter::create(path.string(), h);
  EXPECT_TRUE(w.ok()) << w.error();
  for (int i = 0; i < records; ++i) EXPECT_TRUE((*w)->append(record(i)).ok());
  Status st = (*w)->finish();
  return st ? "" : st.error();
}

TEST(KlBaseFile, RoundTrip) {
  test::TempDir dir("cadenza-kl-base");
  const auto path = dir.path() / "base.kld";
  const KlBaseHeader h = small_header();
  ASSERT_EQ(write_file(path, h, 6), "");
  EXPECT_EQ(std::filesystem::file_size(path), h.file_bytes());
  EXPECT_EQ(h.file_bytes(), 40u + 16 * 4 + 6 * (8 + 5 * 8));
  auto r = KlBaseReader::open(path.string());
  ASSERT_TRUE(r.ok()) << r.error();
  const KlBaseHeader& got = (*r)->header();
  EXPECT_EQ(got.n_vocab, 50u);
  EXPECT_EQ(got.ctx, 8u);
  EXPECT_EQ(got.n_chunks, 2u);
  EXPECT_EQ(got.first, 4u);
  EXPECT_EQ(got.n_scored(), 3u);
  EXPECT_EQ(got.top_k, 3u);
  EXPECT_EQ(got.bos_id, 1);
  EXPECT_EQ(got.tail_samples, 2u);
  EXPECT_EQ(got.tokens, h.tokens);
  for (int i = 0; i < 6; ++i) {
    auto rec = (*r)->next();
    ASSERT_TRUE(rec.ok()) << rec.error();
    const KlBaseRecord want = record(i);
    EXPECT_EQ(rec->target_logprob, want.target_logprob);
    EXPECT_EQ(rec->rest_logmass, want.rest_logmass);
    ASSERT_EQ(rec->top.size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(rec->top[k].id, want.top[k].id);
      EXPECT_EQ(rec->top[k].logprob, want.top[k].logprob);
    }
    ASSERT_EQ(rec->tail.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(rec->tail[k].id, want.tail[k].id);
      EXPECT_EQ(rec->tail[k].logprob, want.tail[k].logprob);
    }
  }
  auto past = (*r)->next();
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.error().find("past the last record"), std::string::npos) << past.error();
}

TEST(KlBaseFile, TooFewRecordsIsAnErrorAtFinish) {
  test::TempDir dir("cadenza-kl-base");
  const std::string err = write_file(dir.path() / "short.kld", small_header(), 5);
  EXPECT_NE(err.find("5 of 6 records"), std::string::npos) << err;
}

TEST(KlBaseFile, BadFilesAreClearErrors) {
  test::TempDir dir("cadenza-kl-base");
  auto missing = KlBaseReader::open((dir.path() / "nope.kld").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("nope.kld: cannot open"), std::string::npos) << missing.error();

  const auto text = dir.path() / "text.kld";
  std::ofstream(text) << "this is not a base file, only some text of sufficient length";
  auto foreign = KlBaseReader::open(text.string());
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.error().find("not a KL-divergence base file"), std::string::npos)
      << foreign.error();

  const auto path = dir.path() / "base.kld";
  ASSERT_EQ(write_file(path, small_header(), 6), "");
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 1);
  auto truncated = KlBaseReader::open(path.string());
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.error().find("truncated or damaged"), std::string::npos) << truncated.error();

  // An id outside the vocabulary in a record.
  ASSERT_EQ(write_file(path, small_header(), 6), "");
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40 + 16 * 4 + 8);  // the first entry's id of the first record
    const int32_t bad = 50;
    f.write(reinterpret_cast<const char*>(&bad), 4);
  }
  auto damaged = KlBaseReader::open(path.string());
  ASSERT_TRUE(damaged.ok()) << damaged.error();
  auto rec = (*damaged)->next();
  ASSERT_FALSE(rec.ok());
  EXPECT_NE(rec.error().find("outside the vocabulary"), std::string::npos) << rec.error();

  // Another version.
  ASSERT_EQ(write_file(path, small_header(), 6), "");
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    const uint32_t v = 7;
    f.write(reinterpret_cast<const char*>(&v), 4);
  }
  auto version = KlBaseReader::open(path.string());
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.error().find("version 7"), std::string::npos) << version.error();
}

}  // namespace
}  // namespace cadenza::eval
