// Internal to the CPU backend: its weight storage and the kernels behind each Backend op.
// Kernels take views (Matrix / IndexMatrix) of host memory and a thread pool; each output row is
// computed by one thread with a fixed reduction order (see backend.h, batch invariance).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "kernels/backend.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace cadenza::kernels::cpu {

// Frees memory from std::aligned_alloc.
struct AlignedFree {
  void operator()(void* p) const;
};
using AlignedBytes = std::unique_ptr<uint8_t[], AlignedFree>;
// size_bytes rounded up to the alignment, zero-filled; nullptr when out of memory.
AlignedBytes aligned_zeroed(size_t size_bytes);
inline constexpr size_t kAlignment = 64;

// What the backend may still spend on repacked copies (CpuBackendOptions::repack_budget_bytes);
// shared by its weights, decremented as copies are made. Thread-safe.
struct RepackBudget {
  std::atomic<int64_t> remaining{0};
  int64_t total = 0;
  std::once_flag exhausted_logged;
};

// A weight in host memory, in its file type: matrix m, row r starts at
// data + (m * rows + r) * row_bytes. Vectors (rows == matrices == 1) are also decoded to f32 once.
class CpuWeight final : public Weight {
 public:
  explicit CpuWeight(const WeightDesc& desc) : Weight(desc) {}
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;
  std::shared_ptr<const void> keep_alive;  // when `data` points into the caller's memory
  AlignedBytes owned;                      // when `data` is our copy
  std::vector<float> vector_f32;           // for vectors only: the values as f32
  // A second copy in the interleaved layout of kernels/simd/repack.h (one block of
  // repacked_matrix_bytes per matrix), made on the first matmul with a type that has a repacked
  // kernel at the active ISA level (ensure_repacked); null otherwise (also when out of memory).
  // `data` stays valid for get_rows and the other ISA levels; when release_after_repack is set it
  // points into a read-only file mapping whose pages ensure_repacked drops as it repacks (they
  // page in again from the file when read), so only the repacked copy stays resident.
  mutable AlignedBytes repacked;
  mutable size_t repacked_matrix_bytes = 0;
  mutable std::once_flag repack_once;
  RepackBudget* repack_budget = nullptr;  // the backend's (outlives the weight); null: unlimited
  bool release_after_repack = false;
  // With release_after_repack: the file and offset of `data` (null when not a MappedFile's), so
  // that get_rows reads rows with pread once the pages are dropped (pages_released) instead of
  // mapping the file back around each row (a tied embedding: up to a large folio per token).
  std::optional<MappedFile::Source> source;
  mutable std::atomic<bool> pages_released{false};

  const uint8_t* repacked_matrix(int64_t matrix) const {
    return repacked.get() + static_cast<size_t>(matrix) * repacked_matrix_bytes;
  }

  const uint8_t* row(int64_t matrix, int64_t r) const {
    return data + (static_cast<size_t>(matrix) * static_cast<size_t>(rows()) +
                   static_cast<size_t>(r)) * row_bytes;
  }
};

// Per-thread scratch memory that only grows; distinct slots may be used at the same time by one
// thread. Valid until the next call with the same slot on the same thread.
enum class Scratch { DecodedRows, RowTemp, Attention };
float* thread_scratch(Scratch slot, size_t n_floats);

// Decodes n elements of type t into f32 (F16 through a lookup table, others via dequantize_row).
void decode_row(DType t, const void* src, float* dst, int64_t n);

// Dot product of n floats with a fixed summation order: 8 interleaved partial sums
// (element i goes to sum i % 8), combined pairwise. The order depends only on n.
float dot(const float* a, const float* b, int64_t n);

// The SIMD matmul of x_rows[0..n) (each w.cols() floats) with matrix `matrix` of w into
// y[j * ldy + r] (ldy >= w.rows()). Returns false, computing nothing, when the weight type has no
// SIMD kernel at the active ISA level (the caller then uses the f32 path). Must be called from the
// thread that issues ops (it uses that thread's activation buffer).
bool simd_matmul(ThreadPool& pool, const CpuWeight& w, int64_t matrix, const float* const* x_rows,
                 int64_t n, float* y, int64_t ldy);
// Makes w.repacked when its type has a repacked kernel at the active ISA level (once per weight,
// thread-safe; the repacking runs on the pool). Logs the first repacking.
void ensure_repacked(ThreadPool& pool, const CpuWeight& w);
// Logs (spdlog info, once per process) which kernels matmul uses.
void log_matmul_path_once();

