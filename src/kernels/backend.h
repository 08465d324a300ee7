// Backend: the seam between model code (src/model) and the code that computes (src/kernels/cpu,
// later SIMD and CUDA). Model code describes a forward pass as a sequence of ops on backend memory;
// a backend decides how weights are stored (as loaded, repacked, on a GPU) and how ops run.
//
// Rules of the seam:
//  - One virtual call per op; arguments are plain structs and pointers (no tensors with graphs).
//  - Every op argument lives in backend memory: weights are opaque Weight handles, activations and
//    index arrays are views (Matrix / IndexMatrix) into Buffers the backend allocated. The host
//    reaches backend memory only through write() and read(). Model code never dereferences a view.
//  - Ops run in call order. A backend may run them asynchronously; read() waits for the ops issued
//    before it.
//  - Batch invariance: every op computes each output row from its own input rows only, with a
//    reduction order that does not depend on the number of rows or on the thread count. So a
//    token's result does not depend on what else is in the batch, bit for bit.
//  - Inputs are trusted: the model validates token ids, positions and block tables on the host
//    before it uploads them. Ops assert only on shapes (programming errors).
//
// Units: lengths and indices are element counts unless a name ends in _bytes.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "tensor/dtype.h"
#include "util/result.h"

namespace cadenza {
class ThreadPool;
}

namespace cadenza::kernels {

// ---------------------------------------------------------------------------------------------
// Memory

// A block of backend memory (host RAM for the CPU backend, device memory for a GPU). Freed when
// destroyed. Must not outlive the backend that allocated it. Not thread-safe.
class Buffer {
 public:
  virtual ~Buffer() = default;
  void* data() const { return data_; }
  size_t size_bytes() const { return size_bytes_; }

 protected:
  Buffer(void* data, size_t size_bytes) : data_(data), size_bytes_(size_bytes) {}
  void* data_;
  size_t size_bytes_;
};

// A view of an f32 matrix in backend memory: element (r, c) is data[r * stride + c].
// Rows are tokens (or token x head, token x expert slot) and columns features, unless an op says
// otherwise. Views do not own memory.
struct Matrix {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t stride = 0;  // elements between the starts of consecutive rows, >= cols

  static Matrix of(void* data, int64_t rows, int64_t cols) {
    return {static_cast<float*>(data), rows, cols, cols};
  }
  bool contiguous() const { return stride == cols; }
  // Rows [begin, begin + count).
  Matrix row_range(int64_t begin, int64_t count) const {
    assert(begin >= 0 && count >= 0 && begin + count <= rows);
    return {data + begin * stride, count, cols, stride};
  }
  // The same elements seen as new_rows x new_cols (e.g. [tokens][heads*head_dim] as
  // [tokens*heads][head_dim]). The view must be contiguous.
  Matrix reshaped(int64_t new_rows, int64_t new_cols) const {
    assert(contiguous() && new_rows * new_cols == rows * cols);
    return {data, new_rows, new_cols, new_cols};
  }
};

// A contiguous view of an int32 matrix in backend memory: element (r, c) is data[r * cols + c].
// Used for token ids, positions, block tables, KV slots and expert ids.
struct IndexMatrix {
  int32_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  static IndexMatrix of(void* data, int64_t rows, int64_t cols) {
    return {static_cast<int32_t*>(data), rows, cols};
  }
};

// ---------------------------------------------------------------------------------------------
// Weights

// What the model hands to upload_weight(): a tensor as stored in the GGUF file.
// Shape in math order: `matrices` matrices of `rows` rows of `cols` elements (ggml order is
// [cols, rows, matrices]). A vector (norm weight, bias) has rows == matrices == 1.
struct WeightDesc {
  std::string name;  // for error messages ("blk.3.attn_q.weight")
  DType type = DType::F32;
  int64_t cols = 0;
  int64_t rows = 1;
  int64_t matrices = 1;
  const void* data = nullptr;  // host bytes: row_bytes(type, cols) * rows * matrices, any alignment
  // When set, `data` stays valid as long as this keep-alive is held: a backend may point into it
  // instead of copying (the CPU backend does so for memory-mapped files). When empty the backend
  // must copy before upload_weight returns.
  std::shared_ptr<const void> keep_alive;
  // `data` lies in a read-only mapping of a file (held by keep_alive) that nobody writes: a
  // backend that has made its own copy of the bytes (the CPU backend's repacked layout) may drop
  // this process's pages of them (MappedFile::release_pages); a later read of `data` pages them in
  // again from the file, with the same contents. False for any other memory, where dropping pages
  // would lose the data.
  bool file_mapped = false;
};

// A weight tensor held by a backend. Callers see its shape and type; the storage is the backend's
// (a subclass). Immutable after upload; safe to use from any thread. Must not outlive the backend.
class Weight {
 public:
  virtual ~Weight() = default;
  const std::string& name() const { return name_; }
  DType type() const { return type_; }
  int64_t cols() const { return cols_; }
  int64_t rows() const { return rows_; }
  int64_t matrices() const { return matrices_; }

