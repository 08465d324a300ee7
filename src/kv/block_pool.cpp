#include "kv/block_pool.h"

#include <cassert>

namespace cadenza::kv {

BlockPool::BlockPool(int32_t num_blocks) {
  assert(num_blocks > 0);
  meta_.resize(static_cast<size_t>(num_blocks));
  hashes_.resize(static_cast<size_t>(num_blocks));
  index_.reserve(static_cast<size_t>(num_blocks));
  for (int32_t b = 0; b < num_blocks; ++b) push_tail(b);
}

void BlockPool::unlink(int32_t block) {
  Meta& m = meta_[idx(block)];
  if (m.prev >= 0) meta_[idx(m.prev)].next = m.next; else head_ = m.next;
  if (m.next >= 0) meta_[idx(m.next)].prev = m.prev; else tail_ = m.prev;
  m.prev = m.next = -1;
  --num_free_;
}

void BlockPool::push_head(int32_t block) {
  Meta& m = meta_[idx(block)];
  m.prev = -1;
  m.next = head_;
  if (head_ >= 0) meta_[idx(head_)].prev = block; else tail_ = block;
  head_ = block;
  ++num_free_;
}

void BlockPool::push_tail(int32_t block) {
  Meta& m = meta_[idx(block)];
  m.next = -1;
  m.prev = tail_;
  if (tail_ >= 0) meta_[idx(tail_)].next = block; else head_ = block;
  tail_ = block;
  ++num_free_;
}

int32_t BlockPool::allocate() {
  assert(head_ >= 0 && "BlockPool::allocate on an empty free queue: capacity not checked");
  const int32_t block = head_;
  unlink(block);
  Meta& m = meta_[idx(block)];
  if (m.cached) {
    if (evict_hook_) evict_hook_(block, hashes_[idx(block)]);
    index_.erase(hashes_[idx(block)]);
    m.cached = false;
    ++evictions_;
  }
  m.ref_count = 1;
  return block;
}

void BlockPool::acquire(int32_t block) {
  Meta& m = meta_[idx(block)];
  if (m.ref_count == 0) unlink(block);
  ++m.ref_count;
}

void BlockPool::release(int32_t block) {
  Meta& m = meta_[idx(block)];
  assert(m.ref_count > 0 && "BlockPool::release of a free block");
  if (--m.ref_count > 0) return;
  if (m.cached) push_tail(block); else push_head(block);
}

int32_t BlockPool::lookup(const BlockHash& hash) const {
  auto it = index_.find(hash);
  return it == index_.end() ? -1 : it->second;
}

bool BlockPool::cache(int32_t block, const BlockHash& hash) {
  Meta& m = meta_[idx(block)];
  assert(m.ref_count > 0 && !m.cached);
  auto [it, inserted] = index_.try_emplace(hash, block);
  if (!inserted) return false;
  hashes_[idx(block)] = hash;
  m.cached = true;
  return true;
}

void BlockPool::uncache(int32_t block) {
  Meta& m = meta_[idx(block)];
  assert(m.ref_count > 0 && "BlockPool::uncache of a free block");
  if (!m.cached) return;
  index_.erase(hashes_[idx(block)]);
  m.cached = false;
}

void BlockPool::clear_cache() {
  index_.clear();
  for (Meta& m : meta_) m.cached = false;
}

std::vector<int32_t> BlockPool::cached_blocks() const {
  std::vector<int32_t> out;
  for (int32_t b = head_; b >= 0; b = meta_[idx(b)].next)
    if (meta_[idx(b)].cached) out.push_back(b);
  for (int32_t b = 0; b < num_blocks(); ++b)
    if (meta_[idx(b)].cached && meta_[idx(b)].ref_count > 0) out.push_back(b);
  return out;
}

std::vector<int32_t> BlockPool::free_queue() const {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(num_free_));
  for (int32_t b = head_; b >= 0 && out.size() <= meta_.size(); b = meta_[idx(b)].next) out.push_back(b);
  return out;
}

Status BlockPool::check_invariants() const {
  const int32_t n = num_blocks();
  std::vector<uint8_t> seen(meta_.size(), 0);
  int32_t count = 0;
  int32_t prev = -1;
  for (int32_t b = head_; b >= 0; b = meta_[idx(b)].next) {
    if (b >= n) return make_error("free queue: block id {} out of range", b);
    if (seen[idx(b)]) return make_error("free queue: block {} appears twice (cycle)", b);
    seen[idx(b)] = 1;
    if (meta_[idx(b)].prev != prev) return make_error("free queue: block {} has a bad prev link", b);
    if (meta_[idx(b)].ref_count != 0) {
      return make_error("free queue: block {} has ref_count {}", b, meta_[idx(b)].ref_count);
    }
    prev = b;
    ++count;
  }
  if (prev != tail_) return make_error("free queue: tail is {}, last reached {}", tail_, prev);
  if (count != num_free_) return make_error("free queue: {} linked, num_free {}", count, num_free_);
  int32_t cached = 0;
  for (int32_t b = 0; b < n; ++b) {
    const Meta& m = meta_[idx(b)];
    if (m.ref_count < 0) return make_error("block {}: ref_count {}", b, m.ref_count);
    if (m.ref_count == 0 && !seen[idx(b)]) return make_error("block {}: free but not queued", b);
    if (m.ref_count > 0 && (m.prev >= 0 || m.next >= 0)) return make_error("block {}: used but linked", b);
    if (m.cached) {
      ++cached;
      if (lookup(hashes_[idx(b)]) != b) return make_error("block {}: cached but not indexed", b);
    }
  }
  for (const auto& [hash, b] : index_) {
    if (b < 0 || b >= n || !meta_[idx(b)].cached || !(hashes_[idx(b)] == hash)) {
      return make_error("index: an entry points to block {} whose stored hash differs", b);
    }
  }
  if (cached != num_cached()) return make_error("{} cached blocks, {} index entries", cached, num_cached());
  return {};
}

}  // namespace cadenza::kv
