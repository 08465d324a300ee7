// Small random-weight GGUF models built in memory, for tests that must run without ../shared:
// every supported architecture variant, and malformed variants (missing or misshapen tensors,
// bad metadata) for the error paths.
#pragma once

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tensor/quant.h"

namespace cadenza::test {

struct SyntheticSpec {
  std::string arch = "llama";
  int64_t embd = 32;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t head_dim = 0;  // 0: embd / heads (no key_length/value_length keys written)
  int64_t ff = 48;
  int64_t vocab = 64;
  int64_t experts = 0;
  int64_t experts_used = 0;
  int64_t ff_expert = 0;
  int64_t ff_shared = 0;  // qwen2moe shared expert width (0: none)
  bool qkv_bias = false;
  bool qk_norm = false;
  bool tied = false;
  DType type = DType::F16;  // matrices; norms and biases are F32
  uint32_t seed = 1;
  // Tweaks for error tests.
  std::set<std::string> omit;                              // tensors left out
  std::map<std::string, std::vector<int64_t>> reshape;     // tensors written with another shape
  std::map<std::string, DType> retype;                     // tensors written with another type
  std::vector<std::pair<std::string, gguf::Value>> extra;  // metadata added or replaced
  std::vector<std::pair<std::string, std::vector<float>>> extra_tensors;  // F32 vectors
};

// The bytes and the file parsed from them, kept alive together.
struct SyntheticModel {
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::GgufFile> file;
};

// The GGUF image of the spec.
inline std::vector<uint8_t> synthetic_bytes(const SyntheticSpec& s) {
  gguf::GgufWriter w;
  const std::string a = s.arch;
  w.set("general.architecture", gguf::Value::string(a));
  w.set(a + ".context_length", gguf::Value::u32(512));
  w.set(a + ".embedding_length", gguf::Value::u32(static_cast<uint32_t>(s.embd)));
  w.set(a + ".block_count", gguf::Value::u32(static_cast<uint32_t>(s.layers)));
  w.set(a + ".feed_forward_length", gguf::Value::u32(static_cast<uint32_t>(s.ff)));
  w.set(a + ".attention.head_count", gguf::Value::u32(static_cast<uint32_t>(s.heads)));
  w.set(a + ".attention.head_count_kv", gguf::Value::u32(static_cast<uint32_t>(s.kv_heads)));
  w.set(a + ".attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-5f));
  w.set(a + ".rope.freq_base", gguf::Value::f32(10000.0f));
  const int64_t hd = s.head_dim ? s.head_dim : s.embd / s.heads;
  if (s.head_dim) {
    w.set(a + ".attention.key_length", gguf::Value::u32(static_cast<uint32_t>(hd)));
    w.set(a + ".attention.value_length", gguf::Value::u32(static_cast<uint32_t>(hd)));
  }
  if (s.experts) {
    w.set(a + ".expert_count", gguf::Value::u32(static_cast<uint32_t>(s.experts)));
    w.set(a + ".expert_used_count", gguf::Value::u32(static_cast<uint32_t>(s.experts_used)));
    if (s.ff_expert) {
      w.set(a + ".expert_feed_forward_length", gguf::Value::u32(static_cast<uint32_t>(s.ff_expert)));
    }
    if (s.ff_shared) {
      w.set(a + ".expert_shared_feed_forward_length",
            gguf::Value::u32(static_cast<uint32_t>(s.ff_shared)));
    }
  }
  for (const auto& [key, value] : s.extra) w.set(key, value);

  std::mt19937 rng(s.seed);
  auto add = [&](const std::string& name, std::vector<int64_t> shape, bool is_vector) {
    if (s.omit.count(name)) return;
    if (auto it = s.reshape.find(name); it != s.reshape.end()) shape = it->second;
    DType type = is_vector ? DType::F32 : s.type;
    if (auto it = s.retype.find(name); it != s.retype.end()) type = it->second;
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    std::normal_distribution<float> dist(is_vector ? 1.0f : 0.0f,
                                         is_vector ? 0.1f : 1.0f / std::sqrt(static_cast<float>(shape[0])));
    std::vector<float> values(static_cast<size_t>(count));
    for (float& v : values) v = dist(rng);
    const DTypeTraits& t = traits(type);
    std::vector<uint8_t> bytes;
    if (t.compute_supported && shape[0] % t.block_size == 0) {
      const size_t row = static_cast<size_t>(*row_bytes(type, shape[0]));
      bytes.resize(row * static_cast<size_t>(count / shape[0]));
      for (int64_t r = 0; r < count / shape[0]; ++r) {
        quantize_row(type, values.data() + r * shape[0], bytes.data() + static_cast<size_t>(r) * row, shape[0]);
      }
    } else {
      bytes.resize(static_cast<size_t>(count / t.block_size) * t.type_size);
    }
    Status st = w.add_tensor(name, type, shape, std::move(bytes));
    (void)st;
  };
  add("token_embd.weight", {s.embd, s.vocab}, false);
  add("output_norm.weight", {s.embd}, true);
  if (!s.tied) add("output.weight", {s.embd, s.vocab}, false);
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", {s.embd}, true);
    add(p + "attn_q.weight", {s.embd, s.heads * hd}, false);
    add(p + "attn_k.weight", {s.embd, s.kv_heads * hd}, false);
    add(p + "attn_v.weight", {s.embd, s.kv_heads * hd}, false);
    add(p + "attn_output.weight", {s.heads * hd, s.embd}, false);
    if (s.qkv_bias) {
      add(p + "attn_q.bias", {s.heads * hd}, true);
      add(p + "attn_k.bias", {s.kv_heads * hd}, true);
      add(p + "attn_v.bias", {s.kv_heads * hd}, true);
    }
    if (s.qk_norm) {
      add(p + "attn_q_norm.weight", {hd}, true);
      add(p + "attn_k_norm.weight", {hd}, true);
    }
    add(p + "ffn_norm.weight", {s.embd}, true);
    if (s.experts) {
      const int64_t f = s.ff_expert ? s.ff_expert : s.ff;
      add(p + "ffn_gate_inp.weight", {s.embd, s.experts}, false);
      add(p + "ffn_gate_exps.weight", {s.embd, f, s.experts}, false);
      add(p + "ffn_up_exps.weight", {s.embd, f, s.experts}, false);
      add(p + "ffn_down_exps.weight", {f, s.embd, s.experts}, false);
      if (s.ff_shared) {
        add(p + "ffn_gate_shexp.weight", {s.embd, s.ff_shared}, false);
        add(p + "ffn_up_shexp.weight", {s.embd, s.ff_shared}, false);
        add(p + "ffn_down_shexp.weight", {s.ff_shared, s.embd}, false);
        add(p + "ffn_gate_inp_shexp.weight", {s.embd}, true);
      }
    } else {
      add(p + "ffn_gate.weight", {s.embd, s.ff}, false);
      add(p + "ffn_up.weight", {s.embd, s.ff}, false);
      add(p + "ffn_down.weight", {s.ff, s.embd}, false);
    }
  }
  for (const auto& [name, values] : s.extra_tensors) {
    std::vector<uint8_t> bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    Status st = w.add_tensor(name, DType::F32, {static_cast<int64_t>(values.size())}, std::move(bytes));
    (void)st;
  }

  return w.to_bytes();
}

// Parses `bytes` (kept alive with the file); null when the reader rejects them.
inline std::shared_ptr<const gguf::GgufFile> parse_synthetic(std::vector<uint8_t> bytes,
                                                             const std::string& name) {
  auto holder = std::make_shared<SyntheticModel>();
  holder->bytes = std::move(bytes);
  Result<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::parse(holder->bytes, name);
  if (!file) return nullptr;
  holder->file = std::move(*file);
  return std::shared_ptr<const gguf::GgufFile>(holder, holder->file.get());
}

inline std::shared_ptr<const gguf::GgufFile> make_synthetic(const SyntheticSpec& s) {
  return parse_synthetic(synthetic_bytes(s), s.arch + "-synthetic.gguf");
}

// One small model per supported architecture variant (llama F16 and Q8_0, Mixtral-style experts,
// qwen2, qwen3, qwen3moe, qwen2moe last: it uses every op kind), for tests that run every
// architecture. Tests index into it: keep the order.
inline std::vector<SyntheticSpec> architecture_variants() {
  std::vector<SyntheticSpec> specs;
  SyntheticSpec llama;
  specs.push_back(llama);
  SyntheticSpec llama_q8 = llama;
  llama_q8.type = DType::Q8_0;
  llama_q8.embd = 64;
  llama_q8.ff = 64;
  specs.push_back(llama_q8);
  SyntheticSpec mixtral = llama;
  mixtral.experts = 4;
  mixtral.experts_used = 2;
  specs.push_back(mixtral);
  SyntheticSpec qwen2 = llama;
  qwen2.arch = "qwen2";
  qwen2.qkv_bias = true;
  qwen2.tied = true;
  specs.push_back(qwen2);
  SyntheticSpec qwen3 = llama;
  qwen3.arch = "qwen3";
  qwen3.qk_norm = true;
  qwen3.head_dim = 16;  // heads * head_dim != embd
  qwen3.tied = true;
  specs.push_back(qwen3);
  SyntheticSpec qwen3moe = qwen3;
  qwen3moe.arch = "qwen3moe";
  qwen3moe.experts = 8;
  qwen3moe.experts_used = 3;
  qwen3moe.ff_expert = 24;
  specs.push_back(qwen3moe);
  SyntheticSpec qwen2moe = qwen2;
  qwen2moe.arch = "qwen2moe";
  qwen2moe.experts = 6;
  qwen2moe.experts_used = 2;
  qwen2moe.ff_expert = 16;
  qwen2moe.ff_shared = 40;
  specs.push_back(qwen2moe);
  return specs;
}

}  // namespace cadenza::test
