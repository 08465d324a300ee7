// `cadenza run --temp 0` on the shared F16 models prints exactly the reference's greedy
// continuation (../shared/golden/*.json greedy_text, the continuation without the prompt): the
// whole path from the command line through EngineCore and the streaming detokenizer to stdout.
// SentencePiece models: the first generated token keeps its leading space (" of the", the
// reference's, not "of the"). F16 models only: their greedy ids must equal the reference's
// (tests/model/golden_test.cpp); quantized ones may differ in a token.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_process.h"
#include "gguf/gguf.h"
#include "shared_data.h"

namespace cadenza {
namespace {

namespace fs = std::filesystem;
using test::run_cadenza;
using test::shell_quote;

std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

TEST(RunGolden, GreedyTextOfEveryF16ModelIsTheReferences) {
  CADENZA_REQUIRE_SHARED();
  std::vector<fs::path> goldens;
  for (const auto& e : fs::directory_iterator(test::shared_dir() / "golden"))
    if (e.path().stem().string().ends_with("-f16")) goldens.push_back(e.path());
  ASSERT_FALSE(goldens.empty()) << "no F16 golden file in " << test::shared_dir() / "golden";
  int checked = 0, spm_with_leading_space = 0;
  for (const fs::path& golden : goldens) {
    const auto j = nlohmann::json::parse(test::read_text_file(golden));
    const fs::path model = test::shared_dir() / j["model"].get<std::string>();
    ASSERT_TRUE(fs::exists(model)) << model;
    auto file = gguf::GgufFile::open(model.string());
    ASSERT_TRUE(file.ok()) << file.error();
    auto vocab = (*file)->get_string_or("tokenizer.ggml.model", "");
    const bool sentencepiece = vocab && *vocab == "llama";
    for (const auto& c : j["cases"]) {
      if (!c.contains("greedy")) continue;  // cases with logits only
      // run always adds BOS/EOS as the file's metadata says.
      ASSERT_TRUE(c["add_special"].get<bool>()) << golden;
      const std::string prompt = c["prompt"].get<std::string>();
      const std::string expected = c["greedy_text"].get<std::string>();
      const size_t n = c["greedy"].size();
      const test::CliRun r =
          run_cadenza("run -m " + shell_quote(model.string()) + " -p " + shell_quote(prompt) +
                      " --temp 0 --ignore-eos --no-echo -t 2 -n " + std::to_string(n));
      ASSERT_EQ(r.status, 0) << r.err;
      EXPECT_EQ(escaped(r.out), escaped(expected + "\n"))
          << golden.filename() << " prompt '" << escaped(prompt) << "'";
      ++checked;
      spm_with_leading_space += sentencepiece && !expected.empty() && expected[0] == ' ';
    }
  }
  EXPECT_GT(checked, 0);
  // The space bug shows only where a SentencePiece continuation starts with a space: some must.
  EXPECT_GT(spm_with_leading_space, 0);
}

}  // namespace
}  // namespace cadenza
