// Model-level tests on synthetic models (no ../shared needed) and on the shared tiny models:
// batch invariance (one batch vs token by token vs chunks, bit for bit), ragged batches of two
// sequences with scattered block tables, thread-count invariance, RoPE scaling, and every error
// path being a clear value.
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/session.h"
#include "shared_data.h"
#include "batch_checks.h"
#include "synthetic_model.h"

namespace cadenza::model {
namespace {

using test::architecture_variants;
using test::make_synthetic;
using test::SyntheticSpec;
using test::bitwise_equal;
using test::check_ragged_batch;
using test::eval_all;
using test::some_tokens;

TEST(Model, EveryArchitectureRunsAndIsBatchInvariant) {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 3});
  for (const SyntheticSpec& spec : architecture_variants()) {
    SCOPED_TRACE(spec.arch + " " + std::string(dtype_name(spec.type)) +
                 (spec.experts ? " experts" : ""));
    std::shared_ptr<const gguf::GgufFile> file = make_synthetic(spec);
    ASSERT_TRUE(file);
    Result<std::unique_ptr<Model>> model = Model::load(file, *backend);
    ASSERT_TRUE(model) << model.error();
    const ModelConfig& c = (*model)->config();
    EXPECT_EQ(c.n_vocab, spec.vocab);
    EXPECT_EQ(c.tied_output, spec.tied);
    EXPECT_EQ(c.n_experts, spec.experts);
    const std::vector<int32_t> tokens = some_tokens(37, spec.vocab, 7);

    const std::vector<float> one_batch = eval_all(**model, tokens, 512);
    ASSERT_EQ(one_batch.size(), tokens.size() * static_cast<size_t>(spec.vocab));
    for (float v : one_batch) ASSERT_TRUE(std::isfinite(v));
    EXPECT_TRUE(bitwise_equal(one_batch, eval_all(**model, tokens, 1))) << "token by token";
    EXPECT_TRUE(bitwise_equal(one_batch, eval_all(**model, tokens, 5))) << "chunks of 5";
    EXPECT_TRUE(bitwise_equal(one_batch, eval_all(**model, tokens, 512, /*block_size=*/3)))
        << "another block size";
  }
}

TEST(Model, ResultsDoNotDependOnThreadCount) {
  SyntheticSpec spec = architecture_variants().back();  // qwen2moe: every op kind
  std::shared_ptr<const gguf::GgufFile> file = make_synthetic(spec);
  const std::vector<int32_t> tokens = some_tokens(20, spec.vocab, 8);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 5}) {
    std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = threads});
    Result<std::unique_ptr<Model>> model = Model::load(file, *backend);
    ASSERT_TRUE(model) << model.error();
    results.push_back(eval_all(**model, tokens, 512));
  }
  EXPECT_TRUE(bitwise_equal(results[0], results[1]));
  EXPECT_TRUE(bitwise_equal(results[0], results[2]));
}

TEST(Model, RaggedBatchOfTwoSequencesMatchesEachAlone) {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  for (const SyntheticSpec& spec : architecture_variants()) {
    SCOPED_TRACE(spec.arch);
    Result<std::unique_ptr<Model>> model = Model::load(make_synthetic(spec), *backend);
    ASSERT_TRUE(model) << model.error();
    check_ragged_batch(**model, some_tokens(19, spec.vocab, 1), some_tokens(11, spec.vocab, 2));
  }
}

TEST(Model, OnlyRequestedLogitRowsAreReturned) {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  SyntheticSpec spec;
  Result<std::unique_ptr<Model>> model = Model::load(make_synthetic(spec), *backend);
  ASSERT_TRUE(model) << model.error();
  const std::vector<int32_t> tokens = some_tokens(9, spec.vocab, 3);
  const std::vector<float> all = eval_all(**model, tokens, 512);
  SessionOptions options;
  options.max_tokens = 9;
  auto session = Session::create(**model, options);
  ASSERT_TRUE(session);
  Result<std::vector<float>> last = (*session)->eval(tokens);
  ASSERT_TRUE(last) << last.error();
  ASSERT_EQ(last->size(), static_cast<size_t>(spec.vocab));
  EXPECT_EQ(0, std::memcmp(last->data(), all.data() + 8 * spec.vocab, spec.vocab * sizeof(float)));
}

