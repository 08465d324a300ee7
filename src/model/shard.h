// ModelShard: the part of a model this process holds when a job splits it (dist/topology.h):
// its tensor-parallel rank (which heads, FFN columns, vocabulary rows or experts) and its
// pipeline stage (which layers). The default is the whole model. Model::load sets it in
// ModelConfig::shard from ModelLoadOptions::distributed; the blocks read it to load their slices
// and shape their scratch. Plain data.
//
// Tensor parallel (Megatron-style): column-parallel Wq/Wk/Wv and FFN gate/up (this rank's heads
// or FFN columns, as output rows), row-parallel Wo and FFN down (the same heads or columns, as
// input columns) followed by one all-reduce each; a vocabulary-parallel output head. KV heads are
// split like the query heads; with fewer KV heads than ranks each rank keeps the one KV head its
// query heads use (replicated). Expert parallel: each rank holds whole experts (a contiguous
// range) instead of a slice of every expert.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dist/topology.h"

namespace cadenza::model {

struct ModelShard {
  int tp_rank = 0;
  int tp_size = 1;
  int64_t layer_begin = 0;
  int64_t layer_end = -1;  // -1: every layer (ModelConfig::from_gguf leaves it; load sets it)
  bool first_stage = true;  // holds the token embedding
  bool last_stage = true;   // holds the output head
  bool expert_parallel = false;
  // Under expert parallelism with a placement file: who holds which experts (else null: even).
  std::shared_ptr<const dist::ExpertPlacement> placement;

  bool tensor_parallel() const { return tp_size > 1; }
  bool holds_layer(int64_t il) const { return il >= layer_begin && il < layer_end; }
  int64_t num_layers() const { return layer_end - layer_begin; }

  // This rank's query heads of `n_heads` (ModelShard requires n_heads % tp_size == 0).
  dist::Range query_heads(int64_t n_heads) const {
    return dist::split_evenly(n_heads, tp_size, tp_rank);
  }
  // This rank's KV heads: its share when n_kv >= tp_size (n_kv % tp_size == 0), else the one KV
  // head that its query heads attend with (tp_size % n_kv == 0).
  dist::Range kv_heads(int64_t n_kv) const {
    if (n_kv >= tp_size) return dist::split_evenly(n_kv, tp_size, tp_rank);
    return {tp_rank / (tp_size / n_kv), 1};
  }
  // A column-parallel split of `n` (FFN width, vocabulary rows).
  dist::Range columns(int64_t n) const { return dist::split_evenly(n, tp_size, tp_rank); }
  // The experts of an MoE layer held here: a range under expert parallelism, else all.
  dist::Range experts(int64_t n_experts) const {
    return expert_parallel ? dist::split_evenly(n_experts, tp_size, tp_rank)
                           : dist::Range{0, n_experts};
  }
  // The experts of `layer` held here, as global ids in the placement's order: the placement
  // file's list, else experts(n_experts) as a list.
  std::vector<int32_t> held_experts(int64_t layer, int64_t n_experts) const {
    if (expert_parallel && placement) return placement->held(layer, tp_rank);
    const dist::Range r = experts(n_experts);
    std::vector<int32_t> ids;
    for (int64_t e = r.begin; e < r.end(); ++e) ids.push_back(static_cast<int32_t>(e));
    return ids;
  }
  // The slice of each held expert's FFN width: whole under expert parallelism, else split.
  dist::Range expert_columns(int64_t width) const {
    return expert_parallel ? dist::Range{0, width} : columns(width);
  }
};

}  // namespace cadenza::model
