// ExpertPlacement: which rank of a tensor-parallel group holds which experts of each MoE layer,
// read from a placement file (--expert-placement), as deployment guides pin hot experts apart:
//
//   {"ranks": [[0, 1, 2, 3], [4, 5, 6, 7]],          every layer, unless overridden
//    "layers": {"3": [[0, 2, 4, 6], [1, 3, 5, 7]]}}  layer 3 (0-based)
//
// Each list is one rank's experts (rank order = the stage's tp ranks); in every layer the lists
// must cover each expert exactly once. Without a file experts are split evenly into contiguous
// ranges (ModelShard::experts).
// Plain data, immutable after parse; thread-safe to read.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace cadenza::dist {

class ExpertPlacement {
 public:
  // Errors name `source` and what is wrong (not JSON, a missing "ranks", a non-integer id).
  static Result<ExpertPlacement> parse(std::string_view json, const std::string& source);
  static Result<ExpertPlacement> load(const std::string& path);

  // Against a model and a group: `ranks` lists per layer, each layer's lists a partition of
  // [0, n_experts), overrides only for layers < n_layers. Errors name the layer and the expert.
  Status check(int ranks, int64_t n_experts, int64_t n_layers) const;

  // The experts `rank` holds in `layer`, in the file's order (check() passed).
  const std::vector<int32_t>& held(int64_t layer, int rank) const;
  // An FNV-1a checksum of the placement, for the ranks' start-up comparison.
  uint64_t checksum() const;
  const std::string& source() const { return source_; }

 private:
  using Lists = std::vector<std::vector<int32_t>>;
  std::string source_;
  Lists default_;
  std::map<int64_t, Lists> layers_;
};

}  // namespace cadenza::dist
