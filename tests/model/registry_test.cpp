// The architecture registry: the built-in families, the error for an unknown architecture, and a
// family defined entirely outside src/model (in this file, from the shared blocks) that takes
// part through one registration line and computes what the built-in llama family computes.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"
#include "model/blocks/attention.h"
#include "model/blocks/dense_ffn.h"
#include "model/blocks/embedding.h"
#include "model/forward.h"
#include "model/metadata.h"
#include "model/model.h"
#include "model/registry.h"
#include "model/session.h"
#include "synthetic_model.h"

namespace cadenza::model {
namespace {

using test::make_synthetic;
using test::SyntheticSpec;

// ---- a family written the way arch/*.cpp are, but in a test ----
// "testllama": a dense pre-norm decoder with normal RoPE, i.e. the llama layer loop rebuilt from
// the blocks. Its file is this section; its registration is the one `add` line in the test.

Status configure_test_family(const MetadataReader& md, ModelConfig& c) {
  c.rope_layout = kernels::RopeLayout::Normal;
  return read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::None});
}

class TestDecoder final : public Network {
 public:
  explicit TestDecoder(const ModelConfig& c)
      : c_(c), embedding_(c), attention_(c), ffn_(c, c.n_ff), head_(c) {}

  Status load(WeightLoader& loader) {
    Status st = embedding_.load(loader);
    if (st) st = head_.load(loader);
    if (st) st = attention_.load_rope(loader);
    layers_.resize(static_cast<size_t>(c_.n_layers));
    for (int64_t il = 0; st && il < c_.n_layers; ++il) {
      Layer& L = layers_[static_cast<size_t>(il)];
      st = loader.load({{L.attn_norm, layer_tensor(il, "attn_norm.weight"), {c_.n_embd}},
                        {L.ffn_norm, layer_tensor(il, "ffn_norm.weight"), {c_.n_embd}}});
      if (st) st = attention_.load(loader, il, L.attention);
      if (st) st = ffn_.load(loader, il, L.ffn);
    }
    return st;
  }

  Status reserve(kernels::Backend& be, const StepCapacity& cap) override {
    Status st = x_.reserve(be, cap.max_tokens, c_.n_embd);
    if (st) st = h_.reserve(be, cap.max_tokens, c_.n_embd);
    if (st) st = attention_.reserve(be, cap);
    if (st) st = ffn_.reserve(be, cap);
    if (st) st = head_.reserve(be, cap);
    return st;
  }

  void forward(const ForwardContext& ctx) override {
    kernels::Backend& be = ctx.backend;
    const int64_t n = ctx.inputs.n_tokens;
    const kernels::Matrix x = x_.rows(n), h = h_.rows(n);
    embedding_.forward(ctx, x);
    for (int64_t il = 0; il < c_.n_layers; ++il) {
      const Layer& L = layers_[static_cast<size_t>(il)];
      be.rms_norm(x, *L.attn_norm, c_.rms_norm_eps, h);
      attention_.forward(ctx, il, L.attention, h, h);
      be.add(x, h, x);
      be.rms_norm(x, *L.ffn_norm, c_.rms_norm_eps, h);
      ffn_.forward(ctx, L.ffn, h, h);
      be.add(x, h, x);
    }
    head_.forward(ctx, embedding_, x);
  }

 private:
  struct Layer {
    std::unique_ptr<kernels::Weight> attn_norm, ffn_norm;
    blocks::Attention::Weights attention;
    blocks::DenseFfn::Weights ffn;
  };
  const ModelConfig& c_;
  blocks::TokenEmbedding embedding_;
  blocks::Attention attention_;
  blocks::DenseFfn ffn_;
  blocks::OutputHead head_;
  std::vector<Layer> layers_;
  ScratchMatrix x_, h_;
};

const ArchitectureFamily kTestFamily{"testllama", &configure_test_family,
                                     &load_network<TestDecoder>};

// ---- tests ----

std::vector<float> all_logits(Model& model, const std::vector<int32_t>& tokens) {
  auto session = Session::create(model, {.max_tokens = 64, .max_batch_tokens = 7});
  EXPECT_TRUE(session) << session.error();
  if (!session) return {};
  Result<std::vector<float>> logits = (*session)->eval_all(tokens);
  EXPECT_TRUE(logits) << logits.error();
  return logits ? *logits : std::vector<float>();
}

std::string load_error(const SyntheticSpec& spec, const ModelLoadOptions& options = {}) {
  std::unique_ptr<kernels::Backend> be = kernels::make_cpu_backend({.n_threads = 1});
  Result<std::unique_ptr<Model>> m = Model::load(make_synthetic(spec), *be, options);
  return m ? "" : m.error();
}

