// VisionEncoder: a CLIP / SigLIP vision transformer and its projector (LLaVA's MLP or Gemma 3's
// average pool) loaded from an mmproj GGUF (mmproj.h), and its forward pass over one
// preprocessed image:
//
//   patches = unfold(image) into [n_patches][3 * p * p], channel-major within a patch (c, y, x),
//             the order of the patch embedding's [p, p, 3, d] kernel; patches row-major
//   x = [patches W_patch^T (+ b); class_embd] + position_embd       rows: n_positions
//   x = pre_ln(x)                                                   (if the file has it)
//   for the first n_layers_used layers (pre-norm; LLaVA: all but the last; Gemma 3: all):
//     x = x + attn_out(softmax(q k^T / sqrt(head_dim)) v),  q/k/v from ln1(x), all positions
//     x = x + ffn_down(act(ffn_up(ln2(x))))      act: GELU (tanh form) or quick GELU (use_gelu)
//   x = post_ln(x)                                                  (if the file has it)
//   mlp:    out = mm.2(GELU(mm.0(x without its first row)))         [n_patches][n_out]
//   gemma3: g = the side x side patch grid averaged over pool x pool squares (row-major),
//           out = (rms_norm(g) * soft_emb_norm) W_input_projection  [(side / pool)^2][n_out]
//
// The class row after the patches, the first row dropped and the last layer skipped are what the
// reference engine computes for such a file (found with black-box probes: mmproj files with
// chosen tensors zeroed, single-pixel images; src/vision/README.md) for the files `cadenza synth`
// writes. (The Hugging Face CLIP puts the class token first and drops it; whether the reference
// engine does the same for converted real models is not verified here: no real mmproj file is
// on this machine.) Gemma 3's pooling and norm follow its HF processor and were matched to the
// reference engine the same way (tests/vision/gemma3_golden_test.cpp).
//
// The matmuls (patch embedding included) run on the backend's kernels; LayerNorm, attention, the
// activations, the pooling and the RMS norm on the host (model/host_ops.h), as the bert encoder
// does.
// Ownership: keeps the GgufFile alive; the backend must outlive the encoder. Thread-safety: one
// encode() at a time (it owns its scratch); config() from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "util/result.h"
#include "vision/image.h"
#include "vision/mmproj.h"
#include "vision/preprocess.h"

namespace cadenza::gguf {
class GgufFile;
}

namespace cadenza::vision {

class VisionEncoder {
 public:
  // Errors: read_vision_config's; a missing or misshapen tensor (named); out of backend memory.
  static Result<std::unique_ptr<VisionEncoder>> load(std::shared_ptr<const gguf::GgufFile> file,
                                                     kernels::Backend& backend);
  static Result<std::unique_ptr<VisionEncoder>> open(const std::string& path, kernels::Backend& backend);
  virtual ~VisionEncoder() = default;

  virtual const VisionConfig& config() const = 0;

  // LLaVA-1.5-style preprocessing: resize (bilinear) to fit image_size x image_size keeping the
  // aspect ratio (sides rounded), centre it on a square of the mean colour, normalize with the
  // file's mean and std. Gemma 3: the same with a bicubic fit and black padding (what the
  // reference engine does, measured; HF's processor stretches to the square instead). An image
  // already at the encoder's size passes through unchanged.
  NormalizedImage preprocess(const Image& image) const;

  // The projected embeddings of one image, [n_image_tokens][n_out] row-major. Errors: an input that
  // is not image_size x image_size; out of backend memory for the scratch.
  virtual Result<std::vector<float>> encode(const NormalizedImage& image) = 0;
};

}  // namespace cadenza::vision