 protected:
  explicit Weight(const WeightDesc& desc)
      : name_(desc.name), type_(desc.type), cols_(desc.cols), rows_(desc.rows),
        matrices_(desc.matrices) {}

 private:
  std::string name_;
  DType type_;
  int64_t cols_, rows_, matrices_;
};

// ---------------------------------------------------------------------------------------------
// Op parameters

enum class RopeLayout {
  Normal,  // rotates adjacent pairs (x[2i], x[2i+1]): llama
  NeoX,    // rotates halves (x[i], x[i + n_dims/2]): qwen2, qwen3, gpt-neox
};

// Rotary position embedding. For pair i (0 <= i < n_dims/2) of a head at position p the rotation
// angle is  theta = p * inv_freq[i]  with  f_i = freq_base^(-2i/n_dims) / freq_factors[i]
// (freq_factors[i] is 1 when absent) and
//   inv_freq[i] = freq_scale * f_i                                 without YaRN (ext_factor 0)
//   inv_freq[i] = freq_scale * f_i * (1 - m_i) + f_i * m_i         with YaRN (ext_factor > 0),
// where m_i = (1 - ramp_i) * ext_factor, ramp_i = clamp((i - low) / max(high - low, 0.001), 0, 1)
// and low / high are the pairs that turn beta_fast / beta_slow times in orig_ctx positions
// (floor / ceil of n_dims * ln(orig_ctx / (beta * 2 pi)) / (2 ln freq_base), clamped to
// [0, n_dims - 1]): the YaRN paper's "NTK-by-parts" blend, high frequencies kept, low ones
// interpolated. The rotated pair is multiplied by attn_factor (YaRN's attention scaling; 1 by
// default). Elements past n_dims of each head are left as they are. (kernels/rope_frequency.h
// computes inv_freq for both backends.)
struct RopeParams {
  int32_t n_dims = 0;         // rotated elements per head, even, <= head_dim
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;    // 1 / linear (or YaRN) scaling factor
  RopeLayout layout = RopeLayout::Normal;
  const Weight* freq_factors = nullptr;  // optional vector of n_dims/2 factors (Llama 3 scaling)
  float ext_factor = 0.0f;    // YaRN blend strength; 0: plain (linear) scaling
  float beta_fast = 32.0f;    // YaRN correction range, in rotations
  float beta_slow = 1.0f;
  int32_t orig_ctx = 0;       // YaRN: the context the model was trained at (> 0 with ext_factor)
  float attn_factor = 1.0f;   // multiplies the rotated elements (cos and sin)
};

// The paged KV store of one layer. Keys: [num_blocks][block_size][n_kv_heads][head_dim_k],
// values: [num_blocks][block_size][n_kv_heads][head_dim_v], both of `type`, in backend memory.
// A token's KV slot is block * block_size + offset; slot s of head h starts at element
// (s * n_kv_heads + h) * head_dim. The memory belongs to whoever allocated it (model::KvCache).
// values_in_keys (multi-head latent attention's compressed cache): there is no value store; the
// value of a head row is the first head_dim_v elements of its key row (head_dim_v <= head_dim_k;
// for Q8_0 a multiple of 32), `values` is null and kv_write ignores v.
struct KvLayer {
  void* keys = nullptr;
  void* values = nullptr;
  DType type = DType::F32;
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;
  bool values_in_keys = false;
};

// Which cache entries each token of a ragged batch attends to. Token t belongs to sequence
// seq_index[t] and sits at position positions[t]; it attends (causally) to positions
// 0 .. positions[t] of its sequence, whose slots are found through the sequence's block table:
// position p lives in block block_tables[seq][p / block_size] at offset p % block_size.
// All K/V of those positions must have been written (kv_write) before attention runs.
struct AttentionBatch {
  IndexMatrix positions;     // [n_tokens][1]
  IndexMatrix seq_index;     // [n_tokens][1]
  IndexMatrix block_tables;  // [n_seqs][max_blocks_per_seq]; entries past a sequence's end unused
  // [n_tokens][1] or empty (rows 0: causal). The last position each token attends to: its own
  // position, or a later one of its sequence (tokens of a span that attend to each other both
  // ways, such as one image's tokens in Gemma 3), whose K/V must be in the cache when attention
  // runs. Only where Backend::supports_attention_spans().
  IndexMatrix last_positions;
};

// The sequences of a batch as linear-attention (recurrent) layers see them. Token t belongs to
// the sequence whose recurrent state is row state_slots[t] of each state matrix; a token at
// position 0 starts its sequence afresh (the row is cleared before it). A sequence's tokens come
// in position order and continue the state (the caller's bookkeeping, as for the KV cache).
struct RecurrentBatch {
  IndexMatrix positions;    // [n_tokens][1]
  IndexMatrix state_slots;  // [n_tokens][1]
};

// The gated delta rule of a batch (Gated DeltaNet, qwen35's linear layers): n_v_heads value
// heads of dv, n_k_heads key heads of dk (value head h reads key head h % n_k_heads: the GGUF
// layout, measured against the reference engine; not the grouped h / (n_v_heads / n_k_heads)). Per token and value head: decay = exp(a[h] * softplus(alpha + dt_bias[h])),
// b = sigmoid(beta), q and k L2-normalised (x / sqrt(sum x^2 + l2_eps)), q times 1/sqrt(dk); then
// simd/recurrent.h's step on the head's state. a and dt_bias: vectors of n_v_heads.
struct DeltaRuleParams {
  int32_t n_k_heads = 0, n_v_heads = 0, dk = 0, dv = 0;
  const Weight* a = nullptr;
  const Weight* dt_bias = nullptr;
  float l2_eps = 1e-6f;
};

// The Mamba-2 state update of a batch (SSD; granitehybrid's Mamba-2 layers): n_heads heads of
// head_dim, B and C in n_groups groups of state_size (head h reads group
// h / (n_heads / n_groups), Mamba-2's grouping). Per token and head: dt = softplus(dt_raw +
// dt_bias[h]), decay = exp(dt * a[h]) (a negative: the file's -exp(A_log)), then
// simd/recurrent.h's ssm_scan_step on the head's state, and out += d[h] * x (the D skip).
// a, d and dt_bias: vectors of n_heads.
struct SsmScanParams {
  int32_t n_heads = 0, n_groups = 0, head_dim = 0, state_size = 0;
  const Weight* a = nullptr;
  const Weight* d = nullptr;
  const Weight* dt_bias = nullptr;
};

// How attention weighs the positions of AttentionBatch (beyond the query . key scores).
//  - scale: multiplies q . k (usually 1/sqrt(head_dim_k)).
//  - sinks (gpt-oss's attention sinks): a vector of n_heads learned logits (this call's heads);
//    head h's sink joins its softmax denominator only:
//      out = sum_p exp(s_p - m) V[p] / (sum_p exp(s_p - m) + exp(sink_h - m)),
//    m = max(max_p s_p, sink_h). Null: none (the plain softmax, bit for bit as before).
//  - window > 0 (sliding-window attention): a token at position p attends to positions
//    max(0, p - window + 1) .. p only (the last `window` positions, itself included); 0: all.
//  - chunk > 0 (chunked attention): positions p - p % chunk .. p only.
struct AttentionParams {
  float scale = 1.0f;
  const Weight* sinks = nullptr;
  int32_t window = 0;
  // chunk > 0 (Llama 4's chunked attention): a token at position p attends only within its chunk,
  // positions p - p % chunk .. p (and within the window when both are set).
  int32_t chunk = 0;
};

// Softmax: over all E router logits; Sigmoid: per expert; SoftmaxTopK: experts chosen by their
// raw logits, then a softmax over the k chosen logits only (gpt-oss).
enum class ExpertGating { Softmax, Sigmoid, SoftmaxTopK };

// Mixture-of-experts routing (kernels/moe_routing.h route_token is the rule, step by step):
// scores = gating(router logits) (SoftmaxTopK: the logits themselves); experts are chosen by
// scores + selection_bias (DeepSeek-V3's bias-corrected selection), optionally only from the
// n_groups_used best of n_groups equal expert groups (a group scored by its two best biased scores); the top-k (largest first; ties:
// lower expert id first) get their unbiased scores as weights (SoftmaxTopK: the softmax of their
// k logits), optionally renormalised to sum to 1 over the k chosen, then multiplied by `scale`.
struct RoutingParams {
  ExpertGating gating = ExpertGating::Softmax;
  bool normalize_top_k = true;
  float scale = 1.0f;
  const Weight* selection_bias = nullptr;  // vector of E floats, or null
  int32_t n_groups = 1;       // divides E
  int32_t n_groups_used = 1;  // <= n_groups; with n_groups: k <= n_groups_used * E / n_groups
};

// ---------------------------------------------------------------------------------------------
// The interface

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // --- memory (not thread-safe: call from the thread that runs ops) ---

