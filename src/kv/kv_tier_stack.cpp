#include "kv/kv_tier_stack.h"

#include <cassert>

namespace cadenza::kv {

KvTierStack::KvTierStack(size_t block_bytes, std::vector<std::unique_ptr<KvTier>> tiers)
    : block_bytes_(block_bytes), tiers_(std::move(tiers)) {
  assert(!tiers_.empty() && block_bytes_ > 0);
}

bool KvTierStack::contains(const BlockHash& hash) const {
  for (const auto& t : tiers_)
    if (t->contains(hash)) return true;
  return false;
}

void KvTierStack::put_from(size_t level, const BlockHash& hash, std::span<const uint8_t> payload) {
  if (level >= tiers_.size()) return;  // past the last tier: dropped
  const bool has_next = level + 1 < tiers_.size();
  const KvTierSink sink = [this, level](const BlockHash& h, std::span<const uint8_t> p) {
    put_from(level + 1, h, p);
  };
  // A payload the tier refuses (larger than its whole budget) goes straight down.
  if (!tiers_[level]->put(hash, payload, has_next ? sink : KvTierSink{}) && has_next)
    put_from(level + 1, hash, payload);
}

void KvTierStack::demote(const BlockHash& hash, std::span<const uint8_t> payload) {
  assert(payload.size() == block_bytes_);
  put_from(0, hash, payload);
}

bool KvTierStack::promote(const BlockHash& hash, std::span<uint8_t> out) {
  assert(out.size() == block_bytes_);
  for (size_t i = 0; i < tiers_.size(); ++i) {
    KvTier& t = *tiers_[i];
    if (!t.contains(hash) || !t.get(hash, out)) continue;
    t.count_promotion();
    // Only the last tier keeps its copy (see the header comment).
    if (i + 1 < tiers_.size()) t.erase(hash);
    return true;
  }
  return false;
}

void KvTierStack::persist(const BlockHash& hash, std::span<const uint8_t> payload) {
  assert(payload.size() == block_bytes_);
  tiers_.back()->put(hash, payload);
}

void KvTierStack::flush_to_last() {
  KvTier& last = *tiers_.back();
  for (size_t i = 0; i + 1 < tiers_.size(); ++i) {
    tiers_[i]->for_each_lru([&last](const BlockHash& h, std::span<const uint8_t> p) { last.put(h, p); });
  }
}

std::optional<int64_t> KvTierStack::clear(std::string_view name) {
  std::optional<int64_t> freed;
  for (const auto& t : tiers_) {
    if (!name.empty() && t->name() != name) continue;
    freed = freed.value_or(0) + t->clear();
  }
  if (!freed && name.empty()) freed = 0;
  return freed;
}

}  // namespace cadenza::kv
