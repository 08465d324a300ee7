// Model loading (tensor validation and upload) and the architecture-independent half of the
// forward pass: batch validation, upload of the batch, dispatch, logits read-back.
#include "model/model.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <set>

#include <spdlog/spdlog.h>

#include "gguf/gguf.h"
#include "model/forward.h"

namespace cadenza::model {

namespace {

// Looks tensors up by name, checks their shape and type, and uploads them.
class WeightLoader {
 public:
  WeightLoader(std::shared_ptr<const gguf::GgufFile> file, kernels::Backend& backend)
      : file_(std::move(file)), backend_(backend) {}

  // `shape` in ggml order ([cols, rows, matrices]); trailing 1s are ignored on both sides.
  Result<std::unique_ptr<kernels::Weight>> require(const std::string& name,
                                                   std::vector<int64_t> shape) {
    const gguf::TensorInfo* t = file_->find_tensor(name);
    if (!t) return make_error("{}: tensor '{}' is missing", file_->name(), name);
    return upload(*t, std::move(shape));
  }
  // Null when absent; an error when present but malformed.
  Result<std::unique_ptr<kernels::Weight>> optional(const std::string& name,
                                                    std::vector<int64_t> shape) {
    const gguf::TensorInfo* t = file_->find_tensor(name);
    if (!t) return std::unique_ptr<kernels::Weight>();
    return upload(*t, std::move(shape));
  }

  // Uploads values computed on the host (copied by the backend).
  Result<std::unique_ptr<kernels::Weight>> from_host(const std::string& name,
                                                     const std::vector<float>& values) {
    kernels::WeightDesc desc;
    desc.name = name;
    desc.type = DType::F32;
    desc.cols = static_cast<int64_t>(values.size());
    desc.data = values.data();
    return backend_.upload_weight(desc);
  }

  // Names of tensors in the file that nothing loaded.
  std::vector<std::string> unused() const {
    std::vector<std::string> names;
    for (const gguf::TensorInfo& t : file_->tensors()) {
      if (!used_.count(t.name)) names.push_back(t.name);
    }
    return names;
  }

 private:
  static std::string shape_string(const std::vector<int64_t>& shape) {
    return fmt::format("[{}]", fmt::join(shape, ", "));
  }
  static std::vector<int64_t> trimmed(std::vector<int64_t> shape) {
    while (shape.size() > 1 && shape.back() == 1) shape.pop_back();
    return shape;
  }

  Result<std::unique_ptr<kernels::Weight>> upload(const gguf::TensorInfo& t,
                                                  std::vector<int64_t> shape) {
    used_.insert(t.name);
    const std::vector<int64_t> expected = trimmed(std::move(shape));
    const std::vector<int64_t> actual = trimmed(t.shape);
    if (expected != actual) {
      return make_error("{}: tensor '{}' has shape {}, expected {}", file_->name(), t.name,
                        shape_string(t.shape), shape_string(expected));
    }
    const std::optional<DTypeTraits> traits = dtype_traits(static_cast<uint32_t>(t.type));
    if (!traits || !traits->compute_supported) {
      return make_error("{}: tensor '{}' has type {}, which is not supported", file_->name(),
                        t.name, traits ? traits->name : "unknown");
    }
    const std::optional<uint64_t> row = row_bytes(t.type, actual[0]);
    const int64_t rows = actual.size() > 1 ? actual[1] : 1;
    const int64_t matrices = actual.size() > 2 ? actual[2] : 1;
    if (!row || *row * static_cast<uint64_t>(rows) * static_cast<uint64_t>(matrices) != t.nbytes ||
        t.data == nullptr) {
      return make_error("{}: tensor '{}' of type {} has {} bytes of data, which does not match its "
                        "shape {}", file_->name(), t.name, traits->name, t.nbytes,
                        shape_string(t.shape));
    }
    kernels::WeightDesc desc;
    desc.name = t.name;
    desc.type = t.type;
    desc.cols = actual[0];
    desc.rows = rows;
    desc.matrices = matrices;
    desc.data = t.data;
    desc.keep_alive = file_;
    Result<std::unique_ptr<kernels::Weight>> w = backend_.upload_weight(desc);
    if (!w) return make_error("{}: {}", file_->name(), w.error());
    return w;
  }

