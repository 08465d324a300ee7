#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>

#include "tokenizer/unicode_bytes.h"

namespace cadenza::tok {

namespace {

// The patterns below are those of the models' own tokenizer.json files (as listed per pre-type
// by llama.cpp's llama-vocab.cpp). Where llama.cpp rewrote a pattern because std::regex lacks a
// feature (case-insensitive groups, \p{Lu}...), the original is used: PCRE2 supports it.

// GPT-2 / byte-level default.
constexpr std::string_view kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
// The same without the final \s+ alternative, as the reference writes it for the multi-regex
// types. Unmatched stretches are kept as pieces, so the two behave identically.
constexpr std::string_view kGpt2NoTail =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
// Llama 3 (tiktoken cl100k style: contractions case-insensitive, numbers in groups of <= 3).
constexpr std::string_view kLlama3 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Qwen2: as Llama 3 but every digit is its own piece.
constexpr std::string_view kQwen2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Qwen3.5: as Qwen2, but combining marks (\p{M}) continue a letter run and are not punctuation
// (the Split regex of Qwen3.5's tokenizer.json).
constexpr std::string_view kQwen35 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// DeepSeek LLM: explicit letter ranges (cased letters), ASCII/full-width punctuation, CJK/Hangul.
constexpr std::string_view kDeepseekLetters =
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";
constexpr std::string_view kDeepseekPunct =
    R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re";
constexpr std::string_view kDeepseekCjk = R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";
// DeepSeek V3.
constexpr std::string_view kDeepseek3Main =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Mistral Tekken and GPT-4o (o200k): case-aware letter runs.
constexpr std::string_view kTekken =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kSeedCoder =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// BLOOM family: everything up to whitespace or sentence punctuation.
constexpr std::string_view kBloom =
    R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)re";

const std::vector<PreTokenizerSpec>& specs() {
  static const std::vector<PreTokenizerSpec> table = {
      // llama.cpp's fallback for BPE vocabularies without a (known) pre-type.
      {{"default"},
       {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2NoTail, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}},
      {{"gpt-2", "phi-2", "mpt", "olmo", "jais", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de",
        "gigachat", "exaone4", "mellum"},
       {kGpt2}},
      {{"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {kLlama3},
       /*ignore_merges=*/true,
       /*add_bos=*/true},
      {{"dbrx", "smaug-bpe"}, {kLlama3}},
      {{"chatglm-bpe", "glm4"}, {kLlama3}},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"}, {kQwen2}},
      {{"qwen35"}, {kQwen35}},
      {{"deepseek-llm"},
       {"[\\r\\n]", kDeepseekLetters, kDeepseekPunct, R"re(\s+$)re", kDeepseekCjk, R"re(\p{N}+)re"}},
      {{"deepseek-coder"},
       {"[\\r\\n]", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kDeepseekCjk, R"re(\p{N})re"}},
      {{"deepseek-v3"}, {R"re(\p{N}{1,3})re", R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re", kDeepseek3Main}},
      {{"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2NoTail, "[0-9][0-9][0-9]"}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {R"re(\p{N})re", kGpt2}},
      {{"tekken"}, {kTekken}, /*ignore_merges=*/true, /*add_bos=*/true},
      {{"gpt-4o", "llama4"}, {kGpt4o}},
      {{"seed-coder"}, {kSeedCoder}},
      {{"bloom", "poro-chat", "gpt3-finnish"}, {kBloom}},
  };
  return table;
}

}  // namespace

const PreTokenizerSpec* find_pretokenizer(std::string_view name) {
  if (name.empty()) name = "default";
  for (const PreTokenizerSpec& s : specs()) {
    for (std::string_view n : s.names) {
      if (n == name) return &s;
    }
  }
  return nullptr;
}

std::string supported_pretokenizers() {
  std::string out;
  for (const PreTokenizerSpec& s : specs()) {
    for (std::string_view n : s.names) {
      if (!out.empty()) out += ", ";
      out += n;
    }
  }
  return out;
}

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  std::string pattern;
  ~Regex() { pcre2_code_free(code); }
};

Result<PreTokenizer> PreTokenizer::compile(const PreTokenizerSpec& spec) {
  PreTokenizer pt;
  for (std::string_view pattern : spec.regexes) {
    auto re = std::make_shared<Regex>();
    re->pattern = std::string(pattern);
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    re->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_offset,
                             nullptr);
    if (re->code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return make_error("pre-tokenizer regex '{}' rejected by PCRE2 at offset {}: {}", pattern,
                        err_offset, reinterpret_cast<const char*>(msg));
    }
    // JIT is an optimisation only: without it (no JIT support, no executable memory) pcre2_match
    // falls back to the interpreter by itself.
    pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    pt.regexes_.push_back(std::move(re));
  }
  return pt;
}

namespace {

struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};
using MatchData = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

// Cuts `piece` into matches of `code` and the unmatched stretches between them.
void split_piece(const pcre2_code* code, pcre2_match_data* md, std::string_view piece,
                 std::vector<std::string_view>& out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  const size_t n = piece.size();
  size_t pos = 0;   // where the next search starts
  size_t kept = 0;  // end of what has been emitted
  while (pos < n) {
    int rc = pcre2_match(code, subject, n, pos, 0, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // Deeply nested backtracking exceeded the JIT's machine-stack block; the interpreter keeps
      // its backtracking state on the heap.
      rc = pcre2_match(code, subject, n, pos, PCRE2_NO_JIT, md, nullptr);
    }
    // No match, or a resource limit hit on hostile input: the rest stays one unmatched stretch
    // (never an infinite loop, never lost text).
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0], end = ov[1];
    if (end <= start) {
      // Empty match (none of the table's patterns produce one): step over one character.
      const Utf8Check c = check_utf8(piece.substr(start < n ? start : n - 1));
      pos = start + (c.kind == Utf8Check::kComplete ? c.length : 1);
      continue;
    }
    if (start > kept) out.push_back(piece.substr(kept, start - kept));
    out.push_back(piece.substr(start, end - start));
    kept = pos = end;
  }
  if (kept < n) out.push_back(piece.substr(kept));
}

}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty()) return;
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  for (const auto& re : regexes_) {
    MatchData md(pcre2_match_data_create_from_pattern(re->code, nullptr));
    if (!md) break;  // out of memory: keep the pieces so far rather than lose text
    next.clear();
    next.reserve(current.size() * 2);
    for (std::string_view piece : current) split_piece(re->code, md.get(), piece, next);
    current.swap(next);
  }
  out.insert(out.end(), current.begin(), current.end());
}

}  // namespace cadenza::tok
