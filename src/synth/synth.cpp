#include "synth/synth.h"
#include "synth/random.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <thread>
#include <vector>

#include "gguf/gguf.h"
#include "synth/plan.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "util/utf8.h"

namespace cadenza::synth {
namespace {

using gguf::Value;
using gguf::ValueType;

}  // namespace

DType output_type(const TypeScheme& s) {
  if (!is_block_quantized(s.base) || s.base == DType::Q8_0 || s.base == DType::Q6_K) return s.base;
  return DType::Q6_K;
}

DType embedding_type(const TypeScheme& s) {
  switch (s.base) {
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS:
    case DType::IQ3_S: case DType::IQ1_S: case DType::IQ1_M:
      return DType::Q4_K;
    default:
      return s.base;
  }
}

namespace {

Result<TypeScheme> parse_scheme(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n == "q4_k_m") return TypeScheme{DType::Q4_K, true, 15};
  // mxfp4_moe: MXFP4 experts, Q8_0 elsewhere, as the gpt-oss GGUF releases (ggml-org's 12.1 GB
  // gpt-oss-20b file; the reference calls the file type MXFP4_MOE). mxfp4_moe_f16: F16 elsewhere,
  // as the "F16" conversions are. "mxfp4" below: every matrix MXFP4.
  if (n == "mxfp4_moe") return TypeScheme{DType::Q8_0, false, 38, DType::MXFP4, true};
  if (n == "mxfp4_moe_f16") return TypeScheme{DType::F16, false, 38, DType::MXFP4, true};
  struct Known { const char* name; DType t; uint32_t ftype; };
  static const Known kKnown[] = {
      {"f32", DType::F32, 0},   {"f16", DType::F16, 1},   {"bf16", DType::BF16, 32},
      {"q8_0", DType::Q8_0, 7}, {"q4_0", DType::Q4_0, 2}, {"q4_1", DType::Q4_1, 3},
      {"q5_0", DType::Q5_0, 8}, {"q5_1", DType::Q5_1, 9}, {"q4_k", DType::Q4_K, 14},
      {"q5_k", DType::Q5_K, 16}, {"q6_k", DType::Q6_K, 18},
      // The low-bit types of the giant MoE files (file types as the reference numbers them).
      {"q2_k", DType::Q2_K, 10},    {"q3_k", DType::Q3_K, 12},    {"iq4_nl", DType::IQ4_NL, 25},
      {"iq4_xs", DType::IQ4_XS, 30}, {"mxfp4", DType::MXFP4, 38},  {"iq2_xxs", DType::IQ2_XXS, 19},
      {"iq2_xs", DType::IQ2_XS, 20}, {"iq2_s", DType::IQ2_S, 28},   {"iq3_xxs", DType::IQ3_XXS, 23},
      {"iq3_s", DType::IQ3_S, 26},   {"iq1_s", DType::IQ1_S, 24},   {"iq1_m", DType::IQ1_M, 31},
  };
  for (const auto& k : kKnown)
    if (n == k.name) return TypeScheme{k.t, false, k.ftype};
  return make_error("unknown weight type '{}' (expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, "
                    "q5_1, q4_k, q5_k, q6_k, q4_k_m, q2_k, q3_k, iq4_nl, iq4_xs, mxfp4, iq2_xxs, "
                    "iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m, mxfp4_moe or mxfp4_moe_f16)", name);
}

}  // namespace

void plan_routed_ffn(std::vector<TensorPlan>& t, const ModelShape& m, const TypeScheme& scheme,
                     const std::string& p, bool more) {
  PlanBuilder b{t};
  t.push_back({p + "ffn_gate_inp.weight", {m.n_embd, m.n_expert}, DType::F32, Init::kNormal});
  const DType e = expert_type(scheme);
  t.push_back({p + "ffn_gate_exps.weight", {m.n_embd, m.n_ff_expert, m.n_expert},
               fit_row(e, m.n_embd), Init::kNormal});
  t.push_back({p + "ffn_up_exps.weight", {m.n_embd, m.n_ff_expert, m.n_expert},
               fit_row(e, m.n_embd), Init::kNormal});
  t.push_back({p + "ffn_down_exps.weight", {m.n_ff_expert, m.n_embd, m.n_expert},
               fit_row(more ? DType::Q6_K : e, m.n_ff_expert), Init::kNormal});
  if (m.n_ff_shared_expert > 0) {
    b.matrix(p + "ffn_gate_shexp.weight", m.n_embd, m.n_ff_shared_expert, scheme.base);
    b.matrix(p + "ffn_up_shexp.weight", m.n_embd, m.n_ff_shared_expert, scheme.base);
    b.matrix(p + "ffn_down_shexp.weight", m.n_ff_shared_expert, m.n_embd,
             more ? DType::Q6_K : scheme.base);
    if (m.shared_expert_gated) b.vec(p + "ffn_gate_inp_shexp.weight", m.n_embd, Init::kSmall);
  }
}

