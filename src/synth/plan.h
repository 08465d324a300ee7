// Internal to src/synth: the tensor plan of a synthetic model (names, ggml shapes, types,
// initialisation) and the weight-type scheme, shared by the generic writer (synth.cpp) and the
// families with tensors of their own (plan_<family>.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "quantize/mixture.h"
#include "synth/presets.h"
#include "tensor/dtype.h"

namespace cadenza::synth {

// kNegative: -(|normal(1/sqrt(row))| + 0.1), a decay rate (qwen35's ssm_a, which must be < 0).
enum class Init { kNormal, kOnes, kSmall, kNegative };

struct TensorPlan {
  std::string name;
  std::vector<int64_t> shape;  // ggml order
  DType type;
  Init init;
};

struct TypeScheme {
  DType base;
  bool k_mix = false;  // q4_k_m
  uint32_t file_type = 1;
  // The routed experts' matrices, when not `base` ("mxfp4_moe": MXFP4 experts, Q8_0 elsewhere, as
  // the released gpt-oss files); DType::F32 here means "same as base".
  DType experts = DType::F32;
  bool own_expert_type = false;
};

// The type of the routed experts' matrices.
inline DType expert_type(const TypeScheme& s) { return s.own_expert_type ? s.experts : s.base; }

// The row fallback and the extra bits of the *_M mixtures are cadenza quantize's
// (quantize/mixture.h), so a synthesized file is typed as a quantized one would be.
using quantize::fit_row;
using quantize::use_more_bits;
// The type of the output projection (and of a tied embedding).
DType output_type(const TypeScheme& s);
// The type of an untied token embedding (only rows are looked up, never multiplied): the scheme's,
// except Q4_K for the IQ1/IQ2/IQ3 schemes, whose search-based quantizers are slow on a large
// vocabulary and buy nothing there.
DType embedding_type(const TypeScheme& s);

// Appends tensors to a plan: a matrix of `out` rows of `in` elements (its type fitted to the row),
// an f32 vector.
struct PlanBuilder {
  std::vector<TensorPlan>& t;
  void matrix(std::string name, int64_t in, int64_t out, DType type) {
    t.push_back({std::move(name), {in, out}, fit_row(type, in), Init::kNormal});
  }
  void vec(std::string name, int64_t n, Init init) {
    t.push_back({std::move(name), {n}, DType::F32, init});
  }
};

// A layer's routed experts (`ffn_gate_inp`, `ffn_{gate,up,down}_exps`) and, with
// m.n_ff_shared_expert > 0, its shared expert (`ffn_{gate,up,down}_shexp`, and its sigmoid gate
// `ffn_gate_inp_shexp` when m.shared_expert_gated), as qwen2moe, qwen3moe, qwen35moe and llama4
// name them; `prefix` is "blk.N.",
// `more` the *_M mixture's extra bits for this layer (synth.cpp).
void plan_routed_ffn(std::vector<TensorPlan>& t, const ModelShape& m, const TypeScheme& scheme,
                     const std::string& prefix, bool more);

// A layer's dense SwiGLU FFN: `ffn_{gate,up,down}` of width m.n_ff, ffn_down in Q6_K when `more`.
void plan_dense_ffn(std::vector<TensorPlan>& t, const ModelShape& m, const TypeScheme& scheme,
                    const std::string& prefix, bool more);

// A layer's FFN: the routed experts (plan_routed_ffn) when `routed`, else the dense one.
void plan_ffn(std::vector<TensorPlan>& t, const ModelShape& m, const TypeScheme& scheme,
              const std::string& prefix, bool routed, bool more);

// deepseek2 (plan_deepseek2.cpp): its tensors and its `deepseek2.*` keys beyond the common ones.
std::vector<TensorPlan> plan_deepseek2(const ModelShape& m, const TypeScheme& scheme,
                                       int64_t n_vocab);
void set_deepseek2_metadata(gguf::GgufWriter& w, const ModelShape& m);

// glm4moe (plan_glm4moe.cpp): its tensors (the multi-token-prediction layers included) and its
// `glm4moe.*` keys beyond the common ones.
std::vector<TensorPlan> plan_glm4moe(const ModelShape& m, const TypeScheme& scheme,
                                     int64_t n_vocab);
void set_glm4moe_metadata(gguf::GgufWriter& w, const ModelShape& m);

// gpt-oss (plan_gpt_oss.cpp): likewise.
std::vector<TensorPlan> plan_gpt_oss(const ModelShape& m, const TypeScheme& scheme,
                                     int64_t n_vocab);
void set_gpt_oss_metadata(gguf::GgufWriter& w, const ModelShape& m);

// gemma3 (plan_gemma3.cpp): pre- and post-norms around both blocks, Q/K norms, tied output; the
// sliding-window and RoPE keys.
std::vector<TensorPlan> plan_gemma3(const ModelShape& m, const TypeScheme& scheme,
                                    int64_t n_vocab);
void set_gemma3_metadata(gguf::GgufWriter& w, const ModelShape& m);

// qwen35 and qwen35moe (plan_qwen35.cpp): the hybrid's linear-attention and gated full-attention
// layers (a dense FFN, or routed experts with a shared expert when m.n_expert > 0) and their keys.
std::vector<TensorPlan> plan_qwen35(const ModelShape& m, const TypeScheme& scheme,
                                    int64_t n_vocab);
void set_qwen35_metadata(gguf::GgufWriter& w, const ModelShape& m);

// granitehybrid (plan_granitehybrid.cpp): Mamba-2 layers with attention layers every
// m.full_attention_interval-th (a dense FFN, or routed experts with an ungated shared expert when
// m.n_expert > 0), the per-layer KV head counts and the `ssm.*` keys.
std::vector<TensorPlan> plan_granitehybrid(const ModelShape& m, const TypeScheme& scheme,
                                           int64_t n_vocab);
void set_granitehybrid_metadata(gguf::GgufWriter& w, const ModelShape& m);

// phi3 (plan_phi3.cpp): fused QKV and gate/up, optional LongRoPE factor tensors; their keys.
std::vector<TensorPlan> plan_phi3(const ModelShape& m, const TypeScheme& scheme, int64_t n_vocab);
void set_phi3_metadata(gguf::GgufWriter& w, const ModelShape& m);

// bert (plan_bert.cpp): the encoder's tensors (a classification head when shape.n_cls_out > 0),
// its keys, and the built-in WordPiece vocabulary (n_vocab >= 128 tokens).
std::vector<TensorPlan> plan_bert(const ModelShape& m, const TypeScheme& scheme, int64_t n_vocab);
void set_bert_metadata(gguf::GgufWriter& w, const ModelShape& m);
void set_bert_vocab(gguf::GgufWriter& w, int64_t n_vocab);

// mistral3 and granite (plan_llama_variants.cpp): the llama tensors, their own keys (YaRN and
// the attention temperature; the four multipliers).
void set_llama_variant_metadata(gguf::GgufWriter& w, const ModelShape& m);

}  // namespace cadenza::synth
