// Random-weight mmproj files: a CLIP vision transformer with the LLaVA-1.5 MLP projector, or a
// SigLIP one with Gemma 3's average-pool projector, with the keys and tensor names the reference
// engine's tools write (vision/mmproj.h lists them), so the same file loads in Cadenza and in the
// reference engine's llama-mtmd-cli.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace cadenza::synth {

struct MmprojShape {
  std::string name;         // preset name
  int64_t image_size = 0;
  int64_t patch_size = 0;
  int64_t n_embd = 0;
  int64_t n_ff = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t proj_hidden = 0;  // mm.0's output width (LLaVA-1.5: the language model's width)
  int64_t n_out = 0;        // mm.2's output width: must equal the language model's embedding width
  bool use_gelu = false;    // false: CLIP's quick GELU
  std::string projector = "mlp";  // "mlp" or "gemma3"
  int64_t pool = 0;         // gemma3: the pooling kernel (written only when it is not 4)
};

// "clip-tiny" (32 px, patch 8, width 64, 2 layers: the test shape) and "clip-vit-l-336"
// (CLIP ViT-L/14 at 336 px as LLaVA-1.5 uses it: 24 layers of which the encoder runs 23, the
// penultimate layer's features, into a 4096-wide language model); "gemma3-tiny" (SigLIP at 64 px,
// patch 4, width 64, 2 layers, the 16 x 16 patches pooled 4 x 4 to 16 tokens, into a 64-wide
// language model: synth --preset gemma3-tiny) and "siglip-gemma3-896" (Gemma 3 4B's encoder:
// 896 px, patch 14, width 1152, 27 layers, 4096 patches pooled to 256 tokens, 2560 wide).
const std::vector<MmprojShape>& mmproj_presets();
const MmprojShape* find_mmproj_preset(const std::string& name);

// Writes the file: matrices F16 (weights N(0, 1/fan_in)), embeddings, norms and biases F32
// (norm weights 1 + small noise, biases N(0, 0.02^2)); deterministic for a seed. mlp: CLIP's
// mean/std; a class embedding, pre_ln, no post_ln (LLaVA takes the features before it). gemma3:
// mean = std = 0.5, no class embedding, a patch bias, post_ln, no pre_ln; the projection F16.
Status write_synthetic_mmproj(const MmprojShape& shape, uint64_t seed, const std::string& path);

}  // namespace cadenza::synth
