// ISA detection, CADENZA_ISA handling and the programmatic setter.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "kernels/simd/isa.h"
#include "kernels/simd/kernels.h"
#include "simd_test_util.h"

namespace cadenza::simd::testing {
namespace {

// Restores CADENZA_ISA and the active level after a test that changes them.
class EnvScope {
 public:
  EnvScope() : prev_level_(active_isa()) {
    if (const char* v = std::getenv("CADENZA_ISA")) prev_ = v, had_ = true;
  }
  ~EnvScope() {
    if (had_)
      setenv("CADENZA_ISA", prev_.c_str(), 1);
    else
      unsetenv("CADENZA_ISA");
    set_isa(prev_level_);
  }

 private:
  Isa prev_level_;
  std::string prev_;
  bool had_ = false;
};

TEST(Isa, NamesRoundTrip) {
  for (Isa i : all_levels()) EXPECT_EQ(isa_from_name(isa_name(i)), i);
  EXPECT_FALSE(isa_from_name("AVX2").has_value());
  EXPECT_FALSE(isa_from_name("").has_value());
  EXPECT_FALSE(isa_from_name("sse").has_value());
}

TEST(Isa, DetectionIsConsistent) {
  const CpuFeatures& f = cpu_features();
  std::printf("%s\n", isa_report().c_str());
  EXPECT_FALSE(f.why.empty());
  EXPECT_TRUE(f.best < Isa::avx2 || (f.avx2 && f.fma && f.f16c && f.os_ymm));
  EXPECT_TRUE(f.best < Isa::avx512 ||
              (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.os_zmm));
  EXPECT_TRUE(f.best < Isa::avx512_vnni || f.avx512_vnni);
  EXPECT_TRUE(f.best < Isa::amx || f.amx_usable);
  // This library needs at least AVX2 to be useful; every x86-64 CI machine has it.
  EXPECT_GE(f.best, Isa::avx2) << f.why;
}

TEST(Isa, SetterCapsAtDetected) {
  EnvScope env;
  EXPECT_EQ(set_isa(Isa::scalar), Isa::scalar);
  EXPECT_EQ(active_isa(), Isa::scalar);
  EXPECT_EQ(set_isa(Isa::amx), detected_isa());
  EXPECT_EQ(active_isa(), detected_isa());
  EXPECT_NE(isa_report().find(std::string("active ") + std::string(isa_name(detected_isa()))),
            std::string::npos);
}

TEST(Isa, ChooseFromEnvironmentValue) {
  const Isa best = detected_isa();
  IsaChoice unset = choose_isa(best, nullptr);
  EXPECT_EQ(unset.isa, best);
  EXPECT_FALSE(unset.warning);
  EXPECT_EQ(choose_isa(best, "").isa, best);

  IsaChoice scalar = choose_isa(best, "scalar");
  EXPECT_EQ(scalar.isa, Isa::scalar);
  EXPECT_FALSE(scalar.warning);
  EXPECT_NE(scalar.message.find("forced"), std::string::npos) << scalar.message;

  IsaChoice bogus = choose_isa(best, "avx9000");
  EXPECT_EQ(bogus.isa, best);
  EXPECT_TRUE(bogus.warning);
  EXPECT_NE(bogus.message.find("unknown CADENZA_ISA='avx9000'"), std::string::npos) << bogus.message;

  IsaChoice above = choose_isa(Isa::avx2, "avx512_vnni");
  EXPECT_EQ(above.isa, Isa::avx2);
  EXPECT_TRUE(above.warning);
  EXPECT_NE(above.message.find("capped to avx2"), std::string::npos) << above.message;
}

TEST(Isa, EnvironmentScalarIsRespected) {
  SCOPED_TRACE(seed_trace());
  EnvScope env;
  setenv("CADENZA_ISA", "scalar", 1);
  IsaChoice c = init_isa_from_env();
  EXPECT_EQ(c.isa, Isa::scalar);
  EXPECT_EQ(active_isa(), Isa::scalar);
  // The public entry points now run the reference: identical floats.
  Rng rng(test_seed());
  const int64_t k = 512, rows = 7;
  std::vector<uint8_t> w = random_weights(rng, DType::Q4_K, rows, k, false);
  std::vector<float> x = random_activations(rng, 1, k);
  std::vector<uint8_t> a(2 * 292);
  quantize_q8_k(x.data(), k, a.data());
  std::vector<float> got(rows), want(rows);
  gemv_q4_k(w.data(), rows, k, a.data(), got.data());
  ref::gemm_q4_k(w.data(), rows, k, a.data(), 1, want.data(), rows);
  EXPECT_EQ(got, want);
}

TEST(Isa, EnvironmentUnknownFallsBackWithMessage) {
  EnvScope env;
  setenv("CADENZA_ISA", "neon", 1);
  IsaChoice c = init_isa_from_env();
  EXPECT_EQ(c.isa, detected_isa());
  EXPECT_EQ(active_isa(), detected_isa());
  EXPECT_TRUE(c.warning);
  EXPECT_NE(c.message.find("unknown CADENZA_ISA='neon'"), std::string::npos) << c.message;
}

}  // namespace
}  // namespace cadenza::simd::testing
