// bert: the BERT encoder (BERT, BGE, MiniLM and their cross-encoder rerankers), from GGUF
// metadata `bert.*` and the tensors the GGUF convention names for it:
//
//   x = token_embd[t] + position_embd[p] + token_types[type]         p = 0.. within the sequence
//   x = LayerNorm(x) * token_embd_norm.weight + token_embd_norm.bias
//   for each layer (post-norm):
//     a = softmax(q k^T / sqrt(head_dim)) v per head, over every token of the sequence
//         (bidirectional), q/k/v = x W{q,k,v}^T + b{q,k,v}
//     x = LayerNorm(x + a Wo^T + bo)          attn_output_norm.{weight,bias}
//     x = LayerNorm(x + gelu(x Wup^T + bup) Wdown^T + bdown)   layer_output_norm.{weight,bias}
//   classification head (rerankers, optional): cls.output(tanh(cls(x[CLS]))), `cls` optional
//
// GELU is the exact one, 0.5 x (1 + erf(x / sqrt 2)) (BERT's "gelu"). The projections and the
// attention run on the backend (the attention through its paged attention, bidirectional_batch);
// LayerNorm and GELU, which the backend has no op for, run on the host over read_view/write_view
// copies (cheap on the CPU backend, whose views are host memory; a device backend pays the
// transfers). Batched: the projections take every
// token of every sequence at once; attention stays within each sequence. No KV cache.
#include <algorithm>
#include <cmath>

#include "gguf/gguf.h"
#include "model/encoder.h"
#include "model/host_ops.h"
#include "model/scratch.h"
#include "model/weight_loader.h"
#include "tensor/quant.h"

namespace cadenza::model {

namespace {

using kernels::Matrix;
using kernels::Weight;

class BertEncoder final : public Encoder {
 public:
  BertEncoder(std::shared_ptr<const gguf::GgufFile> file, kernels::Backend& backend,
              EncoderConfig config)
      : file_(std::move(file)), backend_(backend), c_(std::move(config)) {}

  Status load();
  const EncoderConfig& config() const override { return c_; }
  const gguf::GgufFile& file() const override { return *file_; }
  Result<std::vector<float>> forward(std::span<const EncoderInput> inputs) override;
  Result<std::vector<std::vector<float>>> classify(std::span<const EncoderInput> inputs) override;

 private:
  struct Norm {
    std::vector<float> w, b;
  };
  struct Layer {
    std::unique_ptr<Weight> wq, bq, wk, bk, wv, bv, wo, bo, wup, bup, wdown, bdown;
    Norm attn_norm, out_norm;
  };
  Status reserve(int64_t n);
  Status load_norm(const std::string& prefix, Norm& norm);
  // The backend's paged attention made bidirectional: K and V are the [n][d] projections seen as
  // an F32 KV store of n one-token blocks, sequence s's block table lists its own rows, and every
  // token sits at its sequence's last position, so it attends to all of its sequence.
  kernels::AttentionBatch bidirectional_batch(const std::vector<int64_t>& starts,
                                              const std::vector<int64_t>& lengths, int64_t n);
  // Reads a view into host memory / writes it back.
  void to_host(Matrix m, std::vector<float>& h) {
    h.resize(static_cast<size_t>(m.rows * m.cols));
    backend_.read_view(m, h.data());
  }