TEST(Model, RopeScalingFromTensorAndFromKeys) {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  const std::vector<int32_t> tokens = some_tokens(30, 64, 4);
  SyntheticSpec base;
  // Linear scaling x2 and frequency divisors of 2 everywhere are the same rotation.
  SyntheticSpec linear = base;
  linear.extra = {{"llama.rope.scaling.type", gguf::Value::string("linear")},
                  {"llama.rope.scaling.factor", gguf::Value::f32(2.0f)}};
  SyntheticSpec divisors = base;
  divisors.extra_tensors = {{"rope_freqs.weight", std::vector<float>(4, 2.0f)}};  // head_dim 8
  auto linear_model = Model::load(make_synthetic(linear), *backend);
  auto divisors_model = Model::load(make_synthetic(divisors), *backend);
  auto base_model = Model::load(make_synthetic(base), *backend);
  ASSERT_TRUE(linear_model && divisors_model && base_model);
  EXPECT_EQ((*divisors_model)->config().rope_scaling, RopeScaling::Llama3);
  const std::vector<float> a = eval_all(**linear_model, tokens, 512);
  const std::vector<float> b = eval_all(**divisors_model, tokens, 512);
  const std::vector<float> c = eval_all(**base_model, tokens, 512);
  double max_diff = 0, max_change = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(a[i]) - b[i]));
    max_change = std::max(max_change, std::abs(static_cast<double>(a[i]) - c[i]));
  }
  EXPECT_LT(max_diff, 1e-5);
  EXPECT_GT(max_change, 1e-3);  // scaling does change the result

  // Llama 3 scaling from metadata keys: high frequencies kept, low ones divided by the factor.
  SyntheticSpec keys = base;
  keys.embd = 128;
  keys.heads = 2;
  keys.kv_heads = 1;  // head_dim 64
  keys.extra = {{"llama.rope.scaling.type", gguf::Value::string("llama3")},
                {"llama.rope.scaling.factor", gguf::Value::f32(8.0f)},
                {"llama.rope.scaling.low_freq_factor", gguf::Value::f32(1.0f)},
                {"llama.rope.scaling.high_freq_factor", gguf::Value::f32(4.0f)},
                {"llama.rope.scaling.original_context_length", gguf::Value::u32(64)}};
  auto llama3 = Model::load(make_synthetic(keys), *backend);
  ASSERT_TRUE(llama3) << llama3.error();
  const std::vector<float>& f = (*llama3)->config().rope_freq_factors;
  ASSERT_EQ(f.size(), 32u);
  EXPECT_EQ(f.front(), 1.0f);
  EXPECT_EQ(f.back(), 8.0f);
  EXPECT_TRUE(std::is_sorted(f.begin(), f.end()));
  // The computed divisors are applied: the logits differ from the same weights without scaling
  // at positions past the original context.
  SyntheticSpec unscaled = keys;
  unscaled.extra.clear();
  auto plain = Model::load(make_synthetic(unscaled), *backend);
  ASSERT_TRUE(plain) << plain.error();
  const std::vector<int32_t> long_tokens = some_tokens(80, 64, 5);
  const std::vector<float> scaled_logits = eval_all(**llama3, long_tokens, 512);
  const std::vector<float> plain_logits = eval_all(**plain, long_tokens, 512);
  double change = 0;
  for (size_t i = 0; i < scaled_logits.size(); ++i) {
    change = std::max(change, std::abs(static_cast<double>(scaled_logits[i]) - plain_logits[i]));
  }
  EXPECT_GT(change, 1e-3);
}

// ---- errors are values with clear messages ----

std::string load_error(const SyntheticSpec& spec) {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 1});
  std::shared_ptr<const gguf::GgufFile> file = make_synthetic(spec);
  if (!file) return "file did not parse";
  Result<std::unique_ptr<Model>> model = Model::load(file, *backend);
  return model ? "" : model.error();
}

