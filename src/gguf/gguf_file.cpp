// GgufFile lookups: metadata by key (with typed getters) and tensors by name.
//
// Lookups are linear scans: files hold tens to a few hundred keys and tensors, callers look
// them up once at load, and keeping no index keeps the object simple and immutable.
#include "gguf/gguf.h"
#include "util/mapped_file.h"

namespace cadenza::gguf {

GgufFile::~GgufFile() = default;

int64_t TensorInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const Value* GgufFile::find(std::string_view key) const {
  for (const auto& [k, v] : metadata_)
    if (k == key) return &v;
  return nullptr;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

Error missing(const std::string& file, std::string_view key) {
  return make_error("{}: key '{}' missing", file, key);
}

Error wrong_type(const std::string& file, std::string_view key, const Value& v,
                 std::string_view expected) {
  if (v.type() == ValueType::ARRAY)
    return make_error("{}: key '{}' has type array of {}, expected {}", file, key,
                      value_type_name(v.element_type()), expected);
  return make_error("{}: key '{}' has type {}, expected {}", file, key, value_type_name(v.type()),
                    expected);
}

bool is_integer(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::UINT16:
    case ValueType::INT16:
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::UINT64:
    case ValueType::INT64: return true;
    default: return false;
  }
}

}  // namespace

Result<std::string> GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(name_, key);
  if (const auto* s = v->as_string()) return *s;
  return wrong_type(name_, key, *v, "string");
}

Result<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(name_, key);
  if (auto u = v->as_uint()) return *u;
  if (is_integer(v->type()))
    return make_error("{}: key '{}' is {}, expected a non-negative integer", name_, key,
                      *v->as_int());
  return wrong_type(name_, key, *v, "an unsigned integer");
}

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(name_, key);
  if (auto i = v->as_int()) return *i;
  if (is_integer(v->type()))
    return make_error("{}: key '{}' is {}, which does not fit in int64", name_, key, *v->as_uint());
  return wrong_type(name_, key, *v, "an integer");
}

Result<double> GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(name_, key);
  if (auto d = v->as_float()) return *d;
  return wrong_type(name_, key, *v, "a number");
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(name_, key);
  if (auto b = v->as_bool()) return *b;
  return wrong_type(name_, key, *v, "bool");
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(name_, key);
  const auto* items = v->as_array();
  if (!items || v->element_type() != ValueType::STRING)
    return wrong_type(name_, key, *v, "array of string");
  std::vector<std::string> out;
  out.reserve(items->size());
  for (const auto& item : *items) out.push_back(*item.as_string());
  return out;
}

Result<std::vector<double>> GgufFile::get_float_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(name_, key);
  const auto* items = v->as_array();
  const ValueType et = v->element_type();
  if (!items || !(et == ValueType::FLOAT32 || et == ValueType::FLOAT64 || is_integer(et)))
    return wrong_type(name_, key, *v, "array of numbers");
  std::vector<double> out;
  out.reserve(items->size());
  for (const auto& item : *items) out.push_back(*item.as_float());
  return out;
}

Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(name_, key);
  const auto* items = v->as_array();
  if (!items || !is_integer(v->element_type()))
    return wrong_type(name_, key, *v, "array of integers");
  std::vector<int64_t> out;
  out.reserve(items->size());
  for (size_t i = 0; i < items->size(); ++i) {
    auto x = (*items)[i].as_int();
    if (!x)
      return make_error("{}: key '{}' item {} is {}, which does not fit in int64", name_, key, i,
                        *(*items)[i].as_uint());
    out.push_back(*x);
  }
  return out;
}

Result<uint64_t> GgufFile::get_uint_or(std::string_view key, uint64_t fallback) const {
  if (!find(key)) return fallback;
  return get_uint(key);
}

Result<double> GgufFile::get_float_or(std::string_view key, double fallback) const {
  if (!find(key)) return fallback;
  return get_float(key);
}

Result<bool> GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  if (!find(key)) return fallback;
  return get_bool(key);
}

Result<std::string> GgufFile::get_string_or(std::string_view key, std::string fallback) const {
  if (!find(key)) return fallback;
  return get_string(key);
}

}  // namespace cadenza::gguf
