// The KL-divergence base file of `cadenza perplexity --kl-divergence-base FILE`: what a base
// (full-precision) model predicted at every scored position of the perplexity chunks, so that
// another model can later be compared against it without the base model (docs/perplexity.md).
//
// Layout (little-endian, no padding):
//   char[8]  magic "CDZKLB\0\0"
//   u32      version (1)
//   u32      n_vocab      the base model's vocabulary size
//   u32      ctx          tokens per chunk
//   u32      n_chunks
//   u32      first        the first scored logit row of a chunk; rows first..ctx-2 are scored,
//                         each predicting the next token (n_scored = ctx - 1 - first per chunk)
//   u32      top_k        entries kept per position (1..n_vocab)
//   i32      bos_id       the token that replaced each chunk's first token
//   u32      tail_samples ids sampled per position from outside the top_k (0..2^16)
//   i32[n_chunks * ctx]   the text's tokens (before the BOS replacement)
//   n_chunks * n_scored records, chunk by chunk, in position order:
//     f32    target_logprob  the base's log-probability of the actual next token
//     f32    rest_logmass    log of the base's probability outside the top_k ids (-inf if none)
//     top_k x { i32 id; f32 logprob }         most probable first
//     tail_samples x { i32 id; f32 logprob }  drawn from the other ids in proportion to their
//                                             probability (eval::sample_tail), in id order
// A record is 8 + 8 * (top_k + tail_samples) bytes: 1544 bytes at the defaults of `cadenza
// perplexity` (128 and 64), 19.5 MB for 200 chunks of 128 tokens, whatever the vocabulary.
//
// Ownership: a writer / reader owns its stream. Thread-safety: none.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "eval/scoring.h"
#include "util/result.h"

namespace cadenza::eval {

struct KlBaseHeader {
  uint32_t version = 1;
  uint32_t n_vocab = 0;
  uint32_t ctx = 0;
  uint32_t n_chunks = 0;
  uint32_t first = 0;
  uint32_t top_k = 0;
  int32_t bos_id = 0;
  uint32_t tail_samples = 0;
  std::vector<int32_t> tokens;  // n_chunks * ctx

  uint32_t n_scored() const { return ctx - 1 - first; }
  uint64_t record_bytes() const {
    return 8 + 8 * (static_cast<uint64_t>(top_k) + tail_samples);
  }
  // Bytes of the whole file with this header.
  uint64_t file_bytes() const;
};

// One scored position.
struct KlBaseRecord {
  float target_logprob = 0;
  float rest_logmass = 0;
  std::vector<TopEntry> top;    // top_k entries
  std::vector<TopEntry> tail;   // tail_samples entries
};

class KlBaseWriter {
 public:
  // Creates (truncates) `path` and writes the header. Requires tokens.size() == n_chunks * ctx,
  // 1 <= top_k <= n_vocab and first < ctx - 1. Errors: the file cannot be created or written.
  static Result<std::unique_ptr<KlBaseWriter>> create(const std::string& path,
                                                      const KlBaseHeader& header);
  // Appends one record (requires record.top.size() == top_k, record.tail.size() ==
  // tail_samples). Records go in file order.
  Status append(const KlBaseRecord& record);
  // Flushes and closes; an error when the record count is not n_chunks * n_scored or the
  // write failed.
  Status finish();

 private:
  KlBaseWriter(std::string path, KlBaseHeader header) : path_(std::move(path)), header_(std::move(header)) {}
  std::string path_;
  KlBaseHeader header_;
  std::ofstream out_;
  uint64_t records_ = 0;
  std::vector<char> buf_;
};

class KlBaseReader {
 public:
  // Opens `path` and reads the header. Errors name the file: missing, not a base file (magic),
  // another version, inconsistent header fields, a size that does not match the header (a
  // truncated or damaged file).
  static Result<std::unique_ptr<KlBaseReader>> open(const std::string& path);
  const KlBaseHeader& header() const { return header_; }
  // Reads the next record in file order. Errors: past the last record, a read failure, an id
  // outside the vocabulary.
  Result<KlBaseRecord> next();

 private:
  KlBaseReader(std::string path) : path_(std::move(path)) {}
  std::string path_;
  KlBaseHeader header_;
  std::ifstream in_;
  uint64_t records_ = 0;
  std::vector<char> buf_;
};

}  // namespace cadenza::eval