TEST(Model, LoadErrorsNameTheTensorOrKey) {
  auto expect_error = [](const SyntheticSpec& spec, const std::string& needle) {
    const std::string error = load_error(spec);
    EXPECT_NE(error.find(needle), std::string::npos) << "error: '" << error << "', expected '" << needle << "'";
  };
  SyntheticSpec s;
  s.omit = {"blk.1.ffn_up.weight"};
  expect_error(s, "blk.1.ffn_up.weight");
  s = {};
  s.reshape = {{"blk.0.attn_k.weight", {32, 8}}};
  expect_error(s, "'blk.0.attn_k.weight' has shape [32, 8], expected [32, 16]");
  s = {};
  s.retype = {{"blk.0.attn_q.weight", DType::I32}};
  expect_error(s, "blk.0.attn_q.weight");
  s = {};
  s.omit = {"token_embd.weight"};
  expect_error(s, "token_embd.weight");
  s = {};
  s.arch = "qwen2";  // qwen2 needs biases
  expect_error(s, "blk.0.attn_q.bias");
  s = {};
  s.arch = "qwen3";  // qwen3 needs Q/K norms
  expect_error(s, "blk.0.attn_q_norm.weight");
  s = {};
  s.arch = "gpt2";
  expect_error(s, "architecture 'gpt2' is not supported");
  s = {};
  s.extra = {{"llama.block_count", gguf::Value::u32(1u << 30)}};
  expect_error(s, "llama.block_count");
  s = {};
  s.extra = {{"llama.block_count", gguf::Value::u32(3)}};  // the file has 2 layers
  expect_error(s, "blk.2.attn_norm.weight");
  s = {};
  s.extra = {{"llama.attention.head_count_kv", gguf::Value::u32(3)}};
  expect_error(s, "head_count_kv");
  s = {};
  s.extra = {{"llama.attention.head_count", gguf::Value::u32(0)}};
  expect_error(s, "llama.attention.head_count");
  s = {};
  s.extra = {{"llama.embedding_length", gguf::Value::string("lots")}};
  expect_error(s, "llama.embedding_length");
  s = {};
  s.extra = {{"llama.rope.scaling.type", gguf::Value::string("longrope")}};
  expect_error(s, "rope scaling type 'longrope' is not supported");
  s = {};
  s.extra = {{"llama.rope.scaling.type", gguf::Value::string("yarn")}};
  expect_error(s, "rope scaling 'yarn' needs key 'llama.rope.scaling.factor' > 0");
  s = {};
  s.extra = {{"llama.rope.scaling.type", gguf::Value::string("yarn")},
             {"llama.rope.scaling.factor", gguf::Value::f32(4.0f)}};
  expect_error(s, "llama.rope.scaling.original_context_length");
  s = {};
  s.extra = {{"llama.rope.dimension_count", gguf::Value::u32(7)}};
  expect_error(s, "must be even");
  s = {};
  s.experts = 4;
  s.experts_used = 5;
  expect_error(s, "expert_used_count");
  s = {};
  s.experts = 4;
  s.experts_used = 2;
  s.extra = {{"llama.expert_gating_func", gguf::Value::u32(4)}};
  expect_error(s, "only softmax (1), sigmoid (2) and softmax over the chosen experts (3) gating");
  s = {};
  s.experts = 4;
  s.experts_used = 2;
  s.extra = {{"llama.expert_group_count", gguf::Value::u32(3)}};
  expect_error(s, "'llama.expert_group_count' = 3 does not divide the 4 experts");
  s = {};
  s.experts = 4;
  s.experts_used = 2;
  s.extra = {{"llama.expert_group_count", gguf::Value::u32(4)},
             {"llama.expert_group_used_count", gguf::Value::u32(1)}};
  expect_error(s, "'llama.expert_group_used_count' = 1");
}

