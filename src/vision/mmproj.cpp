#include "vision/mmproj.h"

#include "gguf/gguf.h"

namespace cadenza::vision {

std::string projector_name(ProjectorType p) {
  switch (p) {
    case ProjectorType::kMlp: return "mlp";
    case ProjectorType::kGemma3: return "gemma3";
  }
  return "?";
}

Result<VisionConfig> read_vision_config(const gguf::GgufFile& f) {
  VisionConfig c;
  auto has_vision = f.get_bool_or("clip.has_vision_encoder", false);
  if (!has_vision) return has_vision.error_value();
  if (!*has_vision) return make_error("{}: not a vision mmproj (clip.has_vision_encoder is not true)", f.name());
  auto proj = f.get_string_or("clip.projector_type", "");
  if (!proj) return proj.error_value();
  if (proj->empty()) {
    auto llava = f.get_bool_or("clip.has_llava_projector", false);
    if (!llava) return llava.error_value();
    if (*llava) *proj = "mlp";
  }
  if (*proj == "mlp") c.projector = ProjectorType::kMlp;
  else if (*proj == "gemma3") c.projector = ProjectorType::kGemma3;
  else
    return make_error("{}: projector type '{}' is not supported (supported: mlp (LLaVA-1.5), gemma3)",
                      f.name(), *proj);
  auto u = [&](const char* key, int64_t& dst, uint64_t max) -> Status {
    auto v = f.get_uint(std::string("clip.vision.") + key);
    if (!v) return v.error_value();
    if (*v == 0 || *v > max) return make_error("{}: clip.vision.{} = {} is out of range", f.name(), key, *v);
    dst = static_cast<int64_t>(*v);
    return {};
  };
  for (auto [key, dst, max] :
       {std::tuple{"image_size", &c.image_size, uint64_t{8192}}, {"patch_size", &c.patch_size, uint64_t{1024}},
        {"embedding_length", &c.n_embd, uint64_t{1} << 16}, {"feed_forward_length", &c.n_ff, uint64_t{1} << 18},
        {"block_count", &c.n_layers, uint64_t{1024}}, {"attention.head_count", &c.n_heads, uint64_t{1024}}}) {
    if (Status st = u(key, *dst, max); !st) return st.error_value();
  }
  if (c.image_size % c.patch_size != 0)
    return make_error("{}: image size {} is not a multiple of the patch size {}", f.name(), c.image_size, c.patch_size);
  if (c.n_embd % c.n_heads != 0)
    return make_error("{}: embedding {} is not a multiple of the {} heads", f.name(), c.n_embd, c.n_heads);
  c.head_dim = c.n_embd / c.n_heads;
  // LLaVA feeds the projector the penultimate layer's output: the last block of the file is not
  // run (measured against the reference engine: a file of N blocks computes N - 1). Gemma 3
  // takes the last layer's (after post_ln).
  c.n_layers_used = c.projector == ProjectorType::kMlp ? c.n_layers - 1 : c.n_layers;
  auto eps = f.get_float_or("clip.vision.attention.layer_norm_epsilon", 1e-5);
  if (!eps) return eps.error_value();
  c.norm_eps = static_cast<float>(*eps);
  for (auto [key, dst] : {std::pair{"clip.vision.image_mean", &c.image_mean}, {"clip.vision.image_std", &c.image_std}}) {
    auto v = f.get_float_array(key);
    if (!v) return v.error_value();
    if (v->size() != 3) return make_error("{}: {} has {} values, expected 3", f.name(), key, v->size());
    for (size_t i = 0; i < 3; ++i) (*dst)[i] = static_cast<float>((*v)[i]);
  }
  for (float s : c.image_std)
    if (!(s > 0)) return make_error("{}: clip.vision.image_std has a value <= 0", f.name());
  auto gelu = f.get_bool_or("clip.use_gelu", false);
  if (!gelu) return gelu.error_value();
  c.activation = *gelu ? Activation::kGelu : Activation::kGeluQuick;

  const int64_t side = c.image_size / c.patch_size;
  c.n_patches = side * side;
  c.n_image_tokens = c.n_patches;
  c.has_class_embd = f.find_tensor("v.class_embd") != nullptr;
  c.has_patch_bias = f.find_tensor("v.patch_embd.bias") != nullptr;
  c.has_pre_ln = f.find_tensor("v.pre_ln.weight") != nullptr;
  c.has_post_ln = f.find_tensor("v.post_ln.weight") != nullptr;
  c.n_positions = c.n_patches + (c.has_class_embd ? 1 : 0);
  if (c.projector == ProjectorType::kMlp) {
    const gguf::TensorInfo* mm0 = f.find_tensor("mm.0.weight");
    const gguf::TensorInfo* mm2 = f.find_tensor("mm.2.weight");
    if (mm0 == nullptr || mm2 == nullptr)
      return make_error("{}: the MLP projector's tensors (mm.0.weight, mm.2.weight) are missing", f.name());
    c.proj_hidden = mm0->rows();
    c.n_out = mm2->rows();
    if (c.proj_hidden <= 0 || c.n_out <= 0) return make_error("{}: empty projector tensors", f.name());
    return c;
  }
  // gemma3: SigLIP without a class embedding; the patch grid average-pooled pool x pool.
  if (c.has_class_embd) return make_error("{}: a gemma3 encoder has no class embedding (v.class_embd)", f.name());
  auto pool = f.get_uint_or("clip.vision.projector.scale_factor", 4);
  if (!pool) return pool.error_value();
  if (*pool == 0 || side % static_cast<int64_t>(*pool) != 0)
    return make_error("{}: clip.vision.projector.scale_factor = {} does not divide the {} x {} patch grid",
                      f.name(), *pool, side, side);
  c.pool = static_cast<int64_t>(*pool);
  c.n_image_tokens = (side / c.pool) * (side / c.pool);
  const gguf::TensorInfo* inp = f.find_tensor("mm.input_projection.weight");
  if (inp == nullptr || f.find_tensor("mm.soft_emb_norm.weight") == nullptr)
    return make_error("{}: the gemma3 projector's tensors (mm.input_projection.weight, "
                      "mm.soft_emb_norm.weight) are missing", f.name());
  c.n_out = inp->shape.empty() ? 0 : inp->shape[0];
  if (c.n_out <= 0) return make_error("{}: empty projector tensors", f.name());
  c.image_begin = "<start_of_image>";
  c.image_end = "<end_of_image>";
  c.bidirectional_image = true;
  return c;
}

}  // namespace cadenza::vision
