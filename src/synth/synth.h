// Writes random-weight GGUF models with a real architecture's shapes (see presets.h).
//
// Weights are drawn from N(0, 1/fan_in) (norm weights are 1, biases small), deterministic for a
// given seed, and quantized with the reference quantizers, so files behave like real models for
// size, speed and memory, and like the shared test models numerically. The output is gibberish:
// general.name says "random weights" so nobody mistakes it for a trained model.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "synth/presets.h"
#include "util/result.h"

namespace cadenza::synth {

struct SynthOptions {
  ModelShape shape;
  // Weight type: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, or the llama.cpp
  // style mixture q4_k_m (Q6_K for the output and some attn_v/ffn_down layers). K-quant rows that
  // are not a multiple of 256 fall back the way the reference quantizer does (q4_K->q5_0,
  // q5_K->q5_1, q6_K->q8_0).
  std::string weight_type = "f16";
  // A GGUF whose tokenizer.* metadata is copied (the vocabulary size follows it). Empty: a built-in
  // byte-level BPE vocabulary (256 byte tokens, BOS/EOS, padded with unused tokens to the preset's
  // vocabulary size).
  std::string vocab_from;
  uint64_t seed = 1;
  int threads = 2;
};

struct SynthSummary {
  int64_t n_params = 0;
  uint64_t file_bytes = 0;
  int64_t n_vocab = 0;
};

// Writes the model to `path`. `progress(done_tensors, total_tensors)` is called after each tensor.
Result<SynthSummary> write_synthetic_model(
    const SynthOptions& options, const std::string& path,
    const std::function<void(size_t, size_t)>& progress = {});

}  // namespace cadenza::synth
