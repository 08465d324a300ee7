// `cadenza generate` end to end: the built binary (CADENZA_BIN) runs on a tiny synthesized model
// and a JSONL file with good and bad lines. Checks the output order, the error records (with their
// line numbers), token counts, that greedy and seeded outputs do not depend on batching
// (--sequential, a KV pool too small for all requests), stop token ids, and fatal errors.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "request/validate_request.h"
#include "synth/synth.h"
#include "test_models.h"
#include "tokenizer/tokenizer.h"

namespace cadenza {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::vector<int32_t> random_ids(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % 256);  // byte tokens of the built-in vocab
  return t;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<json> read_jsonl(const fs::path& p) {
  std::vector<json> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "output line is not JSON: " << line;
    out.push_back(j);
  }
  return out;
}

constexpr int kMaxModelLen = 64;
constexpr int kMaxTokens = 6;

// One input line and what the test expects of it.
struct Line {
  std::string text;      // the JSONL line ("" = a blank line)
  bool error = false;    // expects an error record
  int expected_tokens = kMaxTokens;  // completion tokens for good lines (ignore_eos, length)
};

class GenerateTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("cadenza-generate-test-" + std::to_string(::getpid())));
    fs::create_directories(*dir_);
    const synth::SynthOptions opts = test::tiny_model_options(7);
    auto written = synth::write_synthetic_model(opts, model_path().string());
    ASSERT_TRUE(written.ok()) << written.error();
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
    dir_ = nullptr;
  }

  static fs::path model_path() { return *dir_ / "tiny.gguf"; }

  // Writes `lines` as the input file `name`.
  static fs::path write_input(const std::string& name, const std::vector<Line>& lines) {
    fs::path p = *dir_ / name;
    std::ofstream out(p);
    for (const Line& l : lines) out << l.text << '\n';
    return p;
  }

  // Runs `cadenza generate` with the common options plus `extra`; stderr goes to `log`.
  // Returns the exit status.
  static int generate(const fs::path& input, const fs::path& output, const std::string& extra,
                      std::string* log = nullptr) {
    const fs::path log_path = output.string() + ".log";
    const std::string cmd = fmt::format(
        "'{}' generate -m '{}' --input '{}' --output '{}' -t 2 --max-model-len {} "
        "--max-tokens {} --ignore-eos --seed 5 {} 2> '{}'",
        CADENZA_BIN, model_path().string(), input.string(), output.string(), kMaxModelLen,
        kMaxTokens, extra, log_path.string());
    const int status = std::system(cmd.c_str());
    if (log) *log = read_text(log_path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  static fs::path* dir_;
};
fs::path* GenerateTest::dir_ = nullptr;

json ids_json(const std::vector<int32_t>& ids) { return json(ids); }

// The mixed input: good lines of both prompt forms, bad lines of every kind, a blank line.
std::vector<Line> mixed_lines() {
  std::vector<Line> l;
  l.push_back({R"({"id": "text", "prompt": "Hello, world"})"});
  l.push_back({json{{"id", "ids"}, {"prompt_token_ids", ids_json(random_ids(20, 1))}}.dump()});
  l.push_back({""});  // blank: skipped, no record
  l.push_back({"this is not json", true});
  l.push_back({R"({"id": "no-prompt", "max_tokens": 3})", true});
  l.push_back({R"({"id": "bad-type", "prompt": "x", "max_tokens": "8"})", true});
  l.push_back({json{{"id", "too-long"}, {"prompt_token_ids", ids_json(random_ids(70, 2))}}.dump(),
               true});
  l.push_back({R"({"id": "vocab", "prompt_token_ids": [5000]})", true});
  l.push_back({json{{"id", 7}, {"prompt_token_ids", ids_json(random_ids(30, 3))},
                    {"max_tokens", 3}}.dump(),
               false, 3});
  l.push_back(
      {R"({"id": "sampled", "prompt": "Once upon a time", "temperature": 0.9, "seed": 11})"});
  l.push_back({json{{"id", "priority"}, {"prompt_token_ids", ids_json(random_ids(40, 4))},
                    {"priority", -1}}.dump()});
  // Shares a 20-token prefix with "ids" (a prefix-cache candidate).
  std::vector<int32_t> shared = random_ids(20, 1);
  for (int32_t x : random_ids(17, 5)) shared.push_back(x);
  l.push_back({json{{"id", "shared"}, {"prompt_token_ids", ids_json(shared)}}.dump()});
  l.push_back({"[1, 2]", true});
  // The default max_tokens shrinks to what the context leaves: 64 - 60 = 4.
  l.push_back({json{{"id", "clamped"}, {"prompt_token_ids", ids_json(random_ids(60, 6))}}.dump(),
               false, 4});
  // An explicit max_tokens that does not fit is an error.
  l.push_back({json{{"id", "explicit"}, {"prompt_token_ids", ids_json(random_ids(60, 6))},
                    {"max_tokens", 10}}.dump(),
               true});
  l.push_back({R"({"id": "typo", "prompt": "x", "max_token": 3})", true});
  l.push_back({R"({"prompt": "stop strings", "stop": ["zz", "q"], "stop_token_ids": [1]})"});
  l.push_back({R"({"prompt": "penalties", "repetition_penalty": 1.1, "presence_penalty": 0.5, )"
               R"("frequency_penalty": 0.1, "min_tokens": 2, "logit_bias": {"65": 2.5}})"});
  l.push_back({R"({"prompt": "x", "logit_bias": {"abc": 1}})", true});
  l.push_back({R"({"prompt": "x", "repetition_penalty": 0})", true});
  return l;
}

// Fields that must not depend on how requests were batched.
void expect_same_results(const std::vector<json>& a, const std::vector<json>& b,
                         const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(what + ", record " + std::to_string(i));
    EXPECT_EQ(a[i]["id"], b[i]["id"]);
    EXPECT_EQ(a[i].contains("error"), b[i].contains("error"));
    if (a[i].contains("error")) {
      EXPECT_EQ(a[i]["error"], b[i]["error"]);
      continue;
    }
    for (const char* key : {"text", "token_ids", "prompt_tokens", "completion_tokens",
                            "finish_reason"})
      EXPECT_EQ(a[i][key], b[i][key]) << key;
  }
}