  std::shared_ptr<const gguf::GgufFile> file_;
  kernels::Backend& backend_;
  std::set<std::string> used_;
};

#define CADENZA_LOAD(dst, expr)                         \
  do {                                                  \
    auto load_result_ = (expr);                         \
    if (!load_result_) return load_result_.error_value(); \
    dst = std::move(*load_result_);                     \
  } while (0)

Status load_weights(const ModelConfig& c, WeightLoader& loader, ModelWeights& w) {
  const int64_t d = c.n_embd;
  CADENZA_LOAD(w.token_embd, loader.require("token_embd.weight", {d, c.n_vocab}));
  CADENZA_LOAD(w.output_norm, loader.require("output_norm.weight", {d}));
  CADENZA_LOAD(w.output, loader.optional("output.weight", {d, c.n_vocab}));
  if (c.has_rope_freqs_tensor) {
    CADENZA_LOAD(w.rope_freqs, loader.require("rope_freqs.weight", {c.rope_dims / 2}));
  } else if (!c.rope_freq_factors.empty()) {
    CADENZA_LOAD(w.rope_freqs, loader.from_host("rope_freqs (from rope.scaling.* keys)",
                                                c.rope_freq_factors));
  }
  const int64_t q_cols = c.n_heads * c.head_dim_k;
  const int64_t k_cols = c.n_kv_heads * c.head_dim_k;
  const int64_t v_cols = c.n_kv_heads * c.head_dim_v;
  const int64_t attn_cols = c.n_heads * c.head_dim_v;
  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int64_t i = 0; i < c.n_layers; ++i) {
    LayerWeights& L = w.layers[static_cast<size_t>(i)];
    auto name = [i](const char* suffix) { return fmt::format("blk.{}.{}", i, suffix); };
    CADENZA_LOAD(L.attn_norm, loader.require(name("attn_norm.weight"), {d}));
    CADENZA_LOAD(L.wq, loader.require(name("attn_q.weight"), {d, q_cols}));
    CADENZA_LOAD(L.wk, loader.require(name("attn_k.weight"), {d, k_cols}));
    CADENZA_LOAD(L.wv, loader.require(name("attn_v.weight"), {d, v_cols}));
    CADENZA_LOAD(L.wo, loader.require(name("attn_output.weight"), {attn_cols, d}));
    if (c.qkv_bias) {
      CADENZA_LOAD(L.bq, loader.require(name("attn_q.bias"), {q_cols}));
      CADENZA_LOAD(L.bk, loader.require(name("attn_k.bias"), {k_cols}));
      CADENZA_LOAD(L.bv, loader.require(name("attn_v.bias"), {v_cols}));
    }
    if (c.arch == Architecture::Llama) {
      CADENZA_LOAD(L.bo, loader.optional(name("attn_output.bias"), {d}));
    }
    if (c.qk_norm) {
      CADENZA_LOAD(L.q_norm, loader.require(name("attn_q_norm.weight"), {c.head_dim_k}));
      CADENZA_LOAD(L.k_norm, loader.require(name("attn_k_norm.weight"), {c.head_dim_k}));
    }
    CADENZA_LOAD(L.ffn_norm, loader.require(name("ffn_norm.weight"), {d}));
    if (c.n_experts == 0) {
      CADENZA_LOAD(L.ffn_gate, loader.require(name("ffn_gate.weight"), {d, c.n_ff}));
      CADENZA_LOAD(L.ffn_up, loader.require(name("ffn_up.weight"), {d, c.n_ff}));
      CADENZA_LOAD(L.ffn_down, loader.require(name("ffn_down.weight"), {c.n_ff, d}));
    } else {
      const int64_t f = c.n_ff_expert, e = c.n_experts;
      CADENZA_LOAD(L.ffn_router, loader.require(name("ffn_gate_inp.weight"), {d, e}));
      CADENZA_LOAD(L.ffn_gate_exps, loader.require(name("ffn_gate_exps.weight"), {d, f, e}));
      CADENZA_LOAD(L.ffn_up_exps, loader.require(name("ffn_up_exps.weight"), {d, f, e}));
      CADENZA_LOAD(L.ffn_down_exps, loader.require(name("ffn_down_exps.weight"), {f, d, e}));
      if (c.n_ff_shared_expert > 0) {
        const int64_t fs = c.n_ff_shared_expert;
        CADENZA_LOAD(L.ffn_gate_shexp, loader.require(name("ffn_gate_shexp.weight"), {d, fs}));
        CADENZA_LOAD(L.ffn_up_shexp, loader.require(name("ffn_up_shexp.weight"), {d, fs}));
        CADENZA_LOAD(L.ffn_down_shexp, loader.require(name("ffn_down_shexp.weight"), {fs, d}));
        CADENZA_LOAD(L.ffn_gate_inp_shexp, loader.require(name("ffn_gate_inp_shexp.weight"), {d}));
      }
    }
  }
  return {};
}

#undef CADENZA_LOAD

}  // namespace

