// Encoder: a loaded bidirectional encoder (the `bert` architecture: BERT, BGE, MiniLM
// cross-encoders) and its forward pass over a batch of whole sequences. No KV cache: every token
// attends to every token of its own sequence, and a call computes its sequences from scratch.
//
//   auto enc = Encoder::open("bge-small.gguf", *backend);
//   std::vector<EncoderInput> in = {{tokens_a}, {tokens_b}};
//   auto vectors = (*enc)->embed(in);       // pooled per the file's pooling type, L2-normalized
//   auto scores = (*enc)->classify(in);     // rerankers: the classification head's logits
//
// Ownership: keeps the GgufFile alive (weights may point into its mapping); the backend must
// outlive it. Thread-safety: one forward/embed/classify at a time (it owns scratch memory);
// config() may be read from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/pooling.h"
#include "util/result.h"

namespace cadenza::gguf {
class GgufFile;
}

namespace cadenza::model {

struct EncoderConfig {
  std::string arch;      // general.architecture ("bert")
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;     // positions (the position embedding's rows)
  int64_t n_embd = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t head_dim = 0;  // n_embd / n_heads
  int64_t n_ff = 0;
  int64_t n_token_types = 0;  // rows of token_types.weight (0: none)
  float norm_eps = 1e-12f;    // LayerNorm epsilon
  Pooling pooling = Pooling::kCls;  // `<arch>.pooling_type`; CLS when absent
  int64_t n_classes = 0;      // rows of the classification head (cls.output), 0: none
};

// One sequence: token ids (1..n_ctx of them) and optionally their token types (segment ids; the
// same length, each < n_token_types; empty: all 0).
struct EncoderInput {
  std::span<const int32_t> tokens;
  std::span<const int32_t> types = {};
};

class Encoder {
 public:
  // Reads the config, checks and uploads the weights. Errors: an architecture that is not an
  // encoder (only `bert` is), a missing or misshapen tensor or key (named).
  static Result<std::unique_ptr<Encoder>> load(std::shared_ptr<const gguf::GgufFile> file,
                                               kernels::Backend& backend);
  static Result<std::unique_ptr<Encoder>> open(const std::string& path, kernels::Backend& backend);
  // Whether `file` is an encoder architecture (so that `cadenza serve` can choose).
  static bool is_encoder(const gguf::GgufFile& file);
  virtual ~Encoder() = default;

  virtual const EncoderConfig& config() const = 0;
  virtual const gguf::GgufFile& file() const = 0;

  // The final hidden states of every token of every input, the sequences' rows one after the
  // other: [sum of lengths][n_embd], row-major. Errors (nothing computed): no input, an empty or
  // too long sequence, a token id or type out of range, out of memory for the batch's scratch.
  virtual Result<std::vector<float>> forward(std::span<const EncoderInput> inputs) = 0;
  // One vector per input: the hidden states pooled per config().pooling (mean or CLS; last-token
  // pooling too), L2-normalized. Errors: forward()'s; a rank-pooling model (use classify()).
  Result<std::vector<std::vector<float>>> embed(std::span<const EncoderInput> inputs);
  // The classification head over each input's CLS hidden state: [inputs][n_classes] logits
  // (a cross-encoder reranker's relevance is class 0). Errors: forward()'s; no head.
  virtual Result<std::vector<std::vector<float>>> classify(std::span<const EncoderInput> inputs) = 0;
};

}  // namespace cadenza::model
