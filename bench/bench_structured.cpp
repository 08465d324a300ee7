// bench_structured: the cost of constrained decoding (issue 17) in the EngineCore on tiny-qwen2
// (random weights, the real 151,936-token Qwen2 vocabulary; ../shared/models, or
// $CADENZA_SHARED_DIR/models), at c concurrent requests (closed loop: a finished request is
// replaced at once, so c stay running).
//
//   bench_structured [--c 16] [--tokens 4096] [--rounds 3] [--threads 2] [--max-tokens 128]
//                    [--model tiny-qwen2-f16] [--schemas small,medium,large]
//                    [--throughput medium|none] [--only constrained|unconstrained]
//
// For each schema of --schemas (bench/schemas/NAME.json): compile time (json_schema_to_gbnf,
// then compile_gbnf, fresh each time, median of 20), then one constrained engine run of
// `tokens` tokens whose outputs are replayed for the mask times below. For the --throughput
// schema: unconstrained (A) and constrained (B) runs alternate `rounds` times; medians reported.
//
// tokens/s is generated tokens over wall time of the engine loop (prefills of the short 8-token
// prompts included; both sides get the same prompts). Mask time per token replays the tokens
// that the constrained requests generated through a GrammarMatcher, timing
// fill_next_token_bitmask (thread CPU time) at each step: "warm" with the grammar the engine used
// (its caches filled, as for later requests with the same schema), "cold" with a fresh compile
// per replayed request (every state a first visit for that CompiledGrammar).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine_core.h"
#include "grammar/compiled_grammar.h"
#include "grammar/json_schema_to_gbnf.h"
#include "grammar/matcher.h"
#include "grammar/token_index.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using namespace cadenza;
using Clock = std::chrono::steady_clock;

// The schemas: bench/schemas/{small,medium,large}.json. small: a flat object of three fields;
// medium: nested objects, arrays of objects, enums, bounded and unbounded strings, numbers;
// large: an invoice (6.8 KB) with $defs, recursion, anyOf, patterns, formats and 11-value enums.
std::string read_schema(const std::string& name) {
  const fs::path path = fs::path(CADENZA_SOURCE_DIR) / "bench" / "schemas" / (name + ".json");
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "no schema %s\n", path.c_str());
    std::exit(2);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct RunResult {
  double tokens_per_s = 0;
  int64_t tokens = 0;
  int64_t requests = 0;
  int64_t stopped = 0;
  std::vector<std::vector<int32_t>> outputs;  // every request's tokens (unfinished ones too)
};

RunResult run(model::Model& m, const Tokenizer& tok,
              std::shared_ptr<const grammar::CompiledGrammar> g, int c, int64_t target_tokens,
              int max_tokens, uint64_t seed0) {
  auto created = engine::EngineCore::create(m, tok, {.max_num_seqs = c, .max_model_len = 512});
  if (!created) {
    std::fprintf(stderr, "%s\n", created.error().c_str());
    std::exit(1);
  }
  auto e = std::move(*created);
  uint64_t seed = seed0;
  auto add = [&] {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    p.max_tokens = max_tokens;
    p.grammar = g;
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::vector<int32_t> prompt(8);
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % 256);
    ++seed;
    (void)*e->add_request(prompt, p);
  };
  for (int i = 0; i < c; ++i) add();
  RunResult r;
  std::map<engine::RequestId, std::vector<int32_t>> live;
  const auto t0 = Clock::now();
  while (r.tokens < target_tokens) {
    for (engine::RequestOutput& out : e->step()) {
      r.tokens += static_cast<int64_t>(out.new_token_ids.size());
      auto& t = live[out.id];
      t.insert(t.end(), out.new_token_ids.begin(), out.new_token_ids.end());
      if (out.finished) {
        ++r.requests;
        if (out.finish_reason == engine::FinishReason::kStop) ++r.stopped;
        r.outputs.push_back(std::move(t));
        live.erase(out.id);
        add();
      }
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& [id, t] : live) r.outputs.push_back(std::move(t));  // unfinished: prefixes replay too
  r.tokens_per_s = static_cast<double>(r.tokens) / s;
  return r;
}

