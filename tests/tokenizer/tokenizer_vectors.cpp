// tokenizer_vectors: checks every ggml-vocab-NAME.gguf with .inp/.out test vectors in a folder
// (for example the reference engine's models/ folder, whose vocabularies are not in ../shared)
// and reports, per vocabulary, how many texts tokenize exactly to the expected ids.
//
//   build/tests/tokenizer/tokenizer_vectors DIR [-v] [NAME...]
//
// Texts are encoded as the vectors were made: no BOS/EOS, special tokens not parsed. -v prints
// every mismatch (text, expected ids, our ids). NAME limits the run to those vocabularies.
// Exit status: 0 when every text of every vocabulary matches, 1 otherwise, 2 on usage errors.
// Not a ctest test (CI has no such folder); see src/tokenizer/README.md.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vector_files.h"

namespace {

namespace fs = std::filesystem;
using cadenza::test::escaped;
using cadenza::test::ids_str;

// Checks one vocabulary; returns true when every text matches.
bool check(const fs::path& gguf_path, const std::string& name, bool verbose) {
  const fs::path inp = gguf_path.string() + ".inp", out = gguf_path.string() + ".out";
  auto file = cadenza::gguf::GgufFile::open(gguf_path.string());
  if (!file) {
    std::printf("%-16s load error: %s\n", name.c_str(), file.error().c_str());
    return false;
  }
  auto tok = cadenza::Tokenizer::from_gguf(**file);
  if (!tok) {
    std::printf("%-16s load error: %s\n", name.c_str(), tok.error().c_str());
    return false;
  }
  const auto texts = cadenza::test::read_vector_texts(inp);
  const auto expected = cadenza::test::read_vector_ids(out);
  if (texts.size() != expected.size()) {
    std::printf("%-16s malformed vectors: %zu texts, %zu id lines\n", name.c_str(), texts.size(),
                expected.size());
    return false;
  }
  size_t matched = 0, decoded = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto got = (*tok)->encode(texts[i], false, false);
    if (got == expected[i]) {
      ++matched;
    } else if (verbose) {
      std::printf("  %s #%zu '%s'\n    expected %s\n    got      %s\n", name.c_str(), i,
                  escaped(texts[i]).c_str(), ids_str(expected[i]).c_str(), ids_str(got).c_str());
    }
    if ((*tok)->decode(expected[i]) == texts[i]) ++decoded;
  }
  std::printf("%-16s %zu/%zu exact (decode of the expected ids gives the text back: %zu/%zu)\n",
              name.c_str(), matched, texts.size(), decoded, texts.size());
  return matched == texts.size();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const bool verbose = std::erase(args, std::string("-v")) > 0;
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::fprintf(stderr, "usage: tokenizer_vectors DIR [-v] [NAME...]\n");
    return 2;
  }
  const fs::path dir = args[0];
  const std::vector<std::string> only(args.begin() + 1, args.end());
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    std::fprintf(stderr, "tokenizer_vectors: %s is not a folder\n", dir.c_str());
    return 2;
  }
  std::vector<std::pair<std::string, fs::path>> vocabs;
  std::vector<std::string> without_vectors;
  const std::string prefix = "ggml-vocab-", suffix = ".gguf";
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.size() <= prefix.size() + suffix.size() || f.rfind(prefix, 0) != 0 ||
        f.compare(f.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string name = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    if (!fs::exists(e.path().string() + ".inp") || !fs::exists(e.path().string() + ".out")) {
      without_vectors.push_back(name);
      continue;
    }
    vocabs.emplace_back(name, e.path());
  }
  std::sort(vocabs.begin(), vocabs.end());
  if (vocabs.empty()) {
    std::fprintf(stderr, "tokenizer_vectors: no ggml-vocab-*.gguf with vectors in %s\n",
                 dir.c_str());
    return 2;
  }
  std::sort(without_vectors.begin(), without_vectors.end());
  for (const auto& name : without_vectors) {
    std::printf("%-16s (no .inp/.out vectors: not checked)\n", name.c_str());
  }
  size_t all_ok = 0;
  for (const auto& [name, path] : vocabs) all_ok += check(path, name, verbose) ? 1 : 0;
  std::printf("%zu/%zu vocabularies match exactly\n", all_ok, vocabs.size());
  return all_ok == vocabs.size() ? 0 : 1;
}
