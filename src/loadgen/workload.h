// What the load generator sends: prompts and output lengths, built before the run starts so that
// tokenizing never competes with the measurement.
//
// Sources:
//  - random: prompts of about input-len tokens. With a tokenizer, random token ids (no control
//    tokens) are decoded and the text re-encoded, trimming or topping up until the re-encoded
//    length is the target (a few rounds; the final count is exact and recorded). Without one,
//    the prompt is input-len words drawn from a list of common short English words, each a single
//    token in the usual BPE and SentencePiece vocabularies once preceded by a space, so the count
//    is approximate (typically within 10-30%; the server's usage.prompt_tokens is what the run
//    reports when the server sends it).
//  - shared prefix: G groups; each has a random P-token system prompt that every request of the
//    group repeats; the user part (input-len tokens) is unique per request. Request i belongs to
//    group i % G.
//  - dataset: a JSONL file, one request per line, cycled in a seeded shuffled order:
//      {"prompt": "..."}                                   (completions-style text)
//      {"messages": [{"role": "...", "content": "..."}]}   (chat)
//      {"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]}
//    (ShareGPT: the first human turn is the prompt; an optional leading "system" turn is kept).
//    Output length: --output-len when given explicitly, else the line's "output_len" or
//    "max_tokens", else the token count of the ShareGPT reply, else the --output-len default.
//
// Lengths (input and output) follow a distribution around their mean: fixed; uniform on
// [L(1-s), L(1+s)]; normal with standard deviation sL; then clamped to [min-len, max-len].
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace cadenza {
class Tokenizer;
}

namespace cadenza::loadgen {

enum class LenDist { fixed, uniform, normal };

struct LengthSpec {
  int32_t mean = 128;
  LenDist dist = LenDist::fixed;
  double spread = 0.2;  // s above, >= 0
  int32_t min_len = 1;
  int32_t max_len = 0;  // 0: no upper bound
};

// A length drawn from `spec` (always >= max(1, min_len)).
int32_t draw_length(const LengthSpec& spec, std::mt19937_64& rng);

struct WorkItem {
  nlohmann::json messages = nlohmann::json::array();  // chat: [{"role", "content"}...]
  std::string prompt;                                 // completions: the whole prompt as text
  int32_t prompt_tokens = 0;  // tokenizer count when a tokenizer was given, else an estimate
  bool prompt_tokens_exact = false;
  int32_t max_tokens = 0;  // requested output length (>= 1)
  int32_t group = -1;      // shared-prefix group, -1 when none
};

struct WorkloadOptions {
  LengthSpec input{.mean = 256};
  LengthSpec output{.mean = 128};
  int32_t prefix_groups = 0;  // > 0 with prefix_len > 0: the shared-prefix workload
  int32_t prefix_len = 0;
  std::string dataset;  // JSONL path; empty: synthetic prompts
  bool output_len_explicit = false;
  uint64_t seed = 0;
};

// Errors: unreadable dataset, a line that is not JSON or has none of the accepted shapes (naming
// the file and line), an empty dataset. `tokenizer` may be null.
Result<std::vector<WorkItem>> make_workload(const WorkloadOptions& options,
                                            const Tokenizer* tokenizer, size_t count);

// Rough token count of text without a tokenizer: one per 4 bytes, at least one per word.
int32_t estimate_tokens(std::string_view text);

}  // namespace cadenza::loadgen