// Random byte flips in the metadata and tensor table of a valid file: whatever the reader lets
// through, loading either fails with an error or gives a model that runs; nothing crashes (this
// test is meant to run under ASan/UBSan too).
TEST(Model, CorruptedFilesFailCleanly) {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  for (const SyntheticSpec& spec : {architecture_variants()[2], architecture_variants()[5]}) {
    const std::vector<uint8_t> original = test::synthetic_bytes(spec);
    // The header (metadata + tensor infos) is what precedes the first tensor's data.
    std::shared_ptr<const gguf::GgufFile> parsed = test::parse_synthetic(original, "x");
    ASSERT_TRUE(parsed);
    const size_t header = static_cast<size_t>(parsed->data_offset());
    std::mt19937 rng(123);
    int loaded = 0, rejected = 0;
    for (int trial = 0; trial < 1000; ++trial) {
      std::vector<uint8_t> bytes = original;
      for (int flips = 0; flips < 1 + trial % 3; ++flips) {
        bytes[rng() % header] ^= static_cast<uint8_t>(1u << (rng() % 8));
      }
      std::shared_ptr<const gguf::GgufFile> file = test::parse_synthetic(std::move(bytes), "corrupt.gguf");
      if (!file) continue;
      Result<std::unique_ptr<Model>> model = Model::load(file, *backend);
      if (!model) {
        ++rejected;
        EXPECT_FALSE(model.error().empty());
        continue;
      }
      ++loaded;
      SessionOptions options;
      options.max_tokens = 4;
      auto session = Session::create(**model, options);
      if (!session) continue;
      const std::vector<int32_t> tokens = {0, 1, 2};
      Result<std::vector<float>> logits = (*session)->eval(tokens);
      (void)logits;
    }
    std::cout << "[corrupt] " << spec.arch << ": " << loaded << " loaded, " << rejected
              << " rejected by the model loader\n";
  }
}

TEST(Model, SessionAndForwardErrorsAreValues) {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  SyntheticSpec spec;
  Result<std::unique_ptr<Model>> model = Model::load(make_synthetic(spec), *backend);
  ASSERT_TRUE(model) << model.error();
  SessionOptions options;
  options.max_tokens = 8;
  auto session = Session::create(**model, options);
  ASSERT_TRUE(session) << session.error();
  Session& s = **session;

  const std::vector<int32_t> bad = {1, 2, 64};
  Result<std::vector<float>> r = s.eval(bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("token id 64"), std::string::npos) << r.error();
  EXPECT_EQ(s.n_past(), 0);
  EXPECT_FALSE(s.eval({}));
  const std::vector<int32_t> six = some_tokens(6, spec.vocab, 5);
  ASSERT_TRUE(s.eval(six));
  r = s.eval(six);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("context full"), std::string::npos) << r.error();
  EXPECT_EQ(s.n_past(), 6);
  // Rewinding and re-evaluating gives the same logits as the first time.
  ASSERT_TRUE(s.rewind(3));
  const std::vector<int32_t> tail(six.begin() + 3, six.end());
  Result<std::vector<float>> again = s.eval(tail);
  ASSERT_TRUE(again);
  ASSERT_TRUE(s.rewind(0));
  Result<std::vector<float>> fresh = s.eval(six);
  ASSERT_TRUE(fresh);
  EXPECT_TRUE(bitwise_equal(*again, *fresh));
  EXPECT_FALSE(s.rewind(7));

  // Forward validation.
  KvCacheOptions kv_options;
  kv_options.num_blocks = 2;
  kv_options.block_size = 4;
  auto kv = (*model)->create_kv_cache(kv_options);
  ASSERT_TRUE(kv);
  const std::vector<int32_t> table = {1};
  const std::vector<std::span<const int32_t>> tables = {table};
  const std::vector<int32_t> tokens = {1, 2}, seq = {0, 0}, rows = {1};
  std::vector<float> logits(spec.vocab);
  auto forward_error = [&](std::vector<int32_t> positions, std::span<const std::span<const int32_t>> t,
                           std::span<float> out) {
    Status st = (*model)->forward(Batch{tokens, positions, seq, t, rows}, **kv, out);
    return st ? std::string() : st.error();
  };
  EXPECT_EQ(forward_error({0, 1}, tables, logits), "");
  EXPECT_NE(forward_error({3, 4}, tables, logits).find("past its block table"), std::string::npos);
  EXPECT_NE(forward_error({1, 1}, tables, logits).find("same KV slot"), std::string::npos);
  EXPECT_NE(forward_error({-1, 0}, tables, logits).find("negative position"), std::string::npos);
  EXPECT_NE(forward_error({0, 1}, tables, std::span<float>(logits).first(3)).find("logits buffer"),
            std::string::npos);
  const std::vector<int32_t> bad_table = {5};
  const std::vector<std::span<const int32_t>> bad_tables = {bad_table};
  EXPECT_NE(forward_error({0, 1}, bad_tables, logits).find("out of range"), std::string::npos);
  EXPECT_NE(forward_error({0, 1}, {}, logits).find("sequence index"), std::string::npos);

  kv_options.type = DType::Q8_0;
  auto q8_kv = (*model)->create_kv_cache(kv_options);
  ASSERT_FALSE(q8_kv);
  EXPECT_NE(q8_kv.error().find("q8_0"), std::string::npos) << q8_kv.error();
}

