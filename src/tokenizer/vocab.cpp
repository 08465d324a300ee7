#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode_bytes.h"

namespace cadenza::tok {

namespace {

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kPreKey = "tokenizer.ggml.pre";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";
constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";

// Texts the reference treats as end-of-generation whatever the metadata says (Llama 3's
// <|eot_id|>, ChatML's <|im_end|>, Phi-3's <|end|>, Gemma's <end_of_turn>...). Chat models
// often declare only the base model's EOS, so without this list generation would run past the
// end of a turn.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>",    "<|im_end|>",    "<|end|>",        "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>",    "<EOT>",         "_<EOT>",         "<|end_of_text|>", "<end_of_utterance>",
    "<|return|>",    "<|call|>",
};
// Texts that identify the end-of-turn token when tokenizer.ggml.eot_token_id is absent.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>",      "_<EOT>",
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Reads an optional token-id key into `id`. Negative values mean "none" (some converters write
// -1); ids past the vocabulary are an error.
Status read_token_id(const gguf::GgufFile& f, std::string_view key, int32_t n_tokens,
                     int32_t& id) {
  if (f.find(key) == nullptr) return {};
  auto v = f.get_int(key);
  if (!v) return Error(v.error());
  if (*v < 0) {
    id = -1;
    return {};
  }
  if (*v >= n_tokens) {
    return make_error("{}: {} = {} is outside the vocabulary ({} tokens)", f.name(), key, *v,
                      n_tokens);
  }
  id = static_cast<int32_t>(*v);
  return {};
}

// The reference's per-model special-token flags. Phi-3's chat tokens are declared in the
// original tokenizer with rstrip, so the whitespace after "<|user|>" etc. is not tokenized.
void apply_model_token_flags(const gguf::GgufFile& f, Vocab& v) {
  const auto name = f.get_string_or("general.name", "");
  if (!name) return;
  const std::string n = lower(*name);
  if (n.find("phi-3") == std::string::npos && n.find("phi3") == std::string::npos) return;
  for (int32_t id = 0; id < v.size(); ++id) {
    const TokenType t = v.types[id];
    if (t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) {
      v.rstrip[id] = 1;
    }
  }
  if (auto id = v.find("</s>")) v.rstrip[*id] = 1;
  for (std::string_view text : {"<unk>", "<s>", "<|endoftext|>"}) {
    if (auto id = v.find(text)) v.rstrip[*id] = 0;
  }
}

Status read_tokens(const gguf::GgufFile& f, Vocab& v) {
  auto tokens = f.get_string_array(kTokensKey);
  if (!tokens) return Error(tokens.error());
  if (tokens->empty()) return make_error("{}: {} is empty", f.name(), kTokensKey);
  if (tokens->size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return make_error("{}: {} has {} entries, more than a token id can address", f.name(),
                      kTokensKey, tokens->size());
  }
  v.texts = std::move(*tokens);
  const size_t n = v.texts.size();

  v.scores.assign(n, 0.0f);
  if (f.find(kScoresKey) != nullptr) {
    auto scores = f.get_float_array(kScoresKey);
    if (!scores) return Error(scores.error());
    if (scores->size() != n) {
      return make_error("{}: {} has {} entries but {} has {}", f.name(), kScoresKey,
                        scores->size(), kTokensKey, n);
    }
    for (size_t i = 0; i < n; ++i) {
      // NaN would break the strict ordering the merge heap relies on.
      const double d = (*scores)[i];
      v.scores[i] = std::isnan(d) ? -std::numeric_limits<float>::infinity() : static_cast<float>(d);
    }
  }

  v.types.assign(n, TokenType::kNormal);
  if (f.find(kTypesKey) != nullptr) {
    auto types = f.get_int_array(kTypesKey);
    if (!types) return Error(types.error());
    if (types->size() != n) {
      return make_error("{}: {} has {} entries but {} has {}", f.name(), kTypesKey, types->size(),
                        kTokensKey, n);
    }
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = (*types)[i];
      if (t < 0 || t > 6) {
        return make_error("{}: {}[{}] = {} is not a token type (0..6)", f.name(), kTypesKey, i,
                          t);
      }
      v.types[i] = static_cast<TokenType>(t);
    }
  }

  for (size_t i = 0; i < n; ++i) {
    // An empty text could never be produced nor matched; the reference renames it the same way.
    if (v.texts[i].empty()) v.texts[i] = fmt::format("[EMPTY_{}]", i);
    const int32_t previous = v.index.insert(v.texts, static_cast<int32_t>(i));
    if (previous >= 0) {
      return make_error("{}: {}: token {} duplicates the text of token {}", f.name(), kTokensKey,
                        i, previous);
    }
    if (v.types[i] == TokenType::kByte && !parse_byte_token(v.texts[i])) {
      return make_error("{}: token {} has type byte but its text is not of the form <0xXX>",
                        f.name(), i);
    }
  }
  return {};
}

Status read_special_ids(const gguf::GgufFile& f, Vocab& v) {
  const int32_t n = v.size();
  if (v.kind == VocabKind::kSpm) {
    // The reference's SentencePiece defaults when the keys are absent (Llama 2 layout).
    v.unk = n > 0 ? 0 : -1;
    v.bos = n > 1 ? 1 : -1;
    v.eos = n > 2 ? 2 : -1;
  }
  int32_t fim_pad = -1, fim_rep = -1, fim_sep = -1, cls = -1, sep = -1;
  const std::pair<std::string_view, int32_t*> keys[] = {
      {"tokenizer.ggml.cls_token_id", &cls},
      {"tokenizer.ggml.seperator_token_id", &sep},  // sic: the GGUF key's spelling
      {"tokenizer.ggml.bos_token_id", &v.bos},
      {"tokenizer.ggml.eos_token_id", &v.eos},
      {"tokenizer.ggml.unknown_token_id", &v.unk},
      {"tokenizer.ggml.padding_token_id", &v.pad},
      {"tokenizer.ggml.eot_token_id", &v.eot},
      {"tokenizer.ggml.eom_token_id", &v.eom},
      {"tokenizer.ggml.fim_pad_token_id", &fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &fim_rep},
      {"tokenizer.ggml.fim_sep_token_id", &fim_sep},
  };
  for (const auto& [key, id] : keys) {
    if (Status s = read_token_id(f, key, n, *id); !s) return s;
  }
  if (v.kind == VocabKind::kWpm) {
    // BERT wraps text in [CLS] ... [SEP]: they are its BOS and EOS unless those are given.
    if (f.find("tokenizer.ggml.bos_token_id") == nullptr) v.bos = cls;
    if (f.find("tokenizer.ggml.eos_token_id") == nullptr) v.eos = sep;
    if (v.unk < 0 && f.find("tokenizer.ggml.unknown_token_id") == nullptr) {
      if (auto id = v.find("[UNK]")) v.unk = *id;
    }
  }

  // End-of-generation set: metadata ids, then the well-known texts. A token recognised by its
  // text is made a control token (as the reference does), so it is not rendered as text.
  if (v.eot < 0) {
    for (std::string_view text : kEotTexts) {
      if (auto id = v.find(text)) {
        v.eot = *id;
        break;
      }
    }
  }
  if (v.eom < 0) {
    if (auto id = v.find("<|eom_id|>")) v.eom = *id;
  }
  v.end_of_generation.assign(static_cast<size_t>(n), 0);
  for (std::string_view text : kEogTexts) {
    if (auto id = v.find(text)) {
      v.end_of_generation[*id] = 1;
      if (v.types[*id] != TokenType::kControl) v.types[*id] = TokenType::kControl;
    }
  }
  for (int32_t id : {v.eos, v.eot, v.eom, fim_pad, fim_rep, fim_sep}) {
    if (id >= 0) v.end_of_generation[id] = 1;
  }
  return {};
}

// Defaults of the flags when their keys are absent, per kind (the model authors' tokenizers).
struct FlagDefaults {
  bool add_bos, add_eos, add_space_prefix;
};
FlagDefaults flag_defaults(VocabKind kind, const PreTokenizerSpec* spec) {
  switch (kind) {
    case VocabKind::kSpm: return {true, false, true};
    case VocabKind::kBpe: return {spec->add_bos, false, false};
    case VocabKind::kSpmBpe: return {true, false, false};  // Gemma 4: <bos>, no space prefix
    case VocabKind::kWpm: return {true, true, true};        // [CLS] text [SEP]
    case VocabKind::kUgm: return {false, true, true};       // T5: text </s>, a dummy prefix
  }
  return {false, false, false};
}

Status read_flags(const gguf::GgufFile& f, const PreTokenizerSpec* spec, Vocab& v) {
  const FlagDefaults d = flag_defaults(v.kind, spec);
  auto add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", d.add_bos);
  if (!add_bos) return Error(add_bos.error());
  auto add_eos = f.get_bool_or("tokenizer.ggml.add_eos_token", d.add_eos);
  if (!add_eos) return Error(add_eos.error());
  auto prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", d.add_space_prefix);
  if (!prefix) return Error(prefix.error());
  v.add_bos = *add_bos;
  v.add_eos = *add_eos;
  // A default cannot ask for a token the file does not have; only an explicit key is an error.
  if (f.find("tokenizer.ggml.add_bos_token") == nullptr && v.bos < 0) v.add_bos = false;
  if (f.find("tokenizer.ggml.add_eos_token") == nullptr && v.eos < 0) v.add_eos = false;
  // Byte-level BPE does not escape spaces; the flag has no meaning there.
  v.add_space_prefix = v.escapes_spaces() && *prefix;
  // WordPiece: word-initial pieces carry U+2581, so decoded text starts with a space to drop.
  if (v.kind == VocabKind::kWpm) v.add_space_prefix = true;
  v.ignore_merges = v.kind == VocabKind::kBpe && spec->ignore_merges;
  if (v.add_bos && v.bos < 0) {
    return make_error("{}: tokenizer.ggml.add_bos_token is true but there is no BOS token id",
                      f.name());
  }
  if (v.add_eos && v.eos < 0) {
    return make_error("{}: tokenizer.ggml.add_eos_token is true but there is no EOS token id",
                      f.name());
  }
  return {};
}

void build_byte_tokens(Vocab& v) {
  v.byte_tokens.fill(-1);
  if (v.kind == VocabKind::kBpe) {
    for (int b = 0; b < 256; ++b) {
      if (auto id = v.find(byte_to_unicode(static_cast<uint8_t>(b)))) v.byte_tokens[b] = *id;
    }
    return;
  }
  for (int32_t id = 0; id < v.size(); ++id) {
    if (v.types[id] != TokenType::kByte) continue;
    const uint8_t b = *parse_byte_token(v.texts[id]);
    if (v.byte_tokens[b] < 0) v.byte_tokens[b] = id;
  }
  for (int b = 0; b < 256; ++b) {
    if (v.byte_tokens[b] >= 0) continue;
    if (auto id = v.find(std::string(1, static_cast<char>(b)))) {
      v.byte_tokens[b] = *id;
    } else {
      v.byte_tokens[b] = v.unk;
    }
  }
}

// SentencePiece's normalizer settings. remove_extra_whitespaces defaults to SentencePiece's own
// default (true) when the key is absent.
Status read_unigram_keys(const gguf::GgufFile& f, Vocab& v) {
  auto ws = f.get_bool_or("tokenizer.ggml.remove_extra_whitespaces", true);
  if (!ws) return Error(ws.error());
  v.remove_extra_whitespaces = *ws;
  constexpr std::string_view kCharsmapKey = "tokenizer.ggml.precompiled_charsmap";
  if (f.find(kCharsmapKey) == nullptr) return {};
  auto bytes = f.get_int_array(kCharsmapKey);
  if (!bytes) return Error(bytes.error());
  v.charsmap.reserve(bytes->size());
  for (size_t i = 0; i < bytes->size(); ++i) {
    const int64_t b = (*bytes)[i];
    if (b < -128 || b > 255) {
      return make_error("{}: {}[{}] = {} is not a byte", f.name(), kCharsmapKey, i, b);
    }
    v.charsmap.push_back(static_cast<uint8_t>(b));
  }
  return {};
}

}  // namespace

