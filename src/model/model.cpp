// The architecture-independent half of a model: loading (config, the family's weights through its
// registry hook, the reservation), batch validation, upload of the batch, dispatch to the family's
// forward pass, logits read-back. Families: arch/*.cpp; blocks: blocks/*.cpp.
#include "model/model.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <cassert>
#include <limits>
#include <tuple>
#include <utility>

#include <spdlog/spdlog.h>

#include "util/resident_memory.h"

#include "gguf/gguf.h"
#include "model/forward.h"
#include "model/registry.h"
#include "model/weight_loader.h"

namespace cadenza::model {

namespace {

// Upper bound of every StepCapacity field: far above any real step, low enough that no size
// computed from it overflows.
constexpr int64_t kMaxCapacity = int64_t{1} << 24;

// Block-table entries the step reads per sequence: ceil((largest position + 1) / block_size), at
// least 1 (negative positions, rejected later, count as 0).
int32_t step_blocks_per_sequence(std::span<const int32_t> positions, int64_t block_size) {
  int64_t blocks = 1;
  for (const int32_t p : positions) blocks = std::max<int64_t>(blocks, p / block_size + 1);
  return static_cast<int32_t>(blocks);
}

}  // namespace

Model::Model(std::shared_ptr<const gguf::GgufFile> file, kernels::Backend& backend,
             ModelConfig config)
    : file_(std::move(file)), backend_(backend), config_(std::move(config)),
      expert_counts_(std::make_unique<std::atomic<uint64_t>[]>(
          static_cast<size_t>(config_.n_layers * config_.n_experts))) {}

Model::~Model() {
  if (Status st = stop_workers(); !st) spdlog::warn("model: stopping the workers: {}", st.error());
}

Result<std::unique_ptr<Model>> Model::load(std::shared_ptr<const gguf::GgufFile> file,
                                           kernels::Backend& backend,
                                           const ModelLoadOptions& options) {
  const ArchitectureRegistry& registry =
      options.architectures ? *options.architectures : ArchitectureRegistry::builtin();
  Result<ModelConfig> config = ModelConfig::from_gguf(*file, registry);
  if (!config) return config.error_value();
  if (options.experts_per_token != 0) {
    if (config->n_experts == 0) {
      return make_error("{}: --experts-per-token {} given but the model has no experts",
                        file->name(), options.experts_per_token);
    }
    if (options.experts_per_token < 1 || options.experts_per_token > config->n_experts) {
      return make_error("{}: experts per token must be in [1, {}], got {}", file->name(),
                        config->n_experts, options.experts_per_token);
    }
    if (options.experts_per_token != config->n_experts_used) {
      spdlog::warn("{}: using {} experts per token instead of the trained {}; output quality "
                   "changes", file->name(), options.experts_per_token, config->n_experts_used);
    }
    config->n_experts_used = options.experts_per_token;
  }
  if (config->hybrid()) {
    // The recurrent layers' ops exist on the CPU backend only, and their per-sequence state is
    // not mirrored to other processes.
    if (!backend.supports_recurrent()) {
      return make_error("{}: the {} backend does not run the linear-attention layers of {} (use "
                        "--device cpu)", file->name(), backend.name(), config->architecture);
    }
    if (options.world != nullptr && options.world->size() > 1) {
      return make_error("{}: a hybrid ({}) model cannot be split across processes", file->name(),
                        config->architecture);
    }
  }
  if (options.expert_offload.backend != nullptr) {
    if (options.world != nullptr && options.world->size() > 1) {
      return make_error("{}: keeping experts on another backend (--cpu-moe, --n-cpu-moe) is not "
                        "supported with a split model", file->name());
    }
    config->expert_offload = options.expert_offload;
    config->expert_offload.layers = std::min(options.expert_offload.layers, config->n_layers);
    if (config->n_experts > 0 && config->expert_offload.layers > 0) {
      spdlog::info("{}: the routed experts of layers 0..{} run on the {} backend", file->name(),
                   config->expert_offload.layers - 1, options.expert_offload.backend->name());
    }
  }
  std::unique_ptr<Distributed> distributed;
  if (options.world != nullptr && options.world->size() > 1) {
    Result<std::unique_ptr<Distributed>> d =
        Distributed::create(*options.world, options.parallel, *file, *config, backend);
    if (!d) return d.error_value();
    distributed = std::move(*d);
    config->shard = distributed->shard();
  } else if (options.parallel.distributed()) {
    return make_error("tensor parallel {} x pipeline parallel {} needs {} processes: start the "
                      "command under mpirun -np {} (docs/distributed.md)",
                      options.parallel.tensor, options.parallel.pipeline,
                      options.parallel.world_size(), options.parallel.world_size());
  }
  std::unique_ptr<Model> model(new Model(file, backend, std::move(*config)));
  model->distributed_ = std::move(distributed);
  const ArchitectureFamily* family = registry.find(model->config_.architecture);
  assert(family != nullptr);  // from_gguf found it
  WeightLoader loader(file, backend);
  Result<std::unique_ptr<Network>> network = family->load(model->config_, loader);
  if (!network) return network.error_value();
  model->network_ = std::move(*network);
  const std::vector<std::string> unused = loader.unused();
  if (!unused.empty()) {
    spdlog::warn("{}: {} tensor(s) not used by the {} forward pass, e.g. '{}'", file->name(),
                 unused.size(), model->config_.architecture, unused.front());
  }
  // The weights point into the mapping wherever the backend allows (the CPU backend does): the
  // file is not read up front, so a model larger than RAM loads and pages in as it runs.
  if (file->mapped()) {
    const uint8_t* start = file->header_bytes().data();
    spdlog::info("{}: {:.2f} GiB mapped, not read up front; {:.2f} GiB of it resident after load "
                 "(process resident {:.2f} GiB, {:.2f} GiB available)",
                 file->name(), static_cast<double>(file->file_size()) / (1 << 30),
                 static_cast<double>(resident_bytes_of(start, file->file_size())) / (1 << 30),
                 static_cast<double>(current_resident_bytes()) / (1 << 30),
                 static_cast<double>(available_memory_bytes()) / (1 << 30));
  }
  // Every rank reserves the load-time capacity itself (the workers are not serving yet).
  if (Status st = model->reserve_here(options.capacity); !st) {
    return make_error("{}: {}", file->name(), st.error());
  }
  return model;
}

Result<std::unique_ptr<Model>> Model::open(const std::string& path, kernels::Backend& backend,
                                           const ModelLoadOptions& options) {
  Result<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::open(path);
  if (!file) return file.error_value();
  return load(std::shared_ptr<const gguf::GgufFile>(std::move(*file)), backend, options);
}

uint64_t Model::expert_tokens(int64_t layer, int64_t expert) const {
  assert(layer >= 0 && layer < config_.n_layers && expert >= 0 && expert < config_.n_experts);
  return expert_counts_[static_cast<size_t>(layer * config_.n_experts + expert)].load(
      std::memory_order_relaxed);
}

std::vector<uint64_t> Model::expert_token_counts() const {
  std::vector<uint64_t> out(static_cast<size_t>(config_.n_layers * config_.n_experts));
  for (size_t i = 0; i < out.size(); ++i) out[i] = expert_counts_[i].load(std::memory_order_relaxed);
  return out;
}

void Model::reset_expert_token_counts() {
  for (int64_t i = 0; i < config_.n_layers * config_.n_experts; ++i) {
    expert_counts_[static_cast<size_t>(i)].store(0, std::memory_order_relaxed);
  }
}

Result<std::unique_ptr<KvCache>> Model::create_kv_cache(const KvCacheOptions& options) {
  if (distributed_ && options.num_window_blocks > 0)
    return Error("model: a window KV group is not supported on a model split across processes");
  const int64_t id = next_kv_id_++;
  if (distributed_ && distributed_->driver()) {
    CommandHeader h;
    h.command = static_cast<int32_t>(Command::CreateKv);
    h.args[0] = options.num_blocks;
    h.args[1] = options.block_size;
    h.args[2] = static_cast<int64_t>(options.type);
    h.args[3] = id;
    if (Status st = distributed_->send_command(h, {}); !st) return st.error_value();
  }
  Result<std::unique_ptr<KvCache>> kv = KvCache::create(backend_, config_, options);
  if (!kv && distributed_ && distributed_->driver()) {
    // The workers may have theirs: free them (a failure here is the driver's own, e.g. memory).
    CommandHeader h;
    h.command = static_cast<int32_t>(Command::FreeKv);
    h.args[0] = id;
    (void)distributed_->send_command(h, {});
  }
  if (kv && distributed_ && distributed_->driver()) (*kv)->set_mirror(distributed_.get(), id);
  return kv;
}

Status Model::reserve(const StepCapacity& requested) {
  if (distributed_ && distributed_->driver()) {
    CommandHeader h;
    h.command = static_cast<int32_t>(Command::Reserve);
    h.args[0] = requested.max_tokens;
    h.args[1] = requested.max_logit_rows;
    h.args[2] = requested.max_sequences;
    h.args[3] = requested.max_blocks_per_sequence;
    if (Status st = distributed_->send_command(h, {}); !st) return st;
  }
  return reserve_here(requested);
}

Status Model::reserve_here(const StepCapacity& requested) {
  for (const auto& [value, what] : {std::pair{requested.max_tokens, "tokens"},
                                   std::pair{requested.max_logit_rows, "logit rows"},
                                   std::pair{requested.max_sequences, "sequences"},
                                   std::pair{requested.max_blocks_per_sequence,
                                             "blocks per sequence"}}) {
    if (value < 1 || value > kMaxCapacity) {
      return make_error("model: cannot reserve {} {} per step (must be in [1, {}])", value, what,
                        kMaxCapacity);
    }
  }
  const StepCapacity cap = capacity_.merged(requested);
  const int64_t n = cap.max_tokens;
  Status st = network_->reserve(backend_, cap);
  for (ScratchIndices* per_token :
       {&tokens_, &positions_, &seq_index_, &slots_, &state_slots_, &window_slots_, &last_positions_}) {
    if (st) st = per_token->reserve(backend_, n, 1);
  }
  if (st) st = logit_rows_.reserve(backend_, cap.max_logit_rows, 1);
  if (st) st = block_tables_.reserve(backend_, cap.max_sequences, cap.max_blocks_per_sequence);
  if (st) st = window_tables_.reserve(backend_, cap.max_sequences, cap.max_blocks_per_sequence);
  // This rank's vocabulary columns (all of them unless the head is tensor-parallel).
  const int64_t vocab = config_.shard.columns(config_.n_vocab).count;
  if (st) st = logits_.reserve(backend_, cap.max_logit_rows, vocab);
  if (st && distributed_) st = distributed_->reserve(backend_, n * config_.n_embd);
  if (!st) {
    return make_error("model: reserving scratch for steps of {} tokens, {} logit rows: {}", n,
                      cap.max_logit_rows, st.error());
  }
  if (distributed_) local_logits_.reserve(static_cast<size_t>(cap.max_logit_rows * vocab));
  host_slots_.reserve(static_cast<size_t>(n));
  sorted_slots_.reserve(static_cast<size_t>(n));
  max_position_.reserve(static_cast<size_t>(cap.max_sequences));
  min_position_.reserve(static_cast<size_t>(cap.max_sequences));
  host_state_slots_.reserve(static_cast<size_t>(std::max(n, cap.max_sequences)));
  host_tables_.reserve(static_cast<size_t>(cap.max_sequences * cap.max_blocks_per_sequence));
  host_window_tables_.reserve(host_tables_.capacity());
  host_window_slots_.reserve(static_cast<size_t>(n));
  capacity_ = cap;
  return {};
}

Status Model::validate(const Batch& b, const KvCache& kv, size_t logits_size) {
  const size_t n = b.tokens.size();
  if (n == 0) return Error("forward: empty batch");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) return Error("forward: batch too large");
  if (b.positions.size() != n || b.seq_index.size() != n) {
    return make_error("forward: {} tokens but {} positions and {} sequence indices", n,
                      b.positions.size(), b.seq_index.size());
  }
  if (logits_size != SIZE_MAX &&
      logits_size != b.logit_rows.size() * static_cast<size_t>(config_.n_vocab)) {
    return make_error("forward: logits buffer holds {} floats, expected {} rows x {} vocab",
                      logits_size, b.logit_rows.size(), config_.n_vocab);
  }
  const ModelShard& shard = config_.shard;
  if (kv.num_layers() != shard.num_layers() || kv.first_layer() != shard.layer_begin ||
      kv.layer(shard.layer_begin).n_kv_heads != shard.kv_heads(config_.n_kv_heads).count ||
      kv.layer(shard.layer_begin).head_dim_k != config_.head_dim_k ||
      kv.layer(shard.layer_begin).head_dim_v != config_.head_dim_v) {
    return Error("forward: the KV cache was created for a different model shape");
  }
  const int64_t block_size = kv.block_size();
  const int32_t max_blocks = step_blocks_per_sequence(b.positions, block_size);
  // The reservation (Model::reserve): a larger step is an error, never an allocation.
  for (const auto& [used, reserved, what] :
       {std::tuple{static_cast<int64_t>(n), capacity_.max_tokens, "tokens"},
        std::tuple{static_cast<int64_t>(b.logit_rows.size()), capacity_.max_logit_rows, "logit rows"},
        std::tuple{static_cast<int64_t>(b.block_tables.size()), capacity_.max_sequences, "sequences"},
        std::tuple{static_cast<int64_t>(max_blocks), capacity_.max_blocks_per_sequence,
                   "blocks per sequence"}}) {
    if (used > reserved) {
      return make_error("forward: the batch needs {} {}, more than the {} reserved per step "
                        "(Model::reserve)", used, what, reserved);
    }
  }
  max_position_.assign(b.block_tables.size(), -1);
  sorted_slots_.resize(n);
  for (size_t t = 0; t < n; ++t) {
    if (b.tokens[t] < 0 || b.tokens[t] >= config_.n_vocab) {
      return make_error("forward: token id {} at batch row {} is out of range [0, {})", b.tokens[t],
                        t, config_.n_vocab);
    }
    const int32_t pos = b.positions[t];
    const int32_t seq = b.seq_index[t];
    if (pos < 0) return make_error("forward: negative position {} at batch row {}", pos, t);
    if (seq < 0 || static_cast<size_t>(seq) >= b.block_tables.size()) {
      return make_error("forward: sequence index {} at batch row {} is out of range ({} sequences)",
                        seq, t, b.block_tables.size());
    }
    const std::span<const int32_t> table = b.block_tables[static_cast<size_t>(seq)];
    if (static_cast<size_t>(pos / block_size) >= table.size()) {
      return make_error("forward: position {} of sequence {} is past its block table ({} blocks "
                        "of {} tokens)", pos, seq, table.size(), block_size);
    }
    int32_t& max_pos = max_position_[static_cast<size_t>(seq)];
    max_pos = std::max(max_pos, pos);
    sorted_slots_[t] = static_cast<int64_t>(table[static_cast<size_t>(pos / block_size)]) *
                           block_size + pos % block_size;
  }
  // Every block a token may read (positions 0..max of its sequence) must exist.
  for (size_t seq = 0; seq < b.block_tables.size(); ++seq) {
    if (max_position_[seq] < 0) continue;
    const std::span<const int32_t> table = b.block_tables[seq];
    for (int64_t i = 0; i <= max_position_[seq] / block_size; ++i) {
      const int32_t block = table[static_cast<size_t>(i)];
      if (block < 0 || block >= kv.num_blocks()) {
        return make_error("forward: block {} (entry {} of sequence {}'s table) is out of range "
                          "({} blocks)", block, i, seq, kv.num_blocks());
      }
    }
  }
  std::sort(sorted_slots_.begin(), sorted_slots_.end());
  if (std::adjacent_find(sorted_slots_.begin(), sorted_slots_.end()) != sorted_slots_.end()) {
    return Error("forward: two tokens of the batch map to the same KV slot");
  }
  if (config_.hybrid()) {
    if (Status st = validate_recurrent(b, kv); !st) return st;
  }
  if (kv.has_window_group()) {
    if (Status st = validate_window(b, kv); !st) return st;
  }
  for (size_t i = 0; i < b.logit_rows.size(); ++i) {
    if (b.logit_rows[i] < 0 || static_cast<size_t>(b.logit_rows[i]) >= n) {
      return make_error("forward: logit row {} is out of range ({} tokens)", b.logit_rows[i], n);
    }
  }
  if (!b.embd_rows.empty() || !b.embd_values.empty()) {
    if (distributed_) return Error("forward: input embeddings on a model split across processes are not supported");
    if (b.embd_values.size() != b.embd_rows.size() * static_cast<size_t>(config_.n_embd)) {
      return make_error("forward: {} input embedding values for {} rows of {} (n_embd)",
                        b.embd_values.size(), b.embd_rows.size(), config_.n_embd);
    }
    std::vector<int32_t> rows(b.embd_rows.begin(), b.embd_rows.end());
    std::sort(rows.begin(), rows.end());
    if (rows.front() < 0 || static_cast<size_t>(rows.back()) >= n ||
        std::adjacent_find(rows.begin(), rows.end()) != rows.end()) {
      return make_error("forward: input embedding rows must be distinct and < {} (batch rows)", n);
    }
  }
  if (!b.attention_spans.empty()) {
    if (Status st = validate_spans(b); !st) return st;
  }
  return {};
}

