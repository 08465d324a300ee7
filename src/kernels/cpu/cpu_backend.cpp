// The CPU backend: memory management and op dispatch to the kernels in cpu_kernels.h.
#include "kernels/cpu/cpu_backend.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#include <spdlog/spdlog.h>

#include "kernels/cpu/cpu_kernels.h"
#include "util/mapped_file.h"
#include "util/resident_memory.h"
#include "util/thread_pool.h"

namespace cadenza::kernels {

namespace {

using cpu::CpuWeight;

class CpuBuffer final : public Buffer {
 public:
  CpuBuffer(cpu::AlignedBytes bytes, size_t size_bytes)
      : Buffer(bytes.get(), size_bytes), bytes_(std::move(bytes)) {}

 private:
  cpu::AlignedBytes bytes_;
};

const CpuWeight& cpu_weight(const Weight& w) { return static_cast<const CpuWeight&>(w); }

const float* vector_values(const Weight& w) {
  const CpuWeight& cw = cpu_weight(w);
  assert(!cw.vector_f32.empty() && "expected a vector weight");
  return cw.vector_f32.data();
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options)
      : pool_(options.n_threads), release_repacked_pages_(options.release_repacked_pages) {
    cpu::log_matmul_path_once();
    int64_t budget = options.repack_budget_bytes;
    if (budget < 0) budget = static_cast<int64_t>(available_memory_bytes() / 2);
    repack_budget_.total = budget;
    repack_budget_.remaining.store(budget);
    if (options.repack_budget_bytes == 0) {
      spdlog::info("cpu backend: no repacked weight copies (--no-repack)");
    }
  }

  std::string_view name() const override { return "cpu"; }
  ThreadPool* host_pool() override { return &pool_; }

  Result<std::unique_ptr<Weight>> upload_weight(const WeightDesc& desc) override {
    const std::optional<DTypeTraits> traits = dtype_traits(static_cast<uint32_t>(desc.type));
    if (!traits || !traits->compute_supported) {
      return make_error("tensor '{}': type {} is not supported by the cpu backend", desc.name,
                        traits ? traits->name : "unknown");
    }
    if (desc.cols <= 0 || desc.rows <= 0 || desc.matrices <= 0) {
      return make_error("tensor '{}': empty shape", desc.name);
    }
    const std::optional<uint64_t> row_bytes = cadenza::row_bytes(desc.type, desc.cols);
    if (!row_bytes) {
      return make_error("tensor '{}': row of {} elements does not fit type {}", desc.name,
                        desc.cols, traits->name);
    }
    const uint64_t n_rows = static_cast<uint64_t>(desc.rows) * static_cast<uint64_t>(desc.matrices);
    if (n_rows > std::numeric_limits<uint64_t>::max() / *row_bytes) {
      return make_error("tensor '{}': size overflows", desc.name);
    }
    const uint64_t total_bytes = *row_bytes * n_rows;

    auto w = std::make_unique<CpuWeight>(desc);
    w->row_bytes = static_cast<size_t>(*row_bytes);
    w->repack_budget = &repack_budget_;
    const bool aligned = reinterpret_cast<uintptr_t>(desc.data) % 16 == 0;
    if (desc.keep_alive && aligned) {
      w->data = static_cast<const uint8_t*>(desc.data);
      w->keep_alive = desc.keep_alive;
      w->release_after_repack = desc.file_mapped && release_repacked_pages_;
      if (w->release_after_repack) w->source = MappedFile::source_of(desc.data);
    } else {
      w->owned = cpu::aligned_zeroed(static_cast<size_t>(total_bytes));
      if (!w->owned) return make_error("tensor '{}': out of memory ({} bytes)", desc.name, total_bytes);
      std::memcpy(w->owned.get(), desc.data, static_cast<size_t>(total_bytes));
      w->data = w->owned.get();
    }
    if (desc.rows == 1 && desc.matrices == 1) {
      w->vector_f32.resize(static_cast<size_t>(desc.cols));
      cpu::decode_row(desc.type, w->data, w->vector_f32.data(), desc.cols);
    }
    return std::unique_ptr<Weight>(std::move(w));
  }