  // Takes a weight tensor. Errors: unsupported type, out of memory.
  virtual Result<std::unique_ptr<Weight>> upload_weight(const WeightDesc& desc) = 0;
  // Allocates `size_bytes` of backend memory, zero-filled, aligned for any element type.
  virtual Result<std::unique_ptr<Buffer>> allocate(size_t size_bytes) = 0;
  // Copies between host memory and a buffer; offsets and sizes in bytes, inside the buffer.
  virtual void write(Buffer& dst, size_t offset_bytes, const void* src, size_t size_bytes) = 0;
  virtual void read(const Buffer& src, size_t offset_bytes, void* dst, size_t size_bytes) = 0;
  // Copies between (or within) buffers of this backend; the ranges must not overlap.
  virtual void copy(Buffer& dst, size_t dst_offset_bytes, const Buffer& src,
                    size_t src_offset_bytes, size_t size_bytes) = 0;
  // Whether views (Matrix::data) point into host memory that the host may read and write
  // directly once the ops before have run (the CPU backend); false for device memory. The
  // distributed forward pass hands such views to MPI in place and stages the others.
  virtual bool host_memory() const { return false; }
  // Copies a contiguous view to host memory (waiting for the ops issued before) / from host
  // memory into a contiguous view. For any backend; the distributed pass uses them for device
  // memory.
  virtual void read_view(Matrix src, float* dst) = 0;
  virtual void write_view(const float* src, Matrix dst) = 0;
  // Waits until the ops issued so far have run (a no-op for a synchronous backend), so that
  // something outside the backend (NCCL on its own stream) may read their outputs.
  virtual void synchronize() {}
  // The GPU this backend runs on, or -1 (the CPU backend).
  virtual int device_ordinal() const { return -1; }
  // The thread pool the backend computes on (the CPU backend), or null. Host work between
  // forward passes (the engine's per-request sampling) runs on it, so that it uses the cores the
  // model uses instead of competing with them; never while an op runs (one thread issues both).
  virtual ThreadPool* host_pool() { return nullptr; }
  // Whether kv_write / attention accept a KV store of this element type.
  virtual bool supports_kv_type(DType type) const = 0;
  // Whether short_conv, gated_delta_rule and ssm_scan run here (hybrid models' linear-attention
  // and Mamba-2 layers).
  virtual bool supports_recurrent() const { return false; }
  // Whether attention() takes AttentionBatch::last_positions (non-causal spans).
  virtual bool supports_attention_spans() const { return false; }
  // Whether kv_write / attention take a KvLayer with values_in_keys and these head sizes (the
  // compressed cache of multi-head latent attention).
  virtual bool supports_latent_kv(int32_t /*head_dim_k*/, int32_t /*head_dim_v*/) const {
    return false;
  }

