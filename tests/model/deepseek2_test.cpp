// deepseek2 beyond the goldens (family_golden_test.cpp): what a malformed file gives (a clear
// load error naming the tensor or key), the size of the compressed KV cache against the expanded
// form, and a forked sequence (copy_block of the latent cache) continuing like the original.
// Models are written by `cadenza synth`'s writer (the deepseek-v3-small preset, two layers, a
// built-in vocabulary) and rewritten with one edit where a test needs a broken file.
#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "batch_checks.h"
#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "synth/synth.h"
#include "temp_dir.h"

namespace cadenza::model {
namespace {

synth::ModelShape small_shape() {
  synth::ModelShape s = *synth::find_preset("deepseek-v3-small");
  s.n_layer = 2;  // one leading dense layer, one MoE layer
  s.n_vocab = 300;
  return s;
}

std::string write_model(const test::TempDir& dir, const synth::ModelShape& shape) {
  synth::SynthOptions options;
  options.shape = shape;
  options.seed = 3;
  const std::string path = (dir.path() / "ds.gguf").string();
  Result<synth::SynthSummary> written = synth::write_synthetic_model(options, path);
  EXPECT_TRUE(written) << written.error();
  return path;
}

// One edit of a file: a metadata key replaced, a tensor dropped, or a tensor's rows changed
// (filled with zeros).
struct Edit {
  std::string key = {};
  gguf::Value value = gguf::Value::u32(0);
  std::string drop_tensor = {};
  std::string reshape_tensor = {};
  int64_t extra_rows = 0;
};

std::string rewrite(const test::TempDir& dir, const std::string& src, const Edit& edit) {
  auto file = gguf::GgufFile::open(src);
  EXPECT_TRUE(file) << file.error();
  gguf::GgufWriter w;
  for (const auto& [key, value] : (*file)->metadata()) w.set(key, value);
  if (!edit.key.empty()) w.set(edit.key, edit.value);
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    if (t.name == edit.drop_tensor) continue;
    if (t.name == edit.reshape_tensor) {
      std::vector<int64_t> shape = t.shape;
      shape[1] += edit.extra_rows;
      EXPECT_TRUE(w.add_tensor(t.name, t.type, shape, [](std::span<uint8_t>) {}));
      continue;
    }
    const std::span<const uint8_t> bytes = t.bytes();
    EXPECT_TRUE(w.add_tensor(t.name, t.type, t.shape, std::vector<uint8_t>(bytes.begin(), bytes.end())));
  }
  const std::string path = (dir.path() / "edited.gguf").string();
  EXPECT_TRUE(w.write(path));
  return path;
}

std::string load_error(const std::string& path) {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 1});
  Result<std::unique_ptr<Model>> model = Model::open(path, *backend);
  return model ? std::string() : model.error();
}

TEST(DeepSeek2, MalformedFilesAreLoadErrorsNamingTheTensorOrKey) {
  test::TempDir dir("deepseek2");
  const std::string good = write_model(dir, small_shape());
  ASSERT_EQ(load_error(good), "");
  struct Case {
    Edit edit;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{.drop_tensor = "blk.1.attn_k_b.weight"}, "blk.1.attn_k_b.weight"},
      {{.drop_tensor = "blk.0.attn_q_a_norm.weight"}, "blk.0.attn_q_a_norm.weight"},
      {{.drop_tensor = "blk.1.ffn_gate_exps.weight"}, "blk.1.ffn_gate_exps.weight"},
      {{.drop_tensor = "blk.1.ffn_down_shexp.weight"}, "blk.1.ffn_down_shexp.weight"},
      {{.reshape_tensor = "blk.0.attn_kv_a_mqa.weight", .extra_rows = 1},
       "tensor 'blk.0.attn_kv_a_mqa.weight' has shape"},
      {{.reshape_tensor = "blk.1.attn_v_b.weight", .extra_rows = 2},
       "tensor 'blk.1.attn_v_b.weight' has shape"},
      {{.key = "deepseek2.attention.key_length", .value = gguf::Value::u32(88)},
       "inconsistent MLA ranks"},
      {{.key = "deepseek2.attention.head_count_kv", .value = gguf::Value::u32(4)},
       "inconsistent MLA ranks"},
      {{.key = "deepseek2.attention.key_length_mla", .value = gguf::Value::u32(8)},
       "deepseek2.attention.key_length_mla"},
      {{.key = "deepseek2.expert_group_count", .value = gguf::Value::u32(3)},
       "'deepseek2.expert_group_count' = 3 does not divide the 16 experts"},
      {{.key = "deepseek2.expert_group_used_count", .value = gguf::Value::u32(9)},
       "deepseek2.expert_group_used_count"},
      {{.key = "deepseek2.leading_dense_block_count", .value = gguf::Value::u32(5)},
       "deepseek2.leading_dense_block_count"},
      {{.key = "deepseek2.attention.kv_lora_rank", .value = gguf::Value::u32(0)},
       "deepseek2.attention.kv_lora_rank"},
      {{.key = "deepseek2.rope.scaling.original_context_length", .value = gguf::Value::string("x")},
       "deepseek2.rope.scaling.original_context_length"},
  };
  for (const Case& c : cases) {
    const std::string what = c.edit.key.empty()
                                 ? c.edit.drop_tensor + c.edit.reshape_tensor
                                 : c.edit.key;
    SCOPED_TRACE(what);
    const std::string error = load_error(rewrite(dir, good, c.edit));
    EXPECT_NE(error.find(c.expected), std::string::npos) << "error: '" << error << "'";
  }
  // The older layout (one attn_kv_b per layer, no *_mla keys): refused with a hint.
  gguf::GgufWriter old;
  auto file = gguf::GgufFile::open(good);
  ASSERT_TRUE(file);
  for (const auto& [key, value] : (*file)->metadata()) {
    if (key.find("_mla") == std::string::npos) old.set(key, value);
  }
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    const std::span<const uint8_t> bytes = t.bytes();
    ASSERT_TRUE(old.add_tensor(t.name, t.type, t.shape, std::vector<uint8_t>(bytes.begin(), bytes.end())));
  }
  const std::string old_path = (dir.path() / "old.gguf").string();
  ASSERT_TRUE(old.write(old_path));
  EXPECT_NE(load_error(old_path).find("older layout"), std::string::npos) << load_error(old_path);
}

