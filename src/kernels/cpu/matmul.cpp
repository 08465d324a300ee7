// CPU matmul, expert matmul and row lookups.
//
// Matmul has two paths:
//  - SIMD (kernels/simd): for weight types with a kernel at the active ISA level, the activation
//    rows are quantized once per call to the kernel's format (Q8_0 / Q8_K; f32 for F16/BF16) and
//    the output rows are split into one contiguous range per thread (equal shares; multiples of
//    the repacked group for repacked weights); each thread runs the gemv (n = 1) or gemm kernel
//    over its rows for all n activations. Every kernel computes a (row, activation) result with a
//    fixed instruction sequence, whatever the row range and n: batch and thread-count invariant.
//  - fallback (other types, or CADENZA_ISA without a kernel): weight rows are decoded to f32 (a
//    tile of rows at a time, into per-thread scratch) and dotted against every input row.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include <spdlog/spdlog.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/simd/isa.h"
#include "kernels/simd/kernels.h"
#include "kernels/simd/repack.h"
#include "tensor/quant.h"
#include "util/mapped_file.h"

namespace cadenza::kernels::cpu {

void AlignedFree::operator()(void* p) const { std::free(p); }

AlignedBytes aligned_zeroed(size_t size_bytes) {
  const size_t rounded = (std::max<size_t>(size_bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < size_bytes) return nullptr;  // overflow
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (!p) return nullptr;
  std::memset(p, 0, rounded);
  return AlignedBytes(static_cast<uint8_t*>(p));
}

namespace {

// fp16 -> f32 for all 65536 bit patterns, built once from the reference conversion.
const float* fp16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) t[i] = fp16_to_fp32(static_cast<uint16_t>(i));
    return t;
  }();
  return table.data();
}

// Weight rows decoded per tile: enough to reuse each input row from cache, bounded in bytes.
int64_t tile_rows_for(int64_t k) { return std::clamp<int64_t>(16384 / std::max<int64_t>(k, 1), 1, 16); }

// For output rows [r0, r1) of one weight matrix (rows at `matrix_rows`, `row_bytes` apart):
// y_rows[j][r] = dot(w[r], x_rows[j]) for each of the n input rows.
void matmul_tile(const CpuWeight& w, const uint8_t* matrix_rows, int64_t r0, int64_t r1,
                 const float* const* x_rows, float* const* y_rows, int64_t n) {
  const int64_t k = w.cols();
  const int64_t count = r1 - r0;
  const float* decoded;
  if (w.type() == DType::F32) {
    decoded = reinterpret_cast<const float*>(matrix_rows + static_cast<size_t>(r0) * w.row_bytes);
  } else {
    float* scratch = thread_scratch(Scratch::DecodedRows, static_cast<size_t>(count * k));
    for (int64_t r = 0; r < count; ++r) {
      decode_row(w.type(), matrix_rows + static_cast<size_t>(r0 + r) * w.row_bytes,
                 scratch + r * k, k);
    }
    decoded = scratch;
  }
  for (int64_t j = 0; j < n; ++j) {
    const float* x = x_rows[j];
    float* y = y_rows[j] + r0;
    for (int64_t r = 0; r < count; ++r) y[r] = dot(decoded + r * k, x, k);
  }
}

}  // namespace

float* thread_scratch(Scratch slot, size_t n_floats) {
  thread_local std::array<std::vector<float>, 3> scratch;
  std::vector<float>& v = scratch[static_cast<size_t>(slot)];
  if (v.size() < n_floats) v.resize(n_floats);
  return v.data();
}

void decode_row(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16: {
      const float* table = fp16_table();
      const auto* bytes = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        dst[i] = table[h];
      }
      return;
    }
    default:
      dequantize_row(t, src, dst, n);
  }
}

