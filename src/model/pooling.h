// Pooling: how an embedding model turns the hidden states of a sequence's tokens into one vector,
// and the vector arithmetic the embeddings endpoint applies after it.
//
//   auto pooling = pooling_of(file);                    // `<arch>.pooling_type`, if any
//   std::vector<float> v = pool(hidden, n, d, *pooling); // hidden: [n][d] -> [d]
//   l2_normalize(v);                                     // OpenAI clients expect unit vectors
//
// The GGUF convention (`<arch>.pooling_type`, an unsigned integer): 0 none, 1 mean, 2 CLS (the
// first token), 3 last token, 4 rank (a classification head over the CLS token: rerankers).
// Pure functions over host memory; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace cadenza::gguf {
class GgufFile;
}

namespace cadenza::model {

enum class Pooling { kNone = 0, kMean = 1, kCls = 2, kLast = 3, kRank = 4 };

// "none", "mean", "cls", "last", "rank".
std::string_view pooling_name(Pooling p);
// The inverse of pooling_name; nullopt for any other string.
std::optional<Pooling> parse_pooling(std::string_view name);

// `<general.architecture>.pooling_type` of the file: nullopt when the key is absent; an error
// when it is not an integer in [0, 4].
Result<std::optional<Pooling>> pooling_of(const gguf::GgufFile& file);

// One vector of `d` from the hidden states `hidden` ([n][d], row-major, n >= 1):
// kMean: the average of the rows (summed in row order, in double); kCls: row 0; kLast: row n-1.
// Requires hidden.size() == n * d and pooling one of those three (asserted).
std::vector<float> pool(std::span<const float> hidden, int64_t n, int64_t d, Pooling pooling);

// Scales v to Euclidean length 1 (a zero vector stays zero).
void l2_normalize(std::span<float> v);

// Cosine similarity of two vectors of equal length (0 when either is zero).
double cosine_similarity(std::span<const float> a, std::span<const float> b);

}  // namespace cadenza::model