TEST_F(GenerateTest, MixedInputGivesOrderedRecordsAndErrorRecords) {
  const std::vector<Line> lines = mixed_lines();
  const fs::path in = write_input("mixed.jsonl", lines);
  const fs::path out = *dir_ / "mixed.out.jsonl";
  std::string log;
  ASSERT_EQ(generate(in, out, "--temp 0", &log), 0) << log;
  const std::vector<json> records = read_jsonl(out);

  auto file = gguf::GgufFile::open(model_path().string());
  ASSERT_TRUE(file.ok()) << file.error();
  auto tokenizer = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error();

  size_t index = 0;
  int errors = 0;
  for (size_t n = 0; n < lines.size(); ++n) {
    const Line& line = lines[n];
    if (line.text.empty()) continue;
    SCOPED_TRACE("input line " + std::to_string(n + 1) + ": " + line.text.substr(0, 80));
    ASSERT_LT(index, records.size());
    const json& r = records[index];
    EXPECT_EQ(r["index"], index);
    json in_line = json::parse(line.text, nullptr, false);
    if (in_line.is_object() && in_line.contains("id")) {
      EXPECT_EQ(r["id"], in_line["id"]);
    } else {
      EXPECT_TRUE(r["id"].is_null());
    }
    if (line.error) {
      ++errors;
      ASSERT_TRUE(r.contains("error")) << r.dump();
      EXPECT_NE(r["error"].get<std::string>().find("line " + std::to_string(n + 1) + ":"),
                std::string::npos)
          << r["error"];
      EXPECT_FALSE(r.contains("token_ids"));
    } else {
      ASSERT_FALSE(r.contains("error")) << r.dump();
      const auto tokens = r["token_ids"].get<std::vector<int32_t>>();
      EXPECT_EQ(r["completion_tokens"], tokens.size());
      const size_t prompt_tokens =
          in_line.contains("prompt_token_ids")
              ? in_line["prompt_token_ids"].size()
              : (*tokenizer)->encode(in_line["prompt"].get<std::string>(), true, true).size();
      EXPECT_EQ(r["prompt_tokens"], prompt_tokens);
      if (!in_line.contains("stop_token_ids")) {
        EXPECT_EQ(tokens.size(), static_cast<size_t>(line.expected_tokens));
        EXPECT_EQ(r["finish_reason"], "length");
      }
      EXPECT_LE(prompt_tokens + tokens.size(), static_cast<size_t>(kMaxModelLen));
      EXPECT_GE(r["ttft_s"].get<double>(), 0.0);
      EXPECT_LE(r["ttft_s"].get<double>(), r["e2e_s"].get<double>());
    }
    ++index;
  }
  EXPECT_EQ(records.size(), index) << "one record per non-blank input line";
  const int good = static_cast<int>(index) - errors;
  EXPECT_NE(log.find(fmt::format("{} requests: {} completed, {} errors", index, good, errors)),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("generate: generated"), std::string::npos) << log;
  EXPECT_NE(log.find("prefix cache hit"), std::string::npos) << log;
}