  // --- ops. Shapes as [rows][cols]; n = number of tokens (rows). Outputs must not overlap inputs
  // unless an op says it may. ---

  // out[t] = table row ids[t] (dequantized). table: [vocab][d]; ids: [n][1]; out: [n][d].
  virtual void get_rows(const Weight& table, IndexMatrix ids, Matrix out) = 0;
  // out[i] = src[rows[i]]. rows: [n][1]; out: [n][src.cols].
  virtual void gather_rows(Matrix src, IndexMatrix rows, Matrix out) = 0;
  // out = src, element by element, for views of equal shape and any strides (a column block of
  // one matrix into a column block of another). They must not overlap.
  virtual void copy_matrix(Matrix src, Matrix out) = 0;

  // y = x * w^T: y[t][j] = sum_i x[t][i] * w[j][i]. w: [m][k] (one matrix); x: [n][k]; y: [n][m].
  virtual void matmul(const Weight& w, Matrix x, Matrix y) = 0;
  // Per-token expert matmul (mixture of experts). w: [E][m][k]; expert_ids: [n][K] (values in
  // [0, E), or -1); y: [n*K][m], row t*K + s = w[expert_ids[t][s]] * x_row, or zeros where the
  // id is -1 (under expert parallelism, an expert that another rank holds). x is either [n][k]
  // (row t shared by the token's K slots) or [n*K][k] (one row per slot).
  virtual void matmul_experts(const Weight& w, Matrix x, IndexMatrix expert_ids, Matrix y) = 0;
  // out[t] = x[t] + bias. bias: vector of x.cols. out may alias x.
  virtual void add_bias(Matrix x, const Weight& bias, Matrix out) = 0;
  // The bias of each (token, slot)'s expert, in place: y[t*K + s] += bias[expert_ids[t][s]];
  // rows whose id is -1 (another rank's expert) are left as they are. bias: [E][m] (one matrix
  // of E rows, any weight type); expert_ids: [n][K]; y: [n*K][m].
  virtual void add_expert_bias(Matrix y, const Weight& bias, IndexMatrix expert_ids) = 0;

