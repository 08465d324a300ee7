// The vision side of an mmproj GGUF file (as the reference engine's conversion tools write them):
// a CLIP / SigLIP vision transformer and its projector into a language model's embedding space.
// Everything comes from the file's metadata and tensor shapes.
//
// Keys read (prefix `clip.`): has_vision_encoder (must be true), projector_type ("mlp" or
// "gemma3"; older LLaVA files say has_llava_projector instead), use_gelu (true: GELU, tanh form;
// false: CLIP's quick GELU), vision.{image_size, patch_size, embedding_length,
// feed_forward_length, block_count, attention.head_count, attention.layer_norm_epsilon,
// image_mean, image_std}, and for gemma3 vision.projector.scale_factor (the pooling kernel; the
// converter omits it when it is 4, Gemma 3's 64 x 64 patches pooled to 16 x 16).
// Tensors (prefix `v.`): patch_embd.weight [p, p, 3, d] (+ optional .bias), class_embd [d]
// (optional: CLIP has one, SigLIP none), position_embd.weight [d, positions], pre_ln and post_ln
// (optional LayerNorms), blk.N.{ln1, attn_q, attn_k, attn_v, attn_out, ln2, ffn_up, ffn_down}
// with biases. Projectors: LLaVA's MLP mm.0 [d, h] and mm.2 [h, n_out] with biases; Gemma 3's
// mm.soft_emb_norm.weight [d] (an RMS norm) and mm.input_projection.weight [n_out, d] (ggml
// order: d rows of n_out, the transpose of the usual [in, out] matrix: HF's [d][n_out]
// parameter as it is).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "util/result.h"

namespace cadenza::gguf {
class GgufFile;
}

namespace cadenza::vision {

enum class ProjectorType {
  kMlp,     // LLaVA-1.5: mm.2(GELU(mm.0(x)))
  kGemma3,  // Gemma 3: input_projection(rms_norm(avg_pool_k x k(x)) * soft_emb_norm)
};
enum class Activation { kGelu, kGeluQuick };

struct VisionConfig {
  ProjectorType projector = ProjectorType::kMlp;
  int64_t image_size = 0;  // the encoder's input is image_size x image_size
  int64_t patch_size = 0;
  int64_t n_embd = 0;
  int64_t n_ff = 0;
  int64_t n_layers = 0;       // clip.vision.block_count: the layers in the file
  int64_t n_layers_used = 0;  // the layers run: n_layers - 1 for LLaVA (its features are the
                              // penultimate layer's output, as the reference engine computes)
  int64_t n_heads = 0;
  int64_t head_dim = 0;
  float norm_eps = 1e-5f;
  std::array<float, 3> image_mean{};
  std::array<float, 3> image_std{};
  Activation activation = Activation::kGeluQuick;
  bool has_class_embd = false;
  bool has_patch_bias = false;
  bool has_pre_ln = false;
  bool has_post_ln = false;
  int64_t n_patches = 0;      // (image_size / patch_size)^2
  int64_t n_positions = 0;    // n_patches + 1 with a class embedding
  int64_t pool = 1;           // gemma3: the average pool's kernel and stride (scale_factor)
  int64_t n_image_tokens = 0; // the image's tokens in the prompt: n_patches, or gemma3's
                              // (image_size / patch_size / pool)^2
  int64_t proj_hidden = 0;    // mm.0's rows (mlp)
  int64_t n_out = 0;          // the projector's output: the language model's embedding width
  // How the language model takes an image (what the reference engine does for the projector):
  // text around the image's tokens (gemma3: "<start_of_image>" and "<end_of_image>", tokenized
  // as the prompt is; empty for mlp), and whether the image's tokens attend to each other both
  // ways in the language model (gemma3) instead of causally.
  std::string image_begin;
  std::string image_end;
  bool bidirectional_image = false;
};

// Errors name the file and the key or tensor: not a vision mmproj, an unsupported projector, a
// missing key, sizes out of range or inconsistent (image size not a multiple of the patch size,
// width not a multiple of the heads, position count not the patch count).
Result<VisionConfig> read_vision_config(const gguf::GgufFile& f);

// "mlp", "gemma3".
std::string projector_name(ProjectorType p);

}  // namespace cadenza::vision