float dot(const float* a, const float* b, int64_t n) {
  std::array<float, 8> acc{};
  const int64_t full = n / 8 * 8;
  for (int64_t i = 0; i < full; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  for (int64_t i = full; i < n; ++i) acc[i - full] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

void get_rows(ThreadPool& pool, const CpuWeight& table, IndexMatrix ids, Matrix out) {
  assert(ids.cols == 1 && out.rows == ids.rows && out.cols == table.cols());
  // A repacked table whose file pages were dropped (a tied embedding): its rows are read from the
  // file with pread, the same bytes, without mapping them back into this process.
  const bool from_file =
      table.source.has_value() && table.pages_released.load(std::memory_order_acquire);
  pool.parallel_for(ids.rows, [&](int64_t t, int) {
    const int32_t id = ids.data[t];
    assert(id >= 0 && id < table.rows());
    const uint8_t* src = table.row(0, id);
    if (from_file) {
      thread_local std::vector<uint8_t> row;
      row.resize(table.row_bytes);
      if (MappedFile::read_at(*table.source,
                              table.source->offset + static_cast<uint64_t>(src - table.data),
                              row.data(), table.row_bytes)) {
        src = row.data();
      }
    }
    decode_row(table.type(), src, out.data + t * out.stride, out.cols);
  });
}

void gather_rows(ThreadPool& pool, Matrix src, IndexMatrix rows, Matrix out) {
  assert(rows.cols == 1 && out.rows == rows.rows && out.cols == src.cols);
  pool.parallel_for(rows.rows, [&](int64_t i, int) {
    const int32_t r = rows.data[i];
    assert(r >= 0 && r < src.rows);
    std::memcpy(out.data + i * out.stride, src.data + r * src.stride,
                static_cast<size_t>(src.cols) * sizeof(float));
  });
}

void copy_matrix(ThreadPool& pool, Matrix src, Matrix out) {
  assert(src.rows == out.rows && src.cols == out.cols);
  pool.parallel_for(src.rows, [&](int64_t r, int) {
    std::memcpy(out.data + r * out.stride, src.data + r * src.stride,
                static_cast<size_t>(src.cols) * sizeof(float));
  });
}

namespace {

// The caller thread's activation buffer (quantized rows); workers only read it during the call.
uint8_t* activation_buffer(size_t bytes) {
  thread_local std::vector<uint8_t> buffer;
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

// Splits [0, units) into `parts` contiguous ranges of (almost) equal size; part p gets
// [begin, end). Ranges depend only on (units, parts).
std::pair<int64_t, int64_t> split_range(int64_t units, int64_t parts, int64_t p) {
  const int64_t base = units / parts, extra = units % parts;
  const int64_t begin = p * base + std::min(p, extra);
  return {begin, begin + base + (p < extra ? 1 : 0)};
}

}  // namespace

namespace {
std::atomic<uint64_t> g_repacked_bytes{0};
std::atomic<uint64_t> g_released_bytes{0};
}  // namespace

uint64_t repacked_bytes() { return g_repacked_bytes.load(std::memory_order_relaxed); }
uint64_t released_mapped_bytes() { return g_released_bytes.load(std::memory_order_relaxed); }

void ensure_repacked(ThreadPool& pool, const CpuWeight& w) {
  if (!simd::repack_usable(w.type(), simd::active_isa()) || !simd::repack_fits(w.type(), w.cols())) return;
  std::call_once(w.repack_once, [&] {
    const int64_t k = w.cols(), m = w.rows();
    const auto matrix_bytes = static_cast<size_t>(simd::repack_bytes(w.type(), m, k));
    const auto total_bytes = static_cast<int64_t>(matrix_bytes * static_cast<size_t>(w.matrices()));
    if (RepackBudget* budget = w.repack_budget; budget != nullptr) {
      if (budget->remaining.fetch_sub(total_bytes, std::memory_order_relaxed) < total_bytes) {
        budget->remaining.fetch_add(total_bytes, std::memory_order_relaxed);
        std::call_once(budget->exhausted_logged, [&] {
          spdlog::info("cpu backend: the repack budget ({:.1f} MiB) is spent; '{}' and the weights "
                       "after it run from their file layout (the row-major kernels)",
                       static_cast<double>(budget->total) / 1048576.0, w.name());
        });
        return;
      }
    }
    AlignedBytes bytes = aligned_zeroed(static_cast<size_t>(total_bytes));
    if (!bytes) {
      if (w.repack_budget != nullptr) w.repack_budget->remaining.fetch_add(total_bytes);
      spdlog::warn("cpu backend: no memory to repack '{}'; using the row-major kernels", w.name());
      return;
    }
    // Chunks of 64 row groups per task. With release_after_repack each chunk's file pages are
    // dropped as soon as it is repacked (the pages it shares with a neighbour chunk at the end), so
    // the two copies coexist for a few chunks only, not for the whole matrix: this keeps the peak
    // low for the largest matrix (a tied embedding, repacked on the first output head matmul).
    // Dropping pages another thread still reads is safe: they page in again from the file.
    const int64_t chunk_rows = 64 * simd::kRepackRows;
    const int64_t chunks = (m + chunk_rows - 1) / chunk_rows;
    const size_t chunk_bytes = static_cast<size_t>(simd::repack_bytes(w.type(), chunk_rows, k));
    pool.parallel_for(w.matrices() * chunks, [&](int64_t i, int) {
      const int64_t e = i / chunks, c = i % chunks;
      const int64_t r0 = c * chunk_rows, rows = std::min(chunk_rows, m - r0);
      simd::repack_weights(w.type(), w.row(e, r0), rows, k,
                           bytes.get() + static_cast<size_t>(e) * matrix_bytes +
                               static_cast<size_t>(c) * chunk_bytes);
      if (w.release_after_repack) {
        MappedFile::release_pages(w.row(e, r0), static_cast<size_t>(rows) * w.row_bytes);
      }
    });
    if (w.release_after_repack) {
      const size_t source_bytes = static_cast<size_t>(w.matrices() * m) * w.row_bytes;
      g_released_bytes.fetch_add(MappedFile::release_pages(w.data, source_bytes),
                                 std::memory_order_relaxed);
      w.pages_released.store(true, std::memory_order_release);
    }
    w.repacked_matrix_bytes = matrix_bytes;
    w.repacked = std::move(bytes);
    g_repacked_bytes.fetch_add(static_cast<uint64_t>(total_bytes), std::memory_order_relaxed);
    static std::once_flag logged;
    std::call_once(logged, [&] {
      spdlog::info("cpu backend: repacking {} weights into 16-row groups for the VNNI/AMX GEMM "
                   "(matmul's copy of each matrix; {}; first: '{}', {:.1f} MiB)",
                   dtype_name(w.type()),
                   w.release_after_repack ? "the file's pages of it are dropped"
                                          : "the file's rows stay resident too",
                   w.name(),
                   static_cast<double>(matrix_bytes * static_cast<size_t>(w.matrices())) / 1048576.0);
    });
  });
}

bool simd_matmul(ThreadPool& pool, const CpuWeight& w, int64_t matrix, const float* const* x_rows,
                 int64_t n, float* y, int64_t ldy) {
  const int64_t k = w.cols(), m = w.rows();
  const simd::Isa isa = simd::active_isa();
  ensure_repacked(pool, w);
  const bool repacked = w.repacked != nullptr && simd::repack_usable(w.type(), isa);
  assert(!repacked || simd::repack_fits(w.type(), k));
  std::optional<DType> act_type;
  int64_t act_row = 0;
  if (repacked) {
    act_row = simd::repack_act_row_bytes(w.type(), k);
  } else {
    if (isa == simd::Isa::scalar) return false;  // the f32 path is faster than the references
    act_type = simd::activation_dtype(w.type());
    if (!act_type) return false;
    Result<int64_t> bytes = simd::activation_row_bytes(w.type(), k);
    if (!bytes) return false;
    act_row = *bytes;
  }
  // Quantize (or gather) the activations once, in parallel over rows when there are several.
  uint8_t* act = activation_buffer(static_cast<size_t>(act_row * n));
  auto prepare = [&](int64_t j) {
    uint8_t* dst = act + j * act_row;
    if (repacked) {
      simd::repack_quantize_act(w.type(), x_rows[j], k, dst);
    } else if (*act_type == DType::Q8_0) {
      simd::quantize_q8_0(x_rows[j], k, dst);
    } else if (*act_type == DType::Q8_K) {
      simd::quantize_q8_k(x_rows[j], k, dst);
    } else {
      std::memcpy(dst, x_rows[j], static_cast<size_t>(k) * sizeof(float));
    }
  };
  if (n >= 8) {
    pool.parallel_for(n, [&](int64_t j, int) { prepare(j); });
  } else {
    for (int64_t j = 0; j < n; ++j) prepare(j);
  }

  // One contiguous row range per thread (in units of the repacked group, or of 16 rows).
  const int64_t unit = repacked ? simd::kRepackRows : 16;
  const int64_t units = (m + unit - 1) / unit;
  const int64_t parts = std::min<int64_t>(pool.size(), units);
  const uint8_t* weights = w.row(matrix, 0);
  pool.parallel_for(parts, [&](int64_t p, int) {
    const auto [u0, u1] = split_range(units, parts, p);
    const int64_t r0 = u0 * unit, r1 = std::min(m, u1 * unit);
    if (r1 <= r0) return;
    if (repacked) {
      simd::repack_gemm(w.type(), w.repacked_matrix(matrix), m, k, r0, r1, act, n, y, ldy);
    } else {
      const uint8_t* wr = weights + static_cast<size_t>(r0) * w.row_bytes;
      const Status st = simd::gemm(w.type(), wr, r1 - r0, k, act, n, y + r0, ldy);
      assert(st);
      (void)st;
    }
  });
  return true;
}

void log_matmul_path_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const simd::Isa isa = simd::active_isa();
    std::string path = "row-major SIMD kernels";
    if (simd::repack_usable(DType::Q8_0, isa)) {
      path = fmt::format("Q8_0/Q4_0/Q5_0/IQ4_NL/MXFP4/Q4_K/Q5_K/Q6_K repacked to 16-row groups, VNNI GEMM{}",
                         isa >= simd::Isa::amx ? ", AMX tiles for each 16 activation rows" : "");
    }
    spdlog::info("cpu backend: matmul kernels at ISA level {} ({}); {}", simd::isa_name(isa), path,
                 simd::isa_report());
  });
}

