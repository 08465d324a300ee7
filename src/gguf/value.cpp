// gguf::Value: factories, typed views and display.
//
// Storage is widened on purpose: every unsigned type lives in a uint64_t, every signed type in an
// int64_t and both float types in a double (exact for f32), so the typed views need no per-type
// switch and the writer narrows back using type_.
#include <algorithm>
#include <limits>

#include "gguf/gguf.h"

namespace cadenza::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "u8";
    case ValueType::INT8: return "i8";
    case ValueType::UINT16: return "u16";
    case ValueType::INT16: return "i16";
    case ValueType::UINT32: return "u32";
    case ValueType::INT32: return "i32";
    case ValueType::FLOAT32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "u64";
    case ValueType::INT64: return "i64";
    case ValueType::FLOAT64: return "f64";
  }
  return "unknown";
}

Value Value::u8(uint8_t v) { Value r; r.type_ = ValueType::UINT8; r.data_ = uint64_t{v}; return r; }
Value Value::u16(uint16_t v) { Value r; r.type_ = ValueType::UINT16; r.data_ = uint64_t{v}; return r; }
Value Value::u32(uint32_t v) { Value r; r.type_ = ValueType::UINT32; r.data_ = uint64_t{v}; return r; }
Value Value::u64(uint64_t v) { Value r; r.type_ = ValueType::UINT64; r.data_ = v; return r; }
Value Value::i8(int8_t v) { Value r; r.type_ = ValueType::INT8; r.data_ = int64_t{v}; return r; }
Value Value::i16(int16_t v) { Value r; r.type_ = ValueType::INT16; r.data_ = int64_t{v}; return r; }
Value Value::i32(int32_t v) { Value r; r.type_ = ValueType::INT32; r.data_ = int64_t{v}; return r; }
Value Value::i64(int64_t v) { Value r; r.type_ = ValueType::INT64; r.data_ = v; return r; }
Value Value::f32(float v) { Value r; r.type_ = ValueType::FLOAT32; r.data_ = double{v}; return r; }
Value Value::f64(double v) { Value r; r.type_ = ValueType::FLOAT64; r.data_ = v; return r; }
Value Value::boolean(bool v) { Value r; r.type_ = ValueType::BOOL; r.data_ = v; return r; }

Value Value::string(std::string v) {
  Value r;
  r.type_ = ValueType::STRING;
  r.data_ = std::move(v);
  return r;
}

Value Value::array(ValueType element_type, std::vector<Value> items) {
  Value r;
  r.type_ = ValueType::ARRAY;
  r.element_type_ = element_type;
  r.data_ = std::move(items);
  return r;
}

Value Value::string_array(const std::vector<std::string>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (const auto& s : items) v.push_back(Value::string(s));
  return array(ValueType::STRING, std::move(v));
}

Value Value::f32_array(const std::vector<float>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (float f : items) v.push_back(Value::f32(f));
  return array(ValueType::FLOAT32, std::move(v));
}

Value Value::i32_array(const std::vector<int32_t>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (int32_t i : items) v.push_back(Value::i32(i));
  return array(ValueType::INT32, std::move(v));
}

std::optional<uint64_t> Value::as_uint() const {
  if (const auto* u = std::get_if<uint64_t>(&data_)) return *u;
  if (const auto* i = std::get_if<int64_t>(&data_); i && *i >= 0) return static_cast<uint64_t>(*i);
  return std::nullopt;
}

std::optional<int64_t> Value::as_int() const {
  if (const auto* i = std::get_if<int64_t>(&data_)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&data_);
      u && *u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return static_cast<int64_t>(*u);
  return std::nullopt;
}

std::optional<double> Value::as_float() const {
  if (const auto* d = std::get_if<double>(&data_)) return *d;
  if (const auto* i = std::get_if<int64_t>(&data_)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<uint64_t>(&data_)) return static_cast<double>(*u);
  return std::nullopt;
}

std::optional<bool> Value::as_bool() const {
  if (const auto* b = std::get_if<bool>(&data_)) return *b;
  return std::nullopt;
}

const std::string* Value::as_string() const { return std::get_if<std::string>(&data_); }

const std::vector<Value>* Value::as_array() const {
  return std::get_if<std::vector<Value>>(&data_);
}

bool Value::operator==(const Value& other) const {
  if (type_ != other.type_) return false;
  if (type_ == ValueType::ARRAY && element_type_ != other.element_type_) return false;
  return data_ == other.data_;
}

namespace {

void append_quoted(std::string& out, const std::string& s, size_t max_bytes) {
  out += '"';
  const size_t n = std::min(s.size(), max_bytes);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f)
          out += fmt::format("\\x{:02x}", c);
        else
          out += static_cast<char>(c);
    }
  }
  out += '"';
  if (n < s.size()) out += fmt::format("... ({} bytes)", s.size());
}

void append_display(std::string& out, const Value& v, size_t max_items, size_t max_string) {
  switch (v.type()) {
    case ValueType::STRING: append_quoted(out, *v.as_string(), max_string); return;
    case ValueType::BOOL: out += *v.as_bool() ? "true" : "false"; return;
    // Shortest text that reads back to the same value at the stored precision.
    case ValueType::FLOAT32: out += fmt::format("{}", static_cast<float>(*v.as_float())); return;
    case ValueType::FLOAT64: out += fmt::format("{}", *v.as_float()); return;
    case ValueType::INT8:
    case ValueType::INT16:
    case ValueType::INT32:
    case ValueType::INT64: out += fmt::format("{}", *v.as_int()); return;
    case ValueType::ARRAY: {
      const auto& items = *v.as_array();
      out += '[';
      const size_t shown = std::min(items.size(), max_items);
      for (size_t i = 0; i < shown; ++i) {
        if (i) out += ", ";
        append_display(out, items[i], max_items, max_string);
      }
      if (shown < items.size()) out += fmt::format("{}... ({} items)", shown ? ", " : "", items.size());
      out += ']';
      return;
    }
    default: out += fmt::format("{}", *v.as_uint()); return;
  }
}

}  // namespace

std::string Value::to_display(size_t max_items, size_t max_string_bytes) const {
  std::string out;
  append_display(out, *this, max_items, max_string_bytes);
  return out;
}

}  // namespace cadenza::gguf
