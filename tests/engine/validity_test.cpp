// Validity by construction (issue 17's acceptance check): every schema of tests/grammar/schemas is
// converted (json_schema_to_gbnf, strict when the suite file says the schema is strict-compatible),
// compiled against the REAL vocabulary of a shared random-weight model (../shared/models, skipped
// visibly when absent) and sampled by the EngineCore at temperature 1 (no top-k/top-p/min-p), many
// requests at once. Each output is parsed with nlohmann::json here and validated by ajv
// (node tests/js/validate.mjs schema.json docs.jsonl), an independent implementation.
//
// Truncation, honestly: a random model at temperature 1 rarely closes an unbounded string (almost
// every one of 152k tokens is allowed inside one), so many outputs hit max_tokens. Those are
// prefixes, not documents; they are counted per schema and printed, never validated. Completed
// outputs (finish reason stop) must ALL parse and validate. To get completions from every schema,
// the suite also runs a bounded variant of each schema, made here: maxLength 8 on strings without a
// length/pattern/format/enum/const, maxItems 3 on arrays (nothing else changes). A bounded variant
// accepts a subset of the original's documents, and its outputs are validated against BOTH.
//
// Required tool calls (tool_choice required, Hermes format, as src/server/output_grammar.cpp builds
// the grammar): outputs are split by toolcall::parse_output and by the StreamingToolParser fed the
// engine's deltas (the same result required), and each call's arguments validate under ajv against
// its function's parameters schema.
//
// Environment: CADENZA_VALIDITY_N (samples per schema and variant, default 14: >= 1000 generations per model),
// CADENZA_VALIDITY_MAX_TOKENS (default 64), CADENZA_VALIDITY_KEEP=1 keeps the temp dir.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine_test_util.h"
#include "grammar/compiled_grammar.h"
#include "grammar/json_schema_to_gbnf.h"
#include "grammar/token_index.h"
#include "server/output_grammar.h"
#include "server/structured_output.h"
#include "shared_data.h"
#include "toolcall/streaming.h"
#include "toolcall/tool_call.h"

namespace cadenza::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using test_util::Generation;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

// Runs a command, returning its exit status and output (stdout and stderr).
int run_command(const std::string& cmd, std::string& output) {
  output.clear();
  FILE* f = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return -1;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, f)) output.append(buf, n);
  int status = ::pclose(f);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The bounded variant of a schema (see the header comment).
void bound(ordered_json& s) {
  if (s.is_array()) {
    for (auto& x : s) bound(x);
    return;
  }
  if (!s.is_object()) return;
  for (auto& [key, value] : s.items()) {
    if (key == "const" || key == "enum" || key == "examples" || key == "default") continue;
    if (key == "properties" || key == "$defs" || key == "definitions" || key == "patternProperties") {
      if (value.is_object())
        for (auto& [k, sub] : value.items()) bound(sub);
      continue;
    }
    bound(value);
  }
  auto is_type = [&](const char* t) {
    if (!s.contains("type")) return false;
    const auto& ty = s["type"];
    if (ty.is_string()) return ty == t;
    if (ty.is_array()) return std::find(ty.begin(), ty.end(), t) != ty.end();
    return false;
  };
  if (is_type("string") && !s.contains("maxLength") && !s.contains("pattern") &&
      !s.contains("format") && !s.contains("enum") && !s.contains("const")) {
    const int64_t min = s.value("minLength", int64_t{0});
    s["maxLength"] = std::max<int64_t>(min, 8);
  }
  if (is_type("array") && !s.contains("maxItems")) {
    const int64_t min = s.value("minItems", int64_t{0});
    s["maxItems"] = std::max<int64_t>(min, 3);
  }
}

// A directory for the run's files, and tests/js with its node_modules (npm ci into a copy when the
// checkout has none, as tests/server/e2e/run_e2e.sh does).
struct Workspace {
  fs::path dir;
  fs::path validate;  // validate.mjs inside a folder with node_modules
  std::string skip;   // non-empty: node or npm missing

