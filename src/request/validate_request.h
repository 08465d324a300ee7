// validate_request: the one place that says whether a request can run. The engine
// (EngineCore::add_request) and the server (before it answers 400) both call it, so a rule and its
// message exist once; the error names the offending parameter as OpenAI's error `param` does.
//
// Rules, in the order they are checked (the first broken one is reported):
//   prompt:  not empty; every token id in [0, n_vocab); shorter than max_model_len (room for at
//            least one generated token)
//   max_tokens:  >= 1, and prompt + max_tokens <= max_model_len
//   temperature: finite, >= 0          top_p: in (0, 1]          min_p: in [0, 1]
//   stop:    no empty string           stop_token_ids: in [0, n_vocab)
//   n:       in [1, SamplingParams::kMaxN]     logprobs: -1 or in [0, SamplingParams::kMaxLogprobs]
//   logit_bias:  ids in [0, n_vocab), biases finite
//   repetition_penalty: finite, > 0    presence_penalty, frequency_penalty: finite
//   min_tokens:  in [0, max_tokens]
// API-level ranges that are narrower than these (OpenAI's temperature <= 2, penalties in [-2, 2],
// ...) are the JSON reader's (request/sampling_json.h), not rules of the engine.
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "request/sampling_params.h"

namespace cadenza {

// What the request is checked against: the model's vocabulary and the engine's maximum length.
struct RequestLimits {
  int32_t n_vocab = 0;        // token ids are in [0, n_vocab)
  int64_t max_model_len = 0;  // prompt + generated tokens at most
};

// A rejected parameter: its request field name ("prompt", "max_tokens", "logit_bias", ...) and a
// message for the user (no prefix; callers add their own, e.g. "request: ").
struct ParamError {
  std::string param;
  std::string message;
};

// The first rule `prompt` and `params` break (see the header comment), or nullopt.
std::optional<ParamError> validate_request(std::span<const int32_t> prompt,
                                           const SamplingParams& params,
                                           const RequestLimits& limits);

}  // namespace cadenza