void plan_dense_ffn(std::vector<TensorPlan>& t, const ModelShape& m, const TypeScheme& scheme,
                    const std::string& p, bool more) {
  PlanBuilder b{t};
  b.matrix(p + "ffn_gate.weight", m.n_embd, m.n_ff, scheme.base);
  b.matrix(p + "ffn_up.weight", m.n_embd, m.n_ff, scheme.base);
  b.matrix(p + "ffn_down.weight", m.n_ff, m.n_embd, more ? DType::Q6_K : scheme.base);
}

void plan_ffn(std::vector<TensorPlan>& t, const ModelShape& m, const TypeScheme& scheme,
              const std::string& p, bool routed, bool more) {
  if (routed) {
    plan_routed_ffn(t, m, scheme, p, more);
  } else {
    plan_dense_ffn(t, m, scheme, p, more);
  }
}

namespace {

std::vector<TensorPlan> plan_tensors(const ModelShape& m, const TypeScheme& scheme,
                                     int64_t n_vocab) {
  if (m.arch == "deepseek2") return plan_deepseek2(m, scheme, n_vocab);
  if (m.arch == "glm4moe") return plan_glm4moe(m, scheme, n_vocab);
  if (m.arch == "gpt-oss") return plan_gpt_oss(m, scheme, n_vocab);
  if (m.arch == "gemma3") return plan_gemma3(m, scheme, n_vocab);
  if (m.arch == "phi3") return plan_phi3(m, scheme, n_vocab);
  if (m.arch == "qwen35" || m.arch == "qwen35moe") return plan_qwen35(m, scheme, n_vocab);
  if (m.arch == "bert") return plan_bert(m, scheme, n_vocab);
  if (m.arch == "granitehybrid") return plan_granitehybrid(m, scheme, n_vocab);
  std::vector<TensorPlan> t;
  const int64_t q_dim = m.n_head * m.head_dim, kv_dim = m.n_head_kv * m.head_dim;
  auto matrix = [&](std::string name, int64_t in, int64_t out, DType type) {
    t.push_back({std::move(name), {in, out}, fit_row(type, in), Init::kNormal});
  };
  auto vec = [&](std::string name, int64_t n, Init init) {
    t.push_back({std::move(name), {n}, DType::F32, init});
  };
  matrix("token_embd.weight", m.n_embd, n_vocab,
         m.tied_output ? output_type(scheme) : embedding_type(scheme));
  if (m.rope_scale_factor > 0) vec("rope_freqs.weight", m.head_dim / 2, Init::kOnes);
  for (int64_t i = 0; i < m.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const bool more = scheme.k_mix && use_more_bits(i, m.n_layer);
    vec(p + "attn_norm.weight", m.n_embd, Init::kOnes);
    matrix(p + "attn_q.weight", m.n_embd, q_dim, scheme.base);
    matrix(p + "attn_k.weight", m.n_embd, kv_dim, scheme.base);
    matrix(p + "attn_v.weight", m.n_embd, kv_dim, more ? DType::Q6_K : scheme.base);
    if (m.qkv_bias) {
      vec(p + "attn_q.bias", q_dim, Init::kSmall);
      vec(p + "attn_k.bias", kv_dim, Init::kSmall);
      vec(p + "attn_v.bias", kv_dim, Init::kSmall);
    }
    if (m.qk_norm) {
      vec(p + "attn_q_norm.weight", m.head_dim, Init::kOnes);
      vec(p + "attn_k_norm.weight", m.head_dim, Init::kOnes);
    }
    matrix(p + "attn_output.weight", q_dim, m.n_embd, scheme.base);
    vec(p + "ffn_norm.weight", m.n_embd, Init::kOnes);
    const bool experts =
        m.n_expert > 0 && (m.moe_interleave_step <= 1 || (i + 1) % m.moe_interleave_step == 0);
    plan_ffn(t, m, scheme, p, experts, more);
  }
  vec("output_norm.weight", m.n_embd, Init::kOnes);
  if (!m.tied_output) matrix("output.weight", m.n_embd, n_vocab, output_type(scheme));
  return t;
}

// Llama 3 rope scaling as per-frequency divisors (what a rope_freqs tensor holds).
std::vector<float> llama3_rope_freqs(const ModelShape& m) {
  std::vector<float> f(static_cast<size_t>(m.head_dim / 2));
  const double low_wavelen = m.rope_original_ctx / m.rope_low_freq_factor;
  const double high_wavelen = m.rope_original_ctx / m.rope_high_freq_factor;
  for (size_t i = 0; i < f.size(); ++i) {
    const double freq = 1.0 / std::pow(m.rope_base, 2.0 * i / m.head_dim);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      f[i] = 1.0f;
    } else if (wavelen > low_wavelen) {
      f[i] = static_cast<float>(m.rope_scale_factor);
    } else {
      const double smooth = (m.rope_original_ctx / wavelen - m.rope_low_freq_factor) /
                            (m.rope_high_freq_factor - m.rope_low_freq_factor);
      f[i] = static_cast<float>(1.0 / ((1 - smooth) / m.rope_scale_factor + smooth));
    }
  }
  return f;
}