  Workspace() {
    dir = fs::temp_directory_path() / ("cadenza-validity-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::string out;
    if (run_command("command -v node && command -v npm", out) != 0) {
      skip = "SKIPPED: node and npm are needed for ajv (tests/js); scripts/setup.sh --test installs them";
      return;
    }
    const fs::path js = fs::path(CADENZA_SOURCE_DIR) / "tests/js";
    if (const char* d = std::getenv("CADENZA_JS_DIR"); d && *d && fs::exists(fs::path(d) / "node_modules")) {
      validate = fs::path(d) / "validate.mjs";
      return;
    }
    if (fs::exists(js / "node_modules/ajv")) {
      validate = js / "validate.mjs";
      return;
    }
    const fs::path copy = dir / "js";
    fs::create_directories(copy);
    for (const char* f : {"package.json", "package-lock.json", "validate.mjs"})
      fs::copy_file(js / f, copy / f);
    const int rc = run_command("cd '" + copy.string() + "' && npm ci --no-audit --no-fund", out);
    if (rc != 0) {
      ADD_FAILURE() << "npm ci failed (offline? no npm registry?); set CADENZA_JS_DIR to a tests/js "
                       "copy with node_modules:\n"
                    << out;
      return;
    }
    validate = copy / "validate.mjs";
  }
  ~Workspace() {
    if (std::getenv("CADENZA_VALIDITY_KEEP") == nullptr) {
      std::error_code ec;
      fs::remove_all(dir, ec);
    } else {
      std::printf("validity files kept in %s\n", dir.c_str());
    }
  }
  // ajv on every line of docs against schema; empty string when all valid, else its report.
  std::string ajv(const ordered_json& schema, const std::vector<std::string>& docs, const std::string& name) {
    const fs::path sp = dir / (name + ".schema.json");
    const fs::path dp = dir / (name + ".jsonl");
    write_file(sp, schema.dump(2));
    std::string lines;
    for (const auto& d : docs) lines += d + "\n";
    write_file(dp, lines);
    std::string out;
    const int rc = run_command("node '" + validate.string() + "' '" + sp.string() + "' '" + dp.string() + "'", out);
    if (rc == 0 && out.find(std::to_string(docs.size()) + " valid") != std::string::npos) return "";
    return "ajv rc " + std::to_string(rc) + ": " + out;
  }
};

// One line per document: compact JSON (re-dumped after parsing, so one document is one line).
struct Job {
  std::string name;
  ordered_json schema;                 // what the grammar was made from
  std::vector<ordered_json> validate_against;  // ajv schemas for its outputs
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
};

class ValidityTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    CADENZA_REQUIRE_SHARED();
    const fs::path path = test::shared_dir() / "models" / (GetParam() + ".gguf");
    if (!fs::exists(path)) GTEST_SKIP() << "SKIPPED: " << path << " not found";
    loaded_ = test_util::load(path.string());
    ASSERT_NE(loaded_, nullptr);
    index_ = grammar::TokenIndex::from_tokenizer(*loaded_->tokenizer);
    ws_ = std::make_unique<Workspace>();
    if (!ws_->skip.empty()) GTEST_SKIP() << ws_->skip;
    ASSERT_FALSE(ws_->validate.empty());
  }
  std::unique_ptr<EngineCore> engine() {
    auto e = EngineCore::create(*loaded_->model, *loaded_->tokenizer,
                                {.max_num_seqs = 32, .max_model_len = 256});
    EXPECT_TRUE(e.ok()) << e.error();
    return e ? std::move(*e) : nullptr;
  }
  SamplingParams sampled(uint64_t seed, std::shared_ptr<const grammar::CompiledGrammar> g) const {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    p.max_tokens = env_int("CADENZA_VALIDITY_MAX_TOKENS", 64);
    p.grammar = std::move(g);
    return p;
  }

  std::unique_ptr<test_util::Loaded> loaded_;
  std::shared_ptr<const grammar::TokenIndex> index_;
  std::unique_ptr<Workspace> ws_;
};

