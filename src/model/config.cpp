// ModelConfig::from_gguf: the keys every architecture has (sizes, heads, norm epsilon, RoPE); the
// family's configure hook (arch/<family>.cpp, found through the registry) sets its flags and reads
// its own keys in between.
#include "model/config.h"

#include <cmath>
#include <numbers>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gguf/gguf.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model {

namespace {

#define CADENZA_TRY_ASSIGN(lhs, expr)      \
  do {                                     \
    auto try_result_ = (expr);             \
    if (!try_result_) return try_result_.error_value(); \
    lhs = *try_result_;                    \
  } while (0)

// Llama 3 frequency divisors (the scheme Meta published with Llama 3.1): wavelengths shorter than
// original_context / high_freq_factor are kept, longer than original_context / low_freq_factor
// are divided by `factor`, and the band between is interpolated.
std::vector<float> llama3_freq_factors(int32_t rope_dims, double freq_base, double factor,
                                       double low_freq_factor, double high_freq_factor,
                                       double original_context) {
  std::vector<float> factors;
  const double low_freq_wavelen = original_context / low_freq_factor;
  const double high_freq_wavelen = original_context / high_freq_factor;
  for (int32_t i = 0; i < rope_dims / 2; ++i) {
    const double freq = std::pow(freq_base, -2.0 * i / rope_dims);
    const double wavelen = 2.0 * std::numbers::pi / freq;
    double divisor;
    if (wavelen < high_freq_wavelen) {
      divisor = 1.0;
    } else if (wavelen > low_freq_wavelen) {
      divisor = factor;
    } else {
      const double smooth =
          (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      divisor = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    factors.push_back(static_cast<float>(divisor));
  }
  return factors;
}

Status read_rope(const MetadataReader& md, ModelConfig& c) {
  const gguf::GgufFile& file = md.file();
  CADENZA_TRY_ASSIGN(c.rope_dims, md.count_or("rope.dimension_count", c.head_dim_k, 2, c.head_dim_k));
  if (c.rope_dims % 2 != 0) {
    return make_error("{}: key '{}' = {} must be even", file.name(), md.key("rope.dimension_count"),
                      c.rope_dims);
  }
  double freq_base = 0;
  CADENZA_TRY_ASSIGN(freq_base, md.real_or("rope.freq_base", 10000.0));
  if (freq_base <= 1.0) {
    return make_error("{}: key '{}' = {} must be > 1", file.name(), md.key("rope.freq_base"), freq_base);
  }
  c.rope_freq_base = static_cast<float>(freq_base);

  std::string type = "none";
  if (md.has("rope.scaling.type")) {
    Result<std::string> t = file.get_string(md.key("rope.scaling.type"));
    if (!t) return t.error_value();
    type = *t;
  }
  double factor = 0;
  if (md.has("rope.scaling.factor")) {
    CADENZA_TRY_ASSIGN(factor, md.real_or("rope.scaling.factor", 0.0));
  } else {
    CADENZA_TRY_ASSIGN(factor, md.real_or("rope.scale_linear", 0.0));  // the older key
  }
  if (factor < 0) {
    return make_error("{}: rope scaling factor {} must be positive", file.name(), factor);
  }

  c.has_rope_freqs_tensor = file.find_tensor(c.rope_freqs_tensor) != nullptr;
  if (type == "none" || (type == "linear" && (factor == 0.0 || factor == 1.0))) {
    c.rope_scaling = RopeScaling::None;
  } else if (type == "linear") {
    c.rope_scaling = RopeScaling::Linear;
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (type == "llama3") {
    if (c.has_rope_freqs_tensor) {
      c.rope_scaling = RopeScaling::Llama3;
    } else {
      double low = 0, high = 0, original = 0;
      for (const char* k : {"rope.scaling.factor", "rope.scaling.low_freq_factor",
                            "rope.scaling.high_freq_factor", "rope.scaling.original_context_length"}) {
        if (!md.has(k)) {
          return make_error("{}: rope scaling 'llama3' needs key '{}' or a rope_freqs.weight tensor",
                            file.name(), md.key(k));
        }
      }
      CADENZA_TRY_ASSIGN(low, md.real_or("rope.scaling.low_freq_factor", 0.0));
      CADENZA_TRY_ASSIGN(high, md.real_or("rope.scaling.high_freq_factor", 0.0));
      CADENZA_TRY_ASSIGN(original, md.real_or("rope.scaling.original_context_length", 0.0));
      if (!(factor > 0 && low > 0 && high > low && original > 0)) {
        return make_error("{}: invalid llama3 rope scaling (factor {}, low {}, high {}, context {})",
                          file.name(), factor, low, high, original);
      }
      c.rope_scaling = RopeScaling::Llama3;
      c.rope_freq_factors = llama3_freq_factors(c.rope_dims, freq_base, factor, low, high, original);
    }
  } else if (type == "yarn") {
    if (!(factor > 0)) {
      return make_error("{}: rope scaling 'yarn' needs key '{}' > 0", file.name(),
                        md.key("rope.scaling.factor"));
    }
    c.rope_scaling = RopeScaling::Yarn;
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
    CADENZA_TRY_ASSIGN(c.yarn_orig_ctx, md.count("rope.scaling.original_context_length", 1,
                                                  limits::kMaxContext));
    double v = 0;
    CADENZA_TRY_ASSIGN(v, md.real_or("rope.scaling.yarn_ext_factor", 1.0));
    c.yarn_ext_factor = static_cast<float>(v);
    CADENZA_TRY_ASSIGN(v, md.real_or("rope.scaling.yarn_beta_fast", 32.0));
    c.yarn_beta_fast = static_cast<float>(v);
    CADENZA_TRY_ASSIGN(v, md.real_or("rope.scaling.yarn_beta_slow", 1.0));
    c.yarn_beta_slow = static_cast<float>(v);
    CADENZA_TRY_ASSIGN(v, md.real_or("rope.scaling.yarn_attn_factor", 1.0));
    c.yarn_attn_factor = static_cast<float>(v);
    CADENZA_TRY_ASSIGN(v, md.real_or("rope.scaling.yarn_log_multiplier", 0.0));
    c.yarn_log_multiplier = static_cast<float>(v);
    if (!(c.yarn_ext_factor >= 0 && c.yarn_beta_fast > 0 && c.yarn_beta_slow > 0 &&
          c.yarn_attn_factor > 0)) {
      return make_error("{}: invalid yarn rope scaling (ext_factor {}, beta_fast {}, beta_slow {}, "
                        "attn_factor {})", file.name(), c.yarn_ext_factor, c.yarn_beta_fast,
                        c.yarn_beta_slow, c.yarn_attn_factor);
    }
  } else if ((type == "longrope" || type == "su") && c.has_rope_freqs_tensor &&
             c.rope_freqs_tensor != "rope_freqs.weight") {
    c.rope_scaling = RopeScaling::Llama3;  // the family's per-pair factors tensor (phi3)
  } else {
    return make_error("{}: rope scaling type '{}' is not supported (supported: none, linear, llama3, "
                      "yarn)", file.name(), type);
  }
  if (c.has_rope_freqs_tensor) c.rope_scaling = RopeScaling::Llama3;
  return {};
}

}  // namespace

Result<ModelConfig> ModelConfig::from_gguf(const gguf::GgufFile& file) {
  return from_gguf(file, ArchitectureRegistry::builtin());
}

Result<ModelConfig> ModelConfig::from_gguf(const gguf::GgufFile& file,
                                           const ArchitectureRegistry& registry) {
  using namespace limits;
  ModelConfig c;
  Result<std::string> arch = file.get_string("general.architecture");
  if (!arch) return arch.error_value();
  c.architecture = *arch;
  const ArchitectureFamily* family = registry.find(c.architecture);
  if (!family) {
    return make_error("{}: architecture '{}' is not supported (key 'general.architecture'; "
                      "supported: {})", file.name(), c.architecture,
                      fmt::join(registry.names(), ", "));
  }
  {
    Result<std::string> name = file.get_string_or("general.name", "");
    if (!name) return name.error_value();
    c.name = *name;
  }
  const MetadataReader md(file, c.architecture);

  const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (!embd) return make_error("{}: tensor 'token_embd.weight' is missing", file.name());
  if (embd->shape.size() != 2) {
    return make_error("{}: tensor 'token_embd.weight' must have 2 dimensions", file.name());
  }
  c.n_vocab = embd->shape[1];

  CADENZA_TRY_ASSIGN(c.context_length, md.count("context_length", 1, kMaxContext));
  CADENZA_TRY_ASSIGN(c.n_embd, md.count("embedding_length", 1, kMaxEmbd));
  CADENZA_TRY_ASSIGN(c.n_layers, md.count("block_count", 1, kMaxLayers));
  CADENZA_TRY_ASSIGN(c.n_heads, md.count("attention.head_count", 1, kMaxHeads));
  const gguf::Value* kv_heads = file.find(md.key("attention.head_count_kv"));
  if (kv_heads != nullptr && kv_heads->as_array() != nullptr) {
    // Per layer (hybrid files: 0 on the layers without attention; ModelConfig::layer_kv_heads).
    Result<std::vector<int64_t>> per_layer = file.get_int_array(md.key("attention.head_count_kv"));
    if (!per_layer) return per_layer.error_value();
    if (static_cast<int64_t>(per_layer->size()) != c.n_layers) {
      return make_error("{}: key '{}' has {} entries, expected one per layer ({})", file.name(),
                        md.key("attention.head_count_kv"), per_layer->size(), c.n_layers);
    }
    c.n_kv_heads = 0;
    for (int64_t v : *per_layer) {
      if (v < 0 || v > c.n_heads || (v != 0 && c.n_kv_heads != 0 && v != c.n_kv_heads)) {
        return make_error("{}: key '{}' holds {}: every entry must be 0 or the same KV head "
                          "count in [1, {}]", file.name(), md.key("attention.head_count_kv"), v,
                          c.n_heads);
      }
      if (v != 0) c.n_kv_heads = v;
    }
    if (c.n_kv_heads == 0) {
      return make_error("{}: key '{}' is 0 on every layer", file.name(),
                        md.key("attention.head_count_kv"));
    }
    c.layer_kv_heads = std::move(*per_layer);
  } else {
    CADENZA_TRY_ASSIGN(c.n_kv_heads,
                       md.count_or("attention.head_count_kv", c.n_heads, 1, c.n_heads));
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return make_error("{}: head_count {} is not a multiple of head_count_kv {}", file.name(),
                      c.n_heads, c.n_kv_heads);
  }
  const int64_t default_head_dim = c.n_embd / c.n_heads;
  CADENZA_TRY_ASSIGN(c.head_dim_k, md.count_or("attention.key_length", default_head_dim, 1, kMaxHeadDim));
  CADENZA_TRY_ASSIGN(c.head_dim_v, md.count_or("attention.value_length", default_head_dim, 1, kMaxHeadDim));
  double eps = 0;
  CADENZA_TRY_ASSIGN(eps, md.real_or("attention.layer_norm_rms_epsilon", 1e-5));
  if (!(eps > 0 && eps < 1)) {
    return make_error("{}: key '{}' = {} is out of range (0, 1)", file.name(),
                      md.key("attention.layer_norm_rms_epsilon"), eps);
  }
  c.rms_norm_eps = static_cast<float>(eps);

  // The family's flags and keys: RoPE layout, biases, Q/K norms, the feed-forward and expert keys
  // with its defaults (arch/<family>.cpp).
  Status configured = family->configure(md, c);
  if (!configured) return configured.error_value();

  Status rope = read_rope(md, c);
  if (!rope) return rope.error_value();

  c.tied_output = file.find_tensor("output.weight") == nullptr;
  c.shard.layer_end = c.n_layers;
  return c;
}

kernels::RopeParams ModelConfig::rope_params() const {
  kernels::RopeParams rope;
  rope.n_dims = rope_dims;
  rope.freq_base = rope_freq_base;
  rope.freq_scale = rope_freq_scale;
  rope.layout = rope_layout;
  if (rope_scaling == RopeScaling::Yarn && yarn_ext_factor > 0) {
    rope.ext_factor = yarn_ext_factor;
    rope.beta_fast = yarn_beta_fast;
    rope.beta_slow = yarn_beta_slow;
    rope.orig_ctx = yarn_orig_ctx;
    rope.attn_factor = yarn_rotation_scale > 0
                           ? yarn_attn_factor * yarn_rotation_scale
                           : static_cast<float>(yarn_attn_factor *
                                                (1.0 + 0.1 * std::log(1.0 / rope_freq_scale)));
  } else {
    rope.attn_factor = rope_attn_factor;
  }
  return rope;
}

kernels::RopeParams ModelConfig::rope_params(int64_t layer) const {
  kernels::RopeParams rope = rope_params();
  if (attention_window(layer) > 0 && rope_freq_base_window > 0) {
    rope.freq_base = rope_freq_base_window;
    if (rope_window_unscaled) {
      kernels::RopeParams plain;
      plain.n_dims = rope.n_dims;
      plain.freq_base = rope.freq_base;
      plain.layout = rope.layout;
      rope = plain;
    }
  }
  return rope;
}

std::string ModelConfig::summary() const {
  std::string s = fmt::format("{}: {} layers, embd {}, heads {}/{} x {}", architecture, n_layers,
                              n_embd, n_heads, n_kv_heads, head_dim_k);
  if (head_dim_v != head_dim_k) s += fmt::format(" (v {})", head_dim_v);
  if (n_experts > 0) {
    s += fmt::format(", experts {} (top {}) x ffn {}", n_experts, n_experts_used, n_ff_expert);
    if (n_ff_shared_expert > 0) s += fmt::format(" + shared ffn {}", n_ff_shared_expert);
  } else {
    s += fmt::format(", ffn {}", n_ff);
  }
  s += fmt::format(", vocab {}, context {}, rope {} base {}", n_vocab, context_length,
                   rope_layout == kernels::RopeLayout::NeoX ? "neox" : "normal", rope_freq_base);
  if (rope_scaling == RopeScaling::Linear) s += fmt::format(" linear x{}", 1.0f / rope_freq_scale);
  if (rope_scaling == RopeScaling::Llama3) s += " llama3";
  if (rope_scaling == RopeScaling::Yarn) {
    s += fmt::format(" yarn x{} from {}", 1.0f / rope_freq_scale, yarn_orig_ctx);
  }
  if (rope_freq_base_window > 0) {
    s += fmt::format(" (windowed layers: base {}{})", rope_freq_base_window,
                     rope_window_unscaled ? ", unscaled" : "");
  }
  if (qkv_bias) s += ", qkv bias";
  if (fused_qkv) s += ", fused qkv";
  if (fused_gate_up) s += ", fused gate/up";
  if (ffn_activation == FfnActivation::GeluTanh) s += ", geglu";
  if (attn_scale > 0) s += fmt::format(", attention scale {}", attn_scale);
  if (attn_temperature_beta != 0) {
    s += fmt::format(", attention temperature {} per {}", attn_temperature_beta,
                     attn_temperature_length);
  }
  if (embedding_scale != 1) s += fmt::format(", embedding x{}", embedding_scale);
  if (residual_scale != 1) s += fmt::format(", residual x{}", residual_scale);
  if (logit_scale != 1) s += fmt::format(", logits x{}", logit_scale);
  if (final_logit_softcap > 0) s += fmt::format(", logit softcap {}", final_logit_softcap);
  if (qk_norm) s += ", qk norm";
  if (attn_sinks) s += ", attention sinks";
  if (attn_window > 0) {
    int64_t windowed = 0;
    for (int64_t il = 0; il < n_layers; ++il) windowed += attention_window(il) > 0 ? 1 : 0;
    s += fmt::format(", window {} on {} of {} layers", attn_window, windowed, n_layers);
  }
  if (tied_output) s += ", tied output";
  return s;
}

#undef CADENZA_TRY_ASSIGN

}  // namespace cadenza::model
