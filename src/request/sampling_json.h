// The JSON reader of request parameters, shared by the HTTP server (server/openai_protocol.cpp)
// and `cadenza generate` (cli/generate.cpp): OpenAI field names, types and API ranges, one set of
// number, integer, token-id and logit_bias readers. It only reads: whether the values can run is
// validate_request's question (request/validate_request.h), asked by whoever submits.
//
// Fields read by read_sampling_params (absent or null: the field keeps its value in `params`, so
// callers preset their own defaults):
//   max_tokens, max_completion_tokens  integer in [1, 2^31-1]; max_completion_tokens wins
//   temperature   number in [0, 2]         top_p   number in [0, 1]      min_p  number in [0, 1]
//   top_k         integer >= -1 (<= 0: off)
//   seed          any 64-bit integer (negative values wrap to uint64)
//   stop          a string ("" means none) or an array of at most 16 strings
//   stop_token_ids  an array of token ids (integers >= 0)
//   ignore_eos    boolean
//   presence_penalty, frequency_penalty  number in [-2, 2]
//   repetition_penalty  number in [0, 100]
//   logit_bias    object {"token id": number in [-100, 100]}, at most 1024 entries
//   min_tokens    integer in [0, 2^31-1]
//   speculative   boolean (false: this request does not speculate; a Cadenza extension)
// Not read here: n and logprobs (their JSON form differs between the server's endpoints, and
// `cadenza generate` writes one result per line).
// Errors name the field (ParamError::param) and say what it must be, e.g. "'top_k' must be an
// integer". Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "request/sampling_params.h"
#include "request/validate_request.h"

namespace cadenza {

// Which optional fields the body gave (callers default them from context otherwise).
struct SamplingFieldsGiven {
  bool max_tokens = false;
  bool seed = false;
};

// Reads the fields above from the JSON object `body` into `params`.
std::optional<ParamError> read_sampling_params(const nlohmann::json& body, SamplingParams& params,
                                               SamplingFieldsGiven* given = nullptr);

// True when `key` is one of the fields read_sampling_params reads.
bool is_sampling_field(std::string_view key);

// Typed readers of one member `key` of the object `body`, also used for the callers' own fields.
// Absent or null: nullopt, `out` unchanged. Otherwise the value must have the type and range.
bool json_present(const nlohmann::json& body, const char* key);
std::optional<ParamError> read_number(const nlohmann::json& body, const char* key, double lo,
                                      double hi, float& out);
std::optional<ParamError> read_integer(const nlohmann::json& body, const char* key, int64_t lo,
                                       int64_t hi, std::optional<int64_t>& out);
std::optional<ParamError> read_bool(const nlohmann::json& body, const char* key, bool& out);
// Token ids: the value `v` (of field `key`) must be an array of integers in [0, 2^31-1], non-empty
// unless allow_empty.
std::optional<ParamError> read_token_ids(const nlohmann::json& v, const char* key,
                                         std::vector<int32_t>& out, bool allow_empty);

}  // namespace cadenza
