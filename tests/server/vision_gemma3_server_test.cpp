// `serve --mmproj` with a Gemma 3 projector (synthesized gemma3-tiny language model and mmproj):
// the chat answer equals `cadenza run --image`'s greedy text on the same inputs while prompt
// chunks would otherwise end inside the image (its 16 tokens attend to each other both ways, so
// the engine computes them in one step), a repeat reuses cached blocks that end inside the image
// with the same answer, and a step budget too small for an image is refused at startup.
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_process.h"
#include "image_encode.h"
#include "running_server.h"
#include "synth/mmproj.h"
#include "synth/presets.h"
#include "synth/synth.h"
#include "temp_dir.h"
#include "test_client.h"

namespace cadenza::server::testing {
namespace {

using json = nlohmann::json;

// Gemma 3's turn markers around each message (the real template also maps "assistant" to
// "model"); the image's <start_of_image> / <end_of_image> come from the projector. (Rendering
// drops the template's trailing newline, as Jinja does.)
constexpr const char* kGemmaTemplate =
    "{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}<end_of_turn>\n{% endfor %}"
    "<start_of_turn>model\n";

std::string base64(const std::vector<uint8_t>& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t n = (uint32_t{bytes[i]} << 16) | (i + 1 < bytes.size() ? uint32_t{bytes[i + 1]} << 8 : 0) |
                       (i + 2 < bytes.size() ? uint32_t{bytes[i + 2]} : 0);
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=');
    out.push_back(i + 2 < bytes.size() ? kAlphabet[n & 63] : '=');
  }
  return out;
}

class Gemma3ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new cadenza::test::TempDir();
    mmproj_ = dir_->file("mm.gguf");
    lm_ = dir_->file("lm.gguf");
    ASSERT_TRUE(synth::write_synthetic_mmproj(*synth::find_mmproj_preset("gemma3-tiny"), 7, mmproj_).ok());
    synth::SynthOptions o;
    o.shape = *synth::find_preset("gemma3-tiny");
    o.weight_type = "f16";
    o.seed = 11;
    ASSERT_TRUE(synth::write_synthetic_model(o, lm_).ok());
    png_ = vision::testing::encode_png(vision::testing::make_test_image(64, 64, 1));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static Options options() {
    Options o;
    o.model_path = lm_;
    o.chat_template = kGemmaTemplate;
    // 24 tokens a step beside at most 4 decodes: the image (16 tokens at positions 20..35, after
    // BOS, <start_of_turn>, "user\n", "look at this" and <start_of_image>, one byte a token)
    // would be cut by a plain 24-token chunk.
    o.max_num_batched_tokens = 24;
    o.max_num_seqs = 4;
    o.vision.mmproj = mmproj_;
    o.vision.threads = 1;
    return o;
  }
  static inline cadenza::test::TempDir* dir_ = nullptr;
  static inline std::string mmproj_, lm_;
  static inline std::vector<uint8_t> png_;
};

std::string answer_bytes(const json& body) {
  std::string out;
  for (const json& t : body["choices"][0]["logprobs"]["content"])
    for (const json& b : t["bytes"]) out.push_back(static_cast<char>(b.get<int>()));
  return out;
}

TEST_F(Gemma3ServerTest, AnswersLikeCadenzaRunWithTheImageInOneStep) {
  auto s = start(options());
  ASSERT_NE(s, nullptr);
  json req = {{"messages", json::array({{{"role", "user"}, {"content", json::array({
                  {{"type", "text"}, {"text", "look at this"}},
                  {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64," + base64(png_)}}}}})}}})},
              {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}, {"logprobs", true}};
  const Response first = post(s->port, "/v1/chat/completions", req);
  ASSERT_EQ(first.status, 200) << first.body;
  const json a = first.json();
  const int prompt_tokens = a["usage"]["prompt_tokens"];
  ASSERT_EQ(prompt_tokens, 45);

  const std::string png = dir_->file("a.png");
  std::ofstream(png, std::ios::binary).write(reinterpret_cast<const char*>(png_.data()),
                                             static_cast<std::streamsize>(png_.size()));
  auto run = cadenza::test::run_cadenza(
      "run -m " + cadenza::test::shell_quote(lm_) + " --mmproj " + cadenza::test::shell_quote(mmproj_) +
      " --image " + cadenza::test::shell_quote(png) + " -p " +
      cadenza::test::shell_quote("<start_of_turn>user\nlook at this<image><end_of_turn>\n<start_of_turn>model") +
      " -n 8 --ignore-eos --no-echo -t 1");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(answer_bytes(a) + "\n", run.out);
  EXPECT_NE(run.err.find(fmt::format("prompt {} tokens", prompt_tokens)), std::string::npos) << run.err;

  // Again: the full blocks (16 tokens) come from the cache: 32 tokens, ending inside the image
  // (20..35), whose rest is computed with its cached part. Same answer.
  const Response again = post(s->port, "/v1/chat/completions", req);
  ASSERT_EQ(again.status, 200) << again.body;
  const json b = again.json();
  EXPECT_EQ(b["usage"]["prompt_tokens_details"]["cached_tokens"], (prompt_tokens - 1) / 16 * 16);
  EXPECT_EQ(answer_bytes(b), answer_bytes(a));
}

TEST_F(Gemma3ServerTest, AStepBudgetTooSmallForAnImageIsRefused) {
  Options o = options();
  o.max_num_batched_tokens = 16;  // 16 - 4 + 1 = 13 < 16 image tokens
  auto s = build(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("an image's 16 tokens are computed in one step"), std::string::npos) << s.error();
}

}  // namespace
}  // namespace cadenza::server::testing