// LongRoPE divisors per rotated pair, rising from 1 (the high frequencies) like the real ones:
// short 1 .. ~1.5, long 1 .. ~20 (Phi-4-mini's span).
void longrope_factors(bool long_factors, std::vector<float>& out) {
  const double top = long_factors ? 20.0 : 1.5;
  const double n = static_cast<double>(std::max<size_t>(out.size() - 1, 1));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<float>(std::pow(top, static_cast<double>(i) / n));
  }
}

// GPT-2's byte-to-unicode table: printable bytes map to themselves, the rest to U+0100 upwards.
std::vector<std::string> byte_level_tokens() {
  std::vector<int> cps(256, -1);
  for (int b = 0; b < 256; ++b)
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) cps[b] = b;
  int next = 256;
  for (int b = 0; b < 256; ++b)
    if (cps[b] < 0) cps[b] = next++;
  std::vector<std::string> out;
  for (int cp : cps) {
    std::string s;
    append_utf8(s, static_cast<uint32_t>(cp));
    out.push_back(std::move(s));
  }
  return out;
}

void set_builtin_vocab(gguf::GgufWriter& w, int64_t n_vocab, const std::vector<std::string>& extra) {
  std::vector<std::string> tokens = byte_level_tokens();
  std::vector<int32_t> types(256, 1);  // normal
  const int32_t bos = 256, eos = 257;
  tokens.push_back("<|begin_of_text|>");
  tokens.push_back("<|end_of_text|>");
  types.push_back(3);  // control
  types.push_back(3);
  for (const std::string& t : extra) {
    tokens.push_back(t);
    types.push_back(3);
  }
  for (int64_t i = static_cast<int64_t>(tokens.size()); i < n_vocab; ++i) {
    tokens.push_back("<|unused_" + std::to_string(i) + "|>");
    types.push_back(5);  // unused
  }
  w.set("tokenizer.ggml.model", Value::string("gpt2"));
  w.set("tokenizer.ggml.pre", Value::string("default"));
  w.set("tokenizer.ggml.tokens", Value::string_array(tokens));
  w.set("tokenizer.ggml.token_type", Value::i32_array(types));
  w.set("tokenizer.ggml.merges", Value::string_array({}));
  w.set("tokenizer.ggml.bos_token_id", Value::u32(bos));
  w.set("tokenizer.ggml.eos_token_id", Value::u32(eos));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(true));
}

// Copies every tokenizer.* key of `path`; returns its vocabulary size.
Result<int64_t> copy_vocab(gguf::GgufWriter& w, const std::string& path) {
  auto src = gguf::GgufFile::open(path);
  if (!src) return src.error_value();
  auto tokens = (*src)->get_string_array("tokenizer.ggml.tokens");
  if (!tokens) return make_error("--vocab-from {}: {}", path, tokens.error());
  for (const auto& [key, value] : (*src)->metadata())
    if (key.rfind("tokenizer.", 0) == 0) w.set(key, value);
  return static_cast<int64_t>(tokens->size());
}

