// StepCapacity: the largest forward step a Model holds scratch memory for. Model::reserve makes
// room for it once; Model::forward rejects a batch outside it with an error instead of allocating
// during the pass. The defaults are what Model::load reserves unless ModelLoadOptions say otherwise.
#pragma once

#include <algorithm>
#include <cstdint>

namespace cadenza::model {

struct StepCapacity {
  int64_t max_tokens = 512;    // tokens per step (Batch::tokens)
  int64_t max_logit_rows = 16;  // rows of logits per step (Batch::logit_rows)
  int64_t max_sequences = 16;   // block tables per step (Batch::block_tables)
  // Block-table entries a step reads per sequence: ceil((largest position in the batch + 1) /
  // block_size). A sequence of max_model_len tokens needs ceil(max_model_len / block_size).
  int64_t max_blocks_per_sequence = 256;

  // Every field at least as large as `other`'s.
  bool covers(const StepCapacity& other) const {
    return max_tokens >= other.max_tokens && max_logit_rows >= other.max_logit_rows &&
           max_sequences >= other.max_sequences &&
           max_blocks_per_sequence >= other.max_blocks_per_sequence;
  }
  // The smallest capacity that covers both.
  StepCapacity merged(const StepCapacity& other) const {
    return {std::max(max_tokens, other.max_tokens), std::max(max_logit_rows, other.max_logit_rows),
            std::max(max_sequences, other.max_sequences),
            std::max(max_blocks_per_sequence, other.max_blocks_per_sequence)};
  }
};

}  // namespace cadenza::model
