// The subcommands as a user runs them: the built binary (CADENZA_BIN) on a tiny synthesized model
// (no ../shared needed). `run` (stdout is exactly the prompt and the text, the speed report on
// stderr, stops, the context limit), `bench --json` (parses, has its fields), `info` and
// `info --json`, `gateway --check` (the example configuration, a bad one, a missing one) and
// `gateway --hash-key`. Every command's stdout carries its output only: no log line.
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_process.h"
#include "synth/synth.h"
#include "test_models.h"

namespace cadenza {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::run_cadenza;
using test::shell_quote;

// An spdlog line ("[2026-12-01 19:33:32.108] [info] ...") anywhere in `s`.
bool has_log_line(const std::string& s) {
  static const std::regex log(R"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+\] \[)");
  return std::regex_search(s, log);
}

class CommandsTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir("cadenza-cli-commands");
    // q8_0 weights: the CPU backend logs while it repacks them during the first forward pass,
    // that is in the middle of `run`'s output (where the log line used to land on stdout).
    synth::SynthOptions opts = test::tiny_model_options(11);
    opts.weight_type = "q8_0";
    auto written = synth::write_synthetic_model(opts, model().string());
    ASSERT_TRUE(written.ok()) << written.error();
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path model() { return dir_->path() / "tiny-q8_0.gguf"; }
  static std::string m() { return "-m " + shell_quote(model().string()); }

  static test::TempDir* dir_;
};
test::TempDir* CommandsTest::dir_ = nullptr;

TEST_F(CommandsTest, RunPrintsExactlyThePromptAndTheTextOnStdout) {
  const std::string common = m() + " --temp 0 -n 24 --ignore-eos -t 2";
  const test::CliRun echo = run_cadenza("run " + common + " -p Hello");
  ASSERT_EQ(echo.status, 0) << echo.err;
  const test::CliRun bare = run_cadenza("run " + common + " -p Hello --no-echo");
  ASSERT_EQ(bare.status, 0) << bare.err;
  EXPECT_FALSE(has_log_line(echo.out)) << echo.out;
  EXPECT_FALSE(has_log_line(bare.out)) << bare.out;
  // The generated text alone, ended by one newline; with echo, the prompt before it.
  ASSERT_GT(bare.out.size(), 1u);
  EXPECT_EQ(bare.out.back(), '\n');
  EXPECT_EQ(echo.out, "Hello" + bare.out);
  // The logs and the speed report went to stderr.
  EXPECT_TRUE(has_log_line(echo.err)) << echo.err;
  EXPECT_NE(echo.err.find("run: stopped: length"), std::string::npos) << echo.err;
  EXPECT_TRUE(std::regex_search(echo.err, std::regex(R"(run: prompt .* tokens/s)"))) << echo.err;
  EXPECT_TRUE(std::regex_search(echo.err, std::regex(R"(run: generate.* for +23 tokens = )")))
      << echo.err;
  // Greedy is deterministic.
  EXPECT_EQ(run_cadenza("run " + common + " -p Hello --no-echo").out, bare.out);
}

TEST_F(CommandsTest, RunStopStringCutsTheText) {
  const std::string common = m() + " --temp 0 -n 64 --ignore-eos -t 2 -p Hello --no-echo";
  const test::CliRun full = run_cadenza("run " + common);
  ASSERT_EQ(full.status, 0) << full.err;
  // A printable ASCII character after the start of the text: the stop string.
  size_t at = std::string::npos;
  for (size_t i = 1; i + 1 < full.out.size() && at == std::string::npos; ++i)
    if (full.out[i] > ' ' && full.out[i] < 0x7f && full.out[i] != '\'') at = i;
  ASSERT_NE(at, std::string::npos) << "no ASCII character in the text to stop at: " << full.out;
  const std::string stop(1, full.out[at]);
  const test::CliRun cut = run_cadenza("run " + common + " --stop " + shell_quote(stop));
  ASSERT_EQ(cut.status, 0) << cut.err;
  EXPECT_EQ(cut.out, full.out.substr(0, full.out.find(stop)) + "\n");
  EXPECT_NE(cut.err.find("run: stopped: stop string"), std::string::npos) << cut.err;
}

