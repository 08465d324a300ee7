// The Gemma 3 vision path against the reference engine (llama-mtmd-cli and llama-server, black
// boxes) on a synthesized SigLIP + average-pool mmproj and a small gemma3 language model:
// golden/gemma3-tiny.json, made once by scripts/make_vision_golden_gemma3.py. The test
// re-synthesizes both files (same presets and seeds) and draws the same pictures (checked by the
// CRC-32 of their RGB bytes), then compares
//  - the image embeddings (token 0's first and last 16 values, statistics of all);
//  - the language model's log-probabilities of the top-k tokens at each of the reference's
//    greedy steps after the prompt with the image (wrapped in <start_of_image> / <end_of_image>,
//    its tokens attending to each other both ways), and the greedy tokens themselves;
//  - and that attending causally within the image instead is measurably off the reference.
#include <algorithm>
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "gguf/gguf.h"
#include "image_encode.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/session.h"
#include "synth/mmproj.h"
#include "synth/presets.h"
#include "synth/synth.h"
#include "temp_dir.h"
#include "tokenizer/tokenizer.h"
#include "vision/clip_encoder.h"

namespace cadenza::vision {
namespace {

// Tolerances, about 2-3x what was measured against the reference (its F16 matmuls round the
// activations; the resampling filter is not the reference's):
//  - the 64 x 64 picture (no resampling): max |err| 1.1e-3 of token 0's logged values (magnitude
//    ~1-4), mean 1e-5, std 2e-5, min 1.4e-4, max 4.4e-4 apart;
//  - the 48 x 40 one (fitted bicubic, padded black): 0.118, mean 8e-5, std 0.017;
//  - log-probabilities of the top 8 at 8 greedy steps: 3.5e-3 (causal within the image: 0.35).
constexpr double GEMMA3_EMBD_TOL = 3e-3;
constexpr double GEMMA3_RESIZED_TOL = 0.2;
constexpr double GEMMA3_LOGPROB_TOL = 1e-2;

class Gemma3Golden : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream in(std::string(CADENZA_SOURCE_DIR) + "/tests/vision/golden/gemma3-tiny.json");
    ASSERT_TRUE(in.good());
    g_ = nlohmann::json::parse(in);
    mmproj_ = dir_.file("mmproj.gguf");
    lm_ = dir_.file("lm.gguf");
    const synth::MmprojShape* shape = synth::find_mmproj_preset(g_["mmproj"]["preset"].get<std::string>());
    ASSERT_NE(shape, nullptr);
    ASSERT_TRUE(synth::write_synthetic_mmproj(*shape, g_["mmproj"]["seed"].get<uint64_t>(), mmproj_).ok());
    synth::SynthOptions o;
    o.shape = *synth::find_preset(g_["language_model"]["preset"].get<std::string>());
    o.weight_type = g_["language_model"]["type"].get<std::string>();
    o.seed = g_["language_model"]["seed"].get<uint64_t>();
    ASSERT_TRUE(synth::write_synthetic_model(o, lm_).ok());
    backend_ = kernels::make_cpu_backend({.n_threads = 2});
    auto enc = VisionEncoder::open(mmproj_, *backend_);
    ASSERT_TRUE(enc.ok()) << enc.error();
    enc_ = std::move(*enc);
  }
  Image image(const nlohmann::json& im) {
    Image img = testing::make_test_image(im["width"], im["height"], im["seed"].get<uint32_t>());
    EXPECT_EQ(crc32(0, img.rgb.data(), static_cast<uInt>(img.rgb.size())), im["rgb_crc32"].get<uint32_t>())
        << "make_test_image no longer draws the picture the golden file was made from";
    return img;
  }

  nlohmann::json g_;
  cadenza::test::TempDir dir_;
  std::string mmproj_, lm_;
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<VisionEncoder> enc_;
};

TEST_F(Gemma3Golden, EmbeddingsMatchTheReferenceEngine) {
  const VisionConfig& c = enc_->config();
  EXPECT_EQ(c.projector, ProjectorType::kGemma3);
  EXPECT_EQ(c.pool, 4);  // the file leaves the key out: the converter's default
  for (const auto& im : g_["images"]) {
    const int w = im["width"], h = im["height"];
    SCOPED_TRACE(::testing::Message() << w << "x" << h);
    auto out = enc_->encode(enc_->preprocess(image(im)));
    ASSERT_TRUE(out.ok()) << out.error();
    ASSERT_EQ(c.n_out, im["n_embd"].get<int64_t>());
    ASSERT_EQ(c.n_image_tokens, im["n_tokens"].get<int64_t>());
    const int64_t d = c.n_out;
    double max_err = 0;
    for (int i = 0; i < 16; ++i) {
      max_err = std::max(max_err, std::abs((*out)[static_cast<size_t>(i)] - im["token0_first16"][i].get<double>()));
      max_err = std::max(max_err, std::abs((*out)[static_cast<size_t>(d - 16 + i)] - im["token0_last16"][i].get<double>()));
    }
    double sum = 0, sq = 0, mn = 1e30, mx = -1e30;
    for (float v : *out) {
      sum += v;
      sq += static_cast<double>(v) * v;
      mn = std::min<double>(mn, v);
      mx = std::max<double>(mx, v);
    }
    const double n = static_cast<double>(out->size()), mean = sum / n;
    const double sd = std::sqrt(std::max(0.0, sq / n - mean * mean));
    std::fprintf(stderr, "%dx%d: max |err| of token 0's 32 logged values %.3g; mean %.6f (ref %.6f), std %.6f (ref %.6f), min %.6f (ref %.6f), max %.6f (ref %.6f), sum %.4f (ref %.4f)\n",
                 w, h, max_err, mean, im["mean"].get<double>(), sd, im["std"].get<double>(), mn,
                 im["min"].get<double>(), mx, im["max"].get<double>(), sum, im["sum"].get<double>());
    if (w == c.image_size && h == c.image_size) {
      EXPECT_LT(max_err, GEMMA3_EMBD_TOL);
      EXPECT_NEAR(mean, im["mean"].get<double>(), 1e-3);
      EXPECT_NEAR(sd, im["std"].get<double>(), 1e-3);
      EXPECT_NEAR(mn, im["min"].get<double>(), GEMMA3_EMBD_TOL);
      EXPECT_NEAR(mx, im["max"].get<double>(), GEMMA3_EMBD_TOL);
    } else {
      EXPECT_LT(max_err, GEMMA3_RESIZED_TOL);
      EXPECT_NEAR(mean, im["mean"].get<double>(), 0.01);
      EXPECT_NEAR(sd, im["std"].get<double>(), 0.04);
    }
  }
}