TEST_P(ValidityTest, SchemaOutputsParseAndValidateUnderAjv) {
  const fs::path dir = fs::path(CADENZA_SOURCE_DIR) / "tests/grammar/schemas";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 30u);

  std::vector<Job> jobs;
  for (const fs::path& f : files) {
    const ordered_json c = ordered_json::parse(read_file(f));
    const std::string stem = f.stem().string();
    SchemaGrammarOptions opt;
    opt.strict = c.value("strict", false);
    for (bool bounded : {false, true}) {
      Job j;
      j.name = stem + (bounded ? ".bounded" : "");
      j.schema = c.at("schema");
      j.validate_against.push_back(c.at("schema"));
      if (bounded) {
        bound(j.schema);
        if (j.schema == c.at("schema")) continue;  // nothing to bound
        j.validate_against.push_back(j.schema);
      }
      auto gbnf = json_schema_to_gbnf(j.schema, opt);
      ASSERT_TRUE(gbnf.ok()) << j.name << ": " << gbnf.error();
      auto g = grammar::compile_gbnf(*gbnf, index_);
      ASSERT_TRUE(g.ok()) << j.name << ": " << g.error();
      j.grammar = *g;
      jobs.push_back(std::move(j));
    }
  }

  const int n = env_int("CADENZA_VALIDITY_N", 14);
  auto e = engine();
  ASSERT_NE(e, nullptr);
  std::map<RequestId, std::pair<size_t, int>> who;  // request -> (job, sample)
  uint64_t seed = 1;
  for (size_t j = 0; j < jobs.size(); ++j)
    for (int i = 0; i < n; ++i) {
      auto id = e->add_request(test_util::random_prompt(8, static_cast<uint32_t>(seed)),
                               sampled(seed, jobs[j].grammar));
      ++seed;
      ASSERT_TRUE(id.ok()) << id.error();
      who[*id] = {j, i};
    }
  const auto t0 = std::chrono::steady_clock::now();
  auto got = test_util::run(*e);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::vector<std::vector<std::string>> stopped(jobs.size());
  std::vector<int> length(jobs.size(), 0);
  int total = 0, total_stop = 0, tokens = 0;
  for (const auto& [id, ji] : who) {
    const Generation& g = got[id];
    const Job& job = jobs[ji.first];
    ++total;
    tokens += static_cast<int>(g.tokens.size());
    if (g.reason == FinishReason::kLength) {
      ++length[ji.first];
      continue;
    }
    EXPECT_EQ(g.reason, FinishReason::kStop) << job.name << ": " << g.text;
    if (g.reason != FinishReason::kStop) continue;
    ++total_stop;
    ordered_json doc = ordered_json::parse(g.text, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << job.name << ": not JSON: " << g.text;
    if (doc.is_discarded()) continue;
    stopped[ji.first].push_back(doc.dump());
  }

  std::printf("%-44s %5s %5s %6s\n", "schema", "stop", "length", "ajv");
  int never = 0, never_bounded = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    std::string verdict = "-";
    if (!stopped[j].empty()) {
      for (size_t k = 0; k < jobs[j].validate_against.size(); ++k) {
        const std::string r = ws_->ajv(jobs[j].validate_against[k], stopped[j],
                                       jobs[j].name + "." + std::to_string(k));
        EXPECT_EQ(r, "") << jobs[j].name << " against schema " << k;
        verdict = r.empty() ? "ok" : "FAIL";
        if (!r.empty()) break;
      }
    } else {
      (jobs[j].name.ends_with(".bounded") ? never_bounded : never) += 1;
    }
    std::printf("%-44s %5zu %5d %6s\n", jobs[j].name.c_str(), stopped[j].size(), length[j], verdict.c_str());
  }
  std::printf("%s: %zu grammars (%zu schema files), %d generations (%d stop, %d length), %d tokens in "
              "%.1f s; grammars with no completed output: %d original, %d bounded\n",
              GetParam().c_str(), jobs.size(), files.size(), total, total_stop, total - total_stop,
              tokens, secs, never, never_bounded);
  EXPECT_GE(total, 1000);
  EXPECT_GT(total_stop, 0);
}

// Tool sets for tool_choice required.
std::vector<std::vector<server::ToolFunction>> tool_sets() {
  std::vector<std::vector<server::ToolFunction>> sets;
  sets.push_back({{"get_weather",
                   ordered_json::parse(R"({"type":"object","properties":{
                     "city":{"type":"string","maxLength":12},
                     "unit":{"enum":["celsius","fahrenheit"]}},"required":["city"]})"),
                   false}});
  sets.push_back({{"search",
                   ordered_json::parse(R"({"type":"object","properties":{
                     "query":{"type":"string","maxLength":10},
                     "limit":{"type":"integer","minimum":1,"maximum":50}},
                     "required":["query","limit"],"additionalProperties":false})"),
                   true},
                  {"calc",
                   ordered_json::parse(R"({"type":"object","properties":{
                     "a":{"type":"number"},"b":{"type":"number"},
                     "op":{"enum":["+","-","*","/"]}},
                     "required":["a","b","op"],"additionalProperties":false})"),
                   true}});
  sets.push_back({{"noop", ordered_json::parse(R"({"type":"object","properties":{},"additionalProperties":false})"), true},
                  {"set_flags",
                   ordered_json::parse(R"({"type":"object","properties":{
                     "flags":{"type":"array","items":{"type":"boolean"},"maxItems":4},
                     "level":{"type":"integer","minimum":0,"maximum":3}},
                     "required":["flags"],"additionalProperties":false})"),
                   false}});
  return sets;
}

