#include "synth/mmproj.h"

#include <cmath>

#include "gguf/gguf.h"
#include "synth/random.h"
#include "tensor/quant.h"

namespace cadenza::synth {

const std::vector<MmprojShape>& mmproj_presets() {
  static const std::vector<MmprojShape> presets = {
      {"clip-tiny", 32, 8, 64, 128, 2, 4, 64, 64, false},
      {"clip-vit-l-336", 336, 14, 1024, 4096, 24, 16, 4096, 4096, false},
      {"gemma3-tiny", 64, 4, 64, 128, 2, 4, 0, 64, true, "gemma3", 4},
      {"siglip-gemma3-896", 896, 14, 1152, 4304, 27, 16, 0, 2560, true, "gemma3", 4},
  };
  return presets;
}

const MmprojShape* find_mmproj_preset(const std::string& name) {
  for (const MmprojShape& s : mmproj_presets())
    if (s.name == name) return &s;
  return nullptr;
}

namespace {

enum class Init { kWeight, kBias, kNorm, kEmbedding };

// Adds a tensor of `shape` (ggml order) drawn from `init`, stored as `type`.
Status add(gguf::GgufWriter& w, uint64_t seed, const std::string& name, DType type,
           std::vector<int64_t> shape, Init init) {
  const int64_t row = shape[0];
  int64_t rows = 1;
  for (size_t i = 1; i < shape.size(); ++i) rows *= shape[i];
  // fan_in of a matrix is its row length, except the patch kernel's: p * p * 3.
  const int64_t fan_in = shape.size() == 4 ? shape[0] * shape[1] * shape[2] : row;
  const uint64_t tseed = seed ^ hash_name(name);
  const uint64_t row_size = *row_bytes(type, row);
  return w.add_tensor(name, type, shape, [=](std::span<uint8_t> out) {
    std::vector<float> buf(static_cast<size_t>(row));
    for (int64_t r = 0; r < rows; ++r) {
      SplitMix rng{tseed + static_cast<uint64_t>(r) * 0x632be59bd9b4e019ULL};
      switch (init) {
        case Init::kWeight: fill_normal(rng, 1.0f / std::sqrt(static_cast<float>(fan_in)), buf.data(), row); break;
        case Init::kBias: fill_normal(rng, 0.02f, buf.data(), row); break;
        case Init::kEmbedding: fill_normal(rng, 0.5f, buf.data(), row); break;
        case Init::kNorm:
          fill_normal(rng, 0.05f, buf.data(), row);
          for (float& v : buf) v += 1.0f;
          break;
      }
      quantize_row(type, buf.data(), out.data() + r * row_size, row);
    }
  });
}

}  // namespace

Status write_synthetic_mmproj(const MmprojShape& s, uint64_t seed, const std::string& path) {
  const bool gemma3 = s.projector == "gemma3";
  if (s.image_size % s.patch_size != 0 || s.n_embd % s.n_heads != 0 ||
      (gemma3 && (s.pool <= 0 || (s.image_size / s.patch_size) % s.pool != 0)) ||
      (!gemma3 && s.projector != "mlp"))
    return make_error("synth: mmproj shape '{}' is inconsistent", s.name);
  using gguf::Value;
  gguf::GgufWriter w;
  w.set("general.architecture", Value::string("clip"));
  w.set("general.name", Value::string(s.name + " (random weights)"));
  w.set("general.description", Value::string("random-weight mmproj written by cadenza synth"));
  w.set("general.file_type", Value::u32(1));  // mostly F16
  w.set("clip.has_text_encoder", Value::boolean(false));
  w.set("clip.has_vision_encoder", Value::boolean(true));
  if (!gemma3) w.set("clip.has_llava_projector", Value::boolean(true));
  w.set("clip.projector_type", Value::string(s.projector));
  w.set("clip.use_gelu", Value::boolean(s.use_gelu));
  w.set("clip.vision.image_size", Value::u32(static_cast<uint32_t>(s.image_size)));
  w.set("clip.vision.patch_size", Value::u32(static_cast<uint32_t>(s.patch_size)));
  w.set("clip.vision.embedding_length", Value::u32(static_cast<uint32_t>(s.n_embd)));
  w.set("clip.vision.feed_forward_length", Value::u32(static_cast<uint32_t>(s.n_ff)));
  w.set("clip.vision.projection_dim", Value::u32(static_cast<uint32_t>(s.n_out)));
  w.set("clip.vision.attention.head_count", Value::u32(static_cast<uint32_t>(s.n_heads)));
  w.set("clip.vision.attention.layer_norm_epsilon", Value::f32(gemma3 ? 1e-6f : 1e-5f));
  w.set("clip.vision.block_count", Value::u32(static_cast<uint32_t>(s.n_layers)));
  if (gemma3) {
    // The reference converter writes the pooling kernel only when it is not Gemma 3's 4.
    if (s.pool != 4) w.set("clip.vision.projector.scale_factor", Value::u32(static_cast<uint32_t>(s.pool)));
    w.set("clip.vision.image_mean", Value::f32_array({0.5f, 0.5f, 0.5f}));
    w.set("clip.vision.image_std", Value::f32_array({0.5f, 0.5f, 0.5f}));
  } else {
    w.set("clip.vision.image_mean", Value::f32_array({0.48145466f, 0.4578275f, 0.40821073f}));
    w.set("clip.vision.image_std", Value::f32_array({0.26862954f, 0.26130258f, 0.27577711f}));
  }

  const int64_t d = s.n_embd, p = s.patch_size, side = s.image_size / s.patch_size;
  Status st;
  auto t = [&](const std::string& name, DType type, std::vector<int64_t> shape, Init init) {
    if (st) st = add(w, seed, name, type, std::move(shape), init);
  };
  if (gemma3) {
    t("mm.input_projection.weight", DType::F16, {s.n_out, d}, Init::kWeight);
    t("mm.soft_emb_norm.weight", DType::F32, {d}, Init::kNorm);
    t("v.patch_embd.weight", DType::F16, {p, p, 3, d}, Init::kWeight);
    t("v.patch_embd.bias", DType::F32, {d}, Init::kBias);
    t("v.position_embd.weight", DType::F32, {d, side * side}, Init::kEmbedding);
    t("v.post_ln.weight", DType::F32, {d}, Init::kNorm);
    t("v.post_ln.bias", DType::F32, {d}, Init::kBias);
  } else {
    t("mm.0.weight", DType::F16, {d, s.proj_hidden}, Init::kWeight);
    t("mm.0.bias", DType::F32, {s.proj_hidden}, Init::kBias);
    t("mm.2.weight", DType::F16, {s.proj_hidden, s.n_out}, Init::kWeight);
    t("mm.2.bias", DType::F32, {s.n_out}, Init::kBias);
    t("v.class_embd", DType::F32, {d}, Init::kEmbedding);
    t("v.patch_embd.weight", DType::F16, {p, p, 3, d}, Init::kWeight);
    t("v.position_embd.weight", DType::F32, {d, side * side + 1}, Init::kEmbedding);
    t("v.pre_ln.weight", DType::F32, {d}, Init::kNorm);
    t("v.pre_ln.bias", DType::F32, {d}, Init::kBias);
  }
  for (int64_t il = 0; il < s.n_layers; ++il) {
    const std::string pre = "v.blk." + std::to_string(il) + ".";
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
      t(pre + m + ".weight", DType::F16, {d, d}, Init::kWeight);
      t(pre + m + ".bias", DType::F32, {d}, Init::kBias);
    }
    t(pre + "ffn_up.weight", DType::F16, {d, s.n_ff}, Init::kWeight);
    t(pre + "ffn_up.bias", DType::F32, {s.n_ff}, Init::kBias);
    t(pre + "ffn_down.weight", DType::F16, {s.n_ff, d}, Init::kWeight);
    t(pre + "ffn_down.bias", DType::F32, {d}, Init::kBias);
    for (const char* n : {"ln1", "ln2"}) {
      t(pre + n + ".weight", DType::F32, {d}, Init::kNorm);
      t(pre + n + ".bias", DType::F32, {d}, Init::kBias);
    }
  }
  if (!st) return st;
  return w.write(path);
}

}  // namespace cadenza::synth