void matmul(ThreadPool& pool, const CpuWeight& w, Matrix x, Matrix y) {
  assert(w.matrices() == 1 && x.cols == w.cols() && y.cols == w.rows() && y.rows == x.rows);
  const int64_t n = x.rows;
  if (n == 0) return;
  std::vector<const float*> x_rows(static_cast<size_t>(n));
  std::vector<float*> y_rows(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    x_rows[t] = x.data + t * x.stride;
    y_rows[t] = y.data + t * y.stride;
  }
  if (simd_matmul(pool, w, 0, x_rows.data(), n, y.data, y.stride)) return;
  const int64_t m = w.rows();
  const int64_t tile = tile_rows_for(w.cols());
  const int64_t n_tiles = (m + tile - 1) / tile;
  pool.parallel_for(n_tiles, [&](int64_t i, int) {
    const int64_t r0 = i * tile;
    matmul_tile(w, w.row(0, 0), r0, std::min(m, r0 + tile), x_rows.data(), y_rows.data(), n);
  });
}

namespace {

std::atomic<uint64_t> g_expert_calls{0}, g_expert_matrices{0}, g_expert_bytes{0};

// The repacked grouped path: every (token, slot) pair's activation row is quantized once into its
// expert's contiguous group (pairs of expert e at [offset[e], offset[e + 1]) in token order), then
// one parallel region where thread p computes its share of output rows of every active expert for
// all the expert's pairs (each expert's weights are read once per call) and scatters them to y.
// A (row, pair) result depends only on the weight row and the pair's activation row (repack_gemm
// is invariant in n and the row range), so grouping and thread count never change a bit.
void grouped_repacked(ThreadPool& pool, const CpuWeight& w, const std::vector<int32_t>& active,
                      const std::vector<int64_t>& offset, const std::vector<const float*>& x_rows,
                      const std::vector<float*>& y_rows) {
  const int64_t k = w.cols(), m = w.rows();
  const auto pairs = static_cast<int64_t>(x_rows.size());
  const int64_t act_row = simd::repack_act_row_bytes(w.type(), k);
  uint8_t* act = activation_buffer(static_cast<size_t>(act_row * pairs));
  auto prepare = [&](int64_t j) { simd::repack_quantize_act(w.type(), x_rows[j], k, act + j * act_row); };
  if (pairs >= 8) {
    pool.parallel_for(pairs, [&](int64_t j, int) { prepare(j); });
  } else {
    for (int64_t j = 0; j < pairs; ++j) prepare(j);
  }
  thread_local std::vector<float> out;
  if (out.size() < static_cast<size_t>(pairs * m)) out.resize(static_cast<size_t>(pairs * m));
  float* tmp = out.data();
  const int64_t unit = simd::kRepackRows;
  const int64_t units = (m + unit - 1) / unit;
  const int64_t parts = std::min<int64_t>(pool.size(), units);
  pool.parallel_for(parts, [&](int64_t p, int) {
    const auto [u0, u1] = split_range(units, parts, p);
    const int64_t r0 = u0 * unit, r1 = std::min(m, u1 * unit);
    if (r1 <= r0) return;
    for (const int32_t e : active) {
      const int64_t o = offset[static_cast<size_t>(e)];
      const int64_t count = offset[static_cast<size_t>(e) + 1] - o;
      simd::repack_gemm(w.type(), w.repacked_matrix(e), m, k, r0, r1, act + o * act_row, count,
                        tmp + o * m, m);
      for (int64_t j = o; j < o + count; ++j) {
        std::memcpy(y_rows[static_cast<size_t>(j)] + r0, tmp + j * m + r0,
                    static_cast<size_t>(r1 - r0) * sizeof(float));
      }
    }
  });
}

}  // namespace

