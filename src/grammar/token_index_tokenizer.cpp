// TokenIndex::from_tokenizer, apart so that the index itself needs no tokenizer.
#include "grammar/token_index.h"
#include "tokenizer/tokenizer.h"

namespace cadenza::grammar {

std::shared_ptr<const TokenIndex> TokenIndex::from_tokenizer(const Tokenizer& tokenizer) {
  const int32_t n = tokenizer.n_vocab();
  std::vector<std::string> bytes(n), special_text(n);
  std::vector<uint8_t> special(n, 0);
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < n; ++id) {
    if (tokenizer.is_control(id)) {
      special[id] = 1;
      special_text[id] = tokenizer.token_piece(id, true);
    } else {
      bytes[id] = tokenizer.token_piece(id, false);
    }
    if (tokenizer.is_end_of_generation(id)) eog.push_back(id);
  }
  return build(std::move(bytes), std::move(special), std::move(eog), std::move(special_text));
}

}  // namespace cadenza::grammar