  std::shared_ptr<const gguf::GgufFile> file_;
  kernels::Backend& backend_;
  EncoderConfig c_;
  std::unique_ptr<Weight> token_embd_, position_embd_, token_types_;
  Norm embd_norm_;
  std::vector<Layer> layers_;
  std::vector<float> cls_w_, cls_b_, cls_out_w_, cls_out_b_;  // host; cls_w_ empty: no pooler
  // Scratch, grown to the largest batch seen (reserve): backend [n][d] / [n][ff] and [n][1].
  int64_t reserved_ = 0;
  ScratchMatrix x_, t_, q_, k_, v_, a_, up_;
  ScratchIndices ids_, pos_, types_;
  ScratchIndices attn_pos_, attn_seq_, attn_tables_;  // bidirectional_batch: [n][1], [n][1], [seqs][max_len]
  std::vector<float> x_h_, q_h_, k_h_, v_h_, a_h_, up_h_;  // host copies
};

Status BertEncoder::load_norm(const std::string& prefix, Norm& norm) {
  auto w = host_tensor(*file_, prefix + ".weight", c_.n_embd);
  if (!w) return w.error_value();
  auto b = host_tensor(*file_, prefix + ".bias", c_.n_embd);
  if (!b) return b.error_value();
  norm.w = std::move(*w);
  norm.b = std::move(*b);
  return {};
}

Status BertEncoder::load() {
  WeightLoader loader(file_, backend_);
  const int64_t d = c_.n_embd;
  Status st = loader.load({
      {token_embd_, "token_embd.weight", {d, c_.n_vocab}},
      {position_embd_, "position_embd.weight", {d, c_.n_ctx}},
      {token_types_, "token_types.weight", {d, c_.n_token_types}, required_if(c_.n_token_types > 0)},
  });
  if (st) st = load_norm("token_embd_norm", embd_norm_);
  layers_.resize(static_cast<size_t>(c_.n_layers));
  for (int64_t il = 0; st && il < c_.n_layers; ++il) {
    Layer& L = layers_[static_cast<size_t>(il)];
    auto name = [&](const char* s) { return layer_tensor(il, s); };
    st = loader.load({
        {L.wq, name("attn_q.weight"), {d, d}},          {L.bq, name("attn_q.bias"), {d}},
        {L.wk, name("attn_k.weight"), {d, d}},          {L.bk, name("attn_k.bias"), {d}},
        {L.wv, name("attn_v.weight"), {d, d}},          {L.bv, name("attn_v.bias"), {d}},
        {L.wo, name("attn_output.weight"), {d, d}},     {L.bo, name("attn_output.bias"), {d}},
        {L.wup, name("ffn_up.weight"), {d, c_.n_ff}},   {L.bup, name("ffn_up.bias"), {c_.n_ff}},
        {L.wdown, name("ffn_down.weight"), {c_.n_ff, d}}, {L.bdown, name("ffn_down.bias"), {d}},
    });
    if (st) st = load_norm(name("attn_output_norm"), L.attn_norm);
    if (st) st = load_norm(name("layer_output_norm"), L.out_norm);
  }
  if (st && c_.n_classes > 0) {
    if (file_->find_tensor("cls.weight") != nullptr) {  // the pooler: tanh(W x + b)
      auto w = host_tensor(*file_, "cls.weight", d, d);
      auto b = w ? host_tensor(*file_, "cls.bias", d) : w;
      if (!w || !b) return (w ? b : w).error_value();
      cls_w_ = std::move(*w);
      cls_b_ = std::move(*b);
    }
    auto w = host_tensor(*file_, "cls.output.weight", d, c_.n_classes);
    auto b = w ? host_tensor(*file_, "cls.output.bias", c_.n_classes) : w;
    if (!w || !b) return (w ? b : w).error_value();
    cls_out_w_ = std::move(*w);
    cls_out_b_ = std::move(*b);
  }
  return st;
}

Status BertEncoder::reserve(int64_t n) {
  if (n <= reserved_) return {};
  Status st;
  for (ScratchMatrix* m : {&x_, &t_, &q_, &k_, &v_, &a_})
    if (st) st = m->reserve(backend_, n, c_.n_embd);
  if (st) st = up_.reserve(backend_, n, c_.n_ff);
  for (ScratchIndices* m : {&ids_, &pos_, &types_, &attn_pos_, &attn_seq_})
    if (st) st = m->reserve(backend_, n, 1);
  if (!st) return make_error("bert: scratch for {} tokens: {}", n, st.error());
  reserved_ = n;
  return {};
}

kernels::AttentionBatch BertEncoder::bidirectional_batch(const std::vector<int64_t>& starts,
                                                        const std::vector<int64_t>& lengths,
                                                        int64_t n) {
  const int64_t seqs = static_cast<int64_t>(starts.size());
  const int64_t max_len = *std::max_element(lengths.begin(), lengths.end());
  std::vector<int32_t> last(static_cast<size_t>(n)), seq(static_cast<size_t>(n));
  std::vector<int32_t> tables(static_cast<size_t>(seqs * max_len), 0);
  for (int64_t s = 0; s < seqs; ++s)
    for (int64_t i = 0; i < lengths[s]; ++i) {
      const auto t = static_cast<size_t>(starts[s] + i);
      last[t] = static_cast<int32_t>(lengths[s] - 1);
      seq[t] = static_cast<int32_t>(s);
      tables[static_cast<size_t>(s * max_len + i)] = static_cast<int32_t>(starts[s] + i);
    }
  auto write = [&](ScratchIndices& dst, kernels::IndexMatrix view, const std::vector<int32_t>& src) {
    backend_.write(dst.buffer(), 0, src.data(), src.size() * sizeof(int32_t));
    return view;
  };
  kernels::AttentionBatch b;
  b.positions = write(attn_pos_, attn_pos_.rows(n), last);
  b.seq_index = write(attn_seq_, attn_seq_.rows(n), seq);
  b.block_tables = write(attn_tables_, attn_tables_.shaped(seqs, max_len), tables);
  return b;
}

Result<std::vector<float>> BertEncoder::forward(std::span<const EncoderInput> inputs) {
  if (inputs.empty()) return Error("bert: no input");
  std::vector<int64_t> starts, lengths;
  std::vector<int32_t> ids, pos, types;
  for (size_t s = 0; s < inputs.size(); ++s) {
    const EncoderInput& in = inputs[s];
    const int64_t L = static_cast<int64_t>(in.tokens.size());
    if (L == 0 || L > c_.n_ctx)
      return make_error("bert: input {} has {} tokens (1 to {} allowed)", s, L, c_.n_ctx);
    if (!in.types.empty() && in.types.size() != in.tokens.size())
      return make_error("bert: input {} has {} tokens but {} token types", s, L, in.types.size());
    starts.push_back(static_cast<int64_t>(ids.size()));
    lengths.push_back(L);
    for (int64_t i = 0; i < L; ++i) {
      const int32_t t = in.tokens[static_cast<size_t>(i)];
      const int32_t ty = in.types.empty() ? 0 : in.types[static_cast<size_t>(i)];
      if (t < 0 || t >= c_.n_vocab)
        return make_error("bert: token id {} of input {} is out of range [0, {})", t, s, c_.n_vocab);
      if (ty < 0 || ty >= std::max<int64_t>(c_.n_token_types, 1))
        return make_error("bert: token type {} of input {} is out of range", ty, s);
      ids.push_back(t);
      pos.push_back(static_cast<int32_t>(i));
      types.push_back(ty);
    }
  }
  const int64_t n = static_cast<int64_t>(ids.size()), d = c_.n_embd;
  if (Status st = reserve(n); !st) return st.error_value();
  kernels::Backend& be = backend_;
  auto upload = [&](ScratchIndices& dst, const std::vector<int32_t>& src) {
    be.write(dst.buffer(), 0, src.data(), src.size() * sizeof(int32_t));
    return dst.rows(n);
  };
  const Matrix x = x_.rows(n), t = t_.rows(n), q = q_.rows(n), k = k_.rows(n), v = v_.rows(n),
               a = a_.rows(n), up = up_.rows(n);
  be.get_rows(*token_embd_, upload(ids_, ids), x);
  be.get_rows(*position_embd_, upload(pos_, pos), t);
  be.add(x, t, x);
  if (token_types_) {
    be.get_rows(*token_types_, upload(types_, types), t);
    be.add(x, t, x);
  }
  auto norm_in_place = [&](const Norm& nm) {
    to_host(x, x_h_);
    layer_norm(x_h_, n, d, nm.w, nm.b, c_.norm_eps);
    be.write_view(x_h_.data(), x);
  };
  norm_in_place(embd_norm_);
  const bool on_backend = be.supports_kv_type(DType::F32);
  kernels::AttentionBatch batch;
  kernels::KvLayer kv;
  kernels::AttentionParams params;
  if (on_backend) {
    const int64_t cells = static_cast<int64_t>(starts.size()) *
                          *std::max_element(lengths.begin(), lengths.end());
    if (Status st = attn_tables_.reserve(be, cells, 1); !st) return st.error_value();
    batch = bidirectional_batch(starts, lengths, n);
    kv = {k.data, v.data, DType::F32, static_cast<int32_t>(n), 1, static_cast<int32_t>(c_.n_heads),
          static_cast<int32_t>(c_.head_dim), static_cast<int32_t>(c_.head_dim), false};
    params.scale = 1.0f / std::sqrt(static_cast<float>(c_.head_dim));
  }
  for (const Layer& L : layers_) {
    be.matmul(*L.wq, x, q);
    be.add_bias(q, *L.bq, q);
    be.matmul(*L.wk, x, k);
    be.add_bias(k, *L.bk, k);
    be.matmul(*L.wv, x, v);
    be.add_bias(v, *L.bv, v);
    if (on_backend) {
      be.attention(q, kv, batch, static_cast<int32_t>(c_.n_heads), params, a);
    } else {  // (a backend without an F32 KV store)
      to_host(q, q_h_);
      to_host(k, k_h_);
      to_host(v, v_h_);
      a_h_.resize(q_h_.size());
      bidirectional_attention(q_h_.data(), k_h_.data(), v_h_.data(), a_h_.data(), d, c_.n_heads,
                              starts, lengths);
      be.write_view(a_h_.data(), a);
    }
    be.matmul(*L.wo, a, t);
    be.add_bias(t, *L.bo, t);
    be.add(x, t, x);
    norm_in_place(L.attn_norm);
    be.matmul(*L.wup, x, up);
    be.add_bias(up, *L.bup, up);
    to_host(up, up_h_);
    gelu_erf(up_h_);
    be.write_view(up_h_.data(), up);
    be.matmul(*L.wdown, up, t);
    be.add_bias(t, *L.bdown, t);
    be.add(x, t, x);
    norm_in_place(L.out_norm);
  }
  to_host(x, x_h_);
  return std::vector<float>(x_h_.begin(), x_h_.begin() + n * d);
}

Result<std::vector<std::vector<float>>> BertEncoder::classify(std::span<const EncoderInput> inputs) {
  if (c_.n_classes == 0)
    return make_error("{}: no classification head (cls.output.weight): not a reranker",
                      file_->name());
  auto hidden = forward(inputs);
  if (!hidden) return hidden.error_value();
  const int64_t d = c_.n_embd;
  std::vector<std::vector<float>> out;
  int64_t row = 0;
  std::vector<float> pooled(static_cast<size_t>(d));
  for (const EncoderInput& in : inputs) {
    const float* cls = hidden->data() + row * d;  // the sequence's first token
    row += static_cast<int64_t>(in.tokens.size());
    if (cls_w_.empty()) {
      std::copy(cls, cls + d, pooled.begin());
    } else {
      for (int64_t j = 0; j < d; ++j) {
        double acc = cls_b_[static_cast<size_t>(j)];
        for (int64_t i = 0; i < d; ++i) acc += static_cast<double>(cls_w_[static_cast<size_t>(j * d + i)]) * cls[i];
        pooled[static_cast<size_t>(j)] = static_cast<float>(std::tanh(acc));
      }
    }
    std::vector<float> logits(static_cast<size_t>(c_.n_classes));
    for (int64_t j = 0; j < c_.n_classes; ++j) {
      double acc = cls_out_b_[static_cast<size_t>(j)];
      for (int64_t i = 0; i < d; ++i)
        acc += static_cast<double>(cls_out_w_[static_cast<size_t>(j * d + i)]) * pooled[static_cast<size_t>(i)];
      logits[static_cast<size_t>(j)] = static_cast<float>(acc);
    }
    out.push_back(std::move(logits));
  }
  return out;
}

// The `bert.*` keys.
Result<EncoderConfig> read_bert_config(const gguf::GgufFile& f) {
  EncoderConfig c;
  c.arch = "bert";
  auto u = [&](const char* key, int64_t& dst) -> Status {
    auto v = f.get_uint(std::string("bert.") + key);
    if (!v) return v.error_value();
    if (*v == 0 || *v > (1u << 24)) return make_error("{}: bert.{} = {} is out of range", f.name(), key, *v);
    dst = static_cast<int64_t>(*v);
    return {};
  };
  for (auto [key, dst] : {std::pair{"context_length", &c.n_ctx}, {"embedding_length", &c.n_embd},
                          {"block_count", &c.n_layers}, {"feed_forward_length", &c.n_ff},
                          {"attention.head_count", &c.n_heads}}) {
    if (Status st = u(key, *dst); !st) return st.error_value();
  }
  if (c.n_embd % c.n_heads != 0)
    return make_error("{}: embedding {} is not a multiple of the {} heads", f.name(), c.n_embd, c.n_heads);
  c.head_dim = c.n_embd / c.n_heads;
  auto eps = f.get_float_or("bert.attention.layer_norm_epsilon", 1e-12);
  if (!eps) return eps.error_value();
  c.norm_eps = static_cast<float>(*eps);
  auto pooling = pooling_of(f);
  if (!pooling) return pooling.error_value();
  c.pooling = pooling->value_or(Pooling::kCls);
  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (embd == nullptr) return make_error("{}: tensor 'token_embd.weight' missing", f.name());
  c.n_vocab = embd->rows();
  if (const gguf::TensorInfo* types = f.find_tensor("token_types.weight")) c.n_token_types = types->rows();
  if (const gguf::TensorInfo* head = f.find_tensor("cls.output.weight")) c.n_classes = head->rows();
  if (c.pooling == Pooling::kRank && c.n_classes == 0)
    return make_error("{}: pooling 'rank' without a classification head (cls.output.weight)",
                      f.name());
  return c;
}

}  // namespace

bool Encoder::is_encoder(const gguf::GgufFile& file) {
  auto arch = file.get_string("general.architecture");
  return arch && *arch == "bert";
}

Result<std::unique_ptr<Encoder>> Encoder::load(std::shared_ptr<const gguf::GgufFile> file,
                                               kernels::Backend& backend) {
  if (!is_encoder(*file))
    return make_error("{}: not an encoder architecture (supported: bert)", file->name());
  auto config = read_bert_config(*file);
  if (!config) return config.error_value();
  auto enc = std::make_unique<BertEncoder>(file, backend, std::move(*config));
  if (Status st = enc->load(); !st) return st.error_value();
  return std::unique_ptr<Encoder>(std::move(enc));
}

Result<std::unique_ptr<Encoder>> Encoder::open(const std::string& path, kernels::Backend& backend) {
  auto file = gguf::GgufFile::open(path);
  if (!file) return file.error_value();
  return load(std::shared_ptr<const gguf::GgufFile>(std::move(*file)), backend);
}

Result<std::vector<std::vector<float>>> Encoder::embed(std::span<const EncoderInput> inputs) {
  const EncoderConfig& c = config();
  if (c.pooling == Pooling::kRank || c.pooling == Pooling::kNone)
    return make_error("{}: pooling '{}' gives no embedding", file().name(), pooling_name(c.pooling));
  auto hidden = forward(inputs);
  if (!hidden) return hidden.error_value();
  std::vector<std::vector<float>> out;
  size_t row = 0;
  for (const EncoderInput& in : inputs) {
    const size_t L = in.tokens.size();
    std::vector<float> v = pool(std::span<const float>(*hidden).subspan(row * c.n_embd, L * c.n_embd),
                                static_cast<int64_t>(L), c.n_embd, c.pooling);
    l2_normalize(v);
    out.push_back(std::move(v));
    row += L;
  }
  return out;
}

}  // namespace cadenza::model