std::optional<uint8_t> parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(text[3]), lo = hex(text[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<uint8_t>(hi * 16 + lo);
}

Result<Vocab> load_vocab(const gguf::GgufFile& file) {
  Vocab v;
  auto model = file.get_string(kModelKey);
  if (!model) return Error(model.error());
  v.model = *model;
  if (v.model == "llama") {
    v.kind = VocabKind::kSpm;
  } else if (v.model == "gpt2") {
    v.kind = VocabKind::kBpe;
  } else if (v.model == "gemma4") {
    v.kind = VocabKind::kSpmBpe;
  } else if (v.model == "bert") {
    v.kind = VocabKind::kWpm;
  } else if (v.model == "t5") {
    v.kind = VocabKind::kUgm;
  } else {
    return make_error(
        "{}: {} '{}' is not supported (supported: 'llama' SentencePiece-style, 'gpt2' "
        "byte-level BPE, 'gemma4' SentencePiece-style BPE, 'bert' WordPiece, 't5' Unigram; not "
        "'rwkv', 'plamo2', or vocabulary-less files)",
        file.name(), kModelKey, v.model);
  }

  const PreTokenizerSpec* spec = nullptr;
  if (v.kind == VocabKind::kBpe) {
    auto pre = file.get_string_or(kPreKey, "default");
    if (!pre) return Error(pre.error());
    v.pre = *pre;
    spec = find_pretokenizer(v.pre);
    if (spec == nullptr) {
      return make_error("{}: {} '{}' is not a supported pre-tokenizer (supported: {})",
                        file.name(), kPreKey, v.pre, supported_pretokenizers());
    }
  } else {
    // The other kinds have a fixed pre-tokenization; tokenizer.ggml.pre is not consulted.
    v.pre = "default";
  }

  if (Status s = read_tokens(file, v); !s) return s.error_value();
  v.lstrip.assign(v.texts.size(), 0);
  v.rstrip.assign(v.texts.size(), 0);
  if (Status s = read_special_ids(file, v); !s) return s.error_value();
  if (Status s = read_flags(file, spec, v); !s) return s.error_value();
  apply_model_token_flags(file, v);
  build_byte_tokens(v);

  if (v.kind == VocabKind::kUgm) {
    if (Status s = read_unigram_keys(file, v); !s) return s.error_value();
  }
  if (v.kind == VocabKind::kBpe || v.kind == VocabKind::kSpmBpe) {
    auto merges = file.get_string_array(kMergesKey);
    if (!merges) return Error(merges.error());
    v.merges = std::move(*merges);
  }
  return v;
}

}  // namespace cadenza::tok