TEST_P(ValidityTest, RequiredToolCallArgumentsValidateUnderAjvStreamedAndNot) {
  const int n = env_int("CADENZA_VALIDITY_TOOL_N", 24);
  auto sets = tool_sets();
  auto e = engine();
  ASSERT_NE(e, nullptr);
  struct Req {
    size_t set;
    bool parallel;
  };
  std::map<RequestId, Req> who;
  uint64_t seed = 9000;
  for (size_t s = 0; s < sets.size(); ++s)
    for (bool parallel : {false, true}) {
      server::StructuredOutput so;
      so.tools.functions = sets[s];
      so.tools.choice = server::ToolRequest::Choice::kRequired;
      so.tools.parallel = parallel;
      auto gbnf = server::output_gbnf(so, toolcall::ToolCallFormat::kHermes);
      ASSERT_TRUE(std::holds_alternative<std::string>(gbnf))
          << "tool set " << s << ": " << std::get<server::ApiError>(gbnf).message;
      auto g = grammar::compile_gbnf(std::get<std::string>(gbnf), index_);
      ASSERT_TRUE(g.ok()) << g.error();
      for (int i = 0; i < n; ++i) {
        SamplingParams p = sampled(seed, *g);
        p.skip_special_tokens = false;  // the server's detokenization for tool-call formats
        auto id = e->add_request(test_util::random_prompt(8, static_cast<uint32_t>(seed)), p);
        ++seed;
        ASSERT_TRUE(id.ok()) << id.error();
        who[*id] = {s, parallel};
      }
    }
  auto got = test_util::run(*e);
  std::map<std::string, std::vector<std::string>> args;  // function -> arguments documents
  std::map<std::string, ordered_json> params;
  for (const auto& set : sets)
    for (const auto& f : set) params[f.name] = f.parameters;
  int stop = 0, length = 0, calls = 0;
  for (const auto& [id, r] : who) {
    const Generation& g = got[id];
    if (g.reason == FinishReason::kLength) {
      ++length;
      continue;
    }
    EXPECT_EQ(g.reason, FinishReason::kStop) << g.text;
    ++stop;
    const toolcall::ParsedOutput whole = toolcall::parse_output(toolcall::ToolCallFormat::kHermes, g.text);
    toolcall::StreamingToolParser streaming(toolcall::ToolCallFormat::kHermes);
    for (const std::string& d : g.deltas) streaming.feed(d);
    streaming.finish();
    EXPECT_TRUE(streaming.consistent());
    EXPECT_EQ(streaming.emitted().content, whole.content) << g.text;
    ASSERT_EQ(streaming.emitted().tool_calls.size(), whole.tool_calls.size()) << g.text;
    for (size_t k = 0; k < whole.tool_calls.size(); ++k) {
      EXPECT_EQ(streaming.emitted().tool_calls[k].name, whole.tool_calls[k].name);
      EXPECT_EQ(streaming.emitted().tool_calls[k].arguments, whole.tool_calls[k].arguments);
    }
    EXPECT_EQ(whole.content, "") << g.text;
    EXPECT_GE(whole.tool_calls.size(), 1u) << g.text;
    if (!r.parallel) {
      EXPECT_LE(whole.tool_calls.size(), 1u) << g.text;
    }
    for (const auto& c : whole.tool_calls) {
      ++calls;
      ASSERT_TRUE(params.contains(c.name)) << c.name;
      const auto a = ordered_json::parse(c.arguments, nullptr, false);
      EXPECT_TRUE(a.is_object()) << c.arguments;
      args[c.name].push_back(c.arguments);
    }
  }
  for (const auto& [name, docs] : args) {
    EXPECT_EQ(ws_->ajv(params[name], docs, "tool." + name), "") << name;
    std::printf("tool %-10s %3zu calls valid under ajv\n", name.c_str(), docs.size());
  }
  std::printf("%s tools: %zu requests, %d stop (%d calls), %d length\n", GetParam().c_str(), who.size(),
              stop, calls, length);
  EXPECT_GE(stop, static_cast<int>(who.size()) / 5);  // the rest hit max_tokens (prefixes)
  EXPECT_GT(calls, 0);
}

INSTANTIATE_TEST_SUITE_P(SharedModels, ValidityTest,
                         testing::Values("tiny-qwen2-f16", "tiny-llama3-f16"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
}  // namespace cadenza::engine
