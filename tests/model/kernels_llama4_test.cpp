// Llama 4's chunked attention (AttentionParams::chunk) against the naive formula in double
// (attention_reference.h): a position attends only to the earlier positions of its own chunk.
// It runs at the active ISA level (CADENZA_ISA=scalar|avx2|avx512|avx512_vnni picks it).
#include <cmath>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "attention_reference.h"
#include "backend_test_util.h"
#include "batch_checks.h"
#include "kernels/cpu/cpu_backend.h"

namespace cadenza::kernels {
namespace {

using test::bitwise_equal;

// Llama 4's chunked attention (AttentionParams::chunk): chunks of 16 (a block), 40 (not aligned
// to blocks or the kernel's 32-position chunks), and with a window inside them.
TEST(Llama4Kernels, ChunkedAttentionMatchesNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const AttentionSetup a;
  const float scale = 0.125f;
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    const std::vector<float> k = as_stored(type, a.k, a.d), v = as_stored(type, a.v, a.d);
    for (auto [chunk, window] : {std::pair{16, 0}, {40, 0}, {40, 7}, {1, 0}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(type) << " chunk " << chunk << " window "
                                        << window);
      AttentionParams p{.scale = scale, .window = window, .chunk = chunk};
      const std::vector<float> got = run_attention(*backend, a, type, p);
      const std::vector<double> ref = naive_attention(a, k, v, scale, nullptr, window, chunk);
      double max_err = 0;
      for (size_t i = 0; i < got.size(); ++i) max_err = std::max(max_err, std::abs(got[i] - ref[i]));
      EXPECT_LT(max_err, 2e-5);
    }
    // A chunk longer than every sequence is the plain attention, bit for bit.
    EXPECT_TRUE(bitwise_equal(run_attention(*backend, a, type, {.scale = scale}),
                              run_attention(*backend, a, type, {.scale = scale, .chunk = 4096})));
  }
}

}  // namespace
}  // namespace cadenza::kernels