TEST(Registry, BuiltinFamiliesInTableOrder) {
  const std::vector<std::string_view> names = ArchitectureRegistry::builtin().names();
  EXPECT_EQ(names, (std::vector<std::string_view>{"llama", "qwen2", "qwen3", "qwen3moe", "qwen2moe", "deepseek2", "glm4moe", "gpt-oss", "gemma3", "phi3", "mistral3", "granite", "qwen35", "qwen35moe", "llama4", "granitehybrid"}));
  for (const std::string_view name : names) {
    const ArchitectureFamily* f = ArchitectureRegistry::builtin().find(name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->name, name);
  }
  EXPECT_EQ(ArchitectureRegistry::builtin().find("gpt2"), nullptr);
}

TEST(Registry, UnknownArchitectureNamesTheKeyAndListsTheSupportedOnes) {
  SyntheticSpec spec;
  spec.arch = "gpt2";
  const std::string error = load_error(spec);
  EXPECT_NE(error.find("architecture 'gpt2' is not supported"), std::string::npos) << error;
  EXPECT_NE(error.find("general.architecture"), std::string::npos) << error;
  EXPECT_NE(error.find("supported: llama, qwen2, qwen3, qwen3moe, qwen2moe, deepseek2, glm4moe, gpt-oss, gemma3, phi3, mistral3, granite, qwen35, qwen35moe, llama4, granitehybrid)"), std::string::npos)
      << error;

  // A registry with one more family lists it too.
  ArchitectureRegistry registry = ArchitectureRegistry::builtin();
  ASSERT_TRUE(registry.add(kTestFamily));
  const std::string extended = load_error(spec, {.architectures = &registry});
  EXPECT_NE(extended.find("supported: llama, qwen2, qwen3, qwen3moe, qwen2moe, deepseek2, glm4moe, gpt-oss, gemma3, phi3, mistral3, granite, qwen35, qwen35moe, llama4, granitehybrid, testllama)"),
            std::string::npos) << extended;
}

TEST(Registry, AddRejectsDuplicatesAndIncompleteFamilies) {
  ArchitectureRegistry registry;
  EXPECT_TRUE(registry.names().empty());
  ASSERT_TRUE(registry.add(kTestFamily));
  Status duplicate = registry.add(kTestFamily);
  ASSERT_FALSE(duplicate);
  EXPECT_NE(duplicate.error().find("'testllama' is already registered"), std::string::npos);
  Status nameless = registry.add({"", &configure_test_family, &load_network<TestDecoder>});
  EXPECT_FALSE(nameless);
  Status hookless = registry.add({"half", &configure_test_family, nullptr});
  ASSERT_FALSE(hookless);
  EXPECT_NE(hookless.error().find("'half'"), std::string::npos);
  EXPECT_EQ(registry.names(), std::vector<std::string_view>{"testllama"});
}

TEST(Registry, AFamilyOutsideSrcModelJoinsThroughOneRegistrationLine) {
  std::unique_ptr<kernels::Backend> be = kernels::make_cpu_backend({.n_threads = 2});
  SyntheticSpec spec;  // llama-shaped tensors; only the architecture string differs
  spec.arch = "testllama";
  SyntheticSpec llama = spec;
  llama.arch = "llama";

  // Unknown to the built-in registry ...
  auto unknown = Model::load(make_synthetic(spec), *be);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("'testllama' is not supported"), std::string::npos);

  // ... known after its one line.
  ArchitectureRegistry registry = ArchitectureRegistry::builtin();
  ASSERT_TRUE(registry.add(kTestFamily));
  auto test_model = Model::load(make_synthetic(spec), *be, {.architectures = &registry});
  ASSERT_TRUE(test_model) << test_model.error();
  EXPECT_EQ((*test_model)->config().architecture, "testllama");
  auto llama_model = Model::load(make_synthetic(llama), *be);
  ASSERT_TRUE(llama_model) << llama_model.error();

  // Same weights, same blocks, same layer loop: the same logits, bit for bit.
  std::vector<int32_t> tokens(23);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 11) % 64);
  const std::vector<float> a = all_logits(**test_model, tokens);
  const std::vector<float> b = all_logits(**llama_model, tokens);
  ASSERT_EQ(a.size(), tokens.size() * 64);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(Registry, DenseFamiliesRejectExpertKeys) {
  SyntheticSpec spec;
  spec.arch = "qwen2";
  spec.qkv_bias = true;
  spec.experts = 4;
  spec.experts_used = 2;
  const std::string error = load_error(spec);
  EXPECT_NE(error.find("qwen2.expert_count"), std::string::npos) << error;
  EXPECT_NE(error.find("dense"), std::string::npos) << error;
}

}  // namespace
}  // namespace cadenza::model
