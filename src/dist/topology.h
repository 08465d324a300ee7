// Topology: how the processes of a job divide one model. World rank = stage * tp + tp_rank
// (tensor-parallel ranks of a stage are neighbours, so they share a host when hosts are filled
// in rank order). World rank 0 is the driver: HTTP, tokenizer, scheduler, sampling; it is also
// stage 0's tensor-parallel rank 0. Expert parallelism, when enabled, places the experts of the
// MoE layers across the tensor-parallel ranks of a stage (vLLM's --enable-expert-parallel): the
// attention stays tensor-parallel, each expert lives whole on one rank.
//
//   ParallelConfig pc{.tensor = 2, .pipeline = 2};
//   Result<Topology> t = Topology::create(pc, world_rank, world_size, n_layers);
//   t->stage, t->tp_rank, t->layer_begin(), t->layer_end()
//
// Plain data; thread-safe to read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/expert_placement.h"
#include "util/result.h"

namespace cadenza::dist {

struct ParallelConfig {
  int tensor = 1;    // -tp, --tensor-parallel-size
  int pipeline = 1;  // -pp, --pipeline-parallel-size
  bool expert_parallel = false;  // --enable-expert-parallel: experts split across the tp ranks
  // --pp-layers "12,12,8": layers per stage (must sum to the model's layers); empty: even split,
  // the remainder to the first stages.
  std::vector<int64_t> stage_layers = {};
  // --expert-placement FILE (with expert_parallel): which tp rank holds which experts; null:
  // an even split into contiguous ranges.
  std::shared_ptr<const ExpertPlacement> expert_placement = nullptr;
  // Parses "12,12,8" (positive integers, comma-separated). Errors name the option.
  static Result<std::vector<int64_t>> parse_stage_layers(const std::string& text);
  int world_size() const { return tensor * pipeline; }
  bool distributed() const { return world_size() > 1; }
};

struct Topology {
  ParallelConfig config;
  int world_rank = 0;
  int world_size = 1;
  int stage = 0;    // pipeline stage of this rank
  int tp_rank = 0;  // rank within the stage's tensor-parallel group
  // Layers per stage: stage s holds [starts[s], starts[s + 1]).
  std::vector<int64_t> starts;

  // Errors (the same text on every rank, so each rank can print it): world size != tp x pp
  // (the message says what mpirun -np to use), sizes < 1, more stages than layers, a --pp-layers
  // list of the wrong length or sum.
  static Result<Topology> create(const ParallelConfig& config, int world_rank, int world_size,
                                 int64_t n_layers);

  int64_t layer_begin() const { return starts[static_cast<size_t>(stage)]; }
  int64_t layer_end() const { return starts[static_cast<size_t>(stage) + 1]; }
  bool first_stage() const { return stage == 0; }
  bool last_stage() const { return stage == config.pipeline - 1; }
  bool driver() const { return world_rank == 0; }
  // World rank of (stage, tp_rank).
  int rank_of(int s, int tp) const { return s * config.tensor + tp; }
  // "rank 3 (stage 1, tp 1)".
  std::string describe(int rank) const;
};

// Splits [0, n) into `parts` contiguous ranges as evenly as possible (the first n % parts get one
// more); returns range `index` as {begin, count}. Used for heads, FFN columns, vocabulary rows,
// experts.
struct Range {
  int64_t begin = 0;
  int64_t count = 0;
  int64_t end() const { return begin + count; }
};
Range split_evenly(int64_t n, int parts, int index);

}  // namespace cadenza::dist
