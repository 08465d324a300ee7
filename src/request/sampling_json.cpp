#include "request/sampling_json.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <string>

#include <fmt/format.h>

namespace cadenza {

using nlohmann::json;

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

ParamError field_error(const char* key, std::string message) { return ParamError{key, std::move(message)}; }

ParamError out_of_range(const char* key, auto lo, auto hi) {
  return field_error(key, fmt::format("'{}' must be between {} and {}", key, lo, hi));
}

constexpr const char* kFields[] = {
    "max_tokens",     "max_completion_tokens", "temperature",      "top_p",
    "min_p",          "top_k",                 "seed",             "stop",
    "stop_token_ids", "ignore_eos",            "presence_penalty", "frequency_penalty",
    "repetition_penalty", "logit_bias",        "min_tokens",       "speculative",
};

std::optional<ParamError> read_stop(const json& body, std::vector<std::string>& out) {
  if (!json_present(body, "stop")) return std::nullopt;
  const json& s = body.at("stop");
  const ParamError wrong = field_error("stop", "'stop' must be a string or a list of strings");
  if (s.is_string()) {  // "" means none (an empty stop string inside an array is an error)
    out.clear();
    if (!s.get<std::string>().empty()) out.push_back(s.get<std::string>());
    return std::nullopt;
  }
  if (!s.is_array()) return wrong;
  if (s.size() > 16) return field_error("stop", "'stop' holds at most 16 strings");
  std::vector<std::string> stops;
  for (const json& x : s) {
    if (!x.is_string()) return wrong;
    stops.push_back(x.get<std::string>());
  }
  out = std::move(stops);
  return std::nullopt;
}

// OpenAI form: {"token id": bias}; JSON keys are strings.
std::optional<ParamError> read_logit_bias(const json& body, std::map<int32_t, float>& out) {
  if (!json_present(body, "logit_bias")) return std::nullopt;
  const json& v = body.at("logit_bias");
  if (!v.is_object()) return field_error("logit_bias", "'logit_bias' must be an object");
  if (v.size() > 1024) return field_error("logit_bias", "'logit_bias' holds at most 1024 entries");
  std::map<int32_t, float> bias_of;
  for (const auto& [key, bias] : v.items()) {
    int64_t id = -1;
    if (!key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos)
      id = std::stoll(key);
    if (id < 0 || id > kInt32Max)
      return field_error("logit_bias",
                         fmt::format("'logit_bias' keys must be token ids, not '{}'", key));
    if (!bias.is_number() || !std::isfinite(bias.get<double>()) || bias.get<double>() < -100 ||
        bias.get<double>() > 100)
      return field_error("logit_bias", "'logit_bias' values must be numbers between -100 and 100");
    bias_of[static_cast<int32_t>(id)] = static_cast<float>(bias.get<double>());
  }
  out = std::move(bias_of);
  return std::nullopt;
}

}  // namespace

bool json_present(const json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

std::optional<ParamError> read_number(const json& body, const char* key, double lo, double hi,
                                      float& out) {
  if (!json_present(body, key)) return std::nullopt;
  const json& v = body.at(key);
  if (!v.is_number()) return field_error(key, fmt::format("'{}' must be a number", key));
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) return out_of_range(key, lo, hi);
  out = static_cast<float>(d);
  return std::nullopt;
}

std::optional<ParamError> read_integer(const json& body, const char* key, int64_t lo, int64_t hi,
                                       std::optional<int64_t>& out) {
  if (!json_present(body, key)) return std::nullopt;
  const json& v = body.at(key);
  if (!v.is_number_integer()) return field_error(key, fmt::format("'{}' must be an integer", key));
  int64_t i = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return out_of_range(key, lo, hi);
    i = static_cast<int64_t>(u);
  } else {
    i = v.get<int64_t>();
  }
  if (i < lo || i > hi) return out_of_range(key, lo, hi);
  out = i;
  return std::nullopt;
}

std::optional<ParamError> read_bool(const json& body, const char* key, bool& out) {
  if (!json_present(body, key)) return std::nullopt;
  const json& v = body.at(key);
  if (!v.is_boolean()) return field_error(key, fmt::format("'{}' must be a boolean", key));
  out = v.get<bool>();
  return std::nullopt;
}

std::optional<ParamError> read_token_ids(const json& v, const char* key, std::vector<int32_t>& out,
                                         bool allow_empty) {
  if (!v.is_array() || (!allow_empty && v.empty()))
    return field_error(key, fmt::format("'{}' must be {} array of token ids", key,
                                        allow_empty ? "an" : "a non-empty"));
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const json& t : v) {
    const bool ok = t.is_number_integer() &&
                    (t.is_number_unsigned() ? t.get<uint64_t>() <= static_cast<uint64_t>(kInt32Max)
                                            : t.get<int64_t>() >= 0 && t.get<int64_t>() <= kInt32Max);
    if (!ok)
      return field_error(key, fmt::format("'{}' must contain token ids (integers >= 0)", key));
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  out = std::move(ids);
  return std::nullopt;
}

bool is_sampling_field(std::string_view key) {
  return std::find(std::begin(kFields), std::end(kFields), key) != std::end(kFields);
}

std::optional<ParamError> read_sampling_params(const json& body, SamplingParams& p,
                                               SamplingFieldsGiven* given) {
  SamplingFieldsGiven seen;
  std::optional<int64_t> i;
  const char* max_key =
      json_present(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (auto e = read_integer(body, max_key, 1, kInt32Max, i)) return e;
  if (i) {
    p.max_tokens = static_cast<int32_t>(*i);
    seen.max_tokens = true;
  }
  if (auto e = read_number(body, "temperature", 0.0, 2.0, p.temperature)) return e;
  if (auto e = read_number(body, "top_p", 0.0, 1.0, p.top_p)) return e;
  if (auto e = read_number(body, "min_p", 0.0, 1.0, p.min_p)) return e;
  i.reset();
  if (auto e = read_integer(body, "top_k", -1, kInt32Max, i)) return e;
  if (i) p.top_k = static_cast<int32_t>(*i);
  i.reset();
  if (auto e = read_integer(body, "seed", std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max(), i))
    return e;
  if (i) {
    p.seed = static_cast<uint64_t>(*i);
    seen.seed = true;
  }
  if (auto e = read_stop(body, p.stop)) return e;
  if (json_present(body, "stop_token_ids"))
    if (auto e = read_token_ids(body.at("stop_token_ids"), "stop_token_ids", p.stop_token_ids, true))
      return e;
  if (auto e = read_bool(body, "ignore_eos", p.ignore_eos)) return e;
  if (auto e = read_bool(body, "speculative", p.speculative)) return e;
  if (auto e = read_number(body, "presence_penalty", -2.0, 2.0, p.presence_penalty)) return e;
  if (auto e = read_number(body, "frequency_penalty", -2.0, 2.0, p.frequency_penalty)) return e;
  if (auto e = read_number(body, "repetition_penalty", 0.0, 100.0, p.repetition_penalty)) return e;
  if (auto e = read_logit_bias(body, p.logit_bias)) return e;
  i.reset();
  if (auto e = read_integer(body, "min_tokens", 0, kInt32Max, i)) return e;
  if (i) p.min_tokens = static_cast<int32_t>(*i);
  if (given) *given = seen;
  return std::nullopt;
}

}  // namespace cadenza