  // out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight. weight: vector of x.cols. out may alias x.
  virtual void rms_norm(Matrix x, const Weight& weight, float eps, Matrix out) = 0;
  // Elementwise on equal shapes; out may alias a or b.
  virtual void add(Matrix a, Matrix b, Matrix out) = 0;
  virtual void mul(Matrix a, Matrix b, Matrix out) = 0;
  // out = silu(gate) * up, silu(x) = x / (1 + exp(-x)). out may alias gate or up.
  virtual void swiglu(Matrix gate, Matrix up, Matrix out) = 0;
  // out = sigmoid(x) = 1 / (1 + exp(-x)), elementwise. out may alias x.
  virtual void sigmoid(Matrix x, Matrix out) = 0;
  // gpt-oss's clamped SwiGLU, elementwise: g = min(gate, limit), u = clamp(up, -limit, limit),
  // out = (u + 1) * g * sigmoid(alpha * g). out may alias gate or up.
  virtual void swiglu_clamped(Matrix gate, Matrix up, float alpha, float limit, Matrix out) = 0;
  // out = s * x, elementwise (embedding, residual and logit multipliers). out may alias x.
  virtual void scale(Matrix x, float s, Matrix out) = 0;
  // GeGLU with the tanh approximation of GELU (Gemma), elementwise: out = gelu(gate) * up,
  // gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). out may alias gate or up.
  virtual void geglu(Matrix gate, Matrix up, Matrix out) = 0;
  // Soft-capping, elementwise: out = cap * tanh(x / cap), cap > 0. out may alias x.
  virtual void softcap(Matrix x, float cap, Matrix out) = 0;
  // Position-dependent scaling of each row (the attention temperature of Ministral 3 / Llama 4):
  // out[t] = x[t] * (1 + beta * ln(1 + floor((positions[t] + offset) / length))), length >= 1
  // (offset: Ministral 3 0, Llama 4 1). positions: [n][1]. out may alias x.
  virtual void scale_by_position(Matrix x, IndexMatrix positions, float beta, int32_t length,
                                 int32_t offset, Matrix out) = 0;

  // Rotates, in place, the first params.n_dims elements of each head of x at the positions of
  // its row. Head h of a row starts at element h * head_dim; x.cols >= (n_heads - 1) * head_dim
  // + n_dims, so a view that starts inside the first head rotates a later part of every head
  // (MLA's RoPE part after the no-RoPE part). positions: [n][1].
  virtual void rope(Matrix x, int32_t n_heads, int32_t head_dim, IndexMatrix positions,
                    const RopeParams& params) = 0;