  Result<std::unique_ptr<Buffer>> allocate(size_t size_bytes) override {
    cpu::AlignedBytes bytes = cpu::aligned_zeroed(size_bytes);
    if (!bytes) return make_error("cpu backend: out of memory allocating {} bytes", size_bytes);
    return std::unique_ptr<Buffer>(std::make_unique<CpuBuffer>(std::move(bytes), size_bytes));
  }

  void write(Buffer& dst, size_t offset_bytes, const void* src, size_t size_bytes) override {
    assert(offset_bytes <= dst.size_bytes() && size_bytes <= dst.size_bytes() - offset_bytes);
    if (size_bytes) std::memcpy(static_cast<uint8_t*>(dst.data()) + offset_bytes, src, size_bytes);
  }

  bool host_memory() const override { return true; }
  void read_view(Matrix src, float* dst) override {
    assert(src.contiguous());
    std::memcpy(dst, src.data, static_cast<size_t>(src.rows * src.cols) * sizeof(float));
  }
  void write_view(const float* src, Matrix dst) override {
    assert(dst.contiguous());
    std::memcpy(dst.data, src, static_cast<size_t>(dst.rows * dst.cols) * sizeof(float));
  }

  void read(const Buffer& src, size_t offset_bytes, void* dst, size_t size_bytes) override {
    assert(offset_bytes <= src.size_bytes() && size_bytes <= src.size_bytes() - offset_bytes);
    if (size_bytes) {
      std::memcpy(dst, static_cast<const uint8_t*>(src.data()) + offset_bytes, size_bytes);
    }
  }

  void copy(Buffer& dst, size_t dst_offset_bytes, const Buffer& src, size_t src_offset_bytes,
            size_t size_bytes) override {
    assert(dst_offset_bytes <= dst.size_bytes() && size_bytes <= dst.size_bytes() - dst_offset_bytes);
    assert(src_offset_bytes <= src.size_bytes() && size_bytes <= src.size_bytes() - src_offset_bytes);
    if (size_bytes) {
      std::memcpy(static_cast<uint8_t*>(dst.data()) + dst_offset_bytes,
                  static_cast<const uint8_t*>(src.data()) + src_offset_bytes, size_bytes);
    }
  }

  bool supports_kv_type(DType type) const override { return cpu::kv_type_supported(type); }
  bool supports_latent_kv(int32_t head_dim_k, int32_t head_dim_v) const override {
    return head_dim_v >= 1 && head_dim_v <= head_dim_k;
  }