Status ensure_buffer(kernels::Backend& backend, std::unique_ptr<kernels::Buffer>& buffer,
                     size_t size_bytes) {
  if (buffer && buffer->size_bytes() >= size_bytes) return {};
  buffer.reset();
  Result<std::unique_ptr<kernels::Buffer>> b = backend.allocate(std::max<size_t>(size_bytes, 64));
  if (!b) return b.error_value();
  buffer = std::move(*b);
  return {};
}

Model::Model(std::shared_ptr<const gguf::GgufFile> file, kernels::Backend& backend,
             ModelConfig config)
    : file_(std::move(file)), backend_(backend), config_(std::move(config)),
      scratch_(std::make_unique<ForwardScratch>()),
      expert_counts_(std::make_unique<std::atomic<uint64_t>[]>(
          static_cast<size_t>(config_.n_layers * config_.n_experts))) {}

Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::load(std::shared_ptr<const gguf::GgufFile> file,
                                           kernels::Backend& backend,
                                           const ModelLoadOptions& options) {
  Result<ModelConfig> config = ModelConfig::from_gguf(*file);
  if (!config) return config.error_value();
  if (options.experts_per_token != 0) {
    if (config->n_experts == 0) {
      return make_error("{}: --experts-per-token {} given but the model has no experts",
                        file->name(), options.experts_per_token);
    }
    if (options.experts_per_token < 1 || options.experts_per_token > config->n_experts) {
      return make_error("{}: experts per token must be in [1, {}], got {}", file->name(),
                        config->n_experts, options.experts_per_token);
    }
    if (options.experts_per_token != config->n_experts_used) {
      spdlog::warn("{}: using {} experts per token instead of the trained {}; output quality "
                   "changes", file->name(), options.experts_per_token, config->n_experts_used);
    }
    config->n_experts_used = options.experts_per_token;
  }
  std::unique_ptr<Model> model(new Model(file, backend, std::move(*config)));
  WeightLoader loader(file, backend);
  Status st = load_weights(model->config_, loader, model->weights_);
  if (!st) return st.error_value();
  const std::vector<std::string> unused = loader.unused();
  if (!unused.empty()) {
    spdlog::warn("{}: {} tensor(s) not used by the {} forward pass, e.g. '{}'", file->name(),
                 unused.size(), model->config_.architecture, unused.front());
  }
  return model;
}

Result<std::unique_ptr<Model>> Model::open(const std::string& path, kernels::Backend& backend,
                                           const ModelLoadOptions& options) {
  Result<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::open(path);
  if (!file) return file.error_value();
  return load(std::shared_ptr<const gguf::GgufFile>(std::move(*file)), backend, options);
}

