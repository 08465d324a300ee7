// The CUDA backend: memory, op dispatch to the kernels of cuda_kernels.h, the cuBLAS GEMM path.
#include "kernels/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <spdlog/spdlog.h>

#include "kernels/cuda/cublas_api.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_memory.h"

namespace cadenza::kernels {

namespace {

using cuda::CudaWeight;
using cuda::DevicePtr;

constexpr int64_t kCublasMinRows = 9;  // matmuls with more rows may take the cuBLAS path
constexpr size_t kTileBytes = 64u << 20;  // cuBLAS path: bf16 weight tile

// A device fault (illegal address, launch failure) leaves the CUDA context unusable; the seam has
// no error channel for ops, so it ends the process with the reason.
[[noreturn]] void fatal(std::string_view what, cudaError_t err) {
  spdlog::critical("cuda backend: {}", cuda::cuda_error_text(what, err));
  std::abort();
}
void check(cudaError_t err, std::string_view what) {
  if (err != cudaSuccess) fatal(what, err);
}
void check_launch(std::string_view op) { check(cudaGetLastError(), op); }

class CudaBuffer final : public Buffer {
 public:
  CudaBuffer(DevicePtr mem, size_t size_bytes) : Buffer(mem.get(), size_bytes), mem_(std::move(mem)) {}

