// What the chunked-evaluation commands (perplexity, imatrix) share: the token sequence they cut
// into chunks, and the checks of a loaded model against the tokenizer and the chunk length.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace cadenza::cli {

// BOS, then the text's tokens (no special-token parsing): the reference's sequence, whose chunk
// boundaries this fixes (without the BOS every chunk would start one token earlier). An error
// when the vocabulary has no BOS; `model` names the file in it.
Result<std::vector<int32_t>> bos_then_text_tokens(const Tokenizer& tokenizer, std::string_view text,
                                                  const std::string& model);

// After the model loads: chunks of `ctx` tokens fit its trained context (when it states one), and
// it has one logit per vocabulary entry. The error names `model`.
Status check_eval_model(const model::ModelConfig& config, const Tokenizer& tokenizer, int64_t ctx,
                        const std::string& model);

}  // namespace cadenza::cli
