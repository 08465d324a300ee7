#include "dist/topology.h"

#include <charconv>
#include <numeric>

#include <fmt/format.h>

namespace cadenza::dist {

Result<std::vector<int64_t>> ParallelConfig::parse_stage_layers(const std::string& text) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item(text.data() + pos, comma - pos);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 1) {
      return make_error("--pp-layers: '{}' is not a list of positive layer counts such as 12,12,8",
                        text);
    }
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

Range split_evenly(int64_t n, int parts, int index) {
  const int64_t base = n / parts, extra = n % parts;
  const int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, base + (index < extra ? 1 : 0)};
}

Result<Topology> Topology::create(const ParallelConfig& c, int world_rank, int world_size,
                                  int64_t n_layers) {
  if (c.tensor < 1 || c.pipeline < 1) {
    return make_error("--tensor-parallel-size and --pipeline-parallel-size must be >= 1 (got {} "
                      "and {})", c.tensor, c.pipeline);
  }
  if (c.world_size() != world_size) {
    return make_error("tensor parallel {} x pipeline parallel {} needs {} processes, but this job "
                      "has {}: start it with mpirun -np {} (or change -tp/-pp)", c.tensor,
                      c.pipeline, c.world_size(), world_size, c.world_size());
  }
  if (c.pipeline > n_layers) {
    return make_error("--pipeline-parallel-size {} is more than the model's {} layers", c.pipeline,
                      n_layers);
  }
  Topology t;
  t.config = c;
  t.world_rank = world_rank;
  t.world_size = world_size;
  t.stage = world_rank / c.tensor;
  t.tp_rank = world_rank % c.tensor;
  t.starts.push_back(0);
  if (!c.stage_layers.empty()) {
    if (static_cast<int>(c.stage_layers.size()) != c.pipeline) {
      return make_error("--pp-layers lists {} stages but --pipeline-parallel-size is {}",
                        c.stage_layers.size(), c.pipeline);
    }
    const int64_t sum = std::accumulate(c.stage_layers.begin(), c.stage_layers.end(), int64_t{0});
    if (sum != n_layers) {
      return make_error("--pp-layers sums to {} layers but the model has {}", sum, n_layers);
    }
    for (const int64_t n : c.stage_layers) t.starts.push_back(t.starts.back() + n);
  } else {
    for (int s = 0; s < c.pipeline; ++s) {
      t.starts.push_back(t.starts.back() + split_evenly(n_layers, c.pipeline, s).count);
    }
  }
  return t;
}

std::string Topology::describe(int rank) const {
  return fmt::format("rank {} (stage {}, tp {})", rank, rank / config.tensor,
                     rank % config.tensor);
}

}  // namespace cadenza::dist
