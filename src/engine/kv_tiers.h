// The KV tiers of an engine (kv/kv_tier_stack.h): the configuration (--kv-offload-memory,
// --kv-disk-dir, --kv-disk-size), the model identity that keys the disk tier's files, and the
// stack built from both.
//
// The model identity is SHA-256 over what the bytes of a block depend on besides its tokens and
// cache salt (which the chained block hash already covers): the GGUF file's header (metadata and
// tensor table), the first 4 KiB of every tensor's data (two files with the same header but other
// weights, e.g. synthesized ones with different seeds, differ there), and the KV layout (element
// type, block size, held layers, bytes per block). A disk directory shared by several models, or
// kept across a change of --kv-cache-type, never hands one of them another's blocks.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kv/kv_tier_stack.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "util/result.h"

namespace cadenza::engine {

struct KvTierConfig {
  int64_t memory_bytes = 0;  // host-memory tier budget; 0: no memory tier
  std::string disk_dir;      // disk tier directory; empty: no disk tier
  int64_t disk_bytes = 0;    // disk tier budget (> 0 when disk_dir is set)
  bool enabled() const { return memory_bytes > 0 || !disk_dir.empty(); }
};

kv::BlockHash kv_model_identity(const model::Model& model, const model::KvCache& kv);

// The stack for `config` below `kv`'s pool, or null when the config enables no tier or tiers
// cannot apply (prefix caching off, e.g. a hybrid model; a model split across processes): those
// log why once. Errors: bad sizes, a disk directory that cannot be created or read.
Result<std::unique_ptr<kv::KvTierStack>> make_kv_tiers(const KvTierConfig& config,
                                                       const model::Model& model,
                                                       const model::KvCache& kv,
                                                       bool prefix_caching);

}  // namespace cadenza::engine
