#include "engine/kv_tiers.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>

#include "gguf/gguf.h"
#include "kv/disk_tier.h"
#include "kv/memory_tier.h"

namespace cadenza::engine {

namespace {

template <typename T>
void append(std::vector<uint8_t>& buf, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  buf.insert(buf.end(), p, p + sizeof(T));
}

}  // namespace

kv::BlockHash kv_model_identity(const model::Model& model, const model::KvCache& kv) {
  constexpr size_t kSample = 4096;
  const gguf::GgufFile& file = model.file();
  std::vector<uint8_t> buf;
  const std::string_view tag = "cadenza.kv.model.v1";
  buf.insert(buf.end(), tag.begin(), tag.end());
  const std::span<const uint8_t> header = file.header_bytes();
  buf.insert(buf.end(), header.begin(), header.end());
  append(buf, file.file_size());
  for (const gguf::TensorInfo& t : file.tensors()) {
    const std::span<const uint8_t> b = t.bytes().subspan(0, std::min<size_t>(kSample, t.nbytes));
    buf.insert(buf.end(), b.begin(), b.end());
  }
  append(buf, static_cast<int32_t>(kv.type()));
  append(buf, kv.block_size());
  append(buf, kv.first_layer());
  append(buf, kv.num_layers());
  append(buf, static_cast<uint64_t>(kv.block_bytes()));
  return kv::sha256(buf);
}

Result<std::unique_ptr<kv::KvTierStack>> make_kv_tiers(const KvTierConfig& config,
                                                       const model::Model& model,
                                                       const model::KvCache& kv,
                                                       bool prefix_caching) {
  if (config.memory_bytes < 0) return make_error("engine: kv offload memory must be >= 0");
  if (!config.disk_dir.empty() && config.disk_bytes <= 0)
    return make_error("engine: a kv disk directory needs a positive disk size");
  if (!config.enabled()) return std::unique_ptr<kv::KvTierStack>();
  if (!prefix_caching) {
    spdlog::info("engine: KV tiers are off: prefix caching is off for this model ({}); tiers hold "
                 "prefix-cache blocks only", model.config().architecture);
    return std::unique_ptr<kv::KvTierStack>();
  }
  if (model.distributed() != nullptr) {
    spdlog::info("engine: KV tiers are off for a model split across processes (each worker holds "
                 "its own share of the KV)");
    return std::unique_ptr<kv::KvTierStack>();
  }
  const size_t block_bytes = kv.block_bytes();
  std::vector<std::unique_ptr<kv::KvTier>> tiers;
  if (config.memory_bytes > 0) {
    if (static_cast<size_t>(config.memory_bytes) < block_bytes)
      spdlog::warn("engine: --kv-offload-memory {} holds no block ({} bytes each)", config.memory_bytes,
                   block_bytes);
    tiers.push_back(std::make_unique<kv::MemoryTier>(config.memory_bytes));
  }
  if (!config.disk_dir.empty()) {
    auto disk = kv::DiskTier::open(config.disk_dir, config.disk_bytes, kv_model_identity(model, kv),
                                   block_bytes);
    if (!disk) return make_error("engine: {}", disk.error());
    tiers.push_back(std::move(*disk));
  }
  spdlog::info("engine: KV tiers below the pool: {}{}{} ({} bytes per block)",
               config.memory_bytes > 0 ? fmt::format("memory {} bytes", config.memory_bytes) : "",
               config.memory_bytes > 0 && !config.disk_dir.empty() ? ", " : "",
               config.disk_dir.empty() ? "" : fmt::format("disk {} bytes in {}", config.disk_bytes, config.disk_dir),
               block_bytes);
  return std::make_unique<kv::KvTierStack>(block_bytes, std::move(tiers));
}

}  // namespace cadenza::engine
