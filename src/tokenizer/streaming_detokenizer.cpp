#include "tokenizer/streaming_detokenizer.h"

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_bytes.h"

namespace cadenza {

namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
}  // namespace

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool render_special)
    : tokenizer_(tokenizer), render_special_(render_special), at_start_of_text_(true) {}

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer,
                                           std::span<const int32_t> context, bool render_special)
    : tokenizer_(tokenizer), render_special_(render_special), at_start_of_text_(context.empty()) {}

std::string StreamingDetokenizer::push(int32_t id) {
  const int32_t ids[1] = {id};
  // decode() of a single id applies the start-of-text space removal; every other token (and the
  // first one after a context, whose decode() removed the space of the context's first token
  // only) is its raw piece.
  pending_ += first_ && at_start_of_text_ ? tokenizer_.decode(ids, render_special_)
                                          : tokenizer_.token_piece(id, render_special_);
  first_ = false;
  return drain(false);
}

std::string StreamingDetokenizer::finish() {
  std::string out = drain(true);
  first_ = true;
  return out;
}

std::string StreamingDetokenizer::drain(bool final) {
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const tok::Utf8Check c = tok::check_utf8(std::string_view(pending_).substr(i));
    if (c.kind == tok::Utf8Check::kComplete) {
      out.append(pending_, i, c.length);
      i += c.length;
    } else if (c.kind == tok::Utf8Check::kInvalid) {
      out += kReplacement;
      i += c.length;
    } else if (final) {
      out += kReplacement;  // an unfinished character at the end of the stream
      i = pending_.size();
    } else {
      break;  // wait for the bytes that complete it
    }
  }
  pending_.erase(0, i);
  return out;
}

}  // namespace cadenza
