// Internal to src/apishape: reading request fields with 400s that name them.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "apishape/error.h"

namespace cadenza::apishape::detail {

using ojson = nlohmann::ordered_json;

inline bool present(const ojson& o, const char* key) {
  return o.is_object() && o.contains(key) && !o.at(key).is_null();
}

inline bool one_of(std::string_view s, std::initializer_list<std::string_view> set) {
  for (std::string_view x : set)
    if (s == x) return true;
  return false;
}

// The first key of `o` that is not in `known`, as an "unsupported" error (`where` prefixes it).
inline std::optional<ShapeError> unknown_field(const ojson& o,
                                               std::initializer_list<std::string_view> known,
                                               const std::string& where = {}) {
  for (const auto& [key, value] : o.items())
    if (!one_of(key, known)) return unsupported(where.empty() ? key : where + "." + key);
  return std::nullopt;
}

// Copies a number field (if present) into `out[key]` after a type check.
inline std::optional<ShapeError> copy_number(const ojson& in, const char* key, ojson& out,
                                             const char* out_key = nullptr) {
  if (!present(in, key)) return std::nullopt;
  if (!in.at(key).is_number())
    return invalid(std::string("'") + key + "' must be a number", key);
  out[out_key ? out_key : key] = in.at(key);
  return std::nullopt;
}

inline std::optional<ShapeError> copy_positive_int(const ojson& in, const char* key, ojson& out,
                                                   const char* out_key) {
  if (!present(in, key)) return std::nullopt;
  if (!in.at(key).is_number_integer() || in.at(key).get<int64_t>() < 1)
    return invalid(std::string("'") + key + "' must be a positive integer", key);
  out[out_key] = in.at(key);
  return std::nullopt;
}

inline std::optional<ShapeError> read_bool(const ojson& in, const char* key, bool& out) {
  if (!present(in, key)) return std::nullopt;
  if (!in.at(key).is_boolean()) return invalid(std::string("'") + key + "' must be a boolean", key);
  out = in.at(key).get<bool>();
  return std::nullopt;
}

}  // namespace cadenza::apishape::detail
