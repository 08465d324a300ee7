// bench_simd: GEMV throughput per weight type and ISA level, batched GEMM, activation quantization,
// prefill attention (the tile kernel against the single-query loop).
//
//   bench_simd --benchmark_min_time=0.2 [--benchmark_filter=gemv/q4_K]
//
// GEMV runs on 4096 x 4096 matrices. "cold": each iteration takes the next 4096-row window of a
// pool of at least 96 MiB, so the weights come from DRAM as in decoding a model that does not fit
// in the last-level cache; "hot": the same window every time (L3-resident when it fits).
// bytes_per_second counts weight bytes (what bounds decoding). Levels above what the CPU has are
// reported as errors ("not available") rather than silently run at a lower level.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "kernels/simd/attention.h"
#include "kernels/simd/isa.h"
#include "kernels/simd/kernels.h"
#include "kernels/simd/repack.h"
#include "tensor/quant.h"
#include "util/thread_pool.h"

namespace cadenza::simd {
namespace {

constexpr int64_t kRows = 4096, kK = 4096;
constexpr int64_t kPoolBytes = int64_t{96} << 20;

const DType kTypes[] = {DType::Q8_0, DType::Q4_0,  DType::Q4_K,  DType::Q6_K,
                        DType::F16,  DType::BF16,  DType::IQ1_S, DType::IQ1_M};
const Isa kLevels[] = {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_vnni};

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Weights with random quants and sane scales (no NaN/denormal scales to slow the float path).
std::vector<uint8_t> make_weights(DType t, int64_t rows, int64_t k) {
  const int64_t rb = static_cast<int64_t>(*row_bytes(t, k));
  std::vector<uint8_t> w(static_cast<size_t>(rows * rb));
  uint64_t s = 12345;
  for (size_t i = 0; i + 8 <= w.size(); i += 8) {
    const uint64_t v = splitmix(s);
    std::memcpy(&w[i], &v, 8);
  }
  const uint16_t d = fp32_to_fp16(0.01f);
  const size_t bs = traits(t).type_size;
  if (t == DType::F16 || t == DType::BF16) {
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 0.05f);
    for (int64_t i = 0; i < rows * k; ++i) {
      const float f = nd(rng);
      const uint16_t h = t == DType::F16 ? fp32_to_fp16(f) : fp32_to_bf16(f);
      std::memcpy(&w[2 * i], &h, 2);
    }
  } else {
    for (size_t b = 0; b < w.size() / bs; ++b) {
      uint8_t* p = &w[b * bs];
      if (t == DType::Q5_0) {
        std::memcpy(p, &d, 2);
      } else if (t == DType::Q6_K) {
        std::memcpy(p + 208, &d, 2);
      } else if (t == DType::IQ1_M) {  // d's nibbles: the top nibbles of the scale words at 48
        for (int i = 0; i < 4; ++i) {
          uint16_t w16;
          std::memcpy(&w16, p + 48 + 2 * i, 2);
          w16 = static_cast<uint16_t>((w16 & 0x0FFF) | (((d >> (4 * i)) & 0xF) << 12));
          std::memcpy(p + 48 + 2 * i, &w16, 2);
        }
      } else {
        std::memcpy(p, &d, 2);
        if (t == DType::Q4_K || t == DType::Q5_K) std::memcpy(p + 2, &d, 2);
      }
    }
  }
  return w;
}

// One pool at a time (the current type's), kept across the benchmark's repeated calls.
struct Pool {
  DType type = DType::F32;
  int64_t windows = 0, window_bytes = 0;
  std::vector<uint8_t> w;
};
Pool& pool_for(DType t) {
  static Pool p;
  if (p.type != t || p.w.empty()) {
    p.type = t;
    p.window_bytes = static_cast<int64_t>(*row_bytes(t, kK)) * kRows;
    p.windows = std::max<int64_t>(3, (kPoolBytes + p.window_bytes - 1) / p.window_bytes);
    p.w.clear();
    p.w.shrink_to_fit();
    p.w = make_weights(t, kRows * p.windows, kK);
  }
  return p;
}

struct Act {
  std::vector<float> x;
  std::vector<uint8_t> q;
  const void* ptr() const { return q.empty() ? static_cast<const void*>(x.data()) : q.data(); }
};
Act make_act(DType t, int64_t n) {
  Act a;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  a.x.resize(static_cast<size_t>(n * kK));
  for (auto& v : a.x) v = nd(rng);
  const int64_t arb = *activation_row_bytes(t, kK);
  if (t != DType::F16 && t != DType::BF16) {
    a.q.resize(static_cast<size_t>(n * arb));
    if (!quantize_activations(t, a.x.data(), kK, n, a.q.data()).ok()) a.q.clear();
  }
  return a;
}

bool use_level(benchmark::State& state, Isa isa) {
  if (isa > detected_isa()) {
    state.SkipWithError((std::string(isa_name(isa)) + " not available on this CPU").c_str());
    return false;
  }
  set_isa(isa);
  return true;
}

// GEMV (n == 1) or batched GEMM over one 4096 x 4096 window per iteration.
// threads > 1: the window's rows are split between that many threads (the caller's job in the
// engine), so bytes/s is the aggregate.
void BM_gemm(benchmark::State& state, DType t, Isa isa, int64_t n, bool cold, int threads) {
  if (!use_level(state, isa)) return;
  Pool& p = pool_for(t);
  Act a = make_act(t, n);
  std::vector<float> out(static_cast<size_t>(n * kRows));
  const int64_t wrb = static_cast<int64_t>(*row_bytes(t, kK));
  int64_t window = 0;
  auto run_rows = [&](const uint8_t* w, int64_t r0, int64_t r1) {
    Status s = gemm(t, w + r0 * wrb, r1 - r0, kK, a.ptr(), n, out.data() + r0, kRows);
    if (!s.ok()) std::abort();
  };
  for (auto _ : state) {
    const uint8_t* w = p.w.data() + window * p.window_bytes;
    if (cold) window = (window + 1) % p.windows;
    if (threads == 1) {
      run_rows(w, 0, kRows);
    } else {
      std::vector<std::thread> pool;
      const int64_t per = kRows / threads;
      for (int i = 1; i < threads; ++i) pool.emplace_back(run_rows, w, i * per, i == threads - 1 ? kRows : (i + 1) * per);
      run_rows(w, 0, per);
      for (auto& th : pool) th.join();
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * p.window_bytes);
  set_isa(detected_isa());
}

// The machine's single-core read ceiling on the same pool: sums 64-bit words (baseline x86-64
// code, four independent chains), nothing else.
void BM_read(benchmark::State& state, bool cold) {
  Pool& p = pool_for(DType::Q8_0);
  int64_t window = 0;
  for (auto _ : state) {
    const uint8_t* w = p.w.data() + window * p.window_bytes;
    if (cold) window = (window + 1) % p.windows;
    uint64_t s[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i + 32 <= p.window_bytes; i += 32)
      for (int c = 0; c < 4; ++c) {
        uint64_t v;
        std::memcpy(&v, w + i + 8 * c, 8);
        s[c] += v;
      }
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(state.iterations() * p.window_bytes);
}

void BM_quantize(benchmark::State& state, DType act, Isa isa) {
  if (!use_level(state, isa)) return;
  std::vector<float> x(kK);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : x) v = nd(rng);
  std::vector<uint8_t> q(static_cast<size_t>(*row_bytes(act, kK)));
  for (auto _ : state) {
    if (act == DType::Q8_0)
      quantize_q8_0(x.data(), kK, q.data());
    else
      quantize_q8_k(x.data(), kK, q.data());
    benchmark::DoNotOptimize(q.data());
  }
  state.SetBytesProcessed(state.iterations() * kK * 4);
  set_isa(detected_isa());
}

// Prefill shape: a 4864 x 896 matrix (Qwen2.5-0.5B FFN up/gate; 4864 x 1024 for Q4_K/Q5_K/Q6_K, whose
// rows must be a multiple of 256) times n activation rows, one
// thread; row-major gemm (kernels.h) vs the repacked GEMM (repack.h) at `level` (avx512_vnni, or
// amx: AMX tiles for each 16 activation rows). Counter: int8 MACs/s. wide_k > 0: a 1024 x wide_k
// matrix instead ("prefill_wide/": long rows such as Llama-3.2-1B's FFN down, 2048 x 8192).
void BM_prefill(benchmark::State& state, DType t, bool repacked, int64_t n, Isa level, int64_t wide_k) {
  const bool kq = t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
  const int64_t rows = wide_k > 0 ? 1024 : 4864, k = wide_k > 0 ? wide_k : kq ? 1024 : 896;
  if (!use_level(state, repacked ? level : detected_isa())) return;
  if (repacked && !repack_fits(t, k)) {  // (a build from before the type was repacked)
    state.SkipWithError("not repacked in this build");
    return;
  }
  const std::vector<uint8_t> w = make_weights(t, rows, k);
  std::vector<float> x(static_cast<size_t>(n * k));
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : x) v = nd(rng);
  std::vector<float> out(static_cast<size_t>(n * rows));
  std::vector<uint8_t> packed, act;
  if (repacked) {
    packed.resize(static_cast<size_t>(repack_bytes(t, rows, k)));
    repack_weights(t, w.data(), rows, k, packed.data());
    act.resize(static_cast<size_t>(n * repack_act_row_bytes(t, k)));
    for (int64_t j = 0; j < n; ++j)
      repack_quantize_act(t, x.data() + j * k, k, act.data() + j * repack_act_row_bytes(t, k));
  } else {
    act.resize(static_cast<size_t>(n * *activation_row_bytes(t, k)));
    if (!quantize_activations(t, x.data(), k, n, act.data()).ok()) std::abort();
  }
  for (auto _ : state) {
    if (repacked) {
      repack_gemm(t, packed.data(), rows, k, 0, rows, act.data(), n, out.data(), rows);
    } else if (!gemm(t, w.data(), rows, k, act.data(), n, out.data(), rows).ok()) {
      std::abort();
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["MAC/s"] = benchmark::Counter(static_cast<double>(state.iterations() * rows * k * n),
                                               benchmark::Counter::kIsRate);
  set_isa(detected_isa());
}

// Prefill attention over one full split (kAttendSplit positions, the bulk of a long prompt's
// attention): `tokens` query tokens of one sequence with a GQA group of nq heads (7: Qwen2.5's
// 14 / 2; "/g<nq>" in the name otherwise) and dk = dv = d, K/V rows of `type` in a paged-like scattered order. tile = false: one
// attend_partial call per token (the single-query loop decode uses); true: one attend_tile call.
// One thread; counter: f32 multiply-adds (q.k and p.v) per second.
void BM_attention(benchmark::State& state, DType type, int d, int tokens, bool tile, int nq) {
  if (!use_level(state, Isa::avx512)) return;
  set_isa(detected_isa());
  const int64_t n = kAttendSplit;
  const size_t rb = static_cast<size_t>(*row_bytes(type, d));
  std::vector<uint8_t> kv(2 * static_cast<size_t>(n) * rb);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(d));
  for (size_t r = 0; r < 2 * static_cast<size_t>(n); ++r) {
    for (auto& v : row) v = nd(rng);
    quantize_row(type, row.data(), kv.data() + r * rb, d);
  }
  std::vector<const void*> k(static_cast<size_t>(n)), v(static_cast<size_t>(n));
  for (int64_t p = 0; p < n; ++p) {  // every other row: K and V interleaved, as scattered slots
    k[static_cast<size_t>(p)] = kv.data() + static_cast<size_t>(2 * p) * rb;
    v[static_cast<size_t>(p)] = kv.data() + static_cast<size_t>(2 * p + 1) * rb;
  }
  const int rows = tokens * nq;
  std::vector<float> qs(static_cast<size_t>(rows * d)), out(static_cast<size_t>(rows * d)),
      stats(static_cast<size_t>(2 * rows));
  for (auto& x : qs) x = nd(rng);
  std::vector<const float*> q(static_cast<size_t>(rows));
  std::vector<float*> o(static_cast<size_t>(rows)), pm(static_cast<size_t>(tokens)), ps(static_cast<size_t>(tokens));
  for (int r = 0; r < rows; ++r) {
    q[static_cast<size_t>(r)] = qs.data() + r * d;
    o[static_cast<size_t>(r)] = out.data() + r * d;
  }
  for (int t = 0; t < tokens; ++t) {
    pm[static_cast<size_t>(t)] = stats.data() + 2 * t * nq;
    ps[static_cast<size_t>(t)] = stats.data() + 2 * t * nq + nq;
  }
  std::vector<int64_t> lengths(static_cast<size_t>(tokens), n);
  std::vector<float> scratch(static_cast<size_t>(attend_tile_scratch_floats(tokens, nq, d, d)));
  AttendTile tl;
  tl.q = q.data();
  tl.nq = nq;
  tl.nt = tokens;
  tl.n = lengths.data();
  tl.k_rows = k.data();
  tl.v_rows = v.data();
  tl.type = type;
  tl.dk = tl.dv = d;
  tl.scale = 0.125f;
  tl.out = o.data();
  tl.part_max = pm.data();
  tl.part_sum = ps.data();
  for (auto _ : state) {
    if (tile) {
      attend_tile(tl, scratch.data());
    } else {
      for (int t = 0; t < tokens; ++t)
        attend_partial(q.data() + t * nq, nq, k.data(), v.data(), type, n, d, d, 0.125f, o.data() + t * nq,
                       pm[static_cast<size_t>(t)], ps[static_cast<size_t>(t)], scratch.data());
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["MAC/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * rows * n * 2 * d,
                                               benchmark::Counter::kIsRate);
}

// Per-op overhead of the persistent pool: a parallel_for of `tasks` empty bodies on a 2-thread
// pool back to back (what every op of a decode step pays on top of its work). Wall time.
void BM_pool_overhead(benchmark::State& state, int threads, int64_t tasks) {
  static ThreadPool* pools[3] = {nullptr, nullptr, nullptr};
  if (!pools[threads]) pools[threads] = new ThreadPool(threads);
  ThreadPool& pool = *pools[threads];
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    pool.parallel_for(tasks, [&](int64_t i, int) { sink.fetch_add(i, std::memory_order_relaxed); });
  }
  benchmark::DoNotOptimize(sink.load());
}

void register_all() {
  benchmark::RegisterBenchmark("pool/parallel_for/2threads/2tasks", BM_pool_overhead, 2, 2)
      ->Unit(benchmark::kMicrosecond)->UseRealTime();
  benchmark::RegisterBenchmark("pool/parallel_for/2threads/64tasks", BM_pool_overhead, 2, 64)
      ->Unit(benchmark::kMicrosecond)->UseRealTime();
  if (detected_isa() >= Isa::avx512_vnni) {
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
      for (int64_t n : {1, 4, 5, 8, 12, 16, 64, 512}) {
        const std::string tn(dtype_name(t)), ns = std::to_string(n);
        benchmark::RegisterBenchmark(("prefill/" + tn + "/repacked/n" + ns).c_str(), BM_prefill, t, true, n,
                                     Isa::avx512_vnni, int64_t{0})
            ->Unit(benchmark::kMillisecond);
        if (n >= 16 && detected_isa() >= Isa::amx)  // below 16 rows the AMX level runs VNNI
          benchmark::RegisterBenchmark(("prefill/" + tn + "/amx/n" + ns).c_str(), BM_prefill, t, true, n, Isa::amx,
                                       int64_t{0})
              ->Unit(benchmark::kMillisecond);
        if (n == 512 && detected_isa() >= Isa::amx)
          benchmark::RegisterBenchmark(("prefill_wide/" + tn + "/amx/n512").c_str(), BM_prefill, t, true, n, Isa::amx,
                                       int64_t{8192})
              ->Unit(benchmark::kMillisecond);
        if (t != DType::Q5_0 && t != DType::Q5_K)  // no row-major kernel
          benchmark::RegisterBenchmark(("prefill/" + tn + "/rowmajor/n" + ns).c_str(), BM_prefill, t, false, n,
                                       detected_isa(), int64_t{0})
              ->Unit(benchmark::kMillisecond);
      }
    }
  }
  for (DType t : {DType::F16, DType::Q8_0, DType::F32}) {
    for (int d : {64, 128}) {
      const std::string base = "attention/" + std::string(dtype_name(t)) + "/d" + std::to_string(d);
      for (int tokens : {1, 2, 4, 9, 16}) {
        if (tokens != 9 && (t != DType::F16 || d != 64)) continue;  // tile sizes: F16 d64 only
        const std::string tn = std::to_string(tokens);
        benchmark::RegisterBenchmark((base + "/single/t" + tn).c_str(), BM_attention, t, d, tokens, false, 7)
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark((base + "/tile/t" + tn).c_str(), BM_attention, t, d, tokens, true, 7)
            ->Unit(benchmark::kMicrosecond);
      }
      if (t != DType::F16) continue;
      for (int nq : {1, 2, 4, 7, 8}) {  // one token (decode) with smaller groups: where the tile starts to pay
        const std::string g = "/g" + std::to_string(nq);
        benchmark::RegisterBenchmark((base + g + "/single/t1").c_str(), BM_attention, t, d, 1, false, nq)
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark((base + g + "/tile/t1").c_str(), BM_attention, t, d, 1, true, nq)
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  benchmark::RegisterBenchmark("read/cold", BM_read, true)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("read/hot", BM_read, false)->Unit(benchmark::kMicrosecond);
  const Isa best = detected_isa() >= Isa::avx512_vnni ? Isa::avx512_vnni : detected_isa();
  for (DType t : kTypes) {
    const std::string tn(dtype_name(t));
    for (Isa isa : kLevels) {
      const std::string ln(isa_name(isa));
      benchmark::RegisterBenchmark(("gemv/" + tn + "/" + ln + "/cold").c_str(), BM_gemm, t, isa, 1, true, 1)
          ->Unit(benchmark::kMicrosecond);
    }
    benchmark::RegisterBenchmark(("gemv/" + tn + "/" + std::string(isa_name(best)) + "/hot").c_str(),
                                 BM_gemm, t, best, 1, false, 1)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("gemv/" + tn + "/" + std::string(isa_name(best)) + "/cold/2threads").c_str(),
                                 BM_gemm, t, best, 1, true, 2)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    for (int64_t n : {4, 8})
      benchmark::RegisterBenchmark(
          ("gemm_n" + std::to_string(n) + "/" + tn + "/" + std::string(isa_name(best)) + "/cold").c_str(), BM_gemm,
          t, best, n, true, 1)
          ->Unit(benchmark::kMicrosecond);
  }
  for (DType act : {DType::Q8_0, DType::Q8_K})
    for (Isa isa : kLevels)
      benchmark::RegisterBenchmark(
          ("quantize/" + std::string(dtype_name(act)) + "/" + std::string(isa_name(isa))).c_str(), BM_quantize, act,
          isa);
}

}  // namespace
}  // namespace cadenza::simd

int main(int argc, char** argv) {
  cadenza::simd::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("simd", cadenza::simd::isa_report());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
