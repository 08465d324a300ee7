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
// For any token sequence whose decode() is valid UTF-8, the concatenation of push() results and
// finish() equals decode() (the same leading-space removal on the first token applies).
//
// Ownership: keeps a reference to the Tokenizer, which must outlive it.
// Thread-safety: one StreamingDetokenizer per stream; not for concurrent use.
#pragma once

#include <cstdint>
#include <string>

namespace cadenza {

class Tokenizer;

class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool render_special = false);

  // The text that `id` completes (possibly empty).
  std::string push(int32_t id);
  // Flushes what is held back (as U+FFFD) and resets, so the object can start a new stream.
  std::string finish();

 private:
  // Moves the complete prefix of pending_ to the result; invalid bytes become U+FFFD.
  std::string drain(bool final);

  const Tokenizer& tokenizer_;
  bool render_special_;
  bool first_ = true;
  std::string pending_;  // at most 3 bytes: the start of an unfinished character
};

}  // namespace cadenza