// Per-token fill_next_token_bitmask CPU times (µs) replaying `outputs`.
std::vector<double> mask_times(const std::vector<std::vector<int32_t>>& outputs,
                               const std::shared_ptr<const grammar::TokenIndex>& index,
                               const std::string& gbnf,
                               std::shared_ptr<const grammar::CompiledGrammar> warm) {
  std::vector<double> us;
  for (const auto& toks : outputs) {
    auto g = warm ? warm : *grammar::compile_gbnf(gbnf, index);
    grammar::GrammarMatcher m(g);
    std::vector<uint32_t> words(m.mask_words());
    for (int32_t t : toks) {
      const double a = thread_cpu_ns();
      m.fill_next_token_bitmask(words);
      us.push_back((thread_cpu_ns() - a) / 1e3);
      if (!m.accept_token(t)) break;
      if (m.is_terminated()) break;
    }
  }
  return us;
}

struct MaskStats {
  size_t n = 0;
  double mean = 0, p50 = 0, p99 = 0, max = 0;
};

MaskStats summarize(const std::vector<double>& us) {
  MaskStats m;
  m.n = us.size();
  if (us.empty()) return m;
  double sum = 0;
  for (double x : us) sum += x;
  m.mean = sum / static_cast<double>(us.size());
  m.p50 = percentile(us, 0.5);
  m.p99 = percentile(us, 0.99);
  m.max = percentile(us, 1.0);
  return m;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, ',');)
    if (!part.empty()) out.push_back(part);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int c = 16, rounds = 3, threads = 2, max_tokens = 128;
  int64_t target = 4096;
  std::string model_name = "tiny-qwen2-f16";
  std::string only, schemas_arg = "small,medium,large", throughput_schema = "medium";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--c") c = std::atoi(argv[i + 1]);
    else if (a == "--tokens") target = std::atoll(argv[i + 1]);
    else if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--max-tokens") max_tokens = std::atoi(argv[i + 1]);
    else if (a == "--model") model_name = argv[i + 1];
    else if (a == "--only") only = argv[i + 1];  // constrained | unconstrained (for profiling)
    else if (a == "--schemas") schemas_arg = argv[i + 1];
    else if (a == "--throughput") throughput_schema = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  fs::path shared;
  if (const char* env = std::getenv("CADENZA_SHARED_DIR"); env && *env) shared = env;
  else shared = fs::path(CADENZA_SOURCE_DIR).parent_path() / "shared";
  const fs::path path = shared / "models" / (model_name + ".gguf");
  if (!fs::exists(path)) {
    std::printf("SKIPPED: %s not found (set CADENZA_SHARED_DIR)\n", path.c_str());
    return 0;
  }
  auto backend = kernels::make_cpu_backend({.n_threads = threads});
  auto m = model::Model::open(path.string(), *backend);
  if (!m) {
    std::fprintf(stderr, "%s\n", m.error().c_str());
    return 1;
  }
  auto tok = Tokenizer::from_gguf((*m)->file());
  if (!tok) {
    std::fprintf(stderr, "%s\n", tok.error().c_str());
    return 1;
  }
  auto index = grammar::TokenIndex::from_tokenizer(**tok);
  SchemaGrammarOptions opt;
  opt.strict = false;
  auto to_gbnf = [&](const std::string& schema) {
    auto gbnf = json_schema_to_gbnf(nlohmann::ordered_json::parse(schema), opt);
    if (!gbnf) {
      std::fprintf(stderr, "%s\n", gbnf.error().c_str());
      std::exit(1);
    }
    return *gbnf;
  };
  std::printf("model %s, vocab %zu, c=%d, %lld tokens per run, max_tokens %d, %d threads\n",
              model_name.c_str(), static_cast<size_t>(index->n_vocab()), c,
              static_cast<long long>(target), max_tokens, threads);

  if (!only.empty()) {
    auto g = *grammar::compile_gbnf(to_gbnf(read_schema(throughput_schema)), index);
    RunResult r = run(**m, **tok, only == "constrained" ? g : nullptr, c, target, max_tokens, 1);
    std::printf("%s only: %.1f tok/s\n", only.c_str(), r.tokens_per_s);
    return 0;
  }

  // Mask and compile times per schema size.
  for (const std::string& name : split_commas(schemas_arg)) {
    const std::string schema = read_schema(name);
    std::vector<double> convert_us, compile_us;
    std::string gbnf;
    for (int i = 0; i < 20; ++i) {
      const double a = thread_cpu_ns();
      gbnf = to_gbnf(schema);
      const double b = thread_cpu_ns();
      auto g = grammar::compile_gbnf(gbnf, index);
      const double e = thread_cpu_ns();
      if (!g) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), g.error().c_str());
        return 1;
      }
      convert_us.push_back((b - a) / 1e3);
      compile_us.push_back((e - b) / 1e3);
    }
    auto g = *grammar::compile_gbnf(gbnf, index);
    RunResult r = run(**m, **tok, g, c, target, max_tokens, 77);
    const MaskStats warm = summarize(mask_times(r.outputs, index, gbnf, g));
    std::vector<std::vector<int32_t>> few(r.outputs.begin(),
                                          r.outputs.begin() + std::min<size_t>(8, r.outputs.size()));
    const MaskStats cold = summarize(mask_times(few, index, gbnf, nullptr));
    std::printf("schema %s (%zu B, GBNF %zu B): convert %.0f us, compile %.0f us (medians of 20); "
                "%lld requests done, %lld ended by the grammar\n",
                name.c_str(), schema.size(), gbnf.size(), median(convert_us), median(compile_us),
                static_cast<long long>(r.requests), static_cast<long long>(r.stopped));
    std::printf("  mask per token, warm (%zu): mean %.1f us, p50 %.1f, p99 %.1f, max %.1f\n", warm.n,
                warm.mean, warm.p50, warm.p99, warm.max);
    std::printf("  mask per token, cold: fresh compile per request (%zu): mean %.1f us, p50 %.1f, "
                "p99 %.1f, max %.1f\n",
                cold.n, cold.mean, cold.p50, cold.p99, cold.max);
  }

  if (throughput_schema == "none") return 0;
  auto g = *grammar::compile_gbnf(to_gbnf(read_schema(throughput_schema)), index);
  // Warm-up (both): fills the grammar's caches, as a server with this schema in use would have.
  run(**m, **tok, g, c, target / 4, max_tokens, 1);
  run(**m, **tok, nullptr, c, target / 4, max_tokens, 1);
  std::vector<double> a_tps, b_tps, ratio;
  for (int r = 0; r < rounds; ++r) {
    const uint64_t seed = 1000 + 100000 * static_cast<uint64_t>(r);
    RunResult a = run(**m, **tok, nullptr, c, target, max_tokens, seed);
    RunResult b = run(**m, **tok, g, c, target, max_tokens, seed);
    a_tps.push_back(a.tokens_per_s);
    b_tps.push_back(b.tokens_per_s);
    ratio.push_back(b.tokens_per_s / a.tokens_per_s);
    std::printf("throughput (%s) round %d: unconstrained %.1f tok/s, constrained %.1f tok/s (ratio "
                "%.3f; %lld constrained requests finished, %lld by the grammar)\n",
                throughput_schema.c_str(), r + 1, a.tokens_per_s, b.tokens_per_s,
                b.tokens_per_s / a.tokens_per_s, static_cast<long long>(b.requests),
                static_cast<long long>(b.stopped));
  }
  std::printf("median: unconstrained %.1f tok/s, constrained %.1f tok/s, ratio %.3f (cost %.1f%%)\n",
              median(a_tps), median(b_tps), median(ratio), 100 * (1 - median(ratio)));
  return 0;
}
