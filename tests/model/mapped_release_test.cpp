// The CPU backend drops a memory-mapped file's pages of each weight once it has repacked it
// (CpuBackendOptions::release_repacked_pages), so only the repacked copy stays resident. What
// still reads the original rows afterwards (get_rows on the tied embedding, which is also the
// output head; the row-major kernels at a lower ISA level) pages them in again from the file.
// These tests compare logits bit for bit with a backend that keeps the mapping's pages, after
// the release, at a lower ISA level, and with two backends repacking (and releasing) weights of
// one shared mapping at the same time from their own thread pools.
#include <cstring>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/simd/isa.h"
#include "kernels/simd/repack.h"
#include "model/model.h"
#include "batch_checks.h"
#include "synthetic_model.h"
#include "temp_dir.h"

namespace cadenza::model {
namespace {

using test::bitwise_equal;
using test::eval_all;
using test::some_tokens;

// A llama with a tied output head whose matrices are all `type`; the embedding (4096 rows) spans
// many pages, so get_rows after the release really pages rows in again.
test::SyntheticSpec tied_spec(DType type) {
  test::SyntheticSpec s;
  s.type = type;
  s.embd = 256;
  s.ff = 512;
  s.heads = 4;
  s.kv_heads = 2;
  s.vocab = 4096;
  s.tied = true;
  s.seed = 11;
  return s;
}

std::string write_model(const test::TempDir& dir, DType type) {
  const std::vector<uint8_t> bytes = test::synthetic_bytes(tied_spec(type));
  const std::string path = dir.file(std::string(dtype_name(type)) + ".gguf");
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(out.good());
  return path;
}

// Restores the active ISA level when the test ends.
struct IsaGuard {
  simd::Isa saved = simd::active_isa();
  ~IsaGuard() { simd::set_isa(saved); }
};

class MappedRelease : public ::testing::TestWithParam<DType> {};

TEST_P(MappedRelease, LogitsAreBitForBitThoseOfAKeptMapping) {
  const DType type = GetParam();
  IsaGuard guard;
  test::TempDir dir("cadenza-release");
  const std::string path = write_model(dir, type);
  std::unique_ptr<kernels::Backend> keep =
      kernels::make_cpu_backend({.n_threads = 2, .release_repacked_pages = false});
  std::unique_ptr<kernels::Backend> release = kernels::make_cpu_backend({.n_threads = 2});
  Result<std::unique_ptr<Model>> kept = Model::open(path, *keep);
  ASSERT_TRUE(kept) << kept.error();
  Result<std::unique_ptr<Model>> released = Model::open(path, *release);
  ASSERT_TRUE(released) << released.error();

  // Repeated tokens: the second occurrence of a row is read after its pages were dropped.
  std::vector<int32_t> tokens = some_tokens(24, 4096, 5);
  tokens.insert(tokens.end(), tokens.begin(), tokens.begin() + 12);
  const std::vector<float> reference = eval_all(**kept, tokens, 16);
  ASSERT_FALSE(reference.empty());

  const uint64_t before = kernels::cpu::released_mapped_bytes();
  EXPECT_TRUE(bitwise_equal(reference, eval_all(**released, tokens, 16))) << "first run";
  const uint64_t released_bytes = kernels::cpu::released_mapped_bytes() - before;
  const bool repacks = simd::repack_usable(type, simd::active_isa());
  if (repacks) {
    // At least the tied embedding / output head (4096 x 256 values) was released.
    EXPECT_GE(released_bytes, *row_bytes(type, 256) * 4096 - 2 * 4096) << "bytes released";
  } else {
    EXPECT_EQ(released_bytes, 0u) << "nothing is repacked at " << simd::isa_name(simd::active_isa());
  }
  // Everything reads released pages now: the embedding rows, and in one batch.
  EXPECT_TRUE(bitwise_equal(reference, eval_all(**released, tokens, 16))) << "after the release";
  EXPECT_TRUE(bitwise_equal(eval_all(**kept, tokens, 64), eval_all(**released, tokens, 64)))
      << "one batch after the release";

  // A lower level runs the row-major kernels on the original rows (paged in again).
  if (repacks && simd::set_isa(simd::Isa::avx2) == simd::Isa::avx2) {
    EXPECT_TRUE(bitwise_equal(eval_all(**kept, tokens, 16), eval_all(**released, tokens, 16)))
        << "row-major kernels at avx2 after the release";
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MappedRelease,
                         ::testing::Values(DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

// Two backends load one mapping and make their first matmuls at the same time: each repacks its
// own weights on its own pool and drops pages the other may be reading.
TEST(MappedReleaseConcurrent, TwoBackendsOnOneMappingAtOnce) {
  test::TempDir dir("cadenza-release");
  const std::string path = write_model(dir, DType::Q8_0);
  std::unique_ptr<kernels::Backend> keep =
      kernels::make_cpu_backend({.n_threads = 2, .release_repacked_pages = false});
  Result<std::unique_ptr<Model>> kept = Model::open(path, *keep);
  ASSERT_TRUE(kept) << kept.error();
  const std::vector<int32_t> tokens = some_tokens(32, 4096, 9);
  const std::vector<float> reference = eval_all(**kept, tokens, 8);

  Result<std::unique_ptr<gguf::GgufFile>> opened = gguf::GgufFile::open(path);
  ASSERT_TRUE(opened) << opened.error();
  const std::shared_ptr<const gguf::GgufFile> file(std::move(*opened));
  std::unique_ptr<kernels::Backend> a = kernels::make_cpu_backend({.n_threads = 2});
  std::unique_ptr<kernels::Backend> b = kernels::make_cpu_backend({.n_threads = 2});
  Result<std::unique_ptr<Model>> ma = Model::load(file, *a);
  Result<std::unique_ptr<Model>> mb = Model::load(file, *b);
  ASSERT_TRUE(ma && mb);
  std::vector<float> la, lb;
  std::thread ta([&] { la = eval_all(**ma, tokens, 8); });
  std::thread tb([&] { lb = eval_all(**mb, tokens, 8); });
  ta.join();
  tb.join();
  EXPECT_TRUE(bitwise_equal(reference, la));
  EXPECT_TRUE(bitwise_equal(reference, lb));
}

}  // namespace
}  // namespace cadenza::model
