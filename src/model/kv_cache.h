// KvCache: the paged K/V store of one model, in backend memory: for every layer, num_blocks
// blocks of block_size token slots (layout in kernels::KvLayer). It knows nothing about which
// sequence owns which block: callers hand out blocks (a block table per sequence) and pass the
// tables with each batch (model::Batch). A token at position p of a sequence lives in block
// table[p / block_size] at offset p % block_size.
//
// Ownership: owns its buffers; must not outlive the backend. Not thread-safe.
// Buffers: keys of held layer l are buffers_[2l], values buffers_[2l + 1]. Under tensor
// parallelism only this rank's KV heads are stored (ModelConfig::shard).
#pragma once

#include <cassert>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "util/result.h"

namespace cadenza::model {

struct ModelConfig;
class Distributed;

struct KvCacheOptions {
  int32_t num_blocks = 0;   // > 0
  int32_t block_size = 16;  // tokens per block, > 0
  // Element type: F16 (default), F32, or Q8_0 (blocks of 32 values: an f16 scale + 32 int8; each
  // head row quantized on its own, so head dims must be multiples of 32). The backend must
  // support it (Backend::supports_kv_type). K/V are computed in f32 and rounded when stored.
  DType type = DType::F16;
  // Hybrid models (ModelConfig::hybrid): how many sequences' recurrent states are held at once
  // (> 0; the caller gives each running sequence a slot, Batch::state_slots). Ignored otherwise.
  int32_t num_state_slots = 8;
  // > 0: the sliding-window layers (ModelConfig::attention_window(l) > 0) get a block group of
  // their own, num_window_blocks blocks of block_size slots, addressed through
  // Batch::window_block_tables (kv::KvCacheManager's window group): they need only the blocks of
  // each sequence's window, so this is usually far below num_blocks. 0: they use num_blocks and
  // the main tables like every other layer. Not on a model split across processes.
  int32_t num_window_blocks = 0;
};

class KvCache {
 public:
  // Allocates the store for `config`'s layers and KV heads. Errors: bad options, a type the
  // backend does not support, Q8_0 with a head dim that is not a multiple of 32, out of memory.
  static Result<std::unique_ptr<KvCache>> create(kernels::Backend& backend,
                                                 const ModelConfig& config,
                                                 const KvCacheOptions& options);

  int32_t num_blocks() const { return options_.num_blocks; }
  int32_t block_size() const { return options_.block_size; }
  DType type() const { return options_.type; }
  // The layers held here: all of the model's, or a pipeline stage's [first_layer(),
  // first_layer() + num_layers()); layer(i) takes the model's layer index.
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  int64_t first_layer() const { return first_layer_; }
  const kernels::KvLayer& layer(int64_t i) const {
    assert(i >= first_layer_ && i - first_layer_ < num_layers());
    return layers_[static_cast<size_t>(i - first_layer_)];
  }
  size_t size_bytes() const { return size_bytes_; }
  // The window group (KvCacheOptions::num_window_blocks > 0): its block count, and whether layer
  // `i` (the model's index) belongs to it.
  bool has_window_group() const { return options_.num_window_blocks > 0; }
  int32_t num_window_blocks() const { return options_.num_window_blocks; }
  bool in_window_group(int64_t i) const {
    return window_layer_[static_cast<size_t>(i - first_layer_)];
  }

