// Option helpers shared by the subcommands (sizes with units, thread counts, KV sizing).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/engine_core.h"
#include "model/config.h"
#include "util/result.h"

namespace cadenza::cli {

// Parses "1073741824", "1GiB", "512MiB", "1.5G", "100MB": KiB/MiB/GiB/TiB and bare K/M/G/T are
// powers of 1024, KB/MB/GB/TB powers of 1000. Errors name `option`.
Result<int64_t> parse_byte_size(std::string_view option, const std::string& text);

// The thread count to use: `requested` when positive, else every hardware thread.
int resolve_threads(int requested);

// Bytes of one KV block (all layers' K and V) for this model and engine configuration.
Result<int64_t> kv_block_bytes(const model::ModelConfig& model, const engine::EngineConfig& engine);

// KV blocks that fit in the memory budget `text` (a size as above) for this model and engine
// configuration (block size, KV element type). An error when the budget holds no block.
Result<int32_t> kv_blocks_for_memory(const model::ModelConfig& model,
                                     const engine::EngineConfig& engine, const std::string& text);

}  // namespace cadenza::cli
