#include "eval/chunk_runner.h"

#include <algorithm>
#include <vector>

namespace cadenza::eval {

Status run_chunks(model::Model& model, std::span<const int32_t> tokens, const ChunkOptions& o,
                  const ChunkLogits& on_chunk) {
  const int64_t n_vocab = model.config().n_vocab;
  const int64_t model_ctx = model.config().context_length;
  if (o.ctx < 2) return make_error("ctx {} is below 2", o.ctx);
  if (model_ctx > 0 && o.ctx > model_ctx) {
    return make_error("ctx {} is larger than the model's context length {}", o.ctx, model_ctx);
  }
  if (o.first < 0 || o.first >= o.ctx - 1) {
    return make_error("first scored row {} outside [0, {})", o.first, o.ctx - 1);
  }
  if (o.n_chunks < 1 || static_cast<int64_t>(o.n_chunks) * o.ctx > static_cast<int64_t>(tokens.size())) {
    return make_error("{} chunks of {} tokens need {} tokens, the text has {}", o.n_chunks, o.ctx,
                      static_cast<int64_t>(o.n_chunks) * o.ctx, tokens.size());
  }
  if (o.batch_tokens < 1) return make_error("batch size {} is below 1", o.batch_tokens);
  if (o.bos_id < 0 || o.bos_id >= n_vocab) {
    return make_error("BOS id {} outside the vocabulary of {}", o.bos_id, n_vocab);
  }
  const int32_t n_scored = scored_rows(o);
  const int32_t per_step = std::min(std::max(1, o.batch_tokens / o.ctx), o.n_chunks);
  const int32_t piece = std::min(o.ctx, o.batch_tokens);  // positions per step of one chunk
  const int32_t block = 16;
  const int32_t blocks_per_seq = (o.ctx + block - 1) / block;

  auto kv = model.create_kv_cache(
      {.num_blocks = per_step * blocks_per_seq,
       .block_size = block,
       .type = o.kv_type,
       .num_state_slots = per_step});
  if (!kv) return kv.error_value();
  if (Status st = model.reserve({.max_tokens = static_cast<int64_t>(per_step) * piece,
                                 .max_logit_rows = static_cast<int64_t>(per_step) * n_scored,
                                 .max_sequences = per_step,
                                 .max_blocks_per_sequence = blocks_per_seq});
      !st) {
    return st.error_value();
  }
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(per_step));
  std::vector<std::span<const int32_t>> spans;
  for (int32_t s = 0; s < per_step; ++s) {
    for (int32_t b = 0; b < blocks_per_seq; ++b) tables[static_cast<size_t>(s)].push_back(s * blocks_per_seq + b);
    spans.emplace_back(tables[static_cast<size_t>(s)]);
  }
  // [per_step][n_scored][n_vocab]: the scored rows of the step's chunks, chunk-major.
  std::vector<float> logits(static_cast<size_t>(per_step) * static_cast<size_t>(n_scored) *
                            static_cast<size_t>(n_vocab));
  std::vector<int32_t> ids, positions, seq, rows;
  for (int32_t c0 = 0; c0 < o.n_chunks; c0 += per_step) {
    const int32_t n_seq = std::min(per_step, o.n_chunks - c0);
    size_t rows_done = 0;  // rows of the scored buffer filled so far (per_step == 1 with pieces)
    for (int32_t p0 = 0; p0 < o.ctx; p0 += piece) {
      const int32_t p1 = std::min(o.ctx, p0 + piece);
      ids.clear();
      positions.clear();
      seq.clear();
      rows.clear();
      for (int32_t s = 0; s < n_seq; ++s) {
        const size_t base = static_cast<size_t>(c0 + s) * static_cast<size_t>(o.ctx);
        for (int32_t p = p0; p < p1; ++p) {
          const int32_t id = p == 0 ? o.bos_id : tokens[base + static_cast<size_t>(p)];
          if (id < 0 || id >= n_vocab) {
            return make_error("token id {} at text position {} outside the vocabulary of {}", id,
                              base + static_cast<size_t>(p), n_vocab);
          }
          if (p >= o.first && p < o.ctx - 1) rows.push_back(static_cast<int32_t>(ids.size()));
          ids.push_back(id);
          positions.push_back(p);
          seq.push_back(s);
        }
      }
      const size_t row_floats = static_cast<size_t>(n_vocab);
      std::span<float> out(logits.data() + rows_done * row_floats, rows.size() * row_floats);
      if (Status st = model.forward({ids, positions, seq, std::span(spans).first(static_cast<size_t>(n_seq)), rows},
                                    **kv, out);
          !st) {
        return st.error_value();
      }
      rows_done += rows.size();
    }
    for (int32_t s = 0; s < n_seq; ++s) {
      const size_t n = static_cast<size_t>(n_scored) * static_cast<size_t>(n_vocab);
      if (Status st = on_chunk(c0 + s, std::span<const float>(logits.data() + static_cast<size_t>(s) * n, n));
          !st) {
        return st;
      }
    }
  }
  return {};
}

}  // namespace cadenza::eval