// A forked sequence: the parent's partial last block is copied to the child's own block, after
// which both continue independently and the child matches a sequence computed from scratch.
TEST(Model, CopiedBlockContinuesLikeTheOriginal) {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  SyntheticSpec spec;
  Result<std::unique_ptr<Model>> model = Model::load(make_synthetic(spec), *backend);
  ASSERT_TRUE(model) << model.error();
  const int64_t vocab = spec.vocab;
  const std::vector<int32_t> prompt = some_tokens(6, vocab, 9);  // blocks of 4: 1 full + 2 tokens
  KvCacheOptions kv_options;
  kv_options.num_blocks = 4;
  kv_options.block_size = 4;
  auto kv = (*model)->create_kv_cache(kv_options);
  ASSERT_TRUE(kv);
  const std::vector<int32_t> parent = {0, 1}, child = {0, 2};  // block 0 shared, 1 copied to 2
  auto run = [&](const std::vector<int32_t>& table, std::span<const int32_t> tokens, int32_t start) {
    std::vector<int32_t> positions(tokens.size()), seq(tokens.size(), 0), rows = {static_cast<int32_t>(tokens.size() - 1)};
    std::iota(positions.begin(), positions.end(), start);
    const std::vector<std::span<const int32_t>> tables = {table};
    std::vector<float> logits(vocab);
    Status st = (*model)->forward(Batch{tokens, positions, seq, tables, rows}, **kv, logits);
    EXPECT_TRUE(st) << st.error();
    return logits;
  };
  run(parent, prompt, 0);
  ASSERT_TRUE((*kv)->copy_block(1, 2, 2));
  EXPECT_FALSE((*kv)->copy_block(1, 9, 2));
  const std::vector<int32_t> next = {5};
  const std::vector<float> child_logits = run(child, next, 6);
  const std::vector<float> parent_logits = run(parent, next, 6);
  EXPECT_TRUE(bitwise_equal(child_logits, parent_logits));
  std::vector<int32_t> full = prompt;
  full.push_back(5);
  const std::vector<float> scratch = eval_all(**model, full, 512);
  EXPECT_EQ(0, std::memcmp(child_logits.data(), scratch.data() + 6 * vocab, vocab * sizeof(float)));
}

// The same invariance checks on shared models (real tokenizer ids, realistic shapes).
TEST(Model, SharedModelsAreBatchInvariant) {
  CADENZA_REQUIRE_SHARED();
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend();
  for (const char* name : {"tiny-mixtral-f16", "tiny-qwen3-f16"}) {
    SCOPED_TRACE(name);
    const std::filesystem::path dir = test::shared_dir();
    std::ifstream golden_file(dir / "golden" / (std::string(name) + ".json"));
    ASSERT_TRUE(golden_file);
    const nlohmann::json golden = nlohmann::json::parse(golden_file);
    std::vector<int32_t> tokens = golden["cases"][5]["tokens"].get<std::vector<int32_t>>();
    tokens.resize(40);
    Result<std::unique_ptr<Model>> model =
        Model::open((dir / "models" / (std::string(name) + ".gguf")).string(), *backend);
    ASSERT_TRUE(model) << model.error();
    const std::vector<float> one_batch = eval_all(**model, tokens, 512);
    EXPECT_TRUE(bitwise_equal(one_batch, eval_all(**model, tokens, 1))) << "token by token";
    EXPECT_TRUE(bitwise_equal(one_batch, eval_all(**model, tokens, 7))) << "chunks of 7";
    const std::vector<int32_t> other = golden["cases"][3]["tokens"].get<std::vector<int32_t>>();
    check_ragged_batch(**model, tokens, other);
  }
}

}  // namespace
}  // namespace cadenza::model