// --speculative-method ngram: the same greedy text, a report line, start-up errors for bad
// values; bench --prompt-file measures through the engine with identical outputs.
TEST_F(CommandsTest, SpeculativeOptionsKeepTheOutput) {
  const std::string common =
      m() + " --temp 0 -n 48 --ignore-eos -t 2 --no-echo -p " + shell_quote("abcabcabcabcabc");
  const test::CliRun plain = run_cadenza("run " + common);
  ASSERT_EQ(plain.status, 0) << plain.err;
  const test::CliRun spec =
      run_cadenza("run " + common + " --speculative-method ngram --num-speculative-tokens 3 --ngram-max 2");
  ASSERT_EQ(spec.status, 0) << spec.err;
  EXPECT_EQ(spec.out, plain.out);
  EXPECT_NE(spec.err.find("run: speculative: "), std::string::npos) << spec.err;
  EXPECT_EQ(plain.err.find("speculative"), std::string::npos) << plain.err;

  const test::CliRun bad_k = run_cadenza("run " + common + " --speculative-method ngram --num-speculative-tokens 0");
  EXPECT_EQ(bad_k.status, 1);
  EXPECT_NE(bad_k.err.find("num_speculative_tokens 0 must be in [1, 32]"), std::string::npos) << bad_k.err;
  const test::CliRun bad_method = run_cadenza("run " + common + " --speculative-method eagle");
  EXPECT_NE(bad_method.status, 0);
  EXPECT_NE(bad_method.err.find("expected none, ngram or draft"), std::string::npos) << bad_method.err;

  const fs::path prompt = dir_->path() / "prompt.txt";
  {
    std::ofstream(prompt) << "one two three one two three one two three one two";
  }
  const test::CliRun bench = run_cadenza("bench " + m() + " -t 2 -n 16 -r 2 -b 2 --json --prompt-file " +
                                         shell_quote(prompt.string()) + " --speculative-method ngram");
  ASSERT_EQ(bench.status, 0) << bench.err;
  const json j = json::parse(bench.out);
  EXPECT_EQ(j.at("speculative_method"), "ngram");
  EXPECT_EQ(j.at("concurrency"), 2);
  EXPECT_TRUE(j.at("identical_outputs").get<bool>());
  EXPECT_GT(j.at("tg_tokens_per_s_median").get<double>(), 0.0);
}

