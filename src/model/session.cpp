#include "model/session.h"

#include <algorithm>
#include <numeric>

namespace cadenza::model {

namespace {
constexpr int32_t kDefaultMaxTokens = 4096;
}

Session::Session(Model& model, std::unique_ptr<KvCache> kv, int32_t capacity,
                 int32_t max_batch_tokens, const StepCapacity& step)
    : model_(model), kv_(std::move(kv)), capacity_(capacity), max_batch_tokens_(max_batch_tokens),
      step_(step) {
  block_table_.resize(static_cast<size_t>(kv_->num_blocks()));
  std::iota(block_table_.begin(), block_table_.end(), 0);
}

Result<std::unique_ptr<Session>> Session::create(Model& model, const SessionOptions& options) {
  if (options.max_tokens < 0 || options.block_size <= 0 || options.max_batch_tokens <= 0) {
    return make_error("session: invalid options (max_tokens {}, block_size {}, max_batch_tokens {})",
                      options.max_tokens, options.block_size, options.max_batch_tokens);
  }
  int64_t max_tokens = options.max_tokens;
  if (max_tokens == 0) max_tokens = std::min<int64_t>(model.config().context_length, kDefaultMaxTokens);
  KvCacheOptions kv_options;
  kv_options.block_size = options.block_size;
  kv_options.num_blocks = static_cast<int32_t>((max_tokens + options.block_size - 1) / options.block_size);
  kv_options.type = options.kv_type;
  kv_options.num_state_slots = 1;  // a hybrid model's recurrent state: for the one sequence only
  Result<std::unique_ptr<KvCache>> kv = model.create_kv_cache(kv_options);
  if (!kv) return kv.error_value();
  // One sequence, steps of up to max_batch_tokens tokens and one logit row (eval_all reserves
  // more rows when it is used).
  const StepCapacity step{options.max_batch_tokens, 1, 1, kv_options.num_blocks};
  if (Status st = model.reserve(step); !st) return make_error("session: {}", st.error());
  return std::unique_ptr<Session>(new Session(model, std::move(*kv), static_cast<int32_t>(max_tokens),
                                              options.max_batch_tokens, step));
}

Result<std::vector<float>> Session::eval(std::span<const int32_t> tokens) {
  return run(tokens, false, false);
}

Result<std::vector<float>> Session::eval_all(std::span<const int32_t> tokens) {
  return run(tokens, true, false);
}

Result<std::vector<float>> Session::hidden_all(std::span<const int32_t> tokens) {
  return run(tokens, true, true);
}

Status Session::rewind(int32_t n) {
  if (n < 0 || n > n_past_) {
    return make_error("session: cannot rewind to {} tokens (the sequence has {})", n, n_past_);
  }
  // A hybrid model's recurrent state holds every token so far and cannot be cut back; starting
  // over (0) clears it.
  if (model_.config().hybrid() && n != 0 && n != n_past_) {
    return make_error("session: a hybrid ({}) model can rewind only to 0 tokens (the recurrent "
                      "state cannot drop the last {})", model_.config().architecture, n_past_ - n);
  }
  n_past_ = n;
  return {};
}

Result<std::vector<float>> Session::eval(std::span<const int32_t> tokens,
                                        const InputEmbeddings& embd) {
  const int64_t d = model_.config().n_embd;
  if (embd.first < 0 || embd.count < 0 || static_cast<size_t>(embd.first) + embd.count > tokens.size())
    return make_error("session: input embeddings for tokens [{}, {}) outside the {} tokens",
                      embd.first, embd.first + embd.count, tokens.size());
  if (embd.values.size() != static_cast<size_t>(embd.count * d))
    return make_error("session: {} input embedding values for {} tokens of {} (n_embd)",
                      embd.values.size(), embd.count, d);
  return run(tokens, false, false, &embd);
}

Result<std::vector<float>> Session::run(std::span<const int32_t> tokens, bool all_logits,
                                       bool hidden, const InputEmbeddings* embd) {
  const int64_t n_vocab = model_.config().n_vocab;
  const int64_t width = hidden ? model_.config().n_embd : n_vocab;  // of one output row
  if (tokens.empty()) return Error("session: no tokens to evaluate");
  if (static_cast<int64_t>(tokens.size()) > capacity_ - n_past_) {
    return make_error("session: context full: {} tokens do not fit ({} of {} used)", tokens.size(),
                      n_past_, capacity_);
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab) {
      return make_error("session: token id {} (input {}) is out of range [0, {})", tokens[i], i,
                        n_vocab);
    }
  }