// The largest |difference| between our log-probabilities and the reference's top-k at each of
// its greedy steps (our logits after the same tokens), with the image's tokens attending to each
// other both ways or causally. `greedy_ok`: our argmax was the reference's token at every step.
double logprob_gap(model::Model& lm, const Tokenizer& tok, const nlohmann::json& g, const nlohmann::json& im,
                   const std::vector<float>& embd, int32_t n_image, bool bidirectional, bool& greedy_ok) {
  const std::string prompt = g["prompt"].get<std::string>();
  const size_t at = prompt.find("<image>");
  std::vector<int32_t> tokens = tok.encode(prompt.substr(0, at) + "<start_of_image>", true, true);
  const auto first = static_cast<int32_t>(tokens.size());
  tokens.insert(tokens.end(), static_cast<size_t>(n_image), 0);
  const std::vector<int32_t> rest = tok.encode("<end_of_image>" + prompt.substr(at + 7), false, true);
  tokens.insert(tokens.end(), rest.begin(), rest.end());
  if (im.contains("prompt_tokens") && !im["prompt_tokens"].is_null()) {
    EXPECT_EQ(static_cast<int64_t>(tokens.size()), im["prompt_tokens"].get<int64_t>());
  }
  auto session = model::Session::create(lm, {.max_tokens = 256});
  EXPECT_TRUE(session.ok());
  auto logits = (*session)->eval(tokens, model::InputEmbeddings{first, n_image, embd, bidirectional});
  EXPECT_TRUE(logits.ok()) << logits.error();
  double gap = 0;
  greedy_ok = true;
  for (const auto& step : im["steps"]) {
    const std::vector<float>& l = *logits;
    const double mx = *std::max_element(l.begin(), l.end());
    double z = 0;
    for (float v : l) z += std::exp(v - mx);
    const double lse = mx + std::log(z);
    for (const auto& t : step["top"]) gap = std::max(gap, std::abs(l[t[0].get<size_t>()] - lse - t[1].get<double>()));
    const int32_t next = step["id"];
    if (std::max_element(l.begin(), l.end()) - l.begin() != next) greedy_ok = false;
    logits = (*session)->eval(std::span<const int32_t>(&next, 1));
    EXPECT_TRUE(logits.ok());
  }
  return gap;
}

TEST_F(Gemma3Golden, LanguageModelFollowsTheReferenceEngine) {
  auto file = gguf::GgufFile::open(lm_);
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.error();
  auto lm = model::Model::open(lm_, *backend_);
  ASSERT_TRUE(lm.ok()) << lm.error();
  const VisionConfig& c = enc_->config();
  ASSERT_TRUE(c.bidirectional_image);
  ASSERT_EQ(c.image_begin, "<start_of_image>");
  // The picture at the encoder's size (the resized one's embeddings differ by the resampling).
  const auto& im = g_["images"][0];
  ASSERT_EQ(im["width"].get<int64_t>(), c.image_size);
  auto embd = enc_->encode(enc_->preprocess(image(im)));
  ASSERT_TRUE(embd.ok()) << embd.error();
  bool greedy = false, greedy_causal = false;
  const double gap = logprob_gap(**lm, **tok, g_, im, *embd, static_cast<int32_t>(c.n_image_tokens), true, greedy);
  const double causal = logprob_gap(**lm, **tok, g_, im, *embd, static_cast<int32_t>(c.n_image_tokens), false, greedy_causal);
  std::fprintf(stderr, "top-%d log-probabilities over %zu greedy steps: max |err| %.3g (bidirectional image), %.3g (causal); greedy tokens %s\n",
               g_["n_probs"].get<int>(), im["steps"].size(), gap, causal, greedy ? "equal" : "DIFFER");
  EXPECT_TRUE(greedy);
  EXPECT_LT(gap, GEMMA3_LOGPROB_TOL);
  EXPECT_GT(causal, 10 * gap) << "attending causally within the image should be off the reference";
}

}  // namespace
}  // namespace cadenza::vision
