// Replica choice: least outstanding requests, prefix affinity over a consistent-hash ring, and
// weighted version choice for canaries. Pure functions and an immutable ring (thread-safe).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace cadenza::gateway {

// A consistent-hash ring: each member id gets `virtual_nodes` points (hash64 of "id#k"). Adding
// or removing one member moves only the keys that member owned (about 1/n of them).
class HashRing {
 public:
  HashRing() = default;
  HashRing(const std::vector<std::string>& ids, int virtual_nodes);
  // The member owning `hash`: the first point clockwise whose member passes `eligible` (index
  // into the ids given at construction), or -1 when none does / the ring is empty.
  template <typename Eligible>
  int owner(uint64_t hash, Eligible&& eligible) const;
  int owner(uint64_t hash) const {
    return owner(hash, [](int) { return true; });
  }
  bool empty() const { return points_.empty(); }

 private:
  struct Point {
    uint64_t hash;
    int member;
  };
  std::vector<Point> points_;  // sorted by hash
  size_t first_at_or_after(uint64_t hash) const;
};

template <typename Eligible>
int HashRing::owner(uint64_t hash, Eligible&& eligible) const {
  if (points_.empty()) return -1;
  const size_t start = first_at_or_after(hash);
  for (size_t k = 0; k < points_.size(); ++k) {
    const Point& p = points_[(start + k) % points_.size()];
    if (eligible(p.member)) return p.member;
  }
  return -1;
}

// What the router knows about one replica.
struct Candidate {
  int outstanding = 0;
  bool eligible = true;   // healthy, breaker allows, not already tried for this request
};

// The eligible candidate with the fewest outstanding requests; ties go to the first at or after
// `rotate % n` (so equal replicas share the load). -1 when none is eligible.
int pick_least_loaded(std::span<const Candidate> c, uint64_t rotate);

struct Pick {
  int index = -1;
  bool affine = false;  // chosen by prefix affinity
};

// With a prefix hash: the ring owner among eligible candidates, unless it already has
// `busy_threshold` or more outstanding requests, in which case the least loaded. Without one:
// the least loaded.
Pick pick_replica(const HashRing& ring, std::span<const Candidate> c,
                  std::optional<uint64_t> prefix_hash, int busy_threshold, uint64_t rotate);

// Index chosen by weight for u in [0, 1): weights w_i >= 0, at least one positive. -1 when all
// weights are zero or there are none.
int pick_weighted(std::span<const double> weights, double u);

// The text prefix affinity hashes: the first `n` bytes of the prompt (completions) or of the
// messages rendered as "role\n content\n" in order (chat; text parts of array contents). Empty
// when there is no text.
std::string affinity_prefix(const nlohmann::json& request, size_t n);

}  // namespace cadenza::gateway