TEST_F(GenerateTest, SequentialAndBatchedRunsAgree) {
  const fs::path in = write_input("agree.jsonl", mixed_lines());
  const fs::path batched = *dir_ / "agree.batched.jsonl";
  const fs::path sequential = *dir_ / "agree.sequential.jsonl";
  std::string log;
  ASSERT_EQ(generate(in, batched, "--temp 0", &log), 0) << log;
  ASSERT_EQ(generate(in, sequential, "--temp 0 --sequential", &log), 0) << log;
  EXPECT_NE(log.find("sequential mode"), std::string::npos) << log;
  // One at a time, "shared" finds the first 16-token block of "ids" in the prefix cache.
  EXPECT_NE(log.find("prompt tokens (16 of "), std::string::npos) << log;
  expect_same_results(read_jsonl(batched), read_jsonl(sequential), "sequential");
}

TEST_F(GenerateTest, SmallKvPoolAndChunkingDoNotChangeOutputs) {
  std::vector<Line> lines;
  for (uint32_t i = 0; i < 12; ++i)
    lines.push_back({json{{"id", i}, {"prompt_token_ids", ids_json(random_ids(5 + i * 4, 20 + i))},
                          {"max_tokens", 8}}.dump()});
  const fs::path in = write_input("pool.jsonl", lines);
  const fs::path roomy = *dir_ / "pool.roomy.jsonl";
  const fs::path tight = *dir_ / "pool.tight.jsonl";
  std::string log;
  ASSERT_EQ(generate(in, roomy, "--temp 0", &log), 0) << log;
  // Tiny model: 2 layers x 2 KV heads x 16 x (K + V) x 2 bytes (f16 KV, the default) = 256 bytes
  // per token, 4 KiB per 16-token block; 20 KiB = 5 blocks, one 64-token sequence (4 blocks) and a
  // little more, so requests queue and get preempted. A small step budget chunks the prompts.
  ASSERT_EQ(generate(in, tight,
                     "--temp 0 --kv-cache-memory 20KiB --max-num-batched-tokens 16 "
                     "--max-num-seqs 4 --no-prefix-caching",
                     &log),
            0)
      << log;
  EXPECT_NE(log.find("KV cache 5 blocks x 16 tokens"), std::string::npos) << log;
  EXPECT_NE(log.find("1 sequences of the maximum length 64 fit"), std::string::npos) << log;
  const std::vector<json> a = read_jsonl(roomy);
  expect_same_results(a, read_jsonl(tight), "tight pool");
  ASSERT_EQ(a.size(), lines.size());
  for (const json& r : a) EXPECT_EQ(r["completion_tokens"], 8) << r.dump();
}

TEST_F(GenerateTest, KvDiskTierServesTheNextRunsPrefixes) {
  // 40-token prompts: 2 full blocks each are cacheable. The first run computes them and writes
  // its cache to the disk tier when it ends; the second run, a new process, reads them back.
  std::vector<Line> lines;
  for (uint32_t i = 0; i < 3; ++i)
    lines.push_back({json{{"id", i}, {"prompt_token_ids", ids_json(random_ids(40, 70 + i))},
                          {"max_tokens", 4}}.dump()});
  const fs::path in = write_input("tiers.jsonl", lines);
  const fs::path first = *dir_ / "tiers.1.jsonl";
  const fs::path second = *dir_ / "tiers.2.jsonl";
  const std::string tiers = "--temp 0 --kv-disk-dir " + (*dir_ / "kv").string() + " --kv-disk-size 1MiB";
  std::string log;
  ASSERT_EQ(generate(in, first, tiers, &log), 0) << log;
  ASSERT_EQ(generate(in, second, tiers + " --kv-offload-memory 64KiB", &log), 0) << log;
  const std::vector<json> a = read_jsonl(first), b = read_jsonl(second);
  expect_same_results(a, b, "second run from the disk tier");
  ASSERT_EQ(b.size(), lines.size());
  for (const json& r : a) EXPECT_EQ(r["cached_prompt_tokens"], 0) << r.dump();
  for (const json& r : b) EXPECT_EQ(r["cached_prompt_tokens"], 32) << r.dump();
  EXPECT_NE(generate(in, second, "--kv-disk-dir " + (*dir_ / "kv").string(), &log), 0);
  EXPECT_NE(log.find("--kv-disk-dir and --kv-disk-size go together"), std::string::npos) << log;
  EXPECT_NE(generate(in, second, "--kv-offload-memory 12XB", &log), 0);
  EXPECT_NE(log.find("unknown unit"), std::string::npos) << log;
}