// Batch::attention_spans: on a backend that takes them, within their sequences, and never cut at
// their end by the batch (a step that reaches a span holds every position from the sequence's
// first one here, or the span's first, to `last`).
Status Model::validate_spans(const Batch& b) {
  if (!backend_.supports_attention_spans())
    return Error("forward: this backend does not support non-causal attention spans (Gemma 3's image tokens)");
  if (distributed_) return Error("forward: attention spans on a model split across processes are not supported");
  const size_t n_seqs = b.block_tables.size();
  min_position_.assign(n_seqs, std::numeric_limits<int32_t>::max());
  for (size_t t = 0; t < b.tokens.size(); ++t) {
    int32_t& lo = min_position_[static_cast<size_t>(b.seq_index[t])];
    lo = std::min(lo, b.positions[t]);
  }
  for (const AttentionSpan& span : b.attention_spans) {
    if (span.seq < 0 || static_cast<size_t>(span.seq) >= n_seqs || span.first < 0 || span.last < span.first)
      return make_error("forward: attention span [{}, {}] of sequence {} is malformed ({} sequences)",
                        span.first, span.last, span.seq, n_seqs);
    // Untouched by this step: computed in earlier ones, or not reached yet.
    const int32_t lo = std::max(span.first, min_position_[static_cast<size_t>(span.seq)]);
    if (lo > span.last || max_position_[static_cast<size_t>(span.seq)] < span.first) continue;
    int64_t present = 0;
    for (size_t t = 0; t < b.tokens.size(); ++t)
      if (b.seq_index[t] == span.seq && b.positions[t] >= lo && b.positions[t] <= span.last) ++present;
    if (present != span.last - lo + 1)
      return make_error("forward: the batch holds {} of positions {}..{} of sequence {}'s attention "
                        "span [{}, {}]: a step must not end inside a span", present, lo, span.last,
                        span.seq, span.first, span.last);
  }
  return {};
}