void set_arch_metadata(gguf::GgufWriter& w, const ModelShape& m) {
  const std::string a = m.arch + ".";
  w.set("general.architecture", Value::string(m.arch));
  w.set("general.name", Value::string(m.display_name + " shape, random weights (cadenza synth)"));
  w.set(a + "context_length", Value::u32(static_cast<uint32_t>(m.n_ctx)));
  w.set(a + "embedding_length", Value::u32(static_cast<uint32_t>(m.n_embd)));
  w.set(a + "block_count", Value::u32(static_cast<uint32_t>(m.n_layer)));
  w.set(a + "feed_forward_length", Value::u32(static_cast<uint32_t>(m.n_ff)));
  w.set(a + "attention.head_count", Value::u32(static_cast<uint32_t>(m.n_head)));
  w.set(a + "attention.head_count_kv", Value::u32(static_cast<uint32_t>(m.n_head_kv)));
  w.set(a + "attention.layer_norm_rms_epsilon", Value::f32(static_cast<float>(m.rms_eps)));
  w.set(a + "rope.freq_base", Value::f32(static_cast<float>(m.rope_base)));
  if (m.pooling_type >= 0) w.set(a + "pooling_type", Value::u32(static_cast<uint32_t>(m.pooling_type)));
  w.set(a + "rope.dimension_count",
        Value::u32(static_cast<uint32_t>(m.rope_dims > 0 ? m.rope_dims : m.head_dim)));
  if (m.head_dim * m.n_head != m.n_embd) {
    w.set(a + "attention.key_length", Value::u32(static_cast<uint32_t>(m.head_dim)));
    w.set(a + "attention.value_length", Value::u32(static_cast<uint32_t>(m.head_dim)));
  }
  if (m.arch == "deepseek2") set_deepseek2_metadata(w, m);
  if (m.arch == "glm4moe") set_glm4moe_metadata(w, m);
  if (m.arch == "gpt-oss") set_gpt_oss_metadata(w, m);
  if (m.arch == "gemma3") set_gemma3_metadata(w, m);
  if (m.arch == "phi3") set_phi3_metadata(w, m);
  if (m.arch == "qwen35" || m.arch == "qwen35moe") set_qwen35_metadata(w, m);
  if (m.arch == "bert") set_bert_metadata(w, m);
  if (m.arch == "mistral3" || m.arch == "granite" || m.arch == "granitehybrid") {
    set_llama_variant_metadata(w, m);
  }
  if (m.arch == "granitehybrid") set_granitehybrid_metadata(w, m);
  if (m.n_expert > 0) {
    w.set(a + "expert_count", Value::u32(static_cast<uint32_t>(m.n_expert)));
    w.set(a + "expert_used_count", Value::u32(static_cast<uint32_t>(m.n_expert_used)));
    if (m.arch != "llama")
      w.set(a + "expert_feed_forward_length", Value::u32(static_cast<uint32_t>(m.n_ff_expert)));
    if (m.n_ff_shared_expert > 0 && m.arch != "llama4") {  // llama4: the tensor's width
      w.set(a + "expert_shared_feed_forward_length",
            Value::u32(static_cast<uint32_t>(m.n_ff_shared_expert)));
    }
    if (m.moe_interleave_step > 0)
      w.set(a + "interleave_moe_layer_step", Value::u32(static_cast<uint32_t>(m.moe_interleave_step)));
  }
}

Status validate_shape(const ModelShape& m) {
  if (m.n_embd <= 0 || m.n_layer <= 0 || m.n_head <= 0 || m.n_head_kv <= 0 || m.head_dim <= 0 ||
      m.n_ctx <= 0)
    return make_error("synth: preset '{}' has a non-positive dimension", m.preset);
  if (m.n_head % m.n_head_kv != 0)
    return make_error("synth: head count {} is not a multiple of the KV head count {}", m.n_head,
                      m.n_head_kv);
  if (m.head_dim % 2 != 0) return make_error("synth: head dimension {} is odd", m.head_dim);
  if (m.rope_dims < 0 || m.rope_dims % 2 != 0 || m.rope_dims > m.head_dim)
    return make_error("synth: RoPE dimensions {} are odd or more than the head's {}", m.rope_dims,
                      m.head_dim);
  if (m.n_nextn_layers < 0)
    return make_error("synth: {} multi-token-prediction layers", m.n_nextn_layers);
  if (m.n_embd % 32 != 0) return make_error("synth: embedding {} is not a multiple of 32", m.n_embd);
  if (m.n_expert == 0 && (m.n_ff <= 0 || m.n_ff % 32 != 0))
    return make_error("synth: FFN width {} is not a positive multiple of 32", m.n_ff);
  if (m.n_expert > 0 && (m.n_expert_used <= 0 || m.n_expert_used > m.n_expert ||
                         m.n_ff_expert <= 0 || m.n_ff_expert % 32 != 0))
    return make_error("synth: bad expert configuration ({} experts, {} used, width {})",
                      m.n_expert, m.n_expert_used, m.n_ff_expert);
  return {};
}

}  // namespace