  // Stores the K and V of n new tokens into their slots. k: [n][n_kv_heads*head_dim_k];
  // v: [n][n_kv_heads*head_dim_v] (ignored, may be empty, when kv.values_in_keys); slots: [n][1],
  // each in [0, num_blocks*block_size), distinct.
  virtual void kv_write(const KvLayer& kv, Matrix k, Matrix v, IndexMatrix slots) = 0;
  // Paged causal attention with grouped-query heads: query head h uses KV head
  // h / (n_heads / n_kv_heads). out[t][h] = sum_p softmax_p(scale * q[t][h] . K[p]) * V[p] over
  // the positions p of AttentionBatch (up to the token's own, or its last_positions entry;
  // within params.window; with params.sinks in the denominator: AttentionParams). q: [n][n_heads*head_dim_k]; out: [n][n_heads*head_dim_v].
  virtual void attention(Matrix q, const KvLayer& kv, const AttentionBatch& batch, int32_t n_heads,
                         const AttentionParams& params, Matrix out) = 0;

  // Short causal depthwise convolution with SiLU (simd/recurrent.h short_conv_step) per token in
  // batch order. x: [n][C]; w: [C][K] (F32); bias: a vector of C (F32) added before the SiLU, or
  // null; state: [num_slots][(K-1)*C], each slot's previous K-1 inputs (oldest first), updated;
  // out: [n][C]. A token's result depends on its own sequence only.
  // Only on a backend whose supports_recurrent() is true (the model refuses a hybrid model on
  // another at load); elsewhere the default aborts (a programming error).
  virtual void short_conv(Matrix x, const Weight& w, const Weight* bias, Matrix state,
                          const RecurrentBatch& batch, Matrix out);
  // The gated delta rule (DeltaRuleParams) per token in batch order. q, k: [n][n_k_heads*dk];
  // v: [n][n_v_heads*dv]; alpha, beta: [n][n_v_heads]; state: [num_slots][n_v_heads*dk*dv]
  // (head h's [dk][dv] block at h*dk*dv), updated; out: [n][n_v_heads*dv]. q, k, v may be
  // column views of one matrix.
  virtual void gated_delta_rule(Matrix q, Matrix k, Matrix v, Matrix alpha, Matrix beta,
                                Matrix state, const RecurrentBatch& batch,
                                const DeltaRuleParams& params, Matrix out);
  // The Mamba-2 state update (SsmScanParams) per token in batch order. x: [n][n_heads*head_dim];
  // b, c: [n][n_groups*state_size]; dt: [n][n_heads] (before the bias and softplus); state:
  // [num_slots][n_heads*state_size*head_dim] (head h's [state_size][head_dim] block at
  // h*state_size*head_dim), updated; out: [n][n_heads*head_dim]. x, b, c (and dt) may be column
  // views of one matrix.
  virtual void ssm_scan(Matrix x, Matrix b, Matrix c, Matrix dt, Matrix state,
                        const RecurrentBatch& batch, const SsmScanParams& params, Matrix out);

  // Mixture-of-experts routing (see RoutingParams). router_logits: [n][E]; expert_ids: [n][K];
  // expert_weights: [n][K].
  virtual void route_experts(Matrix router_logits, const RoutingParams& params,
                             IndexMatrix expert_ids, Matrix expert_weights) = 0;
  // out[t] = sum_s weights[t][s] * slot_rows[t*K + s], summed in slot order s = 0..K-1.
  // slot_rows: [n*K][d]; weights: [n][K]; out: [n][d].
  virtual void weighted_sum_slots(Matrix slot_rows, Matrix weights, Matrix out) = 0;
};

inline void Backend::short_conv(Matrix, const Weight&, const Weight*, Matrix,
                                const RecurrentBatch&, Matrix) {
  assert(false && "short_conv on a backend without supports_recurrent()");
  std::abort();
}
inline void Backend::gated_delta_rule(Matrix, Matrix, Matrix, Matrix, Matrix, Matrix,
                                      const RecurrentBatch&, const DeltaRuleParams&, Matrix) {
  assert(false && "gated_delta_rule on a backend without supports_recurrent()");
  std::abort();
}
inline void Backend::ssm_scan(Matrix, Matrix, Matrix, Matrix, Matrix, const RecurrentBatch&,
                              const SsmScanParams&, Matrix) {
  assert(false && "ssm_scan on a backend without supports_recurrent()");
  std::abort();
}

}  // namespace cadenza::kernels
