// Embeddings against the reference engine: tests/server/golden/embed-*.json hold the token ids and
// L2-normalized vectors `llama-embedding` wrote for a few prompts on a synthesized model
// (scripts/make_embedding_golden.py ran it once; the reference is a black box). The test
// synthesizes the same model from the recipe, tokenizes the prompts as /v1/embeddings does, and
// embeds them through the server's Embedder (encoder: bert; decoder: the pooling the file names
// or the golden's). Checks: identical token ids, and each vector within kMaxCosineDistance.
//
// Measured (2026-12-06, 2-core Xeon, AVX-512; printed per case): bge-small 2 layers f16 (CLS
// pooling) 4e-8..5.3e-8, the demo decoder with mean pooling 3.2e-8..6.4e-8. The bound, 1e-5,
// leaves room for other ISAs' summation orders, not for a wrong op: the demo golden checked
// with last-token pooling instead of mean is off by far more (0.09 to 0.23).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "model/encoder.h"
#include "model/model.h"
#include "server/embedder.h"
#include "shared_data.h"
#include "synth/synth.h"
#include "temp_dir.h"
#include "tokenizer/tokenizer.h"

namespace cadenza::server {
namespace {

using nlohmann::json;

constexpr double kMaxCosineDistance = 1e-5;

std::vector<std::string> golden_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(CADENZA_EMBED_GOLDEN_DIR))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

double cosine_distance(const std::vector<float>& a, const json& b) {
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double y = b[i].get<double>();
    dot += a[i] * y;
    na += double(a[i]) * a[i];
    nb += y * y;
  }
  return 1.0 - dot / std::sqrt(na * nb);
}

class EmbeddingsGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EmbeddingsGoldenTest, TokensAndVectorsMatchReference) {
  std::ifstream in(std::filesystem::path(CADENZA_EMBED_GOLDEN_DIR) / (GetParam() + ".json"));
  ASSERT_TRUE(in) << GetParam();
  const json golden = json::parse(in);
  const json& recipe = golden["recipe"];
  if (recipe.contains("vocab_from")) CADENZA_REQUIRE_SHARED();

  std::optional<synth::ModelShape> shape = synth::find_preset(recipe["preset"].get<std::string>());
  ASSERT_TRUE(shape) << recipe.dump();
  if (recipe.contains("layers")) shape->n_layer = recipe["layers"].get<int64_t>();
  synth::SynthOptions options;
  options.shape = *shape;
  options.weight_type = recipe["type"].get<std::string>();
  options.seed = recipe["seed"].get<uint64_t>();
  if (recipe.contains("vocab_from"))
    options.vocab_from = (test::shared_dir() / recipe["vocab_from"].get<std::string>()).string();
  test::TempDir dir("embed-golden");
  const std::string path = (dir.path() / "model.gguf").string();
  auto written = synth::write_synthetic_model(options, path);
  ASSERT_TRUE(written) << written.error();

  auto backend = kernels::make_cpu_backend({.n_threads = 2});
  std::unique_ptr<model::Encoder> encoder;
  std::unique_ptr<model::Model> decoder;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Embedder> embedder;
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file) << file.error();
  if (model::Encoder::is_encoder(**file)) {
    auto e = model::Encoder::load(std::shared_ptr<const gguf::GgufFile>(std::move(*file)), *backend);
    ASSERT_TRUE(e) << e.error();
    encoder = std::move(*e);
    auto t = Tokenizer::from_gguf(encoder->file());
    ASSERT_TRUE(t) << t.error();
    tokenizer = std::move(*t);
    embedder = make_encoder_embedder(*encoder, {.max_tokens = 512, .max_batch_tokens = 512});
  } else {
    auto m = model::Model::open(path, *backend);
    ASSERT_TRUE(m) << m.error();
    decoder = std::move(*m);
    auto t = Tokenizer::from_gguf(decoder->file());
    ASSERT_TRUE(t) << t.error();
    tokenizer = std::move(*t);
    auto e = decoder_embedder_for(*decoder, *tokenizer, golden.value("pooling", ""), 512);
    ASSERT_TRUE(e) << e.error();
    embedder = std::move(*e);
  }
  ASSERT_TRUE(embedder) << "the model has no pooling";

  std::vector<std::vector<int32_t>> inputs;
  for (const json& c : golden["cases"]) {
    // As /v1/embeddings tokenizes text (embeddings_routes.cpp): with the special tokens.
    std::vector<int32_t> ids = tokenizer->encode(c["prompt"].get<std::string>(), true, false);
    EXPECT_EQ(ids, c["tokens"].get<std::vector<int32_t>>()) << c["prompt"];
    inputs.push_back(c["tokens"].get<std::vector<int32_t>>());
  }
  // All at once (batched, as a request with several inputs) and one by one: the same vectors.
  auto batched = embedder->embed(inputs);
  ASSERT_TRUE(batched) << batched.error();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const json& ref = golden["cases"][i]["embedding"];
    ASSERT_EQ((*batched)[i].size(), ref.size());
    const double d = cosine_distance((*batched)[i], ref);
    std::printf("%s case %zu (%zu tokens): cosine distance %.3g\n", GetParam().c_str(), i,
                inputs[i].size(), d);
    EXPECT_LT(d, kMaxCosineDistance) << "case " << i;
    auto alone = embedder->embed({inputs[i]});
    ASSERT_TRUE(alone) << alone.error();
    EXPECT_LT(cosine_distance((*alone)[0], ref), kMaxCosineDistance) << "case " << i << " alone";
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, EmbeddingsGoldenTest, ::testing::ValuesIn(golden_names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace cadenza::server