// The window group's contract (Batch::window_block_tables): a table per sequence whose entries
// from the first position's window to the last position are window blocks, and distinct slots.
Status Model::validate_window(const Batch& b, const KvCache& kv) {
  const size_t n_seqs = b.block_tables.size();
  if (b.window_block_tables.size() != n_seqs) {
    return make_error("forward: {} window block tables for {} sequences (the KV cache keeps a "
                      "window group)", b.window_block_tables.size(), n_seqs);
  }
  int32_t window = 0;
  for (int64_t l = kv.first_layer(); l < kv.first_layer() + kv.num_layers(); ++l)
    if (kv.in_window_group(l)) window = std::max(window, config_.attention_window(l));
  const int64_t block_size = kv.block_size();
  min_position_.assign(n_seqs, std::numeric_limits<int32_t>::max());
  for (size_t t = 0; t < b.tokens.size(); ++t) {
    int32_t& lo = min_position_[static_cast<size_t>(b.seq_index[t])];
    lo = std::min(lo, b.positions[t]);
  }
  sorted_slots_.clear();
  for (size_t seq = 0; seq < n_seqs; ++seq) {
    if (max_position_[seq] < 0) continue;
    const std::span<const int32_t> table = b.window_block_tables[seq];
    const int64_t first = std::max<int64_t>(0, min_position_[seq] - window + 1) / block_size;
    const int64_t last = max_position_[seq] / block_size;
    if (static_cast<size_t>(last) >= table.size()) {
      return make_error("forward: position {} of sequence {} is past its window block table ({} "
                        "blocks)", max_position_[seq], seq, table.size());
    }
    for (int64_t i = first; i <= last; ++i) {
      const int32_t block = table[static_cast<size_t>(i)];
      if (block < 0 || block >= kv.num_window_blocks()) {
        return make_error("forward: window block {} (entry {} of sequence {}'s window table) is "
                          "out of range ({} window blocks)", block, i, seq, kv.num_window_blocks());
      }
    }
  }
  for (size_t t = 0; t < b.tokens.size(); ++t) {
    const int32_t pos = b.positions[t];
    const int32_t block = b.window_block_tables[static_cast<size_t>(b.seq_index[t])][static_cast<size_t>(pos / block_size)];
    sorted_slots_.push_back(static_cast<int64_t>(block) * block_size + pos % block_size);
  }
  std::sort(sorted_slots_.begin(), sorted_slots_.end());
  if (std::adjacent_find(sorted_slots_.begin(), sorted_slots_.end()) != sorted_slots_.end()) {
    return Error("forward: two tokens of the batch map to the same window KV slot");
  }
  return {};
}