uint64_t Model::expert_tokens(int64_t layer, int64_t expert) const {
  assert(layer >= 0 && layer < config_.n_layers && expert >= 0 && expert < config_.n_experts);
  return expert_counts_[static_cast<size_t>(layer * config_.n_experts + expert)].load(
      std::memory_order_relaxed);
}

std::vector<uint64_t> Model::expert_token_counts() const {
  std::vector<uint64_t> out(static_cast<size_t>(config_.n_layers * config_.n_experts));
  for (size_t i = 0; i < out.size(); ++i) out[i] = expert_counts_[i].load(std::memory_order_relaxed);
  return out;
}

void Model::reset_expert_token_counts() {
  for (int64_t i = 0; i < config_.n_layers * config_.n_experts; ++i) {
    expert_counts_[static_cast<size_t>(i)].store(0, std::memory_order_relaxed);
  }
}

Result<std::unique_ptr<KvCache>> Model::create_kv_cache(const KvCacheOptions& options) const {
  return KvCache::create(backend_, config_, options);
}

Status Model::validate(const Batch& b, const KvCache& kv, size_t logits_size) const {
  const size_t n = b.tokens.size();
  if (n == 0) return Error("forward: empty batch");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) return Error("forward: batch too large");
  if (b.positions.size() != n || b.seq_index.size() != n) {
    return make_error("forward: {} tokens but {} positions and {} sequence indices", n,
                      b.positions.size(), b.seq_index.size());
  }
  if (logits_size != b.logit_rows.size() * static_cast<size_t>(config_.n_vocab)) {
    return make_error("forward: logits buffer holds {} floats, expected {} rows x {} vocab",
                      logits_size, b.logit_rows.size(), config_.n_vocab);
  }
  if (kv.num_layers() != config_.n_layers || kv.layer(0).n_kv_heads != config_.n_kv_heads ||
      kv.layer(0).head_dim_k != config_.head_dim_k || kv.layer(0).head_dim_v != config_.head_dim_v) {
    return Error("forward: the KV cache was created for a different model shape");
  }
  const int64_t block_size = kv.block_size();
  std::vector<int32_t> max_position(b.block_tables.size(), -1);
  std::vector<int64_t> slots(n);
  for (size_t t = 0; t < n; ++t) {
    if (b.tokens[t] < 0 || b.tokens[t] >= config_.n_vocab) {
      return make_error("forward: token id {} at batch row {} is out of range [0, {})", b.tokens[t],
                        t, config_.n_vocab);
    }
    const int32_t pos = b.positions[t];
    const int32_t seq = b.seq_index[t];
    if (pos < 0) return make_error("forward: negative position {} at batch row {}", pos, t);
    if (seq < 0 || static_cast<size_t>(seq) >= b.block_tables.size()) {
      return make_error("forward: sequence index {} at batch row {} is out of range ({} sequences)",
                        seq, t, b.block_tables.size());
    }
    const std::span<const int32_t> table = b.block_tables[static_cast<size_t>(seq)];
    if (static_cast<size_t>(pos / block_size) >= table.size()) {
      return make_error("forward: position {} of sequence {} is past its block table ({} blocks "
                        "of {} tokens)", pos, seq, table.size(), block_size);
    }
    max_position[static_cast<size_t>(seq)] = std::max(max_position[static_cast<size_t>(seq)], pos);
    slots[t] = static_cast<int64_t>(table[static_cast<size_t>(pos / block_size)]) * block_size +
               pos % block_size;
  }
  // Every block a token may read (positions 0..max of its sequence) must exist.
  for (size_t seq = 0; seq < b.block_tables.size(); ++seq) {
    if (max_position[seq] < 0) continue;
    const std::span<const int32_t> table = b.block_tables[seq];
    for (int64_t i = 0; i <= max_position[seq] / block_size; ++i) {
      const int32_t block = table[static_cast<size_t>(i)];
      if (block < 0 || block >= kv.num_blocks()) {
        return make_error("forward: block {} (entry {} of sequence {}'s table) is out of range "
                          "({} blocks)", block, i, seq, kv.num_blocks());
      }
    }
  }
  std::sort(slots.begin(), slots.end());
  if (std::adjacent_find(slots.begin(), slots.end()) != slots.end()) {
    return Error("forward: two tokens of the batch map to the same KV slot");
  }
  for (size_t i = 0; i < b.logit_rows.size(); ++i) {
    if (b.logit_rows[i] < 0 || static_cast<size_t>(b.logit_rows[i]) >= n) {
      return make_error("forward: logit row {} is out of range ({} tokens)", b.logit_rows[i], n);
    }
  }
  return {};
}