// --speculative-method draft --draft-model FILE (here the model drafting for itself): run,
// generate and bench --prompt-file give the plain text; a missing, unreadable or absent draft
// model is a start-up error on stderr.
TEST_F(CommandsTest, DraftModelKeepsTheOutput) {
  const std::string draft = " --speculative-method draft --speculative-adaptive false --draft-model " +
                            shell_quote(model().string());
  const std::string common = m() + " --temp 0 -n 40 --ignore-eos -t 2 --no-echo -p " + shell_quote("Hello there");
  const test::CliRun plain = run_cadenza("run " + common);
  ASSERT_EQ(plain.status, 0) << plain.err;
  const test::CliRun spec = run_cadenza("run " + common + draft + " --num-speculative-tokens 3");
  ASSERT_EQ(spec.status, 0) << spec.err;
  EXPECT_EQ(spec.out, plain.out);
  // Drafting for itself: every draft accepted.
  EXPECT_TRUE(std::regex_search(spec.err, std::regex(R"(run: speculative: \d+ verifications, (\d+) draft tokens, \1 accepted \(100\.0%\))")))
      << spec.err;

  const fs::path in = dir_->path() / "draft-in.jsonl";
  {
    std::ofstream(in) << "{\"id\": \"a\", \"prompt\": \"Once upon a time\", \"max_tokens\": 24, \"temperature\": 0, \"ignore_eos\": true}\n"
                         "{\"id\": \"b\", \"prompt\": \"abcabcabc\", \"max_tokens\": 17, \"temperature\": 0, \"ignore_eos\": true}\n";
  }
  const auto generate = [&](const std::string& extra, const std::string& out_name) {
    const fs::path out = dir_->path() / out_name;
    const test::CliRun r = run_cadenza("generate " + m() + " -t 2 --input " + shell_quote(in.string()) +
                                       " --output " + shell_quote(out.string()) + extra);
    EXPECT_EQ(r.status, 0) << r.err;
    return std::pair(r, test::read_text_file(out));
  };
  const auto [g_plain, out_plain] = generate("", "plain.jsonl");
  const auto [g_spec, out_spec] = generate(draft, "spec.jsonl");
  // The same records but for the timings.
  const auto records = [](const std::string& text) {
    std::vector<json> r;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      json j = json::parse(line);
      j.erase("ttft_s");
      j.erase("e2e_s");
      r.push_back(j);
    }
    return r;
  };
  EXPECT_EQ(records(out_plain).size(), 2u);
  EXPECT_EQ(records(out_spec), records(out_plain));
  EXPECT_NE(g_spec.err.find("generate: speculative: "), std::string::npos) << g_spec.err;

  const fs::path prompt = dir_->path() / "draft-prompt.txt";
  {
    std::ofstream(prompt) << "one two three one two three one two three one two";
  }
  const test::CliRun bench = run_cadenza("bench " + m() + " -t 2 -n 16 -r 1 -b 2 --json --prompt-file " +
                                         shell_quote(prompt.string()) + draft);
  ASSERT_EQ(bench.status, 0) << bench.err;
  const json j = json::parse(bench.out);
  EXPECT_EQ(j.at("speculative_method"), "draft");
  EXPECT_TRUE(j.at("identical_outputs").get<bool>());

  const test::CliRun missing =
      run_cadenza("run " + common + " --speculative-method draft --draft-model /nonexistent/draft.gguf");
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(missing.out, "");
  EXPECT_NE(missing.err.find("/nonexistent/draft.gguf"), std::string::npos) << missing.err;
  const test::CliRun not_gguf =
      run_cadenza("run " + common + " --speculative-method draft --draft-model " + shell_quote(prompt.string()));
  EXPECT_EQ(not_gguf.status, 1);
  EXPECT_NE(not_gguf.err.find(prompt.string()), std::string::npos) << not_gguf.err;
  const test::CliRun no_path = run_cadenza("run " + common + " --speculative-method draft");
  EXPECT_EQ(no_path.status, 1);
  EXPECT_NE(no_path.err.find("method draft needs a draft model file (--draft-model FILE)"), std::string::npos)
      << no_path.err;
  const test::CliRun no_method = run_cadenza("run " + common + " --draft-model " + shell_quote(model().string()));
  EXPECT_EQ(no_method.status, 1);
  EXPECT_NE(no_method.err.find("only used with method draft"), std::string::npos) << no_method.err;
  const test::CliRun bad_generate = run_cadenza("generate " + m() + " --input " + shell_quote(in.string()) +
                                                " --output " + shell_quote((dir_->path() / "x.jsonl").string()) +
                                                " --speculative-method draft --draft-model /nonexistent/d.gguf");
  EXPECT_NE(bad_generate.status, 0);
  EXPECT_NE(bad_generate.err.find("/nonexistent/d.gguf"), std::string::npos) << bad_generate.err;
}

TEST_F(CommandsTest, RunStopsAtTheContextAndRejectsTooLongPrompts) {
  const test::CliRun full = run_cadenza("run " + m() + " --temp 0 -n 100 --ignore-eos -c 16 -p ab");
  ASSERT_EQ(full.status, 0) << full.err;
  EXPECT_NE(full.err.find("run: stopped: context full"), std::string::npos) << full.err;
  const test::CliRun too_long =
      run_cadenza("run " + m() + " -c 16 -p " + shell_quote(std::string(40, 'x')));
  EXPECT_EQ(too_long.status, 1);
  EXPECT_NE(too_long.err.find("raise --ctx"), std::string::npos) << too_long.err;
  EXPECT_EQ(too_long.out, "");
  const test::CliRun missing = run_cadenza("run -m /nonexistent/model.gguf");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("/nonexistent/model.gguf"), std::string::npos) << missing.err;
  const test::CliRun zero = run_cadenza("run " + m() + " -n 0");
  EXPECT_NE(zero.status, 0);
}

