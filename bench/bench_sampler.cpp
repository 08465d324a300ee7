// Token sampling cost per request and step on a Qwen2-sized vocabulary (151,936 logits, normal
// with sd 3): Sampler::sample for greedy, temperature alone, top-k 40, top-p 0.9 and min-p 0.05,
// and the vocabulary loops of simd/sampling.h at the scalar reference against the vector path.
// See docs/performance.md ("Serving at the ceiling").
//
//   ninja -C build bench_sampler && build/bench/bench_sampler
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "engine/sampler.h"
#include "kernels/simd/sampling.h"

namespace cadenza {

constexpr int64_t kVocab = 151936;

const std::vector<float>& logits() {
  static const std::vector<float> x = [] {
    std::vector<float> v(kVocab);
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    for (float& f : v) f = nd(rng);
    return v;
  }();
  return x;
}

void BM_sample(benchmark::State& state, float temperature, int top_k, float top_p, float min_p) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = 1;
  Sampler s(p);
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(logits()));
}

void BM_argmax(benchmark::State& state, bool vector) {
  const std::vector<float>& x = logits();
  for (auto _ : state)
    benchmark::DoNotOptimize(vector ? simd::argmax(x.data(), kVocab) : simd::ref::argmax(x.data(), kVocab));
}

void BM_softmax_weights(benchmark::State& state, bool vector) {
  const std::vector<float>& x = logits();
  std::vector<float> w(x.size());
  const float mx = simd::ref::max_value(x.data(), kVocab);
  for (auto _ : state) {
    benchmark::DoNotOptimize(vector ? simd::softmax_weights(x.data(), kVocab, mx, 1.0f, w.data())
                                    : simd::ref::softmax_weights(x.data(), kVocab, mx, 1.0f, w.data()));
    benchmark::ClobberMemory();
  }
}

}  // namespace cadenza

using cadenza::BM_argmax;
using cadenza::BM_sample;
using cadenza::BM_softmax_weights;
BENCHMARK_CAPTURE(BM_sample, greedy, 0.0f, 0, 1.0f, 0.0f)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_sample, temperature_1, 1.0f, 0, 1.0f, 0.0f)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_sample, top_k_40, 1.0f, 40, 1.0f, 0.0f)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_sample, top_p_0_9, 1.0f, 0, 0.9f, 0.0f)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_sample, min_p_0_05, 1.0f, 0, 1.0f, 0.05f)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_argmax, ref, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_argmax, vector, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_softmax_weights, ref, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_softmax_weights, vector, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