Status Model::forward(const Batch& b, KvCache& kv, std::span<float> logits) {
  Status valid = validate(b, kv, logits.size());
  if (!valid) return valid;

  // Upload the batch description.
  const int64_t n = static_cast<int64_t>(b.tokens.size());
  const int64_t n_logits = static_cast<int64_t>(b.logit_rows.size());
  const int64_t n_seqs = static_cast<int64_t>(b.block_tables.size());
  const int32_t block_size = kv.block_size();
  int64_t max_blocks = 1;
  for (int64_t t = 0; t < n; ++t) max_blocks = std::max<int64_t>(max_blocks, b.positions[t] / block_size + 1);
  std::vector<int32_t> slots(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    const std::span<const int32_t> table = b.block_tables[static_cast<size_t>(b.seq_index[t])];
    const int32_t pos = b.positions[t];
    slots[t] = table[static_cast<size_t>(pos / block_size)] * block_size + pos % block_size;
  }
  // [n_seqs][max_blocks]; only the entries up to each sequence's last position are read.
  std::vector<int32_t> tables(static_cast<size_t>(n_seqs * max_blocks), 0);
  for (int64_t s = 0; s < n_seqs; ++s) {
    const std::span<const int32_t> table = b.block_tables[static_cast<size_t>(s)];
    const size_t count = std::min(table.size(), static_cast<size_t>(max_blocks));
    std::copy_n(table.begin(), count, tables.begin() + s * max_blocks);
  }

  ForwardScratch& s = *scratch_;
  auto upload = [&](std::unique_ptr<kernels::Buffer>& buffer, const int32_t* data, int64_t rows,
                    int64_t cols) -> Result<kernels::IndexMatrix> {
    const size_t bytes = static_cast<size_t>(rows * cols) * sizeof(int32_t);
    Status st = ensure_buffer(backend_, buffer, bytes);
    if (!st) return st.error_value();
    backend_.write(*buffer, 0, data, bytes);
    return kernels::IndexMatrix::of(buffer->data(), rows, cols);
  };
  StepInputs in;
  in.n_tokens = n;
  in.n_logits = n_logits;
  {
    Result<kernels::IndexMatrix> r = upload(s.tokens, b.tokens.data(), n, 1);
    if (!r) return r.error_value();
    in.tokens = *r;
    r = upload(s.positions, b.positions.data(), n, 1);
    if (!r) return r.error_value();
    in.attention.positions = *r;
    r = upload(s.seq_index, b.seq_index.data(), n, 1);
    if (!r) return r.error_value();
    in.attention.seq_index = *r;
    r = upload(s.block_tables, tables.data(), n_seqs, max_blocks);
    if (!r) return r.error_value();
    in.attention.block_tables = *r;
    r = upload(s.slots, slots.data(), n, 1);
    if (!r) return r.error_value();
    in.slots = *r;
    r = upload(s.logit_rows, b.logit_rows.data(), n_logits, 1);
    if (!r) return r.error_value();
    in.logit_rows = *r;
  }

  const ForwardContext ctx{config_, weights_, backend_, s, in, kv,
                           config_.n_experts > 0 ? expert_counts_.get() : nullptr};
  Result<kernels::Matrix> out = forward_llama_family(ctx);  // every supported arch is llama-family
  if (!out) return out.error_value();
  backend_.read(*s.logits, 0, logits.data(), logits.size() * sizeof(float));
  return {};
}

}  // namespace cadenza::model
