#include "cli/eval_inputs.h"

namespace cadenza::cli {

Result<std::vector<int32_t>> bos_then_text_tokens(const Tokenizer& tokenizer, std::string_view text,
                                                  const std::string& model) {
  if (tokenizer.bos_id() < 0) return make_error("{}: the vocabulary has no BOS token", model);
  std::vector<int32_t> tokens{tokenizer.bos_id()};
  const std::vector<int32_t> body = tokenizer.encode(text, /*add_special=*/false, /*parse_special=*/false);
  tokens.insert(tokens.end(), body.begin(), body.end());
  return tokens;
}

Status check_eval_model(const model::ModelConfig& config, const Tokenizer& tokenizer, int64_t ctx,
                        const std::string& model) {
  if (config.context_length > 0 && ctx > config.context_length) {
    return make_error("--ctx {} is larger than the context length of {} ({})", ctx, model,
                      config.context_length);
  }
  if (config.n_vocab != tokenizer.n_vocab()) {
    return make_error("{}: {} logits per token but {} vocabulary entries", model, config.n_vocab,
                      tokenizer.n_vocab());
  }
  return {};
}

}  // namespace cadenza::cli
