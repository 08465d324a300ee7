// eval/chunk_runner.h on a hybrid model (qwen35: recurrent state per sequence): more chunks per
// step than a KV cache's default number of state slots, and the same logits as one chunk per
// step (each chunk is its own sequence from position 0, so the step's size must not matter).
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "eval/chunk_runner.h"
#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "synth/synth.h"
#include "test_models.h"

namespace cadenza::eval {
namespace {

TEST(ChunkRunner, HybridModelRunsMoreChunksPerStepThanDefaultStateSlots) {
  synth::SynthOptions opts;
  opts.shape = *synth::find_preset("qwen35-small");
  opts.shape.n_vocab = 300;
  opts.weight_type = "f32";
  opts.seed = 5;
  const std::string path = test::write_temp_model(opts, "chunk-runner-qwen35");
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file) << file.error();
  std::shared_ptr<const gguf::GgufFile> shared = std::move(*file);
  auto backend = kernels::make_cpu_backend({.n_threads = 2});
  auto model = model::Model::load(shared, *backend);
  ASSERT_TRUE(model) << model.error();
  ASSERT_TRUE((*model)->config().hybrid());

  const int32_t n_chunks = 12;  // above KvCacheOptions::num_state_slots' default of 8
  std::vector<int32_t> tokens(static_cast<size_t>(n_chunks) * 16);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(3 + (i * 37) % 290);
  auto run = [&](int32_t batch_tokens) {
    ChunkOptions o;
    o.ctx = 16;
    o.first = 8;
    o.n_chunks = n_chunks;
    o.batch_tokens = batch_tokens;
    std::vector<float> all;
    int32_t chunks_seen = 0;
    Status st = run_chunks(**model, tokens, o, [&](int32_t, std::span<const float> logits) -> Status {
      ++chunks_seen;
      all.insert(all.end(), logits.begin(), logits.end());
      return {};
    });
    EXPECT_TRUE(st) << "batch_tokens " << batch_tokens << ": " << st.error();
    EXPECT_EQ(chunks_seen, n_chunks);
    return all;
  };
  const std::vector<float> all_at_once = run(n_chunks * 16);  // 12 sequences in one step
  const std::vector<float> one_by_one = run(16);
  ASSERT_FALSE(all_at_once.empty());
  EXPECT_EQ(all_at_once, one_by_one);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace cadenza::eval