TEST_F(GenerateTest, SlidingWindowLayersTakeTheirWindowGroupOutOfTheKvBudget) {
  // gemma3-small: 5 layers with a 16-position window, 1 global; 8 KiB per layer and block (f16).
  synth::SynthOptions opts;
  opts.shape = *synth::find_preset("gemma3-small");
  opts.shape.n_vocab = 300;
  opts.weight_type = "f32";
  const fs::path model = *dir_ / "gemma3.gguf";
  ASSERT_TRUE(synth::write_synthetic_model(opts, model.string()).ok());
  std::vector<Line> lines;
  for (uint32_t i = 0; i < 3; ++i)
    lines.push_back({json{{"id", i}, {"prompt_token_ids", ids_json(random_ids(100 + 30 * i, 90 + i))},
                          {"max_tokens", 6}}.dump()});
  const fs::path in = write_input("window.jsonl", lines);
  auto run = [&](const std::string& name, const std::string& extra, std::string* log) {
    const fs::path out = *dir_ / name;
    const std::string cmd = fmt::format(
        "'{}' generate -m '{}' --input '{}' --output '{}' -t 2 --max-model-len 256 --temp 0 "
        "--max-num-seqs 2 --max-num-batched-tokens 32 --kv-cache-memory 1MiB {} 2> '{}.log'",
        CADENZA_BIN, model.string(), in.string(), out.string(), extra, out.string());
    const int status = std::system(cmd.c_str());
    *log = read_text(out.string() + ".log");
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << *log;
    return read_jsonl(out);
  };
  std::string full_log, window_log;
  const std::vector<json> full = run("full.out.jsonl", "--no-sliding-window-kv", &full_log);
  const std::vector<json> window = run("window.out.jsonl", "", &window_log);
  // Full-context KV: 1 MiB / (6 layers x 8 KiB) = 21 blocks. Window group: 2 sequences x
  // (ceil(15 / 16) + 2) + 32 / 16 = 8 window blocks x 5 layers x 8 KiB come out first, the rest
  // is 704 KiB / 8 KiB = 88 blocks of the global layer.
  EXPECT_NE(full_log.find("KV cache 21 blocks"), std::string::npos) << full_log;
  EXPECT_NE(window_log.find("KV cache 88 blocks"), std::string::npos) << window_log;
  EXPECT_NE(window_log.find("8 window blocks beside 88 main blocks"), std::string::npos) << window_log;
  expect_same_results(full, window, "window group");
  ASSERT_EQ(full.size(), 3u);
  std::string bad_log;
  const fs::path out = *dir_ / "bad.jsonl";
  const std::string cmd = fmt::format("'{}' generate -m '{}' --input '{}' --output '{}' "
                                      "--state-snapshot-memory 12XB 2> '{}.log'",
                                      CADENZA_BIN, model.string(), in.string(), out.string(), out.string());
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(read_text(out.string() + ".log").find("--state-snapshot-memory"), std::string::npos);
}

