// Reading `<arch>.*` metadata keys for ModelConfig: typed, range-checked reads with errors that
// name the file and the key, and the key groups that several families share (the feed-forward and
// expert keys). Used by config.cpp (the architecture-independent keys) and by each family's
// configure hook (arch/*.cpp). Internal to src/model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace cadenza::gguf {
class GgufFile;
}

namespace cadenza::model {

struct ModelConfig;

// Bounds that reject nonsense from hostile files early. Real models are far inside them; the
// tensor shapes checked at load are the final word.
namespace limits {
constexpr int64_t kMaxEmbd = 1 << 20;
constexpr int64_t kMaxLayers = 1 << 12;
constexpr int64_t kMaxHeads = 1 << 14;
constexpr int64_t kMaxHeadDim = 1 << 14;
constexpr int64_t kMaxFf = 1 << 22;
constexpr int64_t kMaxExperts = 1 << 12;
constexpr int64_t kMaxContext = int64_t{1} << 31;
}  // namespace limits

// Keys of one architecture: `suffix` arguments are the part after "<arch>.".
class MetadataReader {
 public:
  MetadataReader(const gguf::GgufFile& file, std::string arch);

  // "<arch>.<suffix>"
  std::string key(std::string_view suffix) const;
  bool has(std::string_view suffix) const;
  // A required unsigned integer in [min, max].
  Result<int64_t> count(std::string_view suffix, int64_t min, int64_t max) const;
  // The same, or `fallback` when the key is missing (the fallback must be in range too: it is
  // often derived from other keys).
  Result<int64_t> count_or(std::string_view suffix, int64_t fallback, int64_t min,
                           int64_t max) const;
  // A finite number, or `fallback` when missing.
  Result<double> real_or(std::string_view suffix, double fallback) const;
  Result<bool> flag_or(std::string_view suffix, bool fallback) const;

  const gguf::GgufFile& file() const { return file_; }

 private:
  const gguf::GgufFile& file_;
  std::string arch_;
};

// What a family expects of the feed-forward keys.
struct FeedForwardKeys {
  enum class Experts {
    None,      // a dense family (qwen2, qwen3): `expert_count` > 0 is an error
    Optional,  // dense, or experts in every layer when `expert_count` > 0 (llama / Mixtral)
    Required,  // every layer is a mixture of experts (qwen3moe, qwen2moe): `expert_count` > 0,
               // and the dense `feed_forward_length` may be missing
  };
  Experts experts = Experts::None;
  // Default of `expert_weights_norm` (renormalise the top-k weights to sum to 1).
  bool normalize_top_k = true;
  // Default of `expert_gating_func` (1 softmax, 2 sigmoid, 3 softmax over the chosen k).
  int64_t gating_func = 1;
};

// Reads feed_forward_length and, when the model has experts, expert_count, expert_used_count,
// expert_feed_forward_length (default feed_forward_length), expert_weights_norm,
// expert_gating_func (1 softmax, 2 sigmoid, 3 softmax over the k chosen by their logits), expert_group_count / expert_group_used_count (the
// groups must divide the experts and the used ones hold at least expert_used_count) and
// expert_weights_scale into `c`.
Status read_feed_forward(const MetadataReader& md, ModelConfig& c, const FeedForwardKeys& keys);

// Reads the recurrent layers' shape (ModelConfig::RecurrentShape) from `ssm.conv_kernel`,
// `ssm.state_size` (k_dim), `ssm.group_count` (k_heads), `ssm.time_step_rank` (v_heads) and
// `ssm.inner_size` (v_heads x v_dim), all required; `ssm.inner_size` must be a multiple of
// `ssm.time_step_rank`, itself a multiple of `ssm.group_count` (qwen35, granitehybrid).
Status read_recurrent_shape(const MetadataReader& md, ModelConfig& c);

}  // namespace cadenza::model