// The recurrent layers' contract (Batch::state_slots): a slot per sequence, in range and
// distinct among the sequences with tokens here, and each sequence's tokens at consecutive
// positions in batch order (a state advances one token at a time).
Status Model::validate_recurrent(const Batch& b, const KvCache& kv) {
  const size_t n_seqs = b.block_tables.size();
  if (!b.state_slots.empty() && b.state_slots.size() != n_seqs) {
    return make_error("forward: {} state slots for {} sequences", b.state_slots.size(), n_seqs);
  }
  host_state_slots_.assign(n_seqs, -1);  // here: the last position seen per sequence
  std::vector<int32_t>& last = host_state_slots_;
  for (size_t t = 0; t < b.tokens.size(); ++t) {
    const size_t seq = static_cast<size_t>(b.seq_index[t]);
    if (last[seq] >= 0 && b.positions[t] != last[seq] + 1) {
      return make_error("forward: sequence {} of a hybrid model has position {} after {} (its "
                        "tokens must come in order of consecutive positions)",
                        seq, b.positions[t], last[seq]);
    }
    last[seq] = b.positions[t];
  }
  sorted_slots_.clear();
  for (size_t seq = 0; seq < n_seqs; ++seq) {
    if (last[seq] < 0) continue;  // no token in this step
    const int32_t slot = b.state_slots.empty() ? static_cast<int32_t>(seq) : b.state_slots[seq];
    if (slot < 0 || slot >= kv.num_state_slots()) {
      return make_error("forward: state slot {} of sequence {} is out of range ({} slots)", slot,
                        seq, kv.num_state_slots());
    }
    sorted_slots_.push_back(slot);
  }
  std::sort(sorted_slots_.begin(), sorted_slots_.end());
  if (std::adjacent_find(sorted_slots_.begin(), sorted_slots_.end()) != sorted_slots_.end()) {
    return Error("forward: two sequences of the batch share a state slot");
  }
  return {};
}