TEST_F(GenerateTest, StopTokenIdsEndGeneration) {
  const std::vector<int32_t> prompt = random_ids(20, 9);
  const fs::path in = write_input(
      "stop.jsonl", {{json{{"prompt_token_ids", ids_json(prompt)}, {"max_tokens", 6}}.dump()}});
  const fs::path out = *dir_ / "stop.out.jsonl";
  std::string log;
  ASSERT_EQ(generate(in, out, "--temp 0", &log), 0) << log;
  const auto full = read_jsonl(out).at(0)["token_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(full.size(), 6u);
  // Stop on the third token: generation ends at its first occurrence, which is kept.
  const int32_t stop = full[2];
  size_t end = 0;
  while (full[end] != stop) ++end;
  const fs::path in2 = write_input(
      "stop2.jsonl", {{json{{"prompt_token_ids", ids_json(prompt)}, {"max_tokens", 6},
                            {"stop_token_ids", {stop}}}.dump()}});
  ASSERT_EQ(generate(in2, out, "--temp 0", &log), 0) << log;
  const json r = read_jsonl(out).at(0);
  EXPECT_EQ(r["finish_reason"], "stop");
  EXPECT_EQ(r["token_ids"].get<std::vector<int32_t>>(),
            std::vector<int32_t>(full.begin(), full.begin() + static_cast<long>(end) + 1));
}

TEST_F(GenerateTest, LogitBiasSteersGreedyOutput) {
  // Byte token 65 is "A" in the built-in vocabulary; the largest bias (100, OpenAI's range, as the
  // server's) makes it the argmax every time.
  const fs::path in = write_input(
      "bias.jsonl", {{R"({"prompt_token_ids": [10, 20, 30], "logit_bias": {"65": 100}})"}});
  const fs::path out = *dir_ / "bias.out.jsonl";
  std::string log;
  ASSERT_EQ(generate(in, out, "--temp 0", &log), 0) << log;
  const json r = read_jsonl(out).at(0);
  EXPECT_EQ(r["token_ids"], json(std::vector<int32_t>(kMaxTokens, 65))) << r.dump();
  EXPECT_EQ(r["text"], std::string(kMaxTokens, 'A'));
}

// A line the engine cannot run is validate_request's error (the same function as the server's
// 400s and EngineCore's), with the line number in front.
TEST_F(GenerateTest, RejectionsAreValidateRequestsMessages) {
  const std::vector<int32_t> long_prompt = random_ids(60, 9);
  const fs::path in = write_input(
      "rules.jsonl",
      {{R"({"prompt_token_ids": [1, 2], "top_p": 0})"},
       {R"({"prompt_token_ids": [1, 2], "stop": ["ok", ""]})"},
       {json{{"prompt_token_ids", ids_json(long_prompt)}, {"max_tokens", 10}}.dump()}});
  const fs::path out = *dir_ / "rules.out.jsonl";
  std::string log;
  ASSERT_EQ(generate(in, out, "", &log), 0) << log;
  const std::vector<json> records = read_jsonl(out);
  ASSERT_EQ(records.size(), 3u);
  const RequestLimits limits{std::numeric_limits<int32_t>::max(), kMaxModelLen};
  SamplingParams top_p;  // with --max-tokens as generate() passes it
  top_p.max_tokens = kMaxTokens;
  top_p.top_p = 0;
  SamplingParams stop;
  stop.max_tokens = kMaxTokens;
  stop.stop = {"ok", ""};
  SamplingParams longer;
  longer.max_tokens = 10;
  const std::vector<int32_t> two = {1, 2};
  const std::optional<ParamError> expected[] = {validate_request(two, top_p, limits),
                                                validate_request(two, stop, limits),
                                                validate_request(long_prompt, longer, limits)};
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(expected[i]);
    EXPECT_EQ(records[i]["error"], fmt::format("line {}: request: {}", i + 1, expected[i]->message));
  }
}

TEST_F(GenerateTest, RunLevelProblemsAreFatal) {
  const fs::path in = write_input("fatal.jsonl", {{R"({"prompt": "x"})"}});
  const fs::path out = *dir_ / "fatal.out.jsonl";
  std::string log;
  EXPECT_NE(generate(*dir_ / "missing.jsonl", out, "", &log), 0);
  EXPECT_NE(log.find("cannot open the input"), std::string::npos) << log;
  EXPECT_NE(generate(in, out, "--kv-cache-memory 12XB", &log), 0);
  EXPECT_NE(log.find("unknown unit"), std::string::npos) << log;
  EXPECT_NE(generate(in, out, "--kv-cache-memory 100", &log), 0);
  EXPECT_NE(log.find("smaller than one KV block"), std::string::npos) << log;
  // 8 KiB holds two blocks, less than one 64-token sequence: the engine refuses.
  EXPECT_NE(generate(in, out, "--kv-cache-memory 8KiB", &log), 0);
  EXPECT_NE(log.find("cannot hold one"), std::string::npos) << log;
  EXPECT_EQ(generate(in, out, "--kv-cache-memory 0.5MiB", &log), 0) << log;
  EXPECT_NE(log.find("KV cache 128 blocks"), std::string::npos) << log;  // f16: 4 KiB blocks
  EXPECT_EQ(generate(in, out, "--kv-cache-memory 0.5MiB --kv-cache-type f32", &log), 0) << log;
  EXPECT_NE(log.find("KV cache 64 blocks"), std::string::npos) << log;
  EXPECT_NE(log.find("f32)"), std::string::npos) << log;
  EXPECT_NE(generate(in, out, "--kv-cache-type q4", &log), 0);
  EXPECT_NE(log.find("'q4' is not a KV cache type"), std::string::npos) << log;
  // The tiny model's 16-wide heads cannot hold Q8_0 blocks of 32.
  EXPECT_NE(generate(in, out, "--kv-cache-type q8", &log), 0);
  EXPECT_NE(log.find("divisible by 32"), std::string::npos) << log;
}

}  // namespace
}  // namespace cadenza
