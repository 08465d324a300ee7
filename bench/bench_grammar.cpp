// bench_grammar: next-token mask cost of the grammar matcher (src/grammar) on the Qwen2
// vocabulary (151,936 tokens, ../shared/models/tiny-qwen2-f16.gguf; $CADENZA_SHARED_DIR
// overrides ../shared) while "generating" a JSON document: the document is tokenized, and each
// step fills the mask and accepts the next token, as the engine would.
//
//   bench_grammar [--benchmark_filter=mask]
//
// us_per_mask is the mean thread CPU time of fill_next_token_bitmask over the document's tokens
// (CPU time, not wall time, so that other jobs on a shared machine do not inflate it; the
// benchmark's own Time column is wall time):
//   mask/no_cache    both caches off: every mask walks the trie for every head (worst case)
//   mask/heads_warm  whole-state cache off, head masks known: a state never seen before, in a
//                    grammar already used by an earlier request (the first-visit cost)
//   mask/cold_cache  a fresh CompiledGrammar per pass: the first request with this grammar
//   mask/warm_cache  both caches filled by an earlier pass: later requests with the same grammar
// compile is compile_gbnf of the JSON grammar; index_build is TokenIndex::from_tokenizer.
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "gguf/gguf.h"
#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_index.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using namespace cadenza;
using namespace cadenza::grammar;
using Clock = std::chrono::steady_clock;

fs::path shared_dir() {
  if (const char* env = std::getenv("CADENZA_SHARED_DIR"); env && *env) return env;
  return fs::path(CADENZA_SOURCE_DIR).parent_path() / "shared";
}

const char* kJsonGbnf = R"(root   ::= ws value ws
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n]{0,20}
)";

// What a model asked for JSON typically writes: nested objects, arrays, strings with escapes
// and non-ASCII text, numbers.
const char* kDocument = R"({
  "id": "chatcmpl-8f2a",
  "name": "Zoë Müller",
  "age": 37,
  "email": "zoe.mueller@example.com",
  "verified": true,
  "balance": -1234.56e-2,
  "tags": ["admin", "beta-tester", "日本語", "emoji 😀"],
  "address": {"street": "Hauptstraße 5", "city": "Zürich", "zip": "8001", "geo": {"lat": 47.3769, "lon": 8.5417}},
  "orders": [
    {"id": 1, "items": [{"sku": "A-100", "qty": 2, "price": 9.99}, {"sku": "B-7", "qty": 1, "price": 120}], "note": null},
    {"id": 2, "items": [], "note": "Leave at the door, \"please\".\nThanks!"},
    {"id": 3, "items": [{"sku": "C-33", "qty": 10, "price": 0.5}], "note": "Rush \u00e9 delivery"}
  ],
  "description": "A long free-text field, the kind of thing that dominates real outputs: sentences with punctuation, numbers like 42 and 3.14, and some quotes \"inside\" it, plus a path C:\\temp\\file.txt.",
  "empty": {}
})";

struct Setup {
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const TokenIndex> index;
  std::vector<int32_t> tokens;
  double index_build_ms = 0;
  std::string error;
};

const Setup& setup() {
  static Setup s = [] {
    Setup out;
    auto file = gguf::GgufFile::open((shared_dir() / "models" / "tiny-qwen2-f16.gguf").string());
    if (!file) {
      out.error = "../shared/models/tiny-qwen2-f16.gguf not found";
      return out;
    }
    auto tok = Tokenizer::from_gguf(**file);
    if (!tok) {
      out.error = tok.error();
      return out;
    }
    out.tokenizer = std::move(*tok);
    const auto t0 = Clock::now();
    out.index = TokenIndex::from_tokenizer(*out.tokenizer);
    out.index_build_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    out.tokens = out.tokenizer->encode(kDocument, false, false);
    return out;
  }();
  return s;
}

double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// One pass over the document; returns the thread CPU seconds spent in fill_next_token_bitmask.
double generate(const std::shared_ptr<const CompiledGrammar>& g, const std::vector<int32_t>& tokens,
                std::vector<uint32_t>& words, bool& ok) {
  GrammarMatcher m(g);
  double seconds = 0;
  ok = true;
  for (int32_t id : tokens) {
    const double t0 = thread_seconds();
    m.fill_next_token_bitmask(words);
    seconds += thread_seconds() - t0;
    if (!((words[id / 32] >> (id % 32)) & 1) || !m.accept_token(id)) {
      ok = false;
      return seconds;
    }
  }
  return seconds;
}

std::shared_ptr<const CompiledGrammar> compile_json(const Setup& s) {
  auto g = compile_gbnf(kJsonGbnf, s.index);
  return g.ok() ? *g : nullptr;
}

enum Mode { kNoCache, kHeadsWarm, kCold, kWarm };

void mask(benchmark::State& state, Mode mode) {
  const Setup& s = setup();
  if (!s.error.empty()) {
    state.SkipWithError(s.error.c_str());
    return;
  }
  std::vector<uint32_t> words(s.index->mask_words());
  std::shared_ptr<const CompiledGrammar> g = compile_json(s);
  if (!g) {
    state.SkipWithError("the JSON grammar did not compile");
    return;
  }
  if (mode == kNoCache || mode == kHeadsWarm) g->set_mask_cache_bytes(0);
  if (mode == kNoCache) g->set_head_cache_bytes(0);
  bool ok = true;
  if (mode == kWarm || mode == kHeadsWarm) generate(g, s.tokens, words, ok);
  double total = 0;
  for (auto _ : state) {
    if (mode == kCold) {
      state.PauseTiming();
      g = compile_json(s);
      state.ResumeTiming();
    }
    const double seconds = generate(g, s.tokens, words, ok);
    total += seconds;
    state.SetIterationTime(seconds);
    if (!ok) {
      state.SkipWithError("the grammar rejected a token of the document");
      return;
    }
  }
  state.counters["tokens"] = static_cast<double>(s.tokens.size());
  state.counters["us_per_mask"] =
      1e6 * total / static_cast<double>(state.iterations() * s.tokens.size());
  state.counters["state_masks"] = static_cast<double>(g->mask_cache_entries());
  state.counters["head_masks"] = static_cast<double>(g->head_cache_entries());
  state.counters["n_vocab"] = s.index->n_vocab();
}

void compile(benchmark::State& state) {
  const Setup& s = setup();
  if (!s.error.empty()) {
    state.SkipWithError(s.error.c_str());
    return;
  }
  for (auto _ : state) {
    auto g = compile_gbnf(kJsonGbnf, s.index);
    benchmark::DoNotOptimize(g.ok());
  }
  state.counters["index_build_ms"] = s.index_build_ms;
  state.counters["trie_nodes"] = s.index->trie_size();
}

BENCHMARK(compile)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(mask, no_cache, kNoCache)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(mask, heads_warm, kHeadsWarm)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(10);
BENCHMARK_CAPTURE(mask, cold_cache, kCold)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK_CAPTURE(mask, warm_cache, kWarm)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(20);

}  // namespace

BENCHMARK_MAIN();