ExpertCounters expert_counters() {
  return {.calls = g_expert_calls.load(std::memory_order_relaxed),
          .matrices = g_expert_matrices.load(std::memory_order_relaxed),
          .bytes = g_expert_bytes.load(std::memory_order_relaxed)};
}

void matmul_experts(ThreadPool& pool, const CpuWeight& w, Matrix x, IndexMatrix expert_ids,
                    Matrix y) {
  const int64_t n = expert_ids.rows;
  const int64_t slots = expert_ids.cols;
  const int64_t n_experts = w.matrices();
  assert(x.cols == w.cols() && y.cols == w.rows() && y.rows == n * slots);
  assert(x.rows == n || x.rows == n * slots);
  if (n == 0) return;
  const bool x_per_slot = x.rows == n * slots && slots != 1;

  // Group the (token, slot) pairs by expert (counting sort); within an expert, token order.
  std::vector<int64_t> offset(static_cast<size_t>(n_experts) + 1, 0);
  int64_t skipped = 0;  // id -1: an expert another rank holds; its output row is zero
  for (int64_t i = 0; i < n * slots; ++i) {
    const int32_t e = expert_ids.data[i];
    assert(e >= -1 && e < n_experts);
    if (e < 0) {
      std::fill_n(y.data + i * y.stride, y.cols, 0.0f);
      ++skipped;
      continue;
    }
    ++offset[static_cast<size_t>(e) + 1];
  }
  std::vector<int32_t> active;
  for (int64_t e = 0; e < n_experts; ++e) {
    if (offset[static_cast<size_t>(e) + 1] > 0) active.push_back(static_cast<int32_t>(e));
    offset[static_cast<size_t>(e) + 1] += offset[static_cast<size_t>(e)];
  }
  std::vector<const float*> x_rows(static_cast<size_t>(n * slots - skipped));
  std::vector<float*> y_rows(static_cast<size_t>(n * slots - skipped));
  {
    std::vector<int64_t> fill(offset.begin(), offset.end() - 1);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t s = 0; s < slots; ++s) {
        const int32_t e = expert_ids.data[t * slots + s];
        if (e < 0) continue;
        const auto j = static_cast<size_t>(fill[static_cast<size_t>(e)]++);
        const int64_t x_row = x_per_slot ? t * slots + s : t;
        x_rows[j] = x.data + x_row * x.stride;
        y_rows[j] = y.data + (t * slots + s) * y.stride;
      }
    }
  }
  g_expert_calls.fetch_add(1, std::memory_order_relaxed);
  g_expert_matrices.fetch_add(active.size(), std::memory_order_relaxed);
  g_expert_bytes.fetch_add(active.size() * static_cast<size_t>(w.rows()) * w.row_bytes,
                           std::memory_order_relaxed);

  if (simd::active_isa() != simd::Isa::scalar) ensure_repacked(pool, w);
  if (w.repacked != nullptr && simd::repack_usable(w.type(), simd::active_isa())) {
    grouped_repacked(pool, w, active, offset, x_rows, y_rows);
    return;
  }
  const int64_t m = w.rows();
  // Other SIMD kernels: one matmul per active expert into a temporary [count][m], then scattered.
  {
    std::vector<float> tmp;
    bool used_simd = true;
    for (const int32_t e : active) {
      const int64_t o = offset[static_cast<size_t>(e)];
      const int64_t count = offset[static_cast<size_t>(e) + 1] - o;
      tmp.resize(static_cast<size_t>(count * m));
      if (!simd_matmul(pool, w, e, x_rows.data() + o, count, tmp.data(), m)) {
        used_simd = false;
        break;
      }
      for (int64_t j = 0; j < count; ++j) {
        std::memcpy(y_rows[static_cast<size_t>(o + j)], tmp.data() + j * m,
                    static_cast<size_t>(m) * sizeof(float));
      }
    }
    if (used_simd) return;
  }
  // f32 fallback: work items (expert, tile) for the active experts.
  const int64_t tile = tile_rows_for(w.cols());
  const int64_t n_tiles = (m + tile - 1) / tile;
  pool.parallel_for(static_cast<int64_t>(active.size()) * n_tiles, [&](int64_t i, int) {
    const int32_t e = active[static_cast<size_t>(i / n_tiles)];
    const int64_t r0 = (i % n_tiles) * tile;
    const int64_t o = offset[static_cast<size_t>(e)];
    matmul_tile(w, w.row(e, 0), r0, std::min(m, r0 + tile), x_rows.data() + o, y_rows.data() + o,
                offset[static_cast<size_t>(e) + 1] - o);
  });
}

}  // namespace cadenza::kernels::cpu
