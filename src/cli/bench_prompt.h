// `cadenza bench --prompt-file F`: generation speed through the engine (the serving path) on a
// real prompt, so that speculative decoding (--speculative-method) can be measured where it
// pays: text that quotes its prompt. bench's own tg test feeds random tokens to a model Session,
// which neither has an engine nor anything a proposer could match.
#pragma once

#include <cstdint>
#include <string>

#include "engine/engine_core.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace cadenza::cli {

struct PromptBenchArgs {
  std::string prompt_file;  // its text (BOS first) is the prompt, cut to fit the context
  int32_t n_gen = 128;      // greedy tokens generated per request (ignore_eos)
  int repetitions = 5;
  int32_t concurrency = 1;  // identical requests run together
  DType kv_type = DType::F16;
  engine::SpeculativeConfig speculative;
  bool json = false;
};

// Runs `repetitions` rounds of `concurrency` greedy requests and prints the median generation
// tokens/s (first token -> last, the first tokens excluded), the speculative counters, and
// whether every round produced the same tokens. Returns the process exit code; errors (a missing
// file, an engine config error such as a bad --num-speculative-tokens) go to stderr.
int run_prompt_bench(model::Model& model, const Tokenizer& tokenizer, const PromptBenchArgs& args);

}  // namespace cadenza::cli
