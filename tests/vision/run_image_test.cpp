// `cadenza run --mmproj FILE --image FILE` as a binary: the reference engine's greedy text for
// the golden image (golden/clip-tiny.json, llama-mtmd-cli with the shared tiny Llama: skipped
// without ../shared), and the errors: an mmproj for another width, a corrupt image, a lone flag.
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_process.h"
#include "image_encode.h"
#include "shared_data.h"
#include "synth/mmproj.h"
#include "synth/presets.h"
#include "synth/synth.h"
#include "temp_dir.h"
#include "test_models.h"

namespace cadenza::vision {
namespace {

using cadenza::test::run_cadenza;
using cadenza::test::shell_quote;

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

TEST(RunImage, GreedyTextIsTheReferenceEngines) {
  CADENZA_REQUIRE_SHARED();
  const auto g = nlohmann::json::parse(cadenza::test::read_text_file(
      std::string(CADENZA_SOURCE_DIR) + "/tests/vision/golden/clip-tiny.json"));
  cadenza::test::TempDir dir;
  const std::string mmproj = dir.file("mmproj.gguf");
  ASSERT_TRUE(synth::write_synthetic_mmproj(*synth::find_mmproj_preset(g["mmproj"]["preset"]),
                                            g["mmproj"]["seed"], mmproj).ok());
  // The image at the encoder's size (the resized one's embeddings differ by up to 0.1).
  const auto& im = g["images"][0];
  ASSERT_EQ(im["width"], 32);
  const std::string png = dir.file("image.png");
  write_file(png, testing::encode_png(testing::make_test_image(32, 32, im["seed"])));
  // The reference's vicuna template around its media marker: "USER: <__media__>describe\nASSISTANT:".
  const std::string prompt = "USER: <image>" + g["prompt"].get<std::string>() + "\nASSISTANT:";
  auto r = run_cadenza("run -m " + shell_quote((cadenza::test::shared_dir() / g["language_model"].get<std::string>()).string()) +
                       " --mmproj " + shell_quote(mmproj) + " --image " + shell_quote(png) +
                       " -p " + shell_quote(prompt) + " -n " + std::to_string(g["n_predict"].get<int>()) +
                       " -t 2 --no-echo");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, im["greedy_text"].get<std::string>() + "\n") << r.err;
  EXPECT_NE(r.err.find("16 tokens of 64"), std::string::npos) << r.err;
}

class RunImageErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.file("lm.gguf");
    ASSERT_TRUE(synth::write_synthetic_model(cadenza::test::tiny_model_options(3), model_).ok());
    png_ = dir_.file("image.png");
    write_file(png_, testing::encode_png(testing::make_test_image(40, 24)));
  }
  cadenza::test::TempDir dir_;
  std::string model_, png_;
};

TEST_F(RunImageErrors, AnMmprojForAnotherWidthIsRefused) {
  synth::MmprojShape shape = *synth::find_mmproj_preset("clip-tiny");
  shape.n_out = shape.proj_hidden = 32;  // the model is 64 wide
  const std::string mmproj = dir_.file("mm32.gguf");
  ASSERT_TRUE(synth::write_synthetic_mmproj(shape, 1, mmproj).ok());
  auto r = run_cadenza("run -m " + shell_quote(model_) + " --mmproj " + shell_quote(mmproj) +
                       " --image " + shell_quote(png_) + " -n 2");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("output width 32 is not the model's embedding width 64"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(RunImageErrors, RunsAndRefusesBadImagesAndLoneFlags) {
  const std::string mmproj = dir_.file("mm.gguf");
  ASSERT_TRUE(synth::write_synthetic_mmproj(*synth::find_mmproj_preset("clip-tiny"), 1, mmproj).ok());
  auto ok = run_cadenza("run -m " + shell_quote(model_) + " --mmproj " + shell_quote(mmproj) +
                        " --image " + shell_quote(png_) + " -p " + shell_quote("a <image> b") + " -n 3 --ignore-eos");
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(ok.out.rfind("a <image> b", 0), 0u) << ok.out;
  EXPECT_NE(ok.err.find("(40x24) -> 16 tokens"), std::string::npos) << ok.err;
  // A truncated PNG.
  auto bytes = testing::encode_png(testing::make_test_image(40, 24));
  bytes.resize(bytes.size() / 2);
  const std::string cut = dir_.file("cut.png");
  write_file(cut, bytes);
  auto bad = run_cadenza("run -m " + shell_quote(model_) + " --mmproj " + shell_quote(mmproj) +
                         " --image " + shell_quote(cut));
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("PNG: corrupt or truncated"), std::string::npos) << bad.err;
  auto lone = run_cadenza("run -m " + shell_quote(model_) + " --image " + shell_quote(png_));
  EXPECT_EQ(lone.status, 2);
  EXPECT_NE(lone.err.find("--mmproj and --image go together"), std::string::npos) << lone.err;
}

// Gemma 3 (golden/gemma3-tiny.json, made with llama-server): the greedy bytes after the image,
// which `run` wraps in <start_of_image> / <end_of_image> and lets attend to itself both ways; and
// a Gemma 3 mmproj for another width refused.
TEST(RunImageGemma3, GreedyTokensAreTheReferenceEngines) {
  const auto g = nlohmann::json::parse(cadenza::test::read_text_file(
      std::string(CADENZA_SOURCE_DIR) + "/tests/vision/golden/gemma3-tiny.json"));
  cadenza::test::TempDir dir;
  const std::string mmproj = dir.file("mmproj.gguf"), lm = dir.file("lm.gguf");
  ASSERT_TRUE(synth::write_synthetic_mmproj(*synth::find_mmproj_preset(g["mmproj"]["preset"]),
                                            g["mmproj"]["seed"], mmproj).ok());
  synth::SynthOptions o;
  o.shape = *synth::find_preset(g["language_model"]["preset"].get<std::string>());
  o.weight_type = g["language_model"]["type"].get<std::string>();
  o.seed = g["language_model"]["seed"].get<uint64_t>();
  ASSERT_TRUE(synth::write_synthetic_model(o, lm).ok());
  const auto& im = g["images"][0];  // at the encoder's size
  const std::string png = dir.file("image.png");
  write_file(png, testing::encode_png(testing::make_test_image(im["width"], im["height"], im["seed"])));
  auto r = run_cadenza("run -m " + shell_quote(lm) + " --mmproj " + shell_quote(mmproj) + " --image " +
                       shell_quote(png) + " -p " + shell_quote(g["prompt"].get<std::string>()) + " -n " +
                       std::to_string(g["n_predict"].get<int>()) + " -t 2 --no-echo --ignore-eos");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, im["greedy_text"].get<std::string>() + "\n") << r.err;
  EXPECT_NE(r.err.find(fmt::format("16 tokens of 64 (encoder 64x64), prompt {} tokens", im["prompt_tokens"].get<int>())),
            std::string::npos) << r.err;

  synth::MmprojShape narrow = *synth::find_mmproj_preset("gemma3-tiny");
  narrow.n_out = 32;
  const std::string mm32 = dir.file("mm32.gguf");
  ASSERT_TRUE(synth::write_synthetic_mmproj(narrow, 1, mm32).ok());
  auto bad = run_cadenza("run -m " + shell_quote(lm) + " --mmproj " + shell_quote(mm32) + " --image " +
                         shell_quote(png) + " -n 2");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("output width 32 is not the model's embedding width 64"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace cadenza::vision