 private:
  DevicePtr mem_;
};

const CudaWeight& cw(const Weight& w) { return static_cast<const CudaWeight&>(w); }

cuda::DevMat dm(Matrix m) { return {m.data, m.rows, m.cols, m.stride}; }
cuda::DevIdx di(IndexMatrix m) { return {m.data, m.rows, m.cols}; }
cuda::DevKv dkv(const KvLayer& kv) {
  const cuda::KvType type = kv.type == DType::F16    ? cuda::KvType::F16
                           : kv.type == DType::Q8_0 ? cuda::KvType::Q8_0
                                                    : cuda::KvType::F32;
  return {kv.keys, kv.values, type, kv.num_blocks, kv.block_size, kv.n_kv_heads, kv.head_dim_k,
          kv.head_dim_v};
}

bool env_cublas(bool fallback) {
  const char* v = std::getenv("CADENZA_CUDA_GEMM");
  if (!v || !*v) return fallback;
  const std::string_view s(v);
  if (s == "cublas") return true;
  if (s == "invariant") return false;
  spdlog::warn("CADENZA_CUDA_GEMM='{}' is neither 'cublas' nor 'invariant'; ignored", s);
  return fallback;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(CudaDeviceInfo info, cudaStream_t stream, const cuda::CublasApi& blas,
              cublasHandle_t cublas, bool use_cublas)
      : info_(std::move(info)),
        stream_(stream),
        blas_(blas),
        cublas_(cublas),
        use_cublas_(use_cublas) {}

  ~CudaBackend() override {
    cudaSetDevice(info_.ordinal);
    cudaStreamSynchronize(stream_);
    x_half_.reset();
    w_tile_.reset();
    blas_.destroy(cublas_);
    cudaStreamDestroy(stream_);
  }

  std::string_view name() const override { return "cuda"; }
  const CudaDeviceInfo& info() const { return info_; }

  Result<std::unique_ptr<Weight>> upload_weight(const WeightDesc& desc) override {
    select();
    Result<std::unique_ptr<CudaWeight>> w = cuda::upload_weight(desc);
    if (!w) return w.error_value();
    return std::unique_ptr<Weight>(std::move(*w));
  }

  Result<std::unique_ptr<Buffer>> allocate(size_t size_bytes) override {
    select();
    Result<DevicePtr> mem = cuda::device_alloc(size_bytes, fmt::format("a buffer of {} bytes", size_bytes));
    if (!mem) return mem.error_value();
    // Zero-filled, in stream order (ops queued before may still use freed memory's neighbours).
    check(cudaMemsetAsync(mem->get(), 0, std::max<size_t>(size_bytes, 1), stream_), "cudaMemsetAsync");
    return std::unique_ptr<Buffer>(std::make_unique<CudaBuffer>(std::move(*mem), size_bytes));
  }

  void write(Buffer& dst, size_t offset_bytes, const void* src, size_t size_bytes) override {
    assert(offset_bytes <= dst.size_bytes() && size_bytes <= dst.size_bytes() - offset_bytes);
    if (!size_bytes) return;
    select();
    // From pageable memory the copy is staged before this returns, so `src` may be reused.
    check(cudaMemcpyAsync(static_cast<uint8_t*>(dst.data()) + offset_bytes, src, size_bytes,
                          cudaMemcpyHostToDevice, stream_),
          "write (cudaMemcpyAsync)");
  }

  void read(const Buffer& src, size_t offset_bytes, void* dst, size_t size_bytes) override {
    assert(offset_bytes <= src.size_bytes() && size_bytes <= src.size_bytes() - offset_bytes);
    select();
    if (size_bytes) {
      check(cudaMemcpyAsync(dst, static_cast<const uint8_t*>(src.data()) + offset_bytes, size_bytes,
                            cudaMemcpyDeviceToHost, stream_),
            "read (cudaMemcpyAsync)");
    }
    check(cudaStreamSynchronize(stream_), "read (the ops queued before it)");
  }

  void synchronize() override {
    select();
    check(cudaStreamSynchronize(stream_), "synchronize");
  }
  int device_ordinal() const override { return info_.ordinal; }

  void read_view(Matrix src, float* dst) override {
    assert(src.contiguous());
    select();
    const size_t bytes = static_cast<size_t>(src.rows * src.cols) * sizeof(float);
    if (bytes) {
      check(cudaMemcpyAsync(dst, src.data, bytes, cudaMemcpyDeviceToHost, stream_),
            "read_view (cudaMemcpyAsync)");
    }
    check(cudaStreamSynchronize(stream_), "read_view (the ops queued before it)");
  }

  void write_view(const float* src, Matrix dst) override {
    assert(dst.contiguous());
    select();
    const size_t bytes = static_cast<size_t>(dst.rows * dst.cols) * sizeof(float);
    if (bytes) {
      check(cudaMemcpyAsync(dst.data, src, bytes, cudaMemcpyHostToDevice, stream_),
            "write_view (cudaMemcpyAsync)");
    }
    check(cudaStreamSynchronize(stream_), "write_view");
  }

  void copy(Buffer& dst, size_t dst_offset_bytes, const Buffer& src, size_t src_offset_bytes,
            size_t size_bytes) override {
    assert(dst_offset_bytes <= dst.size_bytes() && size_bytes <= dst.size_bytes() - dst_offset_bytes);
    assert(src_offset_bytes <= src.size_bytes() && size_bytes <= src.size_bytes() - src_offset_bytes);
    if (!size_bytes) return;
    select();
    check(cudaMemcpyAsync(static_cast<uint8_t*>(dst.data()) + dst_offset_bytes,
                          static_cast<const uint8_t*>(src.data()) + src_offset_bytes, size_bytes,
                          cudaMemcpyDeviceToDevice, stream_),
          "copy (cudaMemcpyAsync)");
  }

  // Q8_0 needs head dims that are multiples of 32 (kv_write / attention fail fatally otherwise,
  // like the CPU backend's asserts; model::KvCache checks this when it creates the store).
  bool supports_kv_type(DType type) const override {
    return type == DType::F32 || type == DType::F16 || type == DType::Q8_0;
  }

  void get_rows(const Weight& table, IndexMatrix ids, Matrix out) override {
    assert(ids.cols == 1 && out.rows == ids.rows && out.cols == table.cols());
    select();
    cuda::get_rows(cw(table).dev, di(ids), dm(out), stream_);
    check_launch("get_rows");
  }
  void gather_rows(Matrix src, IndexMatrix rows, Matrix out) override {
    assert(rows.cols == 1 && out.rows == rows.rows && out.cols == src.cols);
    select();
    cuda::gather_rows(dm(src), di(rows), dm(out), stream_);
    check_launch("gather_rows");
  }
  void copy_matrix(Matrix src, Matrix out) override {
    assert(src.rows == out.rows && src.cols == out.cols);
    select();
    cuda::copy_matrix(dm(src), dm(out), stream_);
    check_launch("copy_matrix");
  }

  void matmul(const Weight& w, Matrix x, Matrix y) override {
    assert(w.matrices() == 1 && x.cols == w.cols() && y.cols == w.rows() && y.rows == x.rows);
    select();
    if (use_cublas_ && x.rows >= kCublasMinRows) {
      cublas_matmul(cw(w), x, y);
    } else {
      cuda::matmul_invariant(cw(w).dev, dm(x), dm(y), stream_);
    }
    check_launch("matmul");
  }
  void matmul_experts(const Weight& w, Matrix x, IndexMatrix expert_ids, Matrix y) override {
    assert(y.rows == expert_ids.rows * expert_ids.cols && y.cols == w.rows() && x.cols == w.cols());
    assert(x.rows == expert_ids.rows || x.rows == y.rows);
    select();
    cuda::matmul_experts(cw(w).dev, dm(x), di(expert_ids), dm(y), stream_);
    check_launch("matmul_experts");
  }
  void add_bias(Matrix x, const Weight& bias, Matrix out) override {
    assert(bias.cols() == x.cols && cw(bias).is_vector());
    select();
    cuda::add_bias(dm(x), cw(bias).vector_f32(), dm(out), stream_);
    check_launch("add_bias");
  }
  void rms_norm(Matrix x, const Weight& weight, float eps, Matrix out) override {
    assert(weight.cols() == x.cols && cw(weight).is_vector());
    select();
    cuda::rms_norm(dm(x), cw(weight).vector_f32(), eps, dm(out), stream_);
    check_launch("rms_norm");
  }
  void add(Matrix a, Matrix b, Matrix out) override {
    select();
    cuda::add(dm(a), dm(b), dm(out), stream_);
    check_launch("add");
  }
  void mul(Matrix a, Matrix b, Matrix out) override {
    select();
    cuda::mul(dm(a), dm(b), dm(out), stream_);
    check_launch("mul");
  }
  void swiglu(Matrix gate, Matrix up, Matrix out) override {
    select();
    cuda::swiglu(dm(gate), dm(up), dm(out), stream_);
    check_launch("swiglu");
  }
  void swiglu_clamped(Matrix gate, Matrix up, float alpha, float limit, Matrix out) override {
    select();
    cuda::swiglu_clamped(dm(gate), dm(up), alpha, limit, dm(out), stream_);
    check_launch("swiglu_clamped");
  }
  void scale(Matrix x, float s, Matrix out) override {
    select();
    cuda::scale(dm(x), s, dm(out), stream_);
    check_launch("scale");
  }
  void geglu(Matrix gate, Matrix up, Matrix out) override {
    select();
    cuda::geglu(dm(gate), dm(up), dm(out), stream_);
    check_launch("geglu");
  }
  void softcap(Matrix x, float cap, Matrix out) override {
    select();
    cuda::softcap(dm(x), cap, dm(out), stream_);
    check_launch("softcap");
  }
  void scale_by_position(Matrix x, IndexMatrix positions, float beta, int32_t length,
                         int32_t offset, Matrix out) override {
    assert(positions.rows == x.rows && length >= 1);
    select();
    cuda::scale_by_position(dm(x), di(positions), beta, length, offset, dm(out), stream_);
    check_launch("scale_by_position");
  }
  void add_expert_bias(Matrix y, const Weight& bias, IndexMatrix expert_ids) override {
    assert(bias.cols() == y.cols && bias.matrices() == 1);
    assert(y.rows == expert_ids.rows * expert_ids.cols);
    select();
    cuda::add_expert_bias(dm(y), cw(bias).dev, di(expert_ids), stream_);
    check_launch("add_expert_bias");
  }
  void sigmoid(Matrix x, Matrix out) override {
    assert(x.rows == out.rows && x.cols == out.cols);
    select();
    cuda::sigmoid(dm(x), dm(out), stream_);
    check_launch("sigmoid");
  }
  void rope(Matrix x, int32_t n_heads, int32_t head_dim, IndexMatrix positions,
            const RopeParams& params) override {
    assert(n_heads >= 1 && x.cols >= static_cast<int64_t>(n_heads - 1) * head_dim + params.n_dims);
    assert(positions.rows == x.rows);
    assert(params.n_dims > 0 && params.n_dims % 2 == 0 && params.n_dims <= head_dim);
    const float* factors = nullptr;
    if (params.freq_factors) {
      assert(params.freq_factors->cols() == params.n_dims / 2);
      factors = cw(*params.freq_factors).vector_f32();
    }
    select();
    const RopeFrequency freq = make_rope_frequency(params.n_dims, params.freq_base,
                                                   params.freq_scale, params.ext_factor,
                                                   params.beta_fast, params.beta_slow,
                                                   params.orig_ctx);
    cuda::rope(dm(x), n_heads, head_dim, di(positions), freq, params.layout == RopeLayout::NeoX,
               params.attn_factor, factors, stream_);
    check_launch("rope");
  }
  void kv_write(const KvLayer& kv, Matrix k, Matrix v, IndexMatrix slots) override {
    assert(supports_kv_type(kv.type));
    check_q8_dims(kv);
    assert(k.cols == static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim_k);
    assert(v.cols == static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim_v);
    assert(k.rows == v.rows && slots.rows == k.rows);
    select();
    cuda::kv_write(dkv(kv), dm(k), dm(v), di(slots), stream_);
    check_launch("kv_write");
  }
  void attention(Matrix q, const KvLayer& kv, const AttentionBatch& batch, int32_t n_heads,
                 const AttentionParams& params, Matrix out) override {
    assert(supports_kv_type(kv.type));
    check_q8_dims(kv);
    assert(kv.n_kv_heads > 0 && n_heads % kv.n_kv_heads == 0);
    if (kv.head_dim_k > cuda::kMaxAttentionHeadDim || kv.head_dim_v > cuda::kMaxAttentionHeadDim) {
      spdlog::critical("cuda backend: attention supports head sizes up to {} (this model: {} / {})",
                       cuda::kMaxAttentionHeadDim, kv.head_dim_k, kv.head_dim_v);
      std::abort();
    }
    assert(q.cols == static_cast<int64_t>(n_heads) * kv.head_dim_k);
    assert(out.cols == static_cast<int64_t>(n_heads) * kv.head_dim_v && out.rows == q.rows);
    const float* sinks = nullptr;
    if (params.sinks) {
      assert(params.sinks->cols() == n_heads && cw(*params.sinks).is_vector());
      sinks = cw(*params.sinks).vector_f32();
    }
    select();
    cuda::attention(dm(q), dkv(kv), di(batch.positions), di(batch.seq_index),
                    di(batch.block_tables), n_heads, params.scale, sinks, params.window,
                    params.chunk, dm(out), stream_);
    check_launch("attention");
  }
  void route_experts(Matrix router_logits, const RoutingParams& params, IndexMatrix expert_ids,
                     Matrix expert_weights) override {
    assert(expert_ids.rows == router_logits.rows && expert_weights.rows == router_logits.rows);
    assert(expert_weights.cols == expert_ids.cols && expert_ids.cols >= 1 &&
           expert_ids.cols <= router_logits.cols);
    assert(params.n_groups >= 1 && router_logits.cols % params.n_groups == 0);
    RouteRule rule{.sigmoid = params.gating == ExpertGating::Sigmoid,
                   .softmax_top_k = params.gating == ExpertGating::SoftmaxTopK,
                   .bias = nullptr,
                   .n_groups = params.n_groups,
                   .n_groups_used = params.n_groups_used,
                   .normalize_top_k = params.normalize_top_k,
                   .scale = params.scale};
    if (params.selection_bias) {
      assert(params.selection_bias->cols() == router_logits.cols);
      rule.bias = cw(*params.selection_bias).vector_f32();
    }
    select();
    cuda::route_experts(dm(router_logits), rule, di(expert_ids), dm(expert_weights), stream_);
    check_launch("route_experts");
  }
  void weighted_sum_slots(Matrix slot_rows, Matrix weights, Matrix out) override {
    assert(slot_rows.rows == out.rows * weights.cols && slot_rows.cols == out.cols);
    select();
    cuda::weighted_sum_slots(dm(slot_rows), dm(weights), dm(out), stream_);
    check_launch("weighted_sum_slots");
  }

 private:
  static void check_q8_dims(const KvLayer& kv) {
    if (kv.type == DType::Q8_0 && (kv.head_dim_k % 32 != 0 || kv.head_dim_v % 32 != 0)) {
      spdlog::critical("cuda backend: a Q8_0 KV cache needs head sizes that are multiples of 32 "
                       "(this model: {} / {})", kv.head_dim_k, kv.head_dim_v);
      std::abort();
    }
  }

  void select() const {
    if (info_.ordinal != 0) cudaSetDevice(info_.ordinal);
  }

  // Grows a scratch allocation; device memory exhaustion here is fatal (no error channel).
  void* scratch(DevicePtr& p, size_t& capacity, size_t bytes, std::string_view what) {
    if (capacity < bytes) {
      check(cudaStreamSynchronize(stream_), "scratch resize");
      p.reset();
      Result<DevicePtr> mem = cuda::device_alloc(bytes, what);
      if (!mem) {
        spdlog::critical("{}", mem.error());
        std::abort();
      }
      p = std::move(*mem);
      capacity = bytes;
    }
    return p.get();
  }

  // y = x w^T through cuBLAS (column-major view: C[m x n] = W^T[m x k] * X[k x n]).
  void cublas_matmul(const CudaWeight& w, Matrix x, Matrix y) {
    const int m = static_cast<int>(w.rows()), k = static_cast<int>(w.cols()),
              n = static_cast<int>(x.rows);
    const float alpha = 1.0f, beta = 0.0f;
    const cuda::DevWeight& d = w.dev;
    if (d.type == cuda::WType::F32) {
      const cublasStatus_t st =
          blas_.sgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha,
                      static_cast<const float*>(d.data), k, x.data, static_cast<int>(x.stride), &beta,
                      y.data, static_cast<int>(y.stride));
      check_cublas(st, "cublasSgemm");
      return;
    }
    const bool f16 = d.type == cuda::WType::F16;
    const cudaDataType_t type = f16 ? CUDA_R_16F : CUDA_R_16BF;
    void* xh = scratch(x_half_, x_half_bytes_, static_cast<size_t>(n) * static_cast<size_t>(k) * 2,
                       "cuBLAS activations");
    cuda::convert_activations(dm(x), xh, f16, stream_);
    if (d.type == cuda::WType::F16 || d.type == cuda::WType::BF16) {
      gemm_ex(d.data, type, m, n, k, xh, y.data, y.stride);
      return;
    }
    // Quantized: decode tiles of rows to bf16, one GEMM per tile.
    const int64_t tile_rows = std::max<int64_t>(
        1, std::min<int64_t>(m, static_cast<int64_t>(kTileBytes / (static_cast<size_t>(k) * 2))));
    void* tile = scratch(w_tile_, w_tile_bytes_, static_cast<size_t>(tile_rows) * static_cast<size_t>(k) * 2,
                         "cuBLAS weight tile");
    for (int64_t r0 = 0; r0 < m; r0 += tile_rows) {
      const int64_t rows = std::min<int64_t>(tile_rows, m - r0);
      cuda::dequantize_rows(d, 0, r0, rows, tile, /*to_f16=*/false, stream_);
      gemm_ex(tile, CUDA_R_16BF, static_cast<int>(rows), n, k, xh, y.data + r0, y.stride);
    }
  }

