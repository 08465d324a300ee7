// StreamingDetokenizer: token ids in, text out, never a broken character.
//
// Generated tokens arrive one at a time, and a character's bytes may be spread over several
// tokens (byte-fallback tokens <0xF0><0x9F><0x98><0x80>, or byte-level BPE pieces that cut an
// emoji). push() returns only complete, valid UTF-8: the bytes of an unfinished character are held
// back until the tokens completing it arrive. Bytes that can never form a valid character (a stray
// continuation byte, a lead byte followed by a non-continuation, an overlong form) are replaced
// by U+FFFD, one per maximal invalid subsequence (the Unicode-recommended practice), as soon as
// they are known to be invalid; finish() flushes a trailing unfinished character as U+FFFD.
//
// Where the stream starts matters for SentencePiece vocabularies with a space prefix: decode()
// removes one leading space of the text's first token (the space encode() added). A stream that
// stands alone (the default constructor) does the same to its first token. A stream that
// continues a text, such as generated tokens after their prompt, is decoded in that context (the
// constructor taking `context`): no piece loses its space, so prompt text + stream text equals
// decode(context + stream) (`Once upon a time` + ` of the`, not `Once upon a timeof the`).
//
// For any token sequence whose decode() is valid UTF-8, the concatenation of push() results and
// finish() equals decode() of the stream's tokens (standalone), or decode(context + tokens) minus
// decode(context) (in context; when decode(context) is valid UTF-8 too).
//
// Ownership: keeps a reference to the Tokenizer, which must outlive it.
// Thread-safety: one StreamingDetokenizer per stream; not for concurrent use.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace cadenza {

class Tokenizer;

class StreamingDetokenizer {
 public:
  // A standalone stream: its first token is decoded as the start of a text.
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool render_special = false);
  // A stream that continues `context` (the prompt's token ids; only whether it is empty matters
  // today, the span is not kept). An empty context is the start of a text, as above.
  StreamingDetokenizer(const Tokenizer& tokenizer, std::span<const int32_t> context,
                       bool render_special = false);

  // The text that `id` completes (possibly empty).
  std::string push(int32_t id);
  // Flushes what is held back (as U+FFFD) and resets, so the object can start a new stream (at
  // the same place: the start of a text, or after the same context).
  std::string finish();

 private:
  // Moves the complete prefix of pending_ to the result; invalid bytes become U+FFFD.
  std::string drain(bool final);

  const Tokenizer& tokenizer_;
  bool render_special_;
  bool at_start_of_text_;  // the stream begins a text (no context): its first piece loses a space
  bool first_ = true;
  std::string pending_;  // at most 3 bytes: the start of an unfinished character
};

}  // namespace cadenza
