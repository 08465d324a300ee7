// Random-weight mmproj files: a CLIP vision transformer with the LLaVA-1.5 MLP projector, with
// the keys and tensor names the reference engine's tools write (vision/mmproj.h lists them), so
// the same file loads in Cadenza and in the reference engine's llama-mtmd-cli.
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
};

// "clip-tiny" (32 px, patch 8, width 64, 2 layers: the test shape) and "clip-vit-l-336"
// (CLIP ViT-L/14 at 336 px as LLaVA-1.5 uses it: 24 layers of which the encoder runs 23, the
// penultimate layer's features, into a 4096-wide language model).
const std::vector<MmprojShape>& mmproj_presets();
const MmprojShape* find_mmproj_preset(const std::string& name);

// Writes the file: matrices F16 (weights N(0, 1/fan_in)), embeddings, norms and biases F32
// (norm weights 1 + small noise, biases N(0, 0.02^2)); deterministic for a seed; CLIP's
// mean/std; a class embedding, pre_ln, no post_ln (LLaVA takes the features before it).
Status write_synthetic_mmproj(const MmprojShape& shape, uint64_t seed, const std::string& path);

}  // namespace cadenza::synth