void Model::upload(const Batch& b, int32_t block_size, bool window_group, StepInputs& in) {
  const int64_t n = static_cast<int64_t>(b.tokens.size());
  const int64_t n_logits = static_cast<int64_t>(b.logit_rows.size());
  const int64_t n_seqs = static_cast<int64_t>(b.block_tables.size());
  const int32_t max_blocks = step_blocks_per_sequence(b.positions, block_size);
  host_slots_.resize(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    const std::span<const int32_t> table = b.block_tables[static_cast<size_t>(b.seq_index[t])];
    const int32_t pos = b.positions[t];
    host_slots_[t] = table[static_cast<size_t>(pos / block_size)] * block_size + pos % block_size;
  }
  // [n_seqs][max_blocks]; only the entries up to each sequence's last position are read.
  host_tables_.assign(static_cast<size_t>(n_seqs * max_blocks), 0);
  for (int64_t s = 0; s < n_seqs; ++s) {
    const std::span<const int32_t> table = b.block_tables[static_cast<size_t>(s)];
    const size_t count = std::min(table.size(), static_cast<size_t>(max_blocks));
    std::copy_n(table.begin(), count, host_tables_.begin() + s * max_blocks);
  }

  auto write = [&](ScratchIndices& dst, kernels::IndexMatrix view, const int32_t* data) {
    backend_.write(dst.buffer(), 0, data, static_cast<size_t>(view.rows * view.cols) * sizeof(int32_t));
    return view;
  };
  in.n_tokens = n;
  in.n_logits = n_logits;
  in.tokens = write(tokens_, tokens_.rows(n), b.tokens.data());
  in.attention.positions = write(positions_, positions_.rows(n), b.positions.data());
  in.attention.seq_index = write(seq_index_, seq_index_.rows(n), b.seq_index.data());
  in.attention.block_tables =
      write(block_tables_, block_tables_.shaped(n_seqs, max_blocks), host_tables_.data());
  in.slots = write(slots_, slots_.rows(n), host_slots_.data());
  in.attention.last_positions = {};
  if (!b.attention_spans.empty()) {
    host_last_.assign(b.positions.begin(), b.positions.end());
    for (const AttentionSpan& span : b.attention_spans)
      for (int64_t t = 0; t < n; ++t)
        if (b.seq_index[t] == span.seq && b.positions[t] >= span.first && b.positions[t] <= span.last)
          host_last_[static_cast<size_t>(t)] = span.last;
    in.attention.last_positions = write(last_positions_, last_positions_.rows(n), host_last_.data());
  }
  if (window_group) {
    host_window_slots_.resize(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      const std::span<const int32_t> table = b.window_block_tables[static_cast<size_t>(b.seq_index[t])];
      const int32_t pos = b.positions[t];
      host_window_slots_[t] = table[static_cast<size_t>(pos / block_size)] * block_size + pos % block_size;
    }
    // Entries behind a window are -1 and never read: block 0 keeps every entry in range.
    host_window_tables_.assign(static_cast<size_t>(n_seqs * max_blocks), 0);
    for (int64_t s = 0; s < n_seqs; ++s) {
      const std::span<const int32_t> table = b.window_block_tables[static_cast<size_t>(s)];
      const size_t count = std::min(table.size(), static_cast<size_t>(max_blocks));
      for (size_t i = 0; i < count; ++i)
        host_window_tables_[static_cast<size_t>(s * max_blocks) + i] = std::max(table[i], 0);
    }
    in.window_slots = write(window_slots_, window_slots_.rows(n), host_window_slots_.data());
    in.window_attention = in.attention;
    in.window_attention.block_tables =
        write(window_tables_, window_tables_.shaped(n_seqs, max_blocks), host_window_tables_.data());
  }
  in.logit_rows = write(logit_rows_, logit_rows_.rows(n_logits), b.logit_rows.data());
  in.embd_rows = b.embd_rows;
  in.embd_values = b.embd_values;
  if (config_.hybrid()) {
    host_state_slots_.resize(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      const int32_t seq = b.seq_index[t];
      host_state_slots_[t] = b.state_slots.empty() ? seq : b.state_slots[static_cast<size_t>(seq)];
    }
    in.recurrent.positions = in.attention.positions;
    in.recurrent.state_slots = write(state_slots_, state_slots_.rows(n), host_state_slots_.data());
  }
}

