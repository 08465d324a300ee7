// bench_tokenizer: encode speed of the shared vocabularies on 300 KB of held-out English text
// (../shared/text/heldout-licenses.txt; $CADENZA_SHARED_DIR overrides ../shared).
//
//   bench_tokenizer [--benchmark_filter=qwen2]
//
// bytes_per_second counts input bytes. Moved here from the test suite, where a "well under a
// second" wall-clock bound depended on the machine's load rather than on the code. Without
// ../shared each benchmark reports an error and nothing is measured.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <benchmark/benchmark.h>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;

fs::path shared_dir() {
  if (const char* env = std::getenv("CADENZA_SHARED_DIR"); env && *env) return env;
  return fs::path(CADENZA_SOURCE_DIR).parent_path() / "shared";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void encode(benchmark::State& state, const char* vocab) {
  const std::string text = read_file(shared_dir() / "text" / "heldout-licenses.txt");
  auto file = cadenza::gguf::GgufFile::open(
      (shared_dir() / "tokenizer" / (std::string("ggml-vocab-") + vocab + ".gguf")).string());
  if (text.empty() || !file) {
    state.SkipWithError("../shared (text/heldout-licenses.txt, tokenizer/) not found");
    return;
  }
  auto tokenizer = cadenza::Tokenizer::from_gguf(**file);
  if (!tokenizer) {
    state.SkipWithError(tokenizer.error().c_str());
    return;
  }
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = (*tokenizer)->encode(text, false, false);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}

BENCHMARK_CAPTURE(encode, llama_spm, "llama-spm")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode, llama_bpe, "llama-bpe")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode, qwen2, "qwen2")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode, deepseek_llm, "deepseek-llm")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