  // Hybrid models: the recurrent layers hold no K/V (their KvLayer has no memory; blocks are
  // still handed out for the attention layers) but per state slot a fixed-size state, zeroed
  // when a sequence starts at position 0 (kernels::RecurrentBatch). For recurrent layer `i`:
  // conv [num_state_slots][conv_state_floats], delta [num_state_slots][delta_state_floats]
  // (ModelConfig::RecurrentShape), f32 in backend memory. size_bytes() counts them.
  int32_t num_state_slots() const { return hybrid_ ? options_.num_state_slots : 0; }
  struct RecurrentLayer {
    kernels::Matrix conv, delta;
  };
  const RecurrentLayer& recurrent(int64_t i) const {
    assert(i >= first_layer_ && i - first_layer_ < num_layers());
    return recurrent_[static_cast<size_t>(i - first_layer_)];
  }
  // Bytes of one state slot over all held layers.
  size_t state_slot_bytes() const { return state_slot_bytes_; }
  // Copies slot `src`'s state to slot `dst` in every recurrent layer (a forked sequence continues
  // from its parent's state). Errors: slot ids out of range, not a hybrid model's cache.
  Status copy_state(int32_t src, int32_t dst);
  // Slot `slot`'s state over every held recurrent layer as opaque bytes (state_slot_bytes()
  // long: each state buffer's row of that slot, in buffer order), and back. Bit-exact:
  // write_state(b, read_state(a)) makes slot b continue exactly as slot a would (prefix caching
  // of hybrid models snapshots a sequence's state at a block boundary and restores it into
  // another sequence's slot). Errors: a slot out of range, a wrong size, not a hybrid model's
  // cache, a split model.
  Status read_state(int32_t slot, std::span<uint8_t> out) const;
  Status write_state(int32_t slot, std::span<const uint8_t> in);

  // Copies the K/V of slots [0, num_tokens) of block `src` to the same slots of block `dst`, in
  // every layer (copy-on-write of a partially filled block when a sequence is forked).
  // Errors: block ids or num_tokens out of range.
  // On a distributed model's driver the same copy runs on every worker first (Model sets the
  // mirror: the link and the id under which the workers hold their copy of this cache, which
  // they free when this one is destroyed).
  // With a window group, only the main group's layers (copy_window_block does the others).
  Status copy_block(int32_t src, int32_t dst, int32_t num_tokens);
  // The same over the window group's layers and blocks (an error without a window group).
  Status copy_window_block(int32_t src, int32_t dst, int32_t num_tokens);
  // One block's K/V over every held layer as a flat byte string (KV tiers, kv/kv_tier_stack.h):
  // per layer, the keys of its block_size slots, then the values (none for the compressed
  // cache); recurrent layers and a window group's layers contribute nothing. Bit-exact: write_block(b, read_block(a)) makes
  // block b hold exactly block a's K/V.
  size_t block_bytes() const;
  // One window-group block over the window group's layers (0 without a window group).
  size_t window_block_bytes() const;
  // `out` / `in` must be block_bytes() long. Errors: a bad block id or size, a distributed model
  // (the workers hold their own copy; tiers are not supported there).
  Status read_block(int32_t block, std::span<uint8_t> out) const;
  Status write_block(int32_t block, std::span<const uint8_t> in);
  void set_mirror(Distributed* mirror, int64_t id) {
    mirror_ = mirror;
    mirror_id_ = id;
  }
  int64_t mirror_id() const { return mirror_id_; }
  // On a split model's driver the cache must be destroyed before its Model (as an engine is):
  // the destructor tells the workers to free their copy.
  ~KvCache();

 private:
  explicit KvCache(kernels::Backend& backend) : backend_(backend) {}
  kernels::Backend& backend_;
  KvCacheOptions options_;
  size_t key_slot_bytes_ = 0;    // one token slot of one layer
  size_t value_slot_bytes_ = 0;
  std::vector<std::unique_ptr<kernels::Buffer>> buffers_;
  std::vector<kernels::KvLayer> layers_;
  size_t size_bytes_ = 0;
  int64_t first_layer_ = 0;
  bool hybrid_ = false;
  std::vector<bool> window_layer_;  // per held layer: in the window group
  std::vector<RecurrentLayer> recurrent_;  // per held layer; empty views for attention layers
  std::vector<std::unique_ptr<kernels::Buffer>> state_buffers_;  // conv, delta per recurrent layer
  size_t state_slot_bytes_ = 0;
  // Copies slots [0, num_tokens) of block src to dst in the layers where `layer_selected`.
  template <typename Pred>
  void copy_slots(int32_t src, int32_t dst, int32_t num_tokens, Pred&& layer_selected);
  Distributed* mirror_ = nullptr;
  int64_t mirror_id_ = 0;
};

}  // namespace cadenza::model
