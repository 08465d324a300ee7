// The bert tensors, keys and vocabulary of a synthetic encoder, named and shaped as the GGUF
// convention writes BERT / BGE / MiniLM: token, position and token-type embeddings with their
// LayerNorm (token_embd_norm), per layer q/k/v/output projections with biases, the post-attention
// LayerNorm (attn_output_norm), the GELU FFN (ffn_up, ffn_down, biases) and its LayerNorm
// (layer_output_norm); a cross-encoder's classification head (cls: the pooler, cls.output:
// n_cls_out classes) when the shape has one. LayerNorm weights are 1, biases small.
// The built-in vocabulary is an uncased WordPiece one: [PAD] [UNK] [CLS] [SEP] [MASK], every
// lowercase letter and digit as a word start ("▁a") and a continuation ("a"), punctuation, a few
// whole words, padded with [unusedN].
#include <string>

#include "synth/plan.h"

namespace cadenza::synth {

std::vector<TensorPlan> plan_bert(const ModelShape& m, const TypeScheme& scheme, int64_t n_vocab) {
  std::vector<TensorPlan> t;
  PlanBuilder b{t};
  const int64_t d = m.n_embd;
  b.matrix("token_embd.weight", d, n_vocab, embedding_type(scheme));
  b.matrix("token_types.weight", d, 2, DType::F32);
  b.matrix("position_embd.weight", d, m.n_ctx, DType::F32);
  b.vec("token_embd_norm.weight", d, Init::kOnes);
  b.vec("token_embd_norm.bias", d, Init::kSmall);
  for (int64_t i = 0; i < m.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    for (const char* proj : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
      b.matrix(p + proj + ".weight", d, d, scheme.base);
      b.vec(p + proj + ".bias", d, Init::kSmall);
    }
    b.vec(p + "attn_output_norm.weight", d, Init::kOnes);
    b.vec(p + "attn_output_norm.bias", d, Init::kSmall);
    b.matrix(p + "ffn_up.weight", d, m.n_ff, scheme.base);
    b.vec(p + "ffn_up.bias", m.n_ff, Init::kSmall);
    b.matrix(p + "ffn_down.weight", m.n_ff, d, scheme.base);
    b.vec(p + "ffn_down.bias", d, Init::kSmall);
    b.vec(p + "layer_output_norm.weight", d, Init::kOnes);
    b.vec(p + "layer_output_norm.bias", d, Init::kSmall);
  }
  if (m.n_cls_out > 0) {
    t.push_back({"cls.weight", {d, d}, DType::F32, Init::kNormal});
    b.vec("cls.bias", d, Init::kSmall);
    t.push_back({"cls.output.weight", {d, m.n_cls_out}, DType::F32, Init::kNormal});
    b.vec("cls.output.bias", m.n_cls_out, Init::kSmall);
  }
  return t;
}

void set_bert_metadata(gguf::GgufWriter& w, const ModelShape& m) {
  using gguf::Value;
  w.set("bert.attention.layer_norm_epsilon", Value::f32(static_cast<float>(m.rms_eps)));
  w.set("bert.attention.causal", Value::boolean(false));
}

void set_bert_vocab(gguf::GgufWriter& w, int64_t n_vocab) {
  using gguf::Value;
  std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  std::vector<int32_t> types(tokens.size(), 3);  // control
  const std::string word_start = "\xE2\x96\x81";  // U+2581
  auto normal = [&](std::string s) {
    tokens.push_back(std::move(s));
    types.push_back(1);
  };
  for (char c : std::string("abcdefghijklmnopqrstuvwxyz0123456789")) {
    normal(word_start + c);
    normal(std::string(1, c));
  }
  for (char c : std::string(".,!?'\"-:;()/"))
    normal(word_start + c);
  for (const char* word : {"the", "of", "is", "in", "and", "to", "hello", "world", "paris",
                           "france", "capital", "city", "river", "banana", "yellow", "fruit",
                           "what", "where", "embedding", "model", "search", "query", "document"})
    normal(word_start + word);
  for (const char* piece : {"ing", "ed", "er", "es", "ly", "tion"}) normal(piece);
  for (int64_t i = static_cast<int64_t>(tokens.size()); i < n_vocab; ++i) {
    tokens.push_back("[unused" + std::to_string(i) + "]");
    types.push_back(5);  // unused
  }
  w.set("tokenizer.ggml.model", Value::string("bert"));
  w.set("tokenizer.ggml.tokens", Value::string_array(tokens));
  w.set("tokenizer.ggml.token_type", Value::i32_array(types));
  w.set("tokenizer.ggml.padding_token_id", Value::u32(0));
  w.set("tokenizer.ggml.unknown_token_id", Value::u32(1));
  w.set("tokenizer.ggml.cls_token_id", Value::u32(2));
  // Also as BOS: a reader that starts an input with BOS (defaulting to 101, BERT's usual [CLS]
  // id, when the key is absent, as real converted files leave it) then agrees on this small vocab.
  w.set("tokenizer.ggml.bos_token_id", Value::u32(2));
  w.set("tokenizer.ggml.seperator_token_id", Value::u32(3));  // sic: the GGUF key's spelling
  w.set("tokenizer.ggml.mask_token_id", Value::u32(4));
  w.set("tokenizer.ggml.token_type_count", Value::u32(2));
}

}  // namespace cadenza::synth