  void get_rows(const Weight& table, IndexMatrix ids, Matrix out) override {
    cpu::get_rows(pool_, cpu_weight(table), ids, out);
  }
  void gather_rows(Matrix src, IndexMatrix rows, Matrix out) override {
    cpu::gather_rows(pool_, src, rows, out);
  }
  void copy_matrix(Matrix src, Matrix out) override { cpu::copy_matrix(pool_, src, out); }
  void matmul(const Weight& w, Matrix x, Matrix y) override {
    cpu::matmul(pool_, cpu_weight(w), x, y);
  }
  void matmul_experts(const Weight& w, Matrix x, IndexMatrix expert_ids, Matrix y) override {
    cpu::matmul_experts(pool_, cpu_weight(w), x, expert_ids, y);
  }
  void add_bias(Matrix x, const Weight& bias, Matrix out) override {
    assert(bias.cols() == x.cols);
    cpu::add_bias(pool_, x, vector_values(bias), out);
  }
  void rms_norm(Matrix x, const Weight& weight, float eps, Matrix out) override {
    assert(weight.cols() == x.cols);
    cpu::rms_norm(pool_, x, vector_values(weight), eps, out);
  }
  void add(Matrix a, Matrix b, Matrix out) override { cpu::add(pool_, a, b, out); }
  void mul(Matrix a, Matrix b, Matrix out) override { cpu::mul(pool_, a, b, out); }
  void swiglu(Matrix gate, Matrix up, Matrix out) override { cpu::swiglu(pool_, gate, up, out); }
  void sigmoid(Matrix x, Matrix out) override { cpu::sigmoid(pool_, x, out); }
  void swiglu_clamped(Matrix gate, Matrix up, float alpha, float limit, Matrix out) override {
    cpu::swiglu_clamped(pool_, gate, up, alpha, limit, out);
  }
  void scale(Matrix x, float s, Matrix out) override { cpu::scale(pool_, x, s, out); }
  void geglu(Matrix gate, Matrix up, Matrix out) override { cpu::geglu(pool_, gate, up, out); }
  void softcap(Matrix x, float cap, Matrix out) override { cpu::softcap(pool_, x, cap, out); }
  void scale_by_position(Matrix x, IndexMatrix positions, float beta, int32_t length,
                         int32_t offset, Matrix out) override {
    assert(positions.rows == x.rows && length >= 1);
    cpu::scale_by_position(pool_, x, positions, beta, length, offset, out);
  }
  void add_expert_bias(Matrix y, const Weight& bias, IndexMatrix expert_ids) override {
    assert(bias.cols() == y.cols && bias.matrices() == 1);
    assert(y.rows == expert_ids.rows * expert_ids.cols);
    cpu::add_expert_bias(pool_, y, cpu_weight(bias), expert_ids);
  }
  void rope(Matrix x, int32_t n_heads, int32_t head_dim, IndexMatrix positions,
            const RopeParams& params) override {
    const float* factors = nullptr;
    if (params.freq_factors) {
      assert(params.freq_factors->cols() == params.n_dims / 2);
      factors = vector_values(*params.freq_factors);
    }
    cpu::rope(pool_, x, n_heads, head_dim, positions, params, factors);
  }
  void kv_write(const KvLayer& kv, Matrix k, Matrix v, IndexMatrix slots) override {
    cpu::kv_write(pool_, kv, k, v, slots);
  }
  void attention(Matrix q, const KvLayer& kv, const AttentionBatch& batch, int32_t n_heads,
                 const AttentionParams& params, Matrix out) override {
    const float* sinks = nullptr;
    if (params.sinks) {
      assert(params.sinks->cols() == n_heads);
      sinks = vector_values(*params.sinks);
    }
    cpu::attention(pool_, q, kv, batch, n_heads, params, sinks, out);
  }
  void route_experts(Matrix router_logits, const RoutingParams& params, IndexMatrix expert_ids,
                     Matrix expert_weights) override {
    const float* bias = nullptr;
    if (params.selection_bias) {
      assert(params.selection_bias->cols() == router_logits.cols);
      bias = vector_values(*params.selection_bias);
    }
    cpu::route_experts(pool_, router_logits, params, bias, expert_ids, expert_weights);
  }
  void weighted_sum_slots(Matrix slot_rows, Matrix weights, Matrix out) override {
    cpu::weighted_sum_slots(pool_, slot_rows, weights, out);
  }
  bool supports_recurrent() const override { return true; }
  bool supports_attention_spans() const override { return true; }
  void short_conv(Matrix x, const Weight& w, const Weight* bias, Matrix state,
                  const RecurrentBatch& batch, Matrix out) override {
    assert(!bias || bias->cols() == x.cols);
    cpu::short_conv(x, cpu_weight(w), bias ? vector_values(*bias) : nullptr, state, batch, out);
  }
  void ssm_scan(Matrix x, Matrix b, Matrix c, Matrix dt, Matrix state,
                const RecurrentBatch& batch, const SsmScanParams& params, Matrix out) override {
    assert(params.a && params.a->cols() == params.n_heads);
    assert(params.d && params.d->cols() == params.n_heads);
    assert(params.dt_bias && params.dt_bias->cols() == params.n_heads);
    cpu::ssm_scan(pool_, x, b, c, dt, state, batch, params, vector_values(*params.a),
                  vector_values(*params.d), vector_values(*params.dt_bias), out);
  }
  void gated_delta_rule(Matrix q, Matrix k, Matrix v, Matrix alpha, Matrix beta, Matrix state,
                        const RecurrentBatch& batch, const DeltaRuleParams& params,
                        Matrix out) override {
    assert(params.a && params.a->cols() == params.n_v_heads);
    assert(params.dt_bias && params.dt_bias->cols() == params.n_v_heads);
    cpu::gated_delta_rule(pool_, q, k, v, alpha, beta, state, batch, params,
                          vector_values(*params.a), vector_values(*params.dt_bias), out);
  }

 private:
  ThreadPool pool_;
  cpu::RepackBudget repack_budget_;
  bool release_repacked_pages_ = true;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace cadenza::kernels