  if (all_logits) {
    // Every token's logits: up to max_batch_tokens rows per step.
    StepCapacity step = step_;
    step.max_logit_rows = std::min<int64_t>(static_cast<int64_t>(tokens.size()), max_batch_tokens_);
    if (!model_.capacity().covers(step)) {
      if (Status st = model_.reserve(step); !st) return make_error("session: {}", st.error());
    }
  }

  const int64_t n_out = all_logits ? static_cast<int64_t>(tokens.size()) : 1;
  std::vector<float> logits(static_cast<size_t>(n_out * width));
  const std::span<const int32_t> table(block_table_);
  const std::span<const std::span<const int32_t>> tables(&table, 1);
  std::vector<int32_t> positions, seq_index, rows;
  const int32_t start_past = n_past_;
  const bool span = embd != nullptr && embd->count > 0 && embd->bidirectional;
  if (span && embd->count > max_batch_tokens_) {
    return make_error("session: a bidirectional run of {} input embeddings does not fit one forward "
                      "pass of {} tokens", embd->count, max_batch_tokens_);
  }
  std::vector<AttentionSpan> spans;
  if (span) spans.push_back({0, n_past_ + embd->first, n_past_ + embd->first + embd->count - 1});
  for (size_t begin = 0, count = 0; begin < tokens.size(); begin += count) {
    count = std::min(tokens.size() - begin, static_cast<size_t>(max_batch_tokens_));
    if (span) {  // a pass that would end inside the run stops before it (the run fits the next)
      const size_t lo = static_cast<size_t>(embd->first), hi = lo + static_cast<size_t>(embd->count);
      if (begin + count > lo && begin + count < hi && lo > begin) count = lo - begin;
    }
    const bool last_chunk = begin + count == tokens.size();
    positions.resize(count);
    std::iota(positions.begin(), positions.end(), n_past_);
    seq_index.assign(count, 0);
    rows.clear();
    if (all_logits) {
      rows.resize(count);
      std::iota(rows.begin(), rows.end(), 0);
    } else if (last_chunk) {
      rows.push_back(static_cast<int32_t>(count - 1));
    }
    Batch batch;
    std::vector<int32_t> embd_rows;
    if (embd != nullptr && embd->count > 0) {  // the part of the run inside this chunk
      const size_t lo = std::max(begin, static_cast<size_t>(embd->first));
      const size_t hi = std::min(begin + count, static_cast<size_t>(embd->first + embd->count));
      for (size_t t = lo; t < hi; ++t) embd_rows.push_back(static_cast<int32_t>(t - begin));
      if (lo < hi) {
        const size_t d = static_cast<size_t>(model_.config().n_embd);
        batch.embd_values = embd->values.subspan((lo - embd->first) * d, (hi - lo) * d);
      }
      batch.embd_rows = embd_rows;
    }
    batch.attention_spans = spans;
    batch.tokens = tokens.subspan(begin, count);
    batch.positions = positions;
    batch.seq_index = seq_index;
    batch.block_tables = tables;
    batch.logit_rows = rows;
    const size_t out_offset = all_logits ? begin * static_cast<size_t>(width) : 0;
    const std::span<float> out(logits.data() + out_offset, rows.size() * static_cast<size_t>(width));
    Status st = hidden ? model_.forward_hidden(batch, *kv_, out) : model_.forward(batch, *kv_, out);
    if (!st) {
      n_past_ = start_past;  // the tokens of earlier chunks are dropped again
      return st.error_value();
    }
    n_past_ += static_cast<int32_t>(count);
  }
  return logits;
}

}  // namespace cadenza::model
