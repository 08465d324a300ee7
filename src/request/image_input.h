// ImageInput: an image's embeddings in a prompt (vision-language models). The prompt holds
// `num_tokens` placeholder token ids at positions [position, position + num_tokens); the model
// takes row i of `embeddings` in place of the placeholder at position + i (model::Batch::embd_rows).
// `digest` names the image's content (the server hashes its decoded pixels): the prefix cache
// mixes it into the hashes of the blocks the image overlaps (kv::ContentSpan), so a cached image
// is reused only for the same image at the same place after the same tokens.
// Plain data. Ownership: the embeddings are shared (immutable) between the request's samples and
// an encoder-output cache. Thread-safety: immutable once built.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace cadenza {

struct ImageInput {
  int32_t position = 0;    // first placeholder position in the prompt
  int32_t num_tokens = 0;  // > 0
  std::array<uint8_t, 32> digest{};
  std::shared_ptr<const std::vector<float>> embeddings;  // [num_tokens][n_embd], row-major
  // The image's tokens attend to each other both ways in the language model (Gemma 3;
  // vision::VisionConfig::bidirectional_image): the engine computes all of them in one step
  // (the scheduler never ends a prompt chunk inside the image) as a model::AttentionSpan.
  bool bidirectional = false;
};

}  // namespace cadenza