  void gemm_ex(const void* w, cudaDataType_t type, int m, int n, int k, const void* xh, float* y,
               int64_t ldy) {
    const float alpha = 1.0f, beta = 0.0f;
    const cublasStatus_t st =
        blas_.gemm_ex(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w, type, k, xh, type, k,
                      &beta, y, CUDA_R_32F, static_cast<int>(ldy), CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT);
    check_cublas(st, "cublasGemmEx");
  }

  void check_cublas(cublasStatus_t st, std::string_view what) const {
    if (st != CUBLAS_STATUS_SUCCESS) {
      spdlog::critical("cuda backend: {} failed: {}", what, blas_.status_string(st));
      std::abort();
    }
  }

  CudaDeviceInfo info_;
  cudaStream_t stream_;
  const cuda::CublasApi& blas_;  // process-wide (cublas_api())
  cublasHandle_t cublas_;
  bool use_cublas_;
  DevicePtr x_half_, w_tile_;
  size_t x_half_bytes_ = 0, w_tile_bytes_ = 0;
};

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions& options) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return make_error("no CUDA device ({})", cuda::cuda_error_text("cudaGetDeviceCount", err));
  }
  if (count == 0) return make_error("no CUDA device (the driver reports none)");
  if (options.device < 0 || options.device >= count) {
    return make_error("CUDA device {} does not exist (this machine has {}: 0..{})", options.device,
                      count, count - 1);
  }
  if (cudaError_t e = cudaSetDevice(options.device); e != cudaSuccess) {
    return make_error("CUDA device {}: {}", options.device, cuda::cuda_error_text("cudaSetDevice", e));
  }
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, options.device); e != cudaSuccess) {
    return make_error("CUDA device {}: {}", options.device,
                      cuda::cuda_error_text("cudaGetDeviceProperties", e));
  }
  CudaDeviceInfo info;
  info.name = prop.name;
  info.ordinal = options.device;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  if (cudaError_t e = cudaMemGetInfo(&info.free_bytes, &info.total_bytes); e != cudaSuccess) {
    return make_error("CUDA device {}: {}", options.device, cuda::cuda_error_text("cudaMemGetInfo", e));
  }
  // cuBLAS is opened now, on the first CUDA backend, never by a process that runs on the CPU.
  Result<const cuda::CublasApi*> blas = cuda::cublas_api();
  if (!blas) return make_error("CUDA device {}: {}", options.device, blas.error());
  cudaStream_t stream = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess) {
    return make_error("CUDA device {}: {}", options.device,
                      cuda::cuda_error_text("cudaStreamCreate", e));
  }
  cublasHandle_t cublas = nullptr;
  if (cublasStatus_t st = (*blas)->create(&cublas); st != CUBLAS_STATUS_SUCCESS) {
    cudaStreamDestroy(stream);
    return make_error("CUDA device {}: cublasCreate failed: {}", options.device,
                      (*blas)->status_string(st));
  }
  (*blas)->set_stream(cublas, stream);
  const bool use_cublas = env_cublas(options.cublas_gemm);
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  spdlog::info(
      "cuda backend: device {} '{}' (sm_{}{}, {} SMs), {:.1f} GiB total, {:.1f} GiB free; matmul: "
      "{}; KV cache types f32, f16, q8_0",
      info.ordinal, info.name, info.compute_major, info.compute_minor, info.multiprocessors,
      static_cast<double>(info.total_bytes) / kGiB, static_cast<double>(info.free_bytes) / kGiB,
      use_cublas ? "cuBLAS for more than 8 rows (not batch invariant), invariant GEMV below"
                 : "batch-invariant kernels (CADENZA_CUDA_GEMM=cublas for the cuBLAS prefill path)");
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(std::move(info), stream, **blas, cublas, use_cublas));
}

const CudaDeviceInfo* cuda_device_info(const Backend& backend) {
  if (backend.name() != "cuda") return nullptr;
  return &static_cast<const CudaBackend&>(backend).info();
}

}  // namespace cadenza::kernels
