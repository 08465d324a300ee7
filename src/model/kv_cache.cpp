#include "model/kv_cache.h"

#include <limits>
#include <optional>

#include "model/config.h"
#include "model/distributed.h"

namespace cadenza::model {

Result<std::unique_ptr<KvCache>> KvCache::create(kernels::Backend& backend,
                                                 const ModelConfig& config,
                                                 const KvCacheOptions& options) {
  if (options.num_blocks <= 0 || options.block_size <= 0) {
    return make_error("kv cache: num_blocks ({}) and block_size ({}) must be positive",
                      options.num_blocks, options.block_size);
  }
  if (static_cast<int64_t>(options.num_blocks) * options.block_size >
      std::numeric_limits<int32_t>::max()) {
    return make_error("kv cache: {} blocks of {} tokens exceed 2^31 slots", options.num_blocks,
                      options.block_size);
  }
  if (!backend.supports_kv_type(options.type)) {
    return make_error("kv cache: the {} backend does not support element type {}", backend.name(),
                      dtype_name(options.type));
  }
  // Every head row is stored on its own: a Q8_0 block (32 values) must not straddle two heads.
  const int64_t type_block = cadenza::traits(options.type).block_size;
  if (config.head_dim_k % type_block != 0 || config.head_dim_v % type_block != 0) {
    return make_error(
        "kv cache: element type {} needs head dims that are multiples of {} (this model: key {}, "
        "value {}); use f16 or f32",
        dtype_name(options.type), type_block, config.head_dim_k,
        config.head_dim_v);
  }
  if (config.kv_values_in_keys &&
      !backend.supports_latent_kv(static_cast<int32_t>(config.head_dim_k),
                                  static_cast<int32_t>(config.head_dim_v))) {
    return make_error("kv cache: the {} backend does not run multi-head latent attention's "
                      "compressed cache (key {}, value {}); use --device cpu",
                      backend.name(), config.head_dim_k, config.head_dim_v);
  }
  const std::optional<uint64_t> key_row = row_bytes(options.type, config.head_dim_k);
  const std::optional<uint64_t> value_row = row_bytes(options.type, config.head_dim_v);
  if (!key_row || !value_row) {
    return make_error("kv cache: element type {} cannot hold head dims {} / {}",
                      dtype_name(options.type), config.head_dim_k, config.head_dim_v);
  }
  if (options.num_window_blocks < 0) {
    return make_error("kv cache: num_window_blocks ({}) must not be negative", options.num_window_blocks);
  }
  const uint64_t slots = static_cast<uint64_t>(options.num_blocks) * static_cast<uint64_t>(options.block_size);
  const uint64_t window_slots =
      static_cast<uint64_t>(options.num_window_blocks) * static_cast<uint64_t>(options.block_size);
  // This process's share (shard.h): its KV heads and its stage's layers.
  const int64_t n_kv_heads = config.shard.kv_heads(config.n_kv_heads).count;
  const uint64_t key_slot = static_cast<uint64_t>(n_kv_heads) * *key_row;
  // The compressed (latent) cache keeps no values: they are the start of each key row.
  const uint64_t value_slot =
      config.kv_values_in_keys ? 0 : static_cast<uint64_t>(n_kv_heads) * *value_row;

  std::unique_ptr<KvCache> cache(new KvCache(backend));
  cache->options_ = options;
  cache->key_slot_bytes_ = static_cast<size_t>(key_slot);
  cache->value_slot_bytes_ = static_cast<size_t>(value_slot);
  cache->first_layer_ = config.shard.layer_begin;
  cache->hybrid_ = config.hybrid();
  if (cache->hybrid_ && options.num_state_slots <= 0) {
    return make_error("kv cache: num_state_slots ({}) must be positive for a hybrid model",
                      options.num_state_slots);
  }
  const int64_t conv_floats = config.recurrent.conv_state_floats();
  const int64_t delta_floats = config.recurrent.delta_state_floats();
  for (int64_t l = config.shard.layer_begin; l < config.shard.layer_end; ++l) {
    KvCache::RecurrentLayer state;
    if (config.is_recurrent(l)) {
      const int64_t slots_n = options.num_state_slots;
      Result<std::unique_ptr<kernels::Buffer>> conv =
          backend.allocate(static_cast<size_t>(slots_n * conv_floats) * sizeof(float));
      if (!conv) return make_error("kv cache: layer {} convolution state: {}", l, conv.error());
      Result<std::unique_ptr<kernels::Buffer>> delta =
          backend.allocate(static_cast<size_t>(slots_n * delta_floats) * sizeof(float));
      if (!delta) return make_error("kv cache: layer {} recurrent state: {}", l, delta.error());
      state.conv = kernels::Matrix::of((*conv)->data(), slots_n, conv_floats);
      state.delta = kernels::Matrix::of((*delta)->data(), slots_n, delta_floats);
      cache->state_slot_bytes_ += static_cast<size_t>(conv_floats + delta_floats) * sizeof(float);
      cache->size_bytes_ += (*conv)->size_bytes() + (*delta)->size_bytes();
      cache->state_buffers_.push_back(std::move(*conv));
      cache->state_buffers_.push_back(std::move(*delta));
    }
    cache->recurrent_.push_back(state);
    // A recurrent layer keeps no K/V: a token-sized placeholder keeps the layer indexing.
    const bool kv_held = !config.is_recurrent(l);
    const bool windowed = kv_held && options.num_window_blocks > 0 && config.attention_window(l) > 0;
    cache->window_layer_.push_back(windowed);
    const uint64_t layer_slots = windowed ? window_slots : slots;
    const uint64_t key_bytes = layer_slots * key_slot;
    const uint64_t value_bytes = layer_slots * value_slot;
    Result<std::unique_ptr<kernels::Buffer>> keys =
        backend.allocate(kv_held ? static_cast<size_t>(key_bytes) : 1);
    if (!keys) return make_error("kv cache: layer {} keys: {}", l, keys.error());
    Result<std::unique_ptr<kernels::Buffer>> values =
        backend.allocate(kv_held ? static_cast<size_t>(value_bytes) : 1);
    if (!values) return make_error("kv cache: layer {} values: {}", l, values.error());
    kernels::KvLayer layer;
    layer.keys = (*keys)->data();
    layer.values = config.kv_values_in_keys ? nullptr : (*values)->data();
    layer.values_in_keys = config.kv_values_in_keys;
    layer.type = options.type;
    layer.num_blocks = windowed ? options.num_window_blocks : options.num_blocks;
    layer.block_size = options.block_size;
    layer.n_kv_heads = static_cast<int32_t>(n_kv_heads);
    layer.head_dim_k = static_cast<int32_t>(config.head_dim_k);
    layer.head_dim_v = static_cast<int32_t>(config.head_dim_v);
    cache->layers_.push_back(layer);
    cache->buffers_.push_back(std::move(*keys));
    cache->buffers_.push_back(std::move(*values));
    if (kv_held) cache->size_bytes_ += static_cast<size_t>(key_bytes + value_bytes);
  }
  return cache;
}

KvCache::~KvCache() {
  if (mirror_ == nullptr || !mirror_->status()) return;  // a failed job frees nothing remotely
  CommandHeader h;
  h.command = static_cast<int32_t>(Command::FreeKv);
  h.args[0] = mirror_id_;
  (void)mirror_->send_command(h, {});
}

Status KvCache::copy_block(int32_t src, int32_t dst, int32_t num_tokens) {
  if (src < 0 || src >= num_blocks() || dst < 0 || dst >= num_blocks() || num_tokens < 0 ||
      num_tokens > block_size()) {
    return make_error("kv cache: cannot copy {} slots of block {} to block {} ({} blocks of {})",
                      num_tokens, src, dst, num_blocks(), block_size());
  }
  if (src == dst || num_tokens == 0) return {};
  if (mirror_ != nullptr) {
    CommandHeader h;
    h.command = static_cast<int32_t>(Command::CopyBlock);
    h.args[0] = src;
    h.args[1] = dst;
    h.args[2] = num_tokens;
    h.args[3] = mirror_id_;
    if (Status st = mirror_->send_command(h, {}); !st) return st;
  }
  copy_slots(src, dst, num_tokens, [&](size_t l) { return !window_layer_[l]; });
  return {};
}

Status KvCache::copy_window_block(int32_t src, int32_t dst, int32_t num_tokens) {
  if (!has_window_group() || src < 0 || src >= num_window_blocks() || dst < 0 ||
      dst >= num_window_blocks() || num_tokens < 0 || num_tokens > block_size()) {
    return make_error("kv cache: cannot copy {} slots of window block {} to {} ({} window blocks)",
                      num_tokens, src, dst, num_window_blocks());
  }
  if (src == dst || num_tokens == 0) return {};
  copy_slots(src, dst, num_tokens, [&](size_t l) { return window_layer_[l]; });
  return {};
}

template <typename Pred>
void KvCache::copy_slots(int32_t src, int32_t dst, int32_t num_tokens, Pred&& layer_selected) {
  const size_t block = static_cast<size_t>(block_size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (recurrent_[l].delta.data != nullptr) continue;  // no K/V in a recurrent layer
    if (!layer_selected(l)) continue;
    backend_.copy(*buffers_[2 * l], static_cast<size_t>(dst) * block * key_slot_bytes_,
                  *buffers_[2 * l], static_cast<size_t>(src) * block * key_slot_bytes_,
                  static_cast<size_t>(num_tokens) * key_slot_bytes_);
    if (value_slot_bytes_ == 0) continue;  // the compressed cache: values are in the keys
    backend_.copy(*buffers_[2 * l + 1], static_cast<size_t>(dst) * block * value_slot_bytes_,
                  *buffers_[2 * l + 1], static_cast<size_t>(src) * block * value_slot_bytes_,
                  static_cast<size_t>(num_tokens) * value_slot_bytes_);
  }
}

size_t KvCache::block_bytes() const {
  size_t n = 0;
  for (size_t l = 0; l < recurrent_.size(); ++l)
    if (recurrent_[l].delta.data == nullptr && !window_layer_[l])
      n += static_cast<size_t>(block_size()) * (key_slot_bytes_ + value_slot_bytes_);
  return n;
}

size_t KvCache::window_block_bytes() const {
  size_t n = 0;
  for (size_t l = 0; l < recurrent_.size(); ++l)
    if (window_layer_[l]) n += static_cast<size_t>(block_size()) * (key_slot_bytes_ + value_slot_bytes_);
  return n;
}

// Visits the (buffer, offset, size) ranges of one block, layer by layer, keys before values.
template <typename Fn>
static void for_each_block_range(size_t n_layers, const std::vector<KvCache::RecurrentLayer>& recurrent,
                                 const std::vector<bool>& window_layer, size_t block_offset_slots,
                                 size_t block, size_t key_slot, size_t value_slot, Fn&& fn) {
  for (size_t l = 0; l < n_layers; ++l) {
    if (recurrent[l].delta.data != nullptr || window_layer[l]) continue;
    fn(2 * l, block_offset_slots * key_slot, block * key_slot);
    if (value_slot != 0) fn(2 * l + 1, block_offset_slots * value_slot, block * value_slot);
  }
}

Status KvCache::read_block(int32_t block, std::span<uint8_t> out) const {
  if (block < 0 || block >= num_blocks() || out.size() != block_bytes() || mirror_ != nullptr) {
    return make_error("kv cache: cannot read block {} into {} bytes ({} blocks of {} bytes{})", block,
                      out.size(), num_blocks(), block_bytes(), mirror_ ? ", split model" : "");
  }
  const size_t bs = static_cast<size_t>(block_size());
  size_t at = 0;
  for_each_block_range(layers_.size(), recurrent_, window_layer_, static_cast<size_t>(block) * bs, bs, key_slot_bytes_,
                       value_slot_bytes_, [&](size_t buf, size_t offset, size_t size) {
                         backend_.read(*buffers_[buf], offset, out.data() + at, size);
                         at += size;
                       });
  return {};
}

Status KvCache::write_block(int32_t block, std::span<const uint8_t> in) {
  if (block < 0 || block >= num_blocks() || in.size() != block_bytes() || mirror_ != nullptr) {
    return make_error("kv cache: cannot write {} bytes to block {} ({} blocks of {} bytes{})", in.size(),
                      block, num_blocks(), block_bytes(), mirror_ ? ", split model" : "");
  }
  const size_t bs = static_cast<size_t>(block_size());
  size_t at = 0;
  for_each_block_range(layers_.size(), recurrent_, window_layer_, static_cast<size_t>(block) * bs, bs, key_slot_bytes_,
                       value_slot_bytes_, [&](size_t buf, size_t offset, size_t size) {
                         backend_.write(*buffers_[buf], offset, in.data() + at, size);
                         at += size;
                       });
  return {};
}

// Visits each state buffer's row of one slot: (buffer index, byte offset, row bytes).
template <typename Fn>
static void for_each_state_row(const std::vector<KvCache::RecurrentLayer>& recurrent, int32_t slot, Fn&& fn) {
  size_t b = 0;
  for (const KvCache::RecurrentLayer& r : recurrent) {
    if (r.delta.data == nullptr) continue;
    for (const kernels::Matrix& m : {r.conv, r.delta}) {
      const size_t row = static_cast<size_t>(m.cols) * sizeof(float);
      fn(b++, static_cast<size_t>(slot) * row, row);
    }
  }
}

Status KvCache::read_state(int32_t slot, std::span<uint8_t> out) const {
  if (!hybrid_ || slot < 0 || slot >= num_state_slots() || out.size() != state_slot_bytes_ ||
      mirror_ != nullptr) {
    return make_error("kv cache: cannot read state slot {} into {} bytes ({} slots of {} bytes)", slot,
                      out.size(), num_state_slots(), state_slot_bytes_);
  }
  size_t at = 0;
  for_each_state_row(recurrent_, slot, [&](size_t b, size_t offset, size_t size) {
    backend_.read(*state_buffers_[b], offset, out.data() + at, size);
    at += size;
  });
  return {};
}

Status KvCache::write_state(int32_t slot, std::span<const uint8_t> in) {
  if (!hybrid_ || slot < 0 || slot >= num_state_slots() || in.size() != state_slot_bytes_ ||
      mirror_ != nullptr) {
    return make_error("kv cache: cannot write {} bytes to state slot {} ({} slots of {} bytes)",
                      in.size(), slot, num_state_slots(), state_slot_bytes_);
  }
  size_t at = 0;
  for_each_state_row(recurrent_, slot, [&](size_t b, size_t offset, size_t size) {
    backend_.write(*state_buffers_[b], offset, in.data() + at, size);
    at += size;
  });
  return {};
}

Status KvCache::copy_state(int32_t src, int32_t dst) {
  if (!hybrid_ || src < 0 || dst < 0 || src >= num_state_slots() || dst >= num_state_slots()) {
    return make_error("kv cache: cannot copy state slot {} to {} ({} slots)", src, dst,
                      num_state_slots());
  }
  if (mirror_ != nullptr) return Error("kv cache: recurrent states are not supported split");
  if (src == dst) return {};
  for_each_state_row(recurrent_, src, [&](size_t b, size_t offset, size_t row) {
    backend_.copy(*state_buffers_[b], static_cast<size_t>(dst) * row, *state_buffers_[b], offset, row);
  });
  return {};
}

}  // namespace cadenza::model
