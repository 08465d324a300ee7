#include "quantize/mixture.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace cadenza::quantize {
namespace {

using Mix = Target::Mix;

struct Known {
  const char* name;
  DType base;
  uint32_t file_type;
  Mix mix;
};

// LLAMA_FTYPE_* numbers, as the reference writes general.file_type.
constexpr Known kKnown[] = {
    {"f32", DType::F32, 0, Mix::kNone},         {"f16", DType::F16, 1, Mix::kNone},
    {"bf16", DType::BF16, 32, Mix::kNone},      {"q8_0", DType::Q8_0, 7, Mix::kNone},
    {"q4_0", DType::Q4_0, 2, Mix::kNone},       {"q4_1", DType::Q4_1, 3, Mix::kNone},
    {"q5_0", DType::Q5_0, 8, Mix::kNone},       {"q5_1", DType::Q5_1, 9, Mix::kNone},
    {"q2_k", DType::Q2_K, 10, Mix::kQ2K},       {"q3_k_s", DType::Q3_K, 11, Mix::kQ3KS},
    {"q3_k_m", DType::Q3_K, 12, Mix::kQ3KM},    {"q3_k_l", DType::Q3_K, 13, Mix::kQ3KL},
    {"q4_k_s", DType::Q4_K, 14, Mix::kQ4KS},    {"q4_k_m", DType::Q4_K, 15, Mix::kQ4KM},
    {"q5_k_s", DType::Q5_K, 16, Mix::kQ5KS},    {"q5_k_m", DType::Q5_K, 17, Mix::kQ5KM},
    {"q6_k", DType::Q6_K, 18, Mix::kNone},      {"iq4_nl", DType::IQ4_NL, 25, Mix::kNone},
    {"iq4_xs", DType::IQ4_XS, 30, Mix::kNone},  {"mxfp4", DType::MXFP4, 38, Mix::kNone},
    {"iq3_s", DType::IQ3_S, 26, Mix::kNone},    {"iq3_xxs", DType::IQ3_XXS, 23, Mix::kNone},
    {"iq2_s", DType::IQ2_S, 28, Mix::kNone},    {"iq2_xs", DType::IQ2_XS, 20, Mix::kNone},
    {"iq2_xxs", DType::IQ2_XXS, 19, Mix::kNone}, {"iq1_m", DType::IQ1_M, 31, Mix::kNone},
    {"iq1_s", DType::IQ1_S, 24, Mix::kNone},
};

// The reference tool's short names for the *_M mixtures.
constexpr std::pair<const char*, const char*> kAliases[] = {
    {"q3_k", "q3_k_m"}, {"q4_k", "q4_k_m"}, {"q5_k", "q5_k_m"}};

bool is_grid_type(DType t) {
  switch (t) {
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS:
    case DType::IQ3_S: case DType::IQ1_S: case DType::IQ1_M:
      return true;
    default:
      return false;
  }
}

// The output matrix: 6 bits unless the base has as many.
DType output_type_of(DType base) {
  if (!is_block_quantized(base) || base == DType::Q8_0 || base == DType::Q6_K) return base;
  return DType::Q6_K;
}

// The token embedding is read row by row (get_rows): the base, but the grid types' encoders are
// meant for matrices multiplied with activations; their files keep the embedding at 4 bits.
DType embedding_type_of(DType base) { return is_grid_type(base) ? DType::Q4_K : base; }

// Layer index of "blk.N.<...>", or -1.
int64_t layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int64_t v = 0;
  size_t i = 4;
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])))
    v = v * 10 + (name[i++] - '0');
  return i < name.size() && name[i] == '.' ? v : -1;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The mixture's rule for one matrix, or nullopt (the base type).