void get_rows(ThreadPool& pool, const CpuWeight& table, IndexMatrix ids, Matrix out);
void gather_rows(ThreadPool& pool, Matrix src, IndexMatrix rows, Matrix out);
void copy_matrix(ThreadPool& pool, Matrix src, Matrix out);
void matmul(ThreadPool& pool, const CpuWeight& w, Matrix x, Matrix y);
// Groups the (token, slot) pairs by expert so each active expert's matrix is read once per call
// for all its pairs; results are bitwise those of one call per pair (batch invariant).
void matmul_experts(ThreadPool& pool, const CpuWeight& w, Matrix x, IndexMatrix expert_ids,
                    Matrix y);

void add_bias(ThreadPool& pool, Matrix x, const float* bias, Matrix out);
void rms_norm(ThreadPool& pool, Matrix x, const float* weight, float eps, Matrix out);
void add(ThreadPool& pool, Matrix a, Matrix b, Matrix out);
void mul(ThreadPool& pool, Matrix a, Matrix b, Matrix out);
void swiglu(ThreadPool& pool, Matrix gate, Matrix up, Matrix out);
void sigmoid(ThreadPool& pool, Matrix x, Matrix out);
void swiglu_clamped(ThreadPool& pool, Matrix gate, Matrix up, float alpha, float limit, Matrix out);
void scale(ThreadPool& pool, Matrix x, float s, Matrix out);
void geglu(ThreadPool& pool, Matrix gate, Matrix up, Matrix out);
void softcap(ThreadPool& pool, Matrix x, float cap, Matrix out);
void scale_by_position(ThreadPool& pool, Matrix x, IndexMatrix positions, float beta,
                       int32_t length, int32_t offset, Matrix out);
// y[t*K + s] += the bias row of expert_ids[t][s] (skipped for -1).
void add_expert_bias(ThreadPool& pool, Matrix y, const CpuWeight& bias, IndexMatrix expert_ids);
// freq_factors: n_dims/2 values or nullptr.
void rope(ThreadPool& pool, Matrix x, int32_t n_heads, int32_t head_dim, IndexMatrix positions,
          const RopeParams& params, const float* freq_factors);
// bias: the selection bias (E values) or nullptr.
void route_experts(ThreadPool& pool, Matrix router_logits, const RoutingParams& params,
                   const float* bias, IndexMatrix expert_ids, Matrix expert_weights);
void weighted_sum_slots(ThreadPool& pool, Matrix slot_rows, Matrix weights, Matrix out);

// Linear-attention ops (recurrent.cpp). w: an F32 [C][K] matrix; bias: C values or null; a,
// dt_bias: n_v_heads values (ssm_scan: a, d, dt_bias: n_heads values).
void short_conv(Matrix x, const CpuWeight& w, const float* bias, Matrix state,
                const RecurrentBatch& batch, Matrix out);
void ssm_scan(ThreadPool& pool, Matrix x, Matrix b, Matrix c, Matrix dt, Matrix state,
              const RecurrentBatch& batch, const SsmScanParams& params, const float* a,
              const float* d, const float* dt_bias, Matrix out);
void gated_delta_rule(ThreadPool& pool, Matrix q, Matrix k, Matrix v, Matrix alpha, Matrix beta,
                      Matrix state, const RecurrentBatch& batch, const DeltaRuleParams& params,
                      const float* a, const float* dt_bias, Matrix out);

// KV stores of F32, F16 or Q8_0 (kv_type_supported; Q8_0 needs head dims that are multiples of
// 32, which model::KvCache checks). kv_write converts the f32 rows to the store's type (F16:
// round to nearest even; Q8_0: quantize_row per block of 32, so each head row on its own);
// attention decodes them exactly to f32 (simd/attention.h). A KvLayer with values_in_keys has no
// value store: kv_write stores k only and attention reads each value row from its key row.
bool kv_type_supported(DType type);
void kv_write(ThreadPool& pool, const KvLayer& kv, Matrix k, Matrix v, IndexMatrix slots);
// sinks: params.sinks decoded (n_heads values) or nullptr.
void attention(ThreadPool& pool, Matrix q, const KvLayer& kv, const AttentionBatch& batch,
               int32_t n_heads, const AttentionParams& params, const float* sinks, Matrix out);

}  // namespace cadenza::kernels::cpu