// Per token and layer the cache holds kv_lora_rank + rope elements (64 + 16 here), against
// H * (key_length_mla + value_length_mla) = 4 * (48 + 32) for the expanded form.
TEST(DeepSeek2, TheCompressedCacheHoldsTheLatentOnly) {
  test::TempDir dir("deepseek2");
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 1});
  Result<std::unique_ptr<Model>> model = Model::open(write_model(dir, small_shape()), *backend);
  ASSERT_TRUE(model) << model.error();
  const ModelConfig& c = (*model)->config();
  EXPECT_TRUE(c.kv_values_in_keys);
  EXPECT_EQ(c.head_dim_k, c.mla.kv_rank + c.mla.rope);
  for (DType type : {DType::F16, DType::F32}) {
    Result<std::unique_ptr<KvCache>> kv =
        (*model)->create_kv_cache({.num_blocks = 4, .block_size = 16, .type = type});
    ASSERT_TRUE(kv) << kv.error();
    const size_t per_token = (*kv)->size_bytes() / (4 * 16);
    const size_t element = type == DType::F16 ? 2 : 4;
    EXPECT_EQ(per_token, static_cast<size_t>(c.n_layers * (c.mla.kv_rank + c.mla.rope)) * element);
    const size_t expanded =
        static_cast<size_t>(c.n_layers * c.n_heads * (c.mla.nope + c.mla.rope + c.mla.v)) * element;
    EXPECT_EQ(per_token * 4, expanded);  // 80 against 320 elements per layer here
  }
  // Head dims that Q8_0 cannot hold (80 is not a multiple of 32): a clear error.
  Result<std::unique_ptr<KvCache>> q8 =
      (*model)->create_kv_cache({.num_blocks = 4, .block_size = 16, .type = DType::Q8_0});
  ASSERT_FALSE(q8);
  EXPECT_NE(q8.error().find("multiples of 32"), std::string::npos) << q8.error();
}

// A sequence forked inside a block (copy-on-write of the latent rows) continues exactly like
// the original, and like the whole sequence evaluated from scratch.
TEST(DeepSeek2, ForkedLatentCacheContinuesLikeTheOriginal) {
  test::TempDir dir("deepseek2");
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  Result<std::unique_ptr<Model>> model = Model::open(write_model(dir, small_shape()), *backend);
  ASSERT_TRUE(model) << model.error();
  const int64_t vocab = (*model)->config().n_vocab;
  const std::vector<int32_t> prompt = test::some_tokens(6, vocab, 9);
  auto kv = (*model)->create_kv_cache({.num_blocks = 4, .block_size = 4});
  ASSERT_TRUE(kv) << kv.error();
  auto run = [&](const std::vector<int32_t>& table, std::span<const int32_t> tokens, int32_t start) {
    std::vector<int32_t> positions(tokens.size()), seq(tokens.size(), 0),
        rows = {static_cast<int32_t>(tokens.size() - 1)};
    std::iota(positions.begin(), positions.end(), start);
    const std::vector<std::span<const int32_t>> tables = {table};
    std::vector<float> logits(static_cast<size_t>(vocab));
    Status st = (*model)->forward(Batch{tokens, positions, seq, tables, rows}, **kv, logits);
    EXPECT_TRUE(st) << st.error();
    return logits;
  };
  const std::vector<int32_t> parent = {0, 1}, child = {0, 2};
  run(parent, prompt, 0);
  ASSERT_TRUE((*kv)->copy_block(1, 2, 2));
  const std::vector<int32_t> next = {5};
  const std::vector<float> child_logits = run(child, next, 6);
  const std::vector<float> parent_logits = run(parent, next, 6);
  EXPECT_TRUE(test::bitwise_equal(child_logits, parent_logits));
  std::vector<int32_t> full = prompt;
  full.push_back(5);
  const std::vector<float> scratch = test::eval_all(**model, full, 512);
  EXPECT_EQ(0, std::memcmp(child_logits.data(), scratch.data() + 6 * vocab, vocab * sizeof(float)));
}

}  // namespace
}  // namespace cadenza::model
