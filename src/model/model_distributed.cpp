// The split-model half of Model (docs/distributed.md): the driver's commands to the workers,
// the workers' loop, heartbeats, and the pipeline's micro-batched steps. model.cpp is the
// single-process core; both share Model's members.
#include <algorithm>
#include <cstring>
#include <map>

#include "model/distributed.h"
#include "model/forward.h"
#include "model/model.h"

namespace cadenza::model {

namespace {

// A pipeline step runs in micro-batches of at least this many tokens, at most kMaxMicroBatches
// of them: while stage s computes micro-batch i, stage s + 1 computes i - 1, so a long prefill
// keeps every stage busy instead of each waiting for the one before. A decode step of a few
// tokens stays one micro-batch: splitting it would read every weight once per micro-batch.
constexpr int64_t kMinMicroBatchTokens = 16;
constexpr int64_t kMaxMicroBatches = 8;

kernels::IndexMatrix rows_of(kernels::IndexMatrix m, dist::Range r) {
  return {m.data + r.begin * m.cols, r.count, m.cols};
}

}  // namespace

Status Model::forward_split(const Batch& b, const StepInputs& in, KvCache& kv,
                            std::span<float> logits) {
  const int64_t n = in.n_tokens;
  // One micro-batch without a pipeline (nothing to overlap with).
  const int micro = distributed_->topology().config.pipeline == 1
                        ? 1
                        : static_cast<int>(std::clamp<int64_t>(n / kMinMicroBatchTokens, 1,
                                                               kMaxMicroBatches));
  // Each micro-batch's logit rows, renumbered within it; micro_order_[k] = the output row of
  // the k-th logit computed.
  micro_logit_rows_.clear();
  micro_order_.clear();
  std::vector<int64_t> first_logit(static_cast<size_t>(micro) + 1, 0);
  for (int i = 0; i < micro; ++i) {
    const dist::Range r = dist::split_evenly(n, micro, i);
    for (size_t j = 0; j < b.logit_rows.size(); ++j) {
      const int32_t row = b.logit_rows[j];
      if (row >= r.begin && row < r.end()) {
        micro_logit_rows_.push_back(static_cast<int32_t>(row - r.begin));
        micro_order_.push_back(static_cast<int32_t>(j));
      }
    }
    first_logit[static_cast<size_t>(i) + 1] = static_cast<int64_t>(micro_logit_rows_.size());
  }
  if (micro > 1) {  // one micro-batch keeps the step's own rows and order
    backend_.write(logit_rows_.buffer(), 0, micro_logit_rows_.data(),
                   micro_logit_rows_.size() * sizeof(int32_t));
  }
  const kernels::Matrix all_logits = logits_.rows(in.n_logits);
  for (int i = 0; i < micro; ++i) {
    const dist::Range r = dist::split_evenly(n, micro, i);
    const int64_t l0 = first_logit[static_cast<size_t>(i)];
    const int64_t nl = first_logit[static_cast<size_t>(i) + 1] - l0;
    StepInputs sub = in;
    sub.n_tokens = r.count;
    sub.n_logits = nl;
    sub.tokens = rows_of(in.tokens, r);
    sub.slots = rows_of(in.slots, r);
    sub.attention.positions = rows_of(in.attention.positions, r);
    sub.attention.seq_index = rows_of(in.attention.seq_index, r);
    sub.logit_rows = rows_of(in.logit_rows, {l0, nl});
    const ForwardContext ctx{backend_, sub, kv,
                             config_.n_experts > 0 ? expert_counts_.get() : nullptr,
                             all_logits.row_range(l0, nl), distributed_.get()};
    network_->forward(ctx);
  }
  if (config_.shard.last_stage) {
    const size_t cols = static_cast<size_t>(all_logits.cols);
    local_logits_.resize(static_cast<size_t>(in.n_logits) * cols);
    backend_.read(logits_.buffer(), 0, local_logits_.data(), local_logits_.size() * sizeof(float));
  }
  if (config_.shard.last_stage && micro > 1) {  // back to the step's order
    const size_t cols = static_cast<size_t>(all_logits.cols);
    ordered_logits_.resize(local_logits_.size());
    for (size_t k = 0; k < micro_order_.size(); ++k) {
      std::copy_n(local_logits_.data() + k * cols, cols,
                  ordered_logits_.data() + static_cast<size_t>(micro_order_[k]) * cols);
    }
    local_logits_.swap(ordered_logits_);
  }
  distributed_->deliver_logits(local_logits_, in.n_logits, config_.n_vocab, logits);
  return distributed_->status();
}

// ---- split models: the driver's commands and the workers' loop (distributed.h) ----

Status Model::send_forward(const Batch& b, int64_t kv_id) {
  // Payload, int32: tokens[n], positions[n], seq_index[n], logit_rows[n_logits],
  // table_lengths[n_seqs], then the tables one after the other.
  message_.clear();
  for (const std::span<const int32_t> part : {b.tokens, b.positions, b.seq_index, b.logit_rows}) {
    message_.insert(message_.end(), part.begin(), part.end());
  }
  for (const std::span<const int32_t> table : b.block_tables) {
    message_.push_back(static_cast<int32_t>(table.size()));
  }
  for (const std::span<const int32_t> table : b.block_tables) {
    message_.insert(message_.end(), table.begin(), table.end());
  }
  CommandHeader h;
  h.command = static_cast<int32_t>(Command::Forward);
  h.args[0] = static_cast<int64_t>(b.tokens.size());
  h.args[1] = static_cast<int64_t>(b.logit_rows.size());
  h.args[2] = static_cast<int64_t>(b.block_tables.size());
  h.args[3] = kv_id;
  h.payload_bytes = message_.size() * sizeof(int32_t);
  return distributed_->send_command(
      h, {reinterpret_cast<const uint8_t*>(message_.data()), h.payload_bytes});
}

Status Model::run_command(const CommandHeader& h, const std::vector<uint8_t>& payload,
                          std::map<int64_t, std::unique_ptr<KvCache>>& caches) {
  auto cache = [&](int64_t id) -> KvCache* {
    auto it = caches.find(id);
    return it == caches.end() ? nullptr : it->second.get();
  };
  switch (static_cast<Command>(h.command)) {
    case Command::Ping:
      return distributed_->answer_ping(held_expert_tokens());
    case Command::Reserve:
      return reserve_here({h.args[0], h.args[1], h.args[2], h.args[3]});
    case Command::CreateKv: {
      Result<std::unique_ptr<KvCache>> created = KvCache::create(
          backend_, config_, {.num_blocks = static_cast<int32_t>(h.args[0]),
                              .block_size = static_cast<int32_t>(h.args[1]),
                              .type = static_cast<DType>(h.args[2])});
      if (!created) return created.error_value();
      caches[h.args[3]] = std::move(*created);
      return {};
    }
    case Command::FreeKv:
      caches.erase(h.args[0]);
      return {};
    case Command::CopyBlock: {
      KvCache* kv = cache(h.args[3]);
      if (!kv) return make_error("copy_block into unknown KV cache {}", h.args[3]);
      return kv->copy_block(static_cast<int32_t>(h.args[0]), static_cast<int32_t>(h.args[1]),
                            static_cast<int32_t>(h.args[2]));
    }
    case Command::Forward: {
      KvCache* kv = cache(h.args[3]);
      if (!kv) return make_error("forward on unknown KV cache {}", h.args[3]);
      const int64_t n = h.args[0], n_logits = h.args[1], n_seqs = h.args[2];
      const size_t ints = payload.size() / sizeof(int32_t);
      if (n < 0 || n_logits < 0 || n_seqs < 0 ||
          static_cast<size_t>(3 * n + n_logits + n_seqs) > ints) {
        return Error("malformed forward command");
      }
      message_.resize(ints);
      std::memcpy(message_.data(), payload.data(), ints * sizeof(int32_t));
      const int32_t* p = message_.data();
      auto take = [&p](int64_t count) {
        std::span<const int32_t> part(p, static_cast<size_t>(count));
        p += count;
        return part;
      };
      Batch b;
      b.tokens = take(n);
      b.positions = take(n);
      b.seq_index = take(n);
      b.logit_rows = take(n_logits);
      const std::span<const int32_t> lengths = take(n_seqs);
      std::vector<std::span<const int32_t>> tables;
      tables.reserve(static_cast<size_t>(n_seqs));
      for (const int32_t len : lengths) {
        if (len < 0 || p + len > message_.data() + ints) return Error("malformed forward command");
        tables.push_back(take(len));
      }
      b.block_tables = tables;
      if (Status st = validate(b, *kv, SIZE_MAX); !st) return st;
      return forward_shard(b, *kv, {});
    }
    case Command::Stop:
      break;
  }
  return make_error("unknown command {}", h.command);
}

Status Model::serve_worker() {
  if (!distributed_ || distributed_->driver()) return Error("serve_worker: not a worker rank");
  std::map<int64_t, std::unique_ptr<KvCache>> caches;  // the driver's live caches, by id
  std::vector<uint8_t> payload;
  while (true) {
    Result<CommandHeader> h = distributed_->receive_command(payload);
    if (!h) return h.error_value();
    if (static_cast<Command>(h->command) == Command::Stop) return {};
    if (Status st = run_command(*h, payload, caches); !st) {
      return make_error("{}: {} command: {}",
                        distributed_->topology().describe(distributed_->topology().world_rank),
                        command_name(static_cast<Command>(h->command)), st.error());
    }
  }
}

uint64_t Model::held_expert_tokens() const {
  if (config_.n_experts == 0) return 0;
  uint64_t sum = 0;
  for (int64_t l = config_.shard.layer_begin; l < config_.shard.layer_end; ++l) {
    for (const int32_t e : config_.shard.held_experts(l, config_.n_experts)) {
      sum += expert_tokens(l, e);
    }
  }
  return sum;
}

Status Model::ping(double timeout_s) {
  if (!distributed_) return {};
  return distributed_->ping(timeout_s);
}

Status Model::stop_workers() {
  if (!distributed_ || !distributed_->driver() || workers_stopped_) return {};
  workers_stopped_ = true;
  CommandHeader h;
  h.command = static_cast<int32_t>(Command::Stop);
  return distributed_->send_command(h, {});
}

}  // namespace cadenza::model
