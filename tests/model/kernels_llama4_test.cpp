// Llama 4's chunked attention (AttentionParams::chunk) against the naive formula in double
// (attention_reference.h): a position attends only to the earlier positions of its own chunk.
// It runs at the active ISA level (CADENZA_ISA=scalar|avx2|avx512|avx512_vnni picks it).
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "attention_reference.h"
#include "backend_test_util.h"
#include "batch_checks.h"
#include "kernels/cpu/cpu_backend.h"

namespace cadenza::kernels {
namespace {

// Llama 4's chunked attention (AttentionParams::chunk): chunks of 16 (a block), 40 (not aligned
// to blocks or the kernel's 32-position chunks), and with a window inside them.
TEST(Llama4Kernels, ChunkedAttentionMatchesNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const AttentionSetup a;
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    for (auto [chunk, window] : {std::pair{16, 0}, {40, 0}, {40, 7}, {1, 0}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(type) << " chunk " << chunk << " window "
                                        << window);
      EXPECT_LT(max_attention_error(*backend, a, type,
                                    {.scale = a.scale, .window = window, .chunk = chunk}),
                2e-5);
    }
    // A chunk longer than every sequence is the plain attention, bit for bit.
    EXPECT_TRUE(test::bitwise_equal(
        run_attention(*backend, a, type, {.scale = a.scale}),
        run_attention(*backend, a, type, {.scale = a.scale, .chunk = 4096})));
  }
}

}  // namespace
}  // namespace cadenza::kernels