std::optional<DType> mixture_rule(Mix mix, const std::string& name, int64_t i, int64_t n) {
  const bool v = ends_with(name, ".attn_v.weight");
  const bool down = ends_with(name, ".ffn_down.weight") || ends_with(name, ".ffn_down_exps.weight") ||
                    ends_with(name, ".ffn_down_shexp.weight");
  const bool attn_out = ends_with(name, ".attn_output.weight");
  if (i < 0 || (!v && !down && !attn_out)) return std::nullopt;
  switch (mix) {
    case Mix::kQ2K:
      return DType::Q3_K;  // attn_v, ffn_down, attn_output
    case Mix::kQ3KM:
      if (v) return i < 2 ? DType::Q5_K : DType::Q4_K;
      if (down) return i < n / 16 ? DType::Q5_K : DType::Q4_K;
      return DType::Q4_K;
    case Mix::kQ3KL:
      return DType::Q5_K;
    case Mix::kQ4KS:
      if (v && i < 4) return DType::Q5_K;
      if (down && i < n / 8) return DType::Q5_K;
      return std::nullopt;
    case Mix::kQ4KM:
    case Mix::kQ5KM:
      if ((v || down) && use_more_bits(i, n)) return DType::Q6_K;
      return std::nullopt;
    case Mix::kQ3KS:
    case Mix::kQ5KS:
    case Mix::kNone:
      return std::nullopt;
  }
  return std::nullopt;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

const std::vector<std::string>& target_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Known& k : kKnown) v.emplace_back(k.name);
    for (const auto& [alias, target] : kAliases) v.emplace_back(alias);
    return v;
  }();
  return names;
}

Result<Target> parse_target(std::string_view name) {
  std::string n = lower(name);
  for (const auto& [alias, target] : kAliases)
    if (n == alias) n = target;
  for (const Known& k : kKnown) {
    if (n == k.name) return Target{lower(name), k.base, k.file_type, k.mix};
  }
  std::string list;
  for (const std::string& t : target_names()) list += (list.empty() ? "" : ", ") + t;
  return make_error("unknown quantization type '{}' (known: {})", name, list);
}

Result<Overrides::Pattern> parse_tensor_type(const std::string& spec) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    return make_error("--tensor-type '{}': expected PATTERN=TYPE", spec);
  const std::string pattern = spec.substr(0, eq), type_name = spec.substr(eq + 1);
  const std::optional<DType> type = dtype_from_name(type_name);
  if (!type || !traits(*type).compute_supported)
    return make_error("--tensor-type '{}': unknown or unsupported type '{}'", spec, type_name);
  try {
    return Overrides::Pattern{pattern, std::regex(pattern, std::regex::ECMAScript), *type};
  } catch (const std::regex_error& e) {
    return make_error("--tensor-type '{}': bad regular expression: {}", spec, e.what());
  }
}

DType fit_row(DType t, int64_t row) {
  if (row % traits(t).block_size == 0) return t;
  if (row % 32 != 0) return DType::F16;
  switch (t) {
    case DType::Q4_K: return DType::Q5_0;
    case DType::Q5_K: return DType::Q5_1;
    case DType::Q6_K: return DType::Q8_0;
    case DType::IQ4_XS: return DType::IQ4_NL;
    case DType::Q2_K: case DType::Q3_K: case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S:
    case DType::IQ3_XXS: case DType::IQ3_S: case DType::IQ1_S: case DType::IQ1_M:
      return DType::Q4_0;
    default: return DType::Q8_0;
  }
}

bool use_more_bits(int64_t i, int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

Choice choose(const Target& target, const Overrides& overrides, const ModelFacts& facts,
              const std::string& name, const std::vector<int64_t>& shape, DType input_type) {
  Choice c{input_type};
  const bool matrix = shape.size() >= 2 && shape[1] > 1;
  if (!matrix || ends_with(name, ".ffn_gate_inp.weight")) return c;
  std::optional<DType> t;
  for (const Overrides::Pattern& p : overrides.tensor_types) {
    if (std::regex_search(name, p.re)) {
      t = p.type;
      break;
    }
  }
  const bool is_output = name == "output.weight" || (name == "token_embd.weight" && !facts.has_output);
  if (!t && is_output) t = overrides.output_type ? *overrides.output_type
                                                 : overrides.pure ? target.base : output_type_of(target.base);
  if (!t && name == "token_embd.weight")
    t = overrides.token_embedding_type ? *overrides.token_embedding_type
                                       : overrides.pure ? target.base : embedding_type_of(target.base);
  if (!t && !overrides.pure) t = mixture_rule(target.mix, name, layer_of(name), facts.n_layers);
  c.wanted = t.value_or(target.base);
  c.type = fit_row(c.wanted, shape[0]);
  c.fallback = c.type != c.wanted;
  c.quantized = true;
  return c;
}

}  // namespace cadenza::quantize
