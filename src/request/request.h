// Request: the state of one generation request as the scheduler and the engine loop see it.
//
// There is no prefill or decode mode. A request's tokens are its prompt followed by the tokens
// generated so far (`tokens`), and `num_computed_tokens` says how many of them have their K/V in the
// cache. Each step the scheduler picks how many of the remaining tokens to compute (a prompt chunk,
// the one newest token, or everything again after a preemption); when the computed count reaches
// num_tokens(), the last computed position's logits give the next token.
//
// Plain data (src/request, below both src/sched and src/engine): the scheduler and the engine
// share it without depending on each other.
// Ownership: the Scheduler owns live requests (std::unique_ptr); EngineCore reads and appends to
// them between schedule() and finish(). Thread-safety: none (the engine thread only).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "request/image_input.h"
#include "request/request_id.h"
#include "request/sampling_params.h"

namespace cadenza {

enum class RequestStatus : uint8_t {
  kWaiting,    // never scheduled yet, in the waiting queue
  kRunning,    // holds KV blocks, scheduled every step until it finishes or is preempted
  kPreempted,  // lost its blocks (recompute), back in the waiting queue
  kFinished,
};

enum class FinishReason : uint8_t {
  kNone,    // not finished
  kStop,    // EOS, a stop token id or a stop string
  kLength,  // max_tokens reached, or the context is full
  kAbort,   // abort() by the caller
  kError,   // the forward pass failed
};

inline const char* to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
  }
  return "?";
}

struct Request {
  RequestId id = 0;
  std::vector<int32_t> tokens;    // prompt followed by the generated tokens
  int32_t num_prompt_tokens = 0;
  int32_t num_computed_tokens = 0;  // tokens[0, num_computed_tokens) have K/V in the cache
  SamplingParams params;          // includes max_tokens, stop ids/strings, ignore_eos
  int32_t priority = 0;           // lower value = more important (scheduled first, preempted last)
  uint64_t arrival_seq = 0;       // FCFS order within a priority class; set by Scheduler::add
  std::chrono::steady_clock::time_point arrival_time{};
  std::string cache_salt;         // prefix-cache isolation key (kv extra_key); empty: shared
  // Images in the prompt, in order of position, not overlapping, inside the prompt (EngineCore
  // checks this in add_request); their rows enter the batch as embeddings.
  std::vector<ImageInput> images;
  RequestStatus status = RequestStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  int32_t num_preemptions = 0;
  int32_t num_cached_prompt_tokens = -1;  // prefix-cache hit at first admission; -1: not yet
  // Speculative decoding: the last num_draft_tokens of `tokens` are unverified guesses that the
  // engine appended before Scheduler::schedule() (only to a request in its decode phase:
  // num_computed_tokens == num_tokens() - num_draft_tokens - 1). The scheduler computes as many
  // of them as fit (dropping the rest, and all of them on preemption or abort); after the forward
  // pass the engine removes them and appends the verified tokens. 0 outside that window.
  int32_t num_draft_tokens = 0;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }  // drafts included
  // Drops the unverified draft tokens (a no-op without them).
  void drop_drafts() {
    tokens.resize(tokens.size() - static_cast<size_t>(num_draft_tokens));
    num_draft_tokens = 0;
  }
  std::span<const int32_t> prompt() const {
    return std::span<const int32_t>(tokens).first(static_cast<size_t>(num_prompt_tokens));
  }
  std::span<const int32_t> output() const {
    return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(num_prompt_tokens));
  }
  bool finished() const { return status == RequestStatus::kFinished; }
};

}  // namespace cadenza
