// The vision side of an mmproj GGUF file (as the reference engine's conversion tools write them):
// a CLIP / SigLIP vision transformer and its projector into a language model's embedding space.
// Everything comes from the file's metadata and tensor shapes.
//
// Keys read (prefix `clip.`): has_vision_encoder (must be true), projector_type ("mlp"; older
// LLaVA files say has_llava_projector instead), use_gelu (true: GELU, tanh form; false: CLIP's
// quick GELU), vision.{image_size, patch_size, embedding_length, feed_forward_length,
// block_count, attention.head_count, attention.layer_norm_epsilon, image_mean, image_std}.
// Tensors (prefix `v.`): patch_embd.weight [p, p, 3, d] (+ optional .bias), class_embd [d]
// (optional: CLIP has one, SigLIP none), position_embd.weight [d, positions], pre_ln and post_ln
// (optional LayerNorms), blk.N.{ln1, attn_q, attn_k, attn_v, attn_out, ln2, ffn_up, ffn_down}
// with biases; the LLaVA MLP projector mm.0 [d, h] and mm.2 [h, n_out] with biases.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "util/result.h"

namespace cadenza::gguf {
class GgufFile;
}

namespace cadenza::vision {

enum class ProjectorType { kMlp };  // LLaVA-1.5: mm.2(GELU(mm.0(x)))
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
  int64_t n_patches = 0;      // (image_size / patch_size)^2: the image's output tokens
  int64_t n_positions = 0;    // n_patches + 1 with a class embedding
  int64_t proj_hidden = 0;    // mm.0's rows
  int64_t n_out = 0;          // mm.2's rows: the language model's embedding width
};

// Errors name the file and the key or tensor: not a vision mmproj, an unsupported projector, a
// missing key, sizes out of range or inconsistent (image size not a multiple of the patch size,
// width not a multiple of the heads, position count not the patch count).
Result<VisionConfig> read_vision_config(const gguf::GgufFile& f);

// "mlp" for kMlp.
std::string projector_name(ProjectorType p);

}  // namespace cadenza::vision