Status Model::forward(const Batch& b, KvCache& kv, std::span<float> logits) {
  Status valid = validate(b, kv, logits.size());
  if (!valid) return valid;
  if (distributed_) {
    if (Status st = send_forward(b, kv.mirror_id()); !st) return st;
  }
  return forward_shard(b, kv, logits);
}

Status Model::forward_hidden(const Batch& b, KvCache& kv, std::span<float> hidden) {
  if (distributed_) return Error("forward_hidden: not supported on a model split across processes");
  const size_t d = static_cast<size_t>(config_.n_embd);
  if (hidden.size() != b.logit_rows.size() * d) {
    return make_error("forward_hidden: buffer holds {} floats, expected {} rows x {} n_embd",
                      hidden.size(), b.logit_rows.size(), d);
  }
  // The hidden rows reuse the logits scratch ([max_logit_rows][n_vocab]): n_embd <= n_vocab in
  // every real model; a toy one without it is refused rather than overrun.
  if (config_.n_embd > config_.n_vocab) {
    return make_error("forward_hidden: n_embd {} > n_vocab {} is not supported", config_.n_embd,
                      config_.n_vocab);
  }
  if (Status valid = validate(b, kv, SIZE_MAX); !valid) return valid;
  StepInputs in;
  upload(b, kv.block_size(), kv.has_window_group(), in);
  ForwardContext ctx{backend_, in, kv, config_.n_experts > 0 ? expert_counts_.get() : nullptr,
                     logits_.shaped(in.n_logits, config_.n_embd), nullptr};
  ctx.hidden_only = true;
  network_->forward(ctx);
  backend_.read(logits_.buffer(), 0, hidden.data(), hidden.size() * sizeof(float));
  return {};
}

Status Model::forward_shard(const Batch& b, KvCache& kv, std::span<float> logits) {
  StepInputs in;
  upload(b, kv.block_size(), kv.has_window_group(), in);
  if (distributed_) return forward_split(b, in, kv, logits);
  const ForwardContext ctx{backend_, in, kv,
                           config_.n_experts > 0 ? expert_counts_.get() : nullptr,
                           logits_.rows(in.n_logits), nullptr};
  network_->forward(ctx);
  backend_.read(logits_.buffer(), 0, logits.data(), logits.size() * sizeof(float));
  return {};
}

}  // namespace cadenza::model
