// Golden tests against ../shared: the tokenizer test vectors of every vocabulary in
// ../shared/tokenizer (produced by the model authors' tokenizers) and the prompt tokens of every
// model in ../shared/models (produced by llama.cpp).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shared_data.h"
#include "tokenizer/vector_files.h"
#include "tokenizer/tokenizer.h"

namespace cadenza {
namespace {

namespace fs = std::filesystem;
using test::escaped;
using test::ids_str;
using test::read_file;

// A GGUF file with its tokenizer, loaded once per path for the whole test binary.
struct Loaded {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Tokenizer> tokenizer;
};

const Loaded& load(const fs::path& path) {
  static std::map<std::string, Loaded> cache;
  auto it = cache.find(path.string());
  if (it != cache.end()) return it->second;
  Loaded l;
  auto f = gguf::GgufFile::open(path.string());
  EXPECT_TRUE(f.ok()) << (f ? "" : f.error());
  if (f) {
    l.file = std::move(*f);
    auto t = Tokenizer::from_gguf(*l.file);
    EXPECT_TRUE(t.ok()) << (t ? "" : t.error());
    if (t) l.tokenizer = std::move(*t);
  }
  return cache.emplace(path.string(), std::move(l)).first->second;
}

// Names known when the suite was written, plus whatever else ../shared/tokenizer holds, so a new
// vocabulary dropped there is tested (and fails until supported) without editing this file.
std::vector<std::string> vocab_names() {
  std::vector<std::string> names = {"deepseek-llm", "falcon", "gpt-2", "llama-bpe",
                                    "llama-spm",    "phi-3",  "qwen2", "starcoder"};
  const fs::path dir = test::shared_dir() / "tokenizer";
  std::error_code ec;
  if (!test::shared_dir().empty() && fs::is_directory(dir, ec)) {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string f = e.path().filename().string();
      const std::string prefix = "ggml-vocab-", suffix = ".gguf";
      if (f.size() > prefix.size() + suffix.size() && f.rfind(prefix, 0) == 0 &&
          f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0) {
        names.push_back(f.substr(prefix.size(), f.size() - prefix.size() - suffix.size()));
      }
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::string param_name(const testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

class VocabVectors : public testing::TestWithParam<std::string> {};

// Every vector must tokenize exactly (add_special = false, parse_special = false), and decoding
// the expected ids must give back the text exactly. The decode half holds for every vocabulary:
// SentencePiece decode removes exactly the one space encode prepends (also for texts that begin
// with spaces, e.g. " Hello" -> "▁▁Hello" -> "  Hello" -> " Hello"), byte fallback covers every
// byte, and byte-level BPE is lossless.
TEST_P(VocabVectors, TokenizeAndDecodeExactly) {
  CADENZA_REQUIRE_SHARED();
  const fs::path base = test::shared_dir() / "tokenizer" / ("ggml-vocab-" + GetParam() + ".gguf");
  ASSERT_TRUE(fs::exists(base)) << base;
  const Loaded& l = load(base);
  ASSERT_NE(l.tokenizer, nullptr);
  const auto texts = test::read_vector_texts(base.string() + ".inp");
  const auto expected = test::read_vector_ids(base.string() + ".out");
  ASSERT_EQ(texts.size(), expected.size()) << "malformed .inp/.out pair";
  ASSERT_FALSE(texts.empty());
  int mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto got = l.tokenizer->encode(texts[i], false, false);
    if (got != expected[i]) {
      ++mismatches;
      ADD_FAILURE() << GetParam() << " text #" << i << " '" << escaped(texts[i]) << "'\n  expected "
                    << ids_str(expected[i]) << "\n  got      " << ids_str(got);
    }
    EXPECT_EQ(l.tokenizer->decode(expected[i]), texts[i]) << GetParam() << " decode of text #" << i;
  }
  std::printf("[ vectors  ] %s: %zu texts, %d mismatches\n", GetParam().c_str(), texts.size(),
              mismatches);
}

INSTANTIATE_TEST_SUITE_P(Shared, VocabVectors, testing::ValuesIn(vocab_names()), param_name);

std::vector<std::string> model_names() {
  std::vector<std::string> names = {"licenses-tiny-f16",    "small-llama-spm-Q4_0",
                                    "small-llama-spm-Q4_K_M", "small-llama-spm-Q8_0",
                                    "tiny-llama-spm-f16",   "tiny-llama3-f16",
                                    "tiny-mixtral-f16",     "tiny-qwen2-f16",
                                    "tiny-qwen3-f16",       "tiny-qwen3moe-f16"};
  const fs::path dir = test::shared_dir() / "models";
  std::error_code ec;
  if (!test::shared_dir().empty() && fs::is_directory(dir, ec)) {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".gguf") names.push_back(e.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

class GoldenPrompts : public testing::TestWithParam<std::string> {};

// The models' prompts tokenize to exactly the reference's ids (with BOS/EOS as add_special and
// the file's metadata say); decoding them without special tokens gives the prompt back.
TEST_P(GoldenPrompts, PromptTokensMatchReference) {
  CADENZA_REQUIRE_SHARED();
  const fs::path model = test::shared_dir() / "models" / (GetParam() + ".gguf");
  const fs::path golden = test::shared_dir() / "golden" / (GetParam() + ".json");
  ASSERT_TRUE(fs::exists(model)) << model;
  ASSERT_TRUE(fs::exists(golden)) << golden << " (every model needs its golden file)";
  const Loaded& l = load(model);
  ASSERT_NE(l.tokenizer, nullptr);
  const auto j = nlohmann::json::parse(read_file(golden));
  ASSERT_TRUE(j.contains("cases"));
  for (const auto& c : j["cases"]) {
    const std::string prompt = c["prompt"].get<std::string>();
    const bool add_special = c["add_special"].get<bool>();
    const auto expected = c["tokens"].get<std::vector<int32_t>>();
    // The prompts contain no special-token text, so parse_special does not matter; true is what
    // a server passes for templated prompts.
    const auto got = l.tokenizer->encode(prompt, add_special, true);
    EXPECT_EQ(got, expected) << GetParam() << " prompt '" << escaped(prompt) << "'\n  expected "
                             << ids_str(expected) << "\n  got      " << ids_str(got);
    if (c.contains("n_vocab")) {
      EXPECT_EQ(l.tokenizer->n_vocab(), c["n_vocab"].get<int32_t>());
    }
    std::vector<int32_t> body = expected;
    if (add_special && l.tokenizer->add_bos() && !body.empty()) body.erase(body.begin());
    EXPECT_EQ(l.tokenizer->decode(body), prompt) << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, GoldenPrompts, testing::ValuesIn(model_names()), param_name);

class GoldenContinuations : public testing::TestWithParam<std::string> {};

// The reference's greedy continuations, streamed one token at a time after their prompt as the
// engine streams generated tokens, give exactly the reference's greedy_text (the continuation
// only, without the prompt). SentencePiece vocabularies: the first generated token keeps its
// leading space (` of the`, not `of the`).
TEST_P(GoldenContinuations, StreamedAfterThePromptMatchReferenceText) {
  CADENZA_REQUIRE_SHARED();
  const fs::path model = test::shared_dir() / "models" / (GetParam() + ".gguf");
  const fs::path golden = test::shared_dir() / "golden" / (GetParam() + ".json");
  ASSERT_TRUE(fs::exists(model)) << model;
  ASSERT_TRUE(fs::exists(golden)) << golden << " (every model needs its golden file)";
  const Loaded& l = load(model);
  ASSERT_NE(l.tokenizer, nullptr);
  const auto j = nlohmann::json::parse(read_file(golden));
  int checked = 0;
  for (const auto& c : j["cases"]) {
    if (!c.contains("greedy")) continue;  // cases with logits only
    ASSERT_TRUE(c.contains("greedy_text")) << GetParam();
    const auto prompt =
        l.tokenizer->encode(c["prompt"].get<std::string>(), c["add_special"].get<bool>(), true);
    const auto greedy = c["greedy"].get<std::vector<int32_t>>();
    StreamingDetokenizer d(*l.tokenizer, prompt);
    std::string text;
    for (int32_t id : greedy) text += d.push(id);
    text += d.finish();
    EXPECT_EQ(escaped(text), escaped(c["greedy_text"].get<std::string>()))
        << GetParam() << " prompt '" << escaped(c["prompt"].get<std::string>()) << "' greedy "
        << ids_str(greedy);
    ++checked;
  }
  EXPECT_GT(checked, 0) << GetParam() << ": no case with a greedy continuation";
}

INSTANTIATE_TEST_SUITE_P(Shared, GoldenContinuations, testing::ValuesIn(model_names()),
                         param_name);

// Chat markup in real vocabularies: with parse_special the control tokens are single ids and the
// text between them tokenizes as it would alone; without it the markup is ordinary text. The
// chat end-of-turn tokens are end-of-generation although the metadata declares only EOS.
TEST(SharedSpecialTokens, ChatMarkupAndEndOfGeneration) {
  CADENZA_REQUIRE_SHARED();
  auto vocab = [](const char* name) -> const Tokenizer& {
    return *load(test::shared_dir() / "tokenizer" / (std::string("ggml-vocab-") + name + ".gguf"))
                .tokenizer;
  };
  auto concat = [](std::initializer_list<std::vector<int32_t>> parts) {
    std::vector<int32_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  {
    const Tokenizer& t = vocab("qwen2");
    const auto got = t.encode("<|im_start|>user\nHi<|im_end|>\n", false, true);
    EXPECT_EQ(got, concat({{151644}, t.encode("user\nHi", false, false), {151645},
                           t.encode("\n", false, false)}));
    EXPECT_NE(t.encode("<|im_start|>", false, false), std::vector<int32_t>{151644});
    EXPECT_TRUE(t.is_end_of_generation(151643));  // EOS
    EXPECT_TRUE(t.is_end_of_generation(151645));  // <|im_end|>
    EXPECT_FALSE(t.is_end_of_generation(151644));
    EXPECT_EQ(t.decode(got), "user\nHi\n");
    EXPECT_EQ(t.decode(got, true), "<|im_start|>user\nHi<|im_end|>\n");
  }
  {
    const Tokenizer& t = vocab("llama-bpe");
    const auto got = t.encode("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", true, true);
    EXPECT_EQ(got, concat({{128000, 128006}, t.encode("user", false, false), {128007},
                           t.encode("\n\nHi", false, false), {128009}}));
    EXPECT_TRUE(t.is_end_of_generation(128001));  // EOS <|end_of_text|>
    EXPECT_TRUE(t.is_end_of_generation(128009));  // <|eot_id|>
    EXPECT_FALSE(t.is_end_of_generation(128008));  // a reserved token in Llama 3.0
    EXPECT_FALSE(t.is_end_of_generation(128000));
  }
  {
    // SentencePiece: a space is prepended to the text after each special token; Phi-3's chat
    // tokens also swallow the whitespace after them.
    const Tokenizer& t = vocab("phi-3");
    const auto got = t.encode("<|user|>\nHi<|end|>\n<|assistant|>", true, true);
    EXPECT_EQ(got, concat({{1, 32010}, t.encode("Hi", false, false), {32007, 32001}}));
    EXPECT_TRUE(t.is_end_of_generation(32000));  // EOS <|endoftext|>
    EXPECT_TRUE(t.is_end_of_generation(32007));  // <|end|>
  }
}

// 300 KB of held-out text encodes and decodes losslessly with each vocabulary; the time is printed
// for the log. Speed itself is measured by bench/bench_tokenizer.cpp: a wall-clock bound here
// failed on loaded CI machines without saying anything about the code.
TEST(TokenizerHeldout, EncodesHeldoutTextLosslessly) {
  CADENZA_REQUIRE_SHARED();
  const std::string text = read_file(test::shared_dir() / "text" / "heldout-licenses.txt");
  ASSERT_GT(text.size(), 100000u);
  for (const char* name : {"llama-spm", "llama-bpe", "qwen2", "deepseek-llm"}) {
    const fs::path p = test::shared_dir() / "tokenizer" / (std::string("ggml-vocab-") + name + ".gguf");
    const Loaded& l = load(p);
    ASSERT_NE(l.tokenizer, nullptr);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = l.tokenizer->encode(text, false, false);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ speed    ] %-12s %zu bytes -> %zu tokens in %.1f ms (not asserted)\n", name,
                text.size(), ids.size(), secs * 1e3);
    EXPECT_GT(ids.size(), text.size() / 8) << name;  // far fewer tokens would mean lost text
    EXPECT_EQ(l.tokenizer->decode(ids), text) << name;
  }
}

}  // namespace
}  // namespace cadenza
