#include "request/validate_request.h"

#include <cmath>

#include <fmt/format.h>

namespace cadenza {

namespace {

template <class... Args>
ParamError reject(const char* param, fmt::format_string<Args...> format, Args&&... args) {
  return ParamError{param, fmt::format(format, std::forward<Args>(args)...)};
}

}  // namespace

std::optional<ParamError> validate_request(std::span<const int32_t> prompt,
                                           const SamplingParams& p, const RequestLimits& limits) {
  const int32_t n_vocab = limits.n_vocab;
  if (prompt.empty()) return reject("prompt", "the prompt is empty");
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= n_vocab)
      return reject("prompt", "prompt token {} at index {} is outside the vocabulary [0, {})",
                    prompt[i], i, n_vocab);
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  // The wording of OpenAI's context-length errors, which clients recognise.
  if (n_prompt >= limits.max_model_len)
    return reject("prompt",
                  "This model's maximum context length is {} tokens. However, your prompt has {} "
                  "tokens, which leaves no room for the completion.",
                  limits.max_model_len, n_prompt);
  if (p.max_tokens < 1) return reject("max_tokens", "max_tokens must be >= 1 (got {})", p.max_tokens);
  if (n_prompt + p.max_tokens > limits.max_model_len)
    return reject("max_tokens",
                  "This model's maximum context length is {} tokens. However, you requested {} "
                  "tokens ({} in the prompt, {} for the completion). Please reduce the prompt or "
                  "max_tokens.",
                  limits.max_model_len, n_prompt + p.max_tokens, n_prompt, p.max_tokens);
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    return reject("temperature", "temperature must be finite and >= 0 (got {})", p.temperature);
  if (!(p.top_p > 0 && p.top_p <= 1))
    return reject("top_p", "top_p must be in (0, 1] (got {})", p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1))
    return reject("min_p", "min_p must be in [0, 1] (got {})", p.min_p);
  for (const std::string& s : p.stop)
    if (s.empty()) return reject("stop", "stop strings must not be empty");
  for (int32_t id : p.stop_token_ids)
    if (id < 0 || id >= n_vocab)
      return reject("stop_token_ids", "stop token id {} is outside the vocabulary [0, {})", id,
                    n_vocab);
  if (p.n < 1 || p.n > SamplingParams::kMaxN)
    return reject("n", "n must be in [1, {}] (got {})", SamplingParams::kMaxN, p.n);
  if (p.logprobs < -1 || p.logprobs > SamplingParams::kMaxLogprobs)
    return reject("logprobs", "logprobs must be in [0, {}] or -1 for none (got {})",
                  SamplingParams::kMaxLogprobs, p.logprobs);
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= n_vocab)
      return reject("logit_bias", "logit_bias token id {} is outside the vocabulary [0, {})", id,
                    n_vocab);
    if (!std::isfinite(bias)) return reject("logit_bias", "logit_bias of token {} must be finite", id);
  }
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0)
    return reject("repetition_penalty", "repetition_penalty must be finite and > 0 (got {})",
                  p.repetition_penalty);
  if (!std::isfinite(p.presence_penalty))
    return reject("presence_penalty", "presence_penalty must be finite");
  if (!std::isfinite(p.frequency_penalty))
    return reject("frequency_penalty", "frequency_penalty must be finite");
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens)
    return reject("min_tokens", "min_tokens must be in [0, max_tokens = {}] (got {})", p.max_tokens,
                  p.min_tokens);
  return std::nullopt;
}

}  // namespace cadenza
