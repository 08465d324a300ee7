// The compute-peak probes (kernels/simd/peak_probe.h): each probe this CPU has runs on every pool
// thread and reports a positive finite rate; each it lacks reports why and runs nothing. No timing
// thresholds: the rates depend on the machine and its load.
#include <cmath>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "kernels/simd/isa.h"
#include "kernels/simd/peak_probe.h"
#include "util/thread_pool.h"

namespace cadenza::simd::testing {
namespace {

// A short loop: the tests check what the probes report, not how fast this machine is.
constexpr PeakOptions kQuick{.repetitions = 2, .work_scale = 0.002};

std::vector<Peak> all_peaks() {
  std::vector<Peak> v;
  for (int i = 0; i < kPeakCount; ++i) v.push_back(static_cast<Peak>(i));
  return v;
}

TEST(Peak, NamesAndCountsAreWellFormed) {
  std::set<std::string> names;
  for (Peak p : all_peaks()) {
    EXPECT_FALSE(peak_name(p).empty());
    EXPECT_FALSE(peak_description(p).empty());
    EXPECT_GT(peak_macs_per_iteration(p), 0) << peak_name(p);
    names.insert(std::string(peak_name(p)));
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kPeakCount));
  EXPECT_EQ(peak_macs_per_iteration(Peak::amx_int8) % (16 * 16 * 64), 0);
  EXPECT_EQ(peak_macs_per_iteration(Peak::int8_vnni512) % 64, 0);
}

TEST(Peak, AvailabilityFollowsTheCpuFeatures) {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma && f.f16c && f.os_ymm;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.os_zmm;
  EXPECT_EQ(peak_unavailable_reason(Peak::int8_maddubs256).empty(), avx2);
  EXPECT_EQ(peak_unavailable_reason(Peak::f32_fma256).empty(), avx2);
  EXPECT_EQ(peak_unavailable_reason(Peak::int8_maddubs512).empty(), avx512);
  EXPECT_EQ(peak_unavailable_reason(Peak::f32_fma512).empty(), avx512);
  EXPECT_EQ(peak_unavailable_reason(Peak::int8_vnni512).empty(), avx512 && f.avx512_vnni);
  EXPECT_EQ(peak_unavailable_reason(Peak::bf16_dot512).empty(), avx512 && f.avx512_bf16);
  EXPECT_EQ(peak_unavailable_reason(Peak::amx_int8).empty(), f.amx_usable);
}

TEST(Peak, EachProbeRunsOnEveryThreadOrReportsUnavailable) {
  ThreadPool pool(2);
  for (Peak p : all_peaks()) {
    SCOPED_TRACE(std::string(peak_name(p)));
    const std::string why = peak_unavailable_reason(p);
    const PeakResult r = measure_peak(p, pool, kQuick);
    EXPECT_EQ(r.peak, p);
    EXPECT_EQ(r.threads, 2);
    if (why.empty()) {
      std::printf("%-16s %10.1f GMAC/s on 2 threads (quick loop; %s)\n",
                  std::string(peak_name(p)).c_str(), r.gmac_per_s,
                  std::string(peak_description(p)).c_str());
      EXPECT_TRUE(r.available);
      EXPECT_TRUE(r.unavailable.empty());
      EXPECT_GT(r.macs, 0);
      EXPECT_EQ(r.macs % (peak_macs_per_iteration(p) * 2), 0);
      EXPECT_GT(r.seconds, 0.0);
      EXPECT_GE(r.threads_ran, 1);
      EXPECT_LE(r.threads_ran, 2);
      EXPECT_TRUE(std::isfinite(r.gmac_per_s));
      EXPECT_GT(r.gmac_per_s, 0.0);
    } else {
      std::printf("%-16s not available: %s\n", std::string(peak_name(p)).c_str(), why.c_str());
      EXPECT_FALSE(r.available);
      EXPECT_EQ(r.unavailable, why);
      EXPECT_EQ(r.macs, 0);
      EXPECT_EQ(r.gmac_per_s, 0.0);
    }
  }
}

TEST(Peak, MeasurePeaksCoversEveryProbeInOrderOnOneThreadToo) {
  ThreadPool pool(1);
  const std::vector<PeakResult> all = measure_peaks(pool, kQuick);
  ASSERT_EQ(all.size(), static_cast<size_t>(kPeakCount));
  for (int i = 0; i < kPeakCount; ++i) {
    EXPECT_EQ(all[static_cast<size_t>(i)].peak, static_cast<Peak>(i));
    EXPECT_EQ(all[static_cast<size_t>(i)].threads, 1);
    EXPECT_EQ(all[static_cast<size_t>(i)].available,
              peak_unavailable_reason(static_cast<Peak>(i)).empty());
  }
}

TEST(Peak, PrefillPeakIsTheInt8PathOfTheLevel) {
  EXPECT_EQ(prefill_peak(Isa::amx), Peak::amx_int8);
  EXPECT_EQ(prefill_peak(Isa::avx512_vnni), Peak::int8_vnni512);
  EXPECT_EQ(prefill_peak(Isa::avx512), Peak::int8_maddubs512);
  EXPECT_EQ(prefill_peak(Isa::avx2), Peak::int8_maddubs256);
  EXPECT_FALSE(prefill_peak(Isa::scalar).has_value());
  // The level this CPU reaches has its probe.
  for (int i = static_cast<int>(Isa::avx2); i <= static_cast<int>(detected_isa()); ++i) {
    const std::optional<Peak> p = prefill_peak(static_cast<Isa>(i));
    ASSERT_TRUE(p.has_value());
    EXPECT_TRUE(peak_unavailable_reason(*p).empty()) << isa_name(static_cast<Isa>(i));
  }
}

}  // namespace
}  // namespace cadenza::simd::testing