TEST_F(CommandsTest, BenchJsonParsesAndHasItsFields) {
  const test::CliRun r = run_cadenza("bench " + m() + " -p 16 -n 4 -r 2 -t 2 --no-probe --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << "stdout is not JSON:\n" << r.out;
  EXPECT_EQ(j.value("model", ""), model().string());
  EXPECT_EQ(j.value("architecture", ""), "llama");
  EXPECT_EQ(j.value("backend", ""), "cpu");
  EXPECT_EQ(j.value("threads", 0), 2);
  EXPECT_EQ(j.value("kv_cache_type", ""), "f16");
  EXPECT_EQ(j.value("repetitions", 0), 2);
  EXPECT_GT(j.value("file_bytes", uint64_t{0}), 0u);
  EXPECT_GT(j.value("decode_weight_bytes", uint64_t{0}), 0u);
  for (const char* test : {"pp", "tg"}) {
    ASSERT_TRUE(j.contains(test)) << test;
    const json& t = j[test];
    EXPECT_EQ(t.value("tokens", 0), std::string(test) == "pp" ? 16 : 4);
    const json& s = t["tokens_per_s"];
    EXPECT_GT(s.value("median", 0.0), 0.0) << test;
    EXPECT_LE(s.value("min", 0.0), s.value("median", 0.0)) << test;
    EXPECT_GE(s.value("max", 0.0), s.value("median", 0.0)) << test;
    EXPECT_TRUE(s.contains("stddev")) << test;
  }
  EXPECT_GT(j.value("decode_gb_per_s", 0.0), 0.0);
  EXPECT_FALSE(j.contains("probe_gb_per_s"));  // --no-probe
  // Multiply-adds per token from the shapes, and the compute peaks (not skipped by --no-probe).
  ASSERT_TRUE(j.contains("macs_per_token"));
  const json& macs = j["macs_per_token"];
  EXPECT_GT(macs.value("matmul", uint64_t{0}), 0u);
  EXPECT_GT(macs.value("output_head", uint64_t{0}), 0u);
  EXPECT_EQ(macs.value("decode", uint64_t{0}),
            macs.value("matmul", uint64_t{0}) + macs.value("output_head", uint64_t{0}));
  EXPECT_GT(macs.value("prefill", 0.0), 0.0);
  EXPECT_FALSE(macs.value("attention_included", true));
  EXPECT_GT(macs.value("attention_prefill_estimate", 0.0), 0.0);
  EXPECT_GT(j.value("prefill_gmac_per_s", 0.0), 0.0);
  const std::string isa = j.value("isa", "");
  EXPECT_FALSE(isa.empty());
  ASSERT_TRUE(j.contains("peaks"));
  const json& peaks = j["peaks"];
  EXPECT_EQ(peaks.value("threads", 0), 2);
  EXPECT_NE(peaks.value("unit", "").find("multiply-adds"), std::string::npos);
  ASSERT_TRUE(peaks.contains("gmac_per_s"));
  for (const auto& [name, rate] : peaks["gmac_per_s"].items()) {
    EXPECT_TRUE(rate.is_number()) << name;
    EXPECT_GT(rate.get<double>(), 0.0) << name;
  }
  if (isa != "scalar") {
    ASSERT_TRUE(j.contains("prefill_peak")) << j.dump(2);
    const std::string peak = j.value("prefill_peak", "");
    EXPECT_TRUE(peaks["gmac_per_s"].contains(peak)) << peak;
    const double fraction = j.value("prefill_fraction_of_peak", 0.0);
    EXPECT_GT(fraction, 0.0);
    EXPECT_TRUE(std::isfinite(fraction));
    EXPECT_DOUBLE_EQ(j["prefill_fraction_of"].value(peak, 0.0), fraction);
  }
  // The text form: the table on stdout, still no log line; --no-peak skips the peaks.
  const test::CliRun text =
      run_cadenza("bench " + m() + " -p 16 -n 4 -r 1 -t 2 --no-probe --no-peak");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_FALSE(has_log_line(text.out)) << text.out;
  EXPECT_NE(text.out.find("| pp16   |"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("| tg4    |"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("prefill: "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("attention not included"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("peaks:"), std::string::npos) << text.out;
  const test::CliRun no_peak =
      run_cadenza("bench " + m() + " -p 16 -n 4 -r 1 -t 2 --no-probe --no-peak --json");
  ASSERT_EQ(no_peak.status, 0) << no_peak.err;
  const json jn = json::parse(no_peak.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(jn.is_discarded()) << no_peak.out;
  EXPECT_FALSE(jn.contains("peaks"));
  EXPECT_FALSE(jn.contains("prefill_fraction_of_peak"));
  EXPECT_TRUE(jn.contains("macs_per_token"));
  const test::CliRun missing = run_cadenza("bench -m /nonexistent/model.gguf --json");
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(missing.out, "");
  EXPECT_NE(missing.err.find("/nonexistent/model.gguf"), std::string::npos) << missing.err;
}

TEST_F(CommandsTest, InfoShowsTheFileAsTextAndJson) {
  const test::CliRun text = run_cadenza("info " + shell_quote(model().string()));
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("general.architecture"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\"llama\""), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("token_embd.weight"), std::string::npos) << text.out;
  const test::CliRun js = run_cadenza("info --json " + shell_quote(model().string()));
  ASSERT_EQ(js.status, 0) << js.err;
  const json j = json::parse(js.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "stdout is not JSON:\n" << js.out;
  EXPECT_EQ(j.value("version", 0), 3);
  // metadata: [{"key": ..., "type": ..., "value": ...}] in file order.
  auto metadata = [&](const std::string& key) {
    for (const json& e : j["metadata"])
      if (e.value("key", "") == key) return e;
    return json();
  };
  EXPECT_EQ(metadata("general.architecture").value("value", ""), "llama");
  EXPECT_EQ(metadata("llama.block_count").value("type", ""), "u32");
  EXPECT_EQ(metadata("llama.block_count").value("value", 0), 2);
  ASSERT_TRUE(j["tensors"].is_array());
  EXPECT_GT(j["tensors"].size(), 2u);
  EXPECT_EQ(j["tensors"][0].value("name", ""), "token_embd.weight");
  EXPECT_EQ(j["tensors"][0].value("type", ""), "q8_0");
  EXPECT_GT(j["summary"].value("parameters", uint64_t{0}), 0u);
  EXPECT_EQ(j.value("file_size", uint64_t{0}), fs::file_size(model()));
  // Not a GGUF file: a clear error, nothing on stdout.
  const fs::path bad = dir_->path() / "not-a-model.gguf";
  std::ofstream(bad) << "garbage, not GGUF";
  const test::CliRun err = run_cadenza("info " + shell_quote(bad.string()));
  EXPECT_EQ(err.status, 1);
  EXPECT_EQ(err.out, "");
  EXPECT_NE(err.err.find("not a GGUF file"), std::string::npos) << err.err;
}

TEST(GatewayCommand, CheckAcceptsTheExampleAndRejectsBadFiles) {
  const std::string example = std::string(CADENZA_SOURCE_DIR) + "/deploy/gateway.example.yaml";
  const test::CliRun ok = run_cadenza("gateway --config " + shell_quote(example) + " --check");
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(ok.out, example + ": OK (2 models, 2 tenants)\n");

  test::TempDir dir("cadenza-cli-gateway");
  const fs::path bad = dir.path() / "bad.yaml";
  std::ofstream(bad) << "listeners:\n  - host: 127.0.0.1\n    port: 99999\nmodels: []\n";
  auto check = [](const fs::path& config) {
    return run_cadenza("gateway --config " + shell_quote(config.string()) + " --check");
  };
  const test::CliRun rejected = check(bad);
  EXPECT_EQ(rejected.status, 1);
  EXPECT_EQ(rejected.out, "");
  EXPECT_NE(rejected.err.find("listeners[0].port"), std::string::npos) << rejected.err;

  const fs::path junk = dir.path() / "junk.yaml";
  std::ofstream(junk) << "models: [unclosed\n";
  const test::CliRun unparsable = check(junk);
  EXPECT_EQ(unparsable.status, 1);
  EXPECT_NE(unparsable.err.find(junk.string()), std::string::npos) << unparsable.err;

  const test::CliRun missing = run_cadenza("gateway --config /nonexistent/gateway.yaml --check");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("/nonexistent/gateway.yaml"), std::string::npos) << missing.err;

  const test::CliRun none = run_cadenza("gateway --check");
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("--config is required"), std::string::npos) << none.err;
}

TEST(GatewayCommand, HashKeyPrintsTheSha256OfTheKey) {
  // The example configuration's key for tenant acme (deploy/gateway.example.yaml).
  const test::CliRun r = run_cadenza("gateway --hash-key sk-acme-123");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "6cdc328485a5b1a00306a6eb5f5c4d7999c79e323877a7fa662f209faca87816\n");
  // SHA-256("abc"), the FIPS 180-2 example.
  EXPECT_EQ(run_cadenza("gateway --hash-key abc").out,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n");
}

}  // namespace
}  // namespace cadenza