Result<SynthSummary> write_synthetic_model(const SynthOptions& options, const std::string& path,
                                           const std::function<void(size_t, size_t)>& progress) {
  const ModelShape& m = options.shape;
  if (auto st = validate_shape(m); !st) return st.error_value();
  auto scheme = parse_scheme(options.weight_type);
  if (!scheme) return scheme.error_value();

  gguf::GgufWriter w;
  set_arch_metadata(w, m);
  w.set("general.file_type", Value::u32(scheme->file_type));
  if (is_block_quantized(scheme->base)) w.set("general.quantization_version", Value::u32(2));

  int64_t n_vocab = m.n_vocab > 0 ? m.n_vocab : 258;
  if (!options.vocab_from.empty()) {
    auto v = copy_vocab(w, options.vocab_from);
    if (!v) return v.error_value();
    n_vocab = *v;
  } else if (m.arch == "bert") {
    if (n_vocab < 128) return make_error("synth: a bert vocabulary needs >= 128 tokens, not {}", n_vocab);
    set_bert_vocab(w, n_vocab);
  } else {
    // (Without extra tokens a smaller n_vocab keeps its old meaning: the bytes and BOS/EOS are
    // written all the same, the model's tables have n_vocab rows.)
    if (!m.extra_special_tokens.empty() && n_vocab < 258 + static_cast<int64_t>(m.extra_special_tokens.size()))
      return make_error("synth: a vocabulary of {} is too small for the bytes and special tokens", n_vocab);
    set_builtin_vocab(w, n_vocab, m.extra_special_tokens);
  }

  SynthSummary summary;
  summary.n_vocab = n_vocab;
  const std::vector<float> rope_freqs = llama3_rope_freqs(m);
  const int threads = std::max(1, options.threads);
  const std::vector<TensorPlan> plans = plan_tensors(m, *scheme, n_vocab);
  for (size_t index = 0; index < plans.size(); ++index) {
    const TensorPlan& plan = plans[index];
    const int64_t row = plan.shape[0];
    int64_t rows = 1;
    for (size_t d = 1; d < plan.shape.size(); ++d) rows *= plan.shape[d];
    summary.n_params += row * rows;
    const uint64_t row_size = *row_bytes(plan.type, row);
    const uint64_t seed = options.seed ^ hash_name(plan.name);
    const size_t total = plans.size();
    gguf::GgufWriter::Fill fill = [plan, row, rows, row_size, seed, threads, index, total,
                                   &rope_freqs, &progress](std::span<uint8_t> out) {
      auto make_rows = [&](int64_t begin, int64_t end) {
        std::vector<float> buf(static_cast<size_t>(row));
        for (int64_t r = begin; r < end; ++r) {
          SplitMix rng{seed + static_cast<uint64_t>(r) * 0x632be59bd9b4e019ULL};
          if (plan.name == "rope_freqs.weight") {
            std::copy(rope_freqs.begin(), rope_freqs.end(), buf.begin());
          } else if (plan.name == "rope_factors_short.weight" ||
                     plan.name == "rope_factors_long.weight") {
            longrope_factors(plan.name == "rope_factors_long.weight", buf);
          } else if (plan.init == Init::kOnes) {
            std::fill(buf.begin(), buf.end(), 1.0f);
          } else {
            const float sd = plan.init == Init::kSmall ? 0.02f : 1.0f / std::sqrt(float(row));
            fill_normal(rng, sd, buf.data(), row);
            if (plan.init == Init::kNegative)
              for (float& v : buf) v = -(std::fabs(v) + 0.1f);
          }
          quantize_row(plan.type, buf.data(), out.data() + r * row_size, row);
        }
      };
      std::vector<std::thread> pool;
      const int64_t per = (rows + threads - 1) / threads;
      for (int t = 1; t < threads && t * per < rows; ++t)
        pool.emplace_back(make_rows, t * per, std::min(rows, (t + 1) * per));
      make_rows(0, std::min(rows, per));
      for (auto& th : pool) th.join();
      if (progress) progress(index + 1, total);
    };
    if (auto st = w.add_tensor(plan.name, plan.type, plan.shape, std::move(fill)); !st)
      return st.error_value();
  }
  if (auto st = w.write(path); !st) return st.error_value();
  std::error_code ec;
  summary.file_bytes = std::filesystem::file_size(path, ec);
  return summary;
}

}  // namespace cadenza::synth
