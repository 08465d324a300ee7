// Experts on a second backend (ModelConfig::expert_offload, --cpu-moe / --n-cpu-moe): with two
// CPU backend instances the placement can run in CI. The hidden state crosses to the experts'
// backend and back each MoE layer; the kernels are the same, so every placement gives the model's
// logits bit for bit, in one batch and token by token. That the experts really run on the second
// backend shows when it computes differently: a backend that rounds activations to f16 before
// its matmuls (reference_emulation.h) changes the logits once it holds the experts.
#include <filesystem>
#include <vector>

#include <gtest/gtest.h>

#include "batch_checks.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "reference_emulation.h"
#include "synth/synth.h"
#include "synthetic_model.h"
#include "temp_dir.h"

namespace cadenza::model {
namespace {

// The logits of `tokens` with the experts of the first `offload_layers` layers on a second
// backend: a CPU backend, or (rounding) one that rounds activations to f16 first.
std::vector<float> logits_with(const std::shared_ptr<const gguf::GgufFile>& file,
                               int64_t offload_layers, const std::vector<int32_t>& tokens,
                               int32_t batch, bool rounding = false) {
  std::unique_ptr<kernels::Backend> main = kernels::make_cpu_backend({.n_threads = 2});
  std::unique_ptr<kernels::Backend> experts = kernels::make_cpu_backend({.n_threads = 2});
  if (rounding) {
    experts = std::make_unique<test::ReferenceEmulatingBackend>(std::move(experts), false);
  }
  ModelLoadOptions options;
  if (offload_layers > 0) options.expert_offload = {.backend = experts.get(), .layers = offload_layers};
  Result<std::unique_ptr<Model>> model = Model::load(file, *main, options);
  EXPECT_TRUE(model) << model.error();
  if (!model) return {};
  return test::eval_all(**model, tokens, batch);
}

void check_placements(const std::shared_ptr<const gguf::GgufFile>& file, int64_t layers,
                      int64_t vocab) {
  const std::vector<int32_t> tokens = test::some_tokens(21, vocab, 4);
  const std::vector<float> reference = logits_with(file, 0, tokens, 512);
  ASSERT_FALSE(reference.empty());
  for (int64_t offload : {int64_t{1}, layers, int64_t{1000}}) {
    SCOPED_TRACE(offload);
    EXPECT_TRUE(test::bitwise_equal(reference, logits_with(file, offload, tokens, 512)));
    EXPECT_TRUE(test::bitwise_equal(reference, logits_with(file, offload, tokens, 1)))
        << "token by token";
  }
  // The experts run where they were placed: a backend that computes differently changes the
  // logits, and only when it holds them.
  EXPECT_FALSE(test::bitwise_equal(reference, logits_with(file, layers, tokens, 512, true)));
  EXPECT_TRUE(test::bitwise_equal(reference, logits_with(file, 0, tokens, 512, true)));
}

TEST(ExpertOffload, EveryPlacementGivesTheSameLogits) {
  for (const test::SyntheticSpec& spec : test::architecture_variants()) {
    if (spec.experts == 0) continue;
    SCOPED_TRACE(spec.arch);
    check_placements(test::make_synthetic(spec), spec.layers, spec.vocab);
  }
}

TEST(ExpertOffload, DeepSeek2PlacementGivesTheSameLogits) {
  test::TempDir dir("offload");
  synth::SynthOptions options;
  options.shape = *synth::find_preset("deepseek-v3-small");
  options.shape.n_vocab = 300;
  const std::string path = (dir.path() / "ds.gguf").string();
  ASSERT_TRUE(synth::write_synthetic_model(options, path));
  Result<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file) << file.error();
  check_placements(std::shared_ptr<const gguf::GgufFile>(std::move(*file)), options.shape.n_layer,
                   300);
}

}  // namespace
}  // namespace cadenza::model
