// The GGUF reader: parses and validates a file image (see gguf.h for the contract and
// src/gguf/README.md for the rules and limits).
//
// Every length or count read from the file is checked against the bytes that remain before
// anything is allocated or looped over, so the work and memory spent on an input are bounded by
// its size (and by kMaxArrayElements) whatever the input claims.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_set>

#include "gguf/gguf.h"
#include "util/mapped_file.h"

namespace cadenza::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
// Smallest possible encodings, used to reject counts that cannot fit in the bytes left.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;           // key length, 1-byte key, type, u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, n_dims, 1 dim, type, offset

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::FLOAT64); }

// Bytes the smallest item of an array of this element type occupies in the file.
uint64_t min_item_bytes(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL: return 1;
    case ValueType::UINT16:
    case ValueType::INT16: return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32: return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64:
    case ValueType::STRING: return 8;   // the length prefix
    case ValueType::ARRAY: return 12;   // element type + count
  }
  return 1;
}

}  // namespace

class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  Status run(GgufFile& f);

 private:
  size_t left() const { return bytes_.size() - pos_; }

  // An error prefixed with the file name and the item being read.
  template <typename... Args>
  Error fail(fmt::format_string<Args...> format, Args&&... args) const {
    std::string detail = fmt::format(format, std::forward<Args>(args)...);
    if (ctx_.empty()) return make_error("{}: {}", name_, detail);
    return make_error("{}: {}: {}", name_, ctx_, detail);
  }

  // Reads a little-endian scalar (the host is little-endian; see README).
  template <typename T>
  Status read(T& out, const char* what) {
    if (left() < sizeof(T))
      return fail("truncated: {} needs {} bytes at offset {} but the file ends at {}", what,
                  sizeof(T), pos_, bytes_.size());
    std::memcpy(&out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }

  template <typename T>
  Status scalar(const char* what, Value (*make)(T), Value& out) {
    T v{};
    if (auto s = read(v, what); !s) return s;
    out = make(v);
    return {};
  }

  Status read_string(std::string& out, const char* what, uint64_t max_len);
  Status read_value(ValueType type, uint32_t depth, Value& out);
  Status read_array(uint32_t depth, Value& out);
  Status read_metadata(GgufFile& f, uint64_t kv_count);
  Status read_tensor_infos(GgufFile& f, uint64_t tensor_count);
  Status read_alignment(GgufFile& f);
  Status place_tensors(GgufFile& f);

  std::span<const uint8_t> bytes_;
  const std::string& name_;
  size_t pos_ = 0;
  std::string ctx_;             // "key 'x'" / "tensor #3 'y'": prefixes error details
  uint64_t array_elements_ = 0;  // summed over the file, checked against kMaxArrayElements
};

Status Parser::read_string(std::string& out, const char* what, uint64_t max_len) {
  uint64_t len = 0;
  const size_t at = pos_;
  if (auto s = read(len, what); !s) return s;
  if (len > max_len) return fail("{} length {} at offset {} exceeds the limit {}", what, len, at, max_len);
  if (len > left())
    return fail("truncated: {} length {} at offset {} exceeds the {} bytes left", what, len, at,
                left());
  out.assign(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(len));
  pos_ += static_cast<size_t>(len);
  return {};
}

Status Parser::read_value(ValueType type, uint32_t depth, Value& out) {
  switch (type) {
    case ValueType::UINT8: return scalar<uint8_t>("u8 value", &Value::u8, out);
    case ValueType::INT8: return scalar<int8_t>("i8 value", &Value::i8, out);
    case ValueType::UINT16: return scalar<uint16_t>("u16 value", &Value::u16, out);
    case ValueType::INT16: return scalar<int16_t>("i16 value", &Value::i16, out);
    case ValueType::UINT32: return scalar<uint32_t>("u32 value", &Value::u32, out);
    case ValueType::INT32: return scalar<int32_t>("i32 value", &Value::i32, out);
    case ValueType::UINT64: return scalar<uint64_t>("u64 value", &Value::u64, out);
    case ValueType::INT64: return scalar<int64_t>("i64 value", &Value::i64, out);
    case ValueType::FLOAT32: return scalar<float>("f32 value", &Value::f32, out);
    case ValueType::FLOAT64: return scalar<double>("f64 value", &Value::f64, out);
    case ValueType::BOOL: {
      uint8_t v = 0;
      const size_t at = pos_;
      if (auto s = read(v, "bool value"); !s) return s;
      // Any other byte means the file is corrupt; accepting it would hide that.
      if (v > 1) return fail("bool value {} at offset {} is neither 0 nor 1", v, at);
      out = Value::boolean(v != 0);
      return {};
    }
    case ValueType::STRING: {
      std::string v;
      if (auto s = read_string(v, "string", std::numeric_limits<uint64_t>::max()); !s) return s;
      out = Value::string(std::move(v));
      return {};
    }
    case ValueType::ARRAY: return read_array(depth + 1, out);
  }
  return fail("unknown value type {}", static_cast<uint32_t>(type));
}

Status Parser::read_array(uint32_t depth, Value& out) {
  if (depth > kMaxArrayDepth)
    return fail("arrays nested deeper than {} at offset {}", kMaxArrayDepth, pos_);
  uint32_t raw_type = 0;
  size_t at = pos_;
  if (auto s = read(raw_type, "array element type"); !s) return s;
  if (!known_value_type(raw_type))
    return fail("unknown array element type {} at offset {}", raw_type, at);
  const auto type = static_cast<ValueType>(raw_type);
  uint64_t count = 0;
  at = pos_;
  if (auto s = read(count, "array count"); !s) return s;
  if (count > left() / min_item_bytes(type))
    return fail("array count {} at offset {} cannot fit in the {} bytes left (items of type {} take "
                "at least {} bytes)",
                count, at, left(), value_type_name(type), min_item_bytes(type));
  if (count > kMaxArrayElements - array_elements_)
    return fail("array count {} at offset {} exceeds the limit of {} array items per file", count,
                at, kMaxArrayElements);
  array_elements_ += count;
  std::vector<Value> items(static_cast<size_t>(count));
  for (auto& item : items)
    if (auto s = read_value(type, depth, item); !s) return s;
  out = Value::array(type, std::move(items));
  return {};
}

Status Parser::read_metadata(GgufFile& f, uint64_t kv_count) {
  std::unordered_set<std::string_view> seen;
  f.metadata_.reserve(static_cast<size_t>(kv_count));
  for (uint64_t i = 0; i < kv_count; ++i) {
    ctx_ = fmt::format("metadata #{}", i);
    std::string key;
    if (auto s = read_string(key, "key", kMaxKeyBytes); !s) return s;
    if (key.empty()) return fail("empty key");
    // Keys are stored as file bytes; escape them so a hostile key cannot garble messages.
    ctx_ = fmt::format("key {}", Value::string(key).to_display(0, 200));
    uint32_t raw_type = 0;
    const size_t at = pos_;
    if (auto s = read(raw_type, "value type"); !s) return s;
    if (!known_value_type(raw_type)) return fail("unknown value type {} at offset {}", raw_type, at);
    Value v;
    if (auto s = read_value(static_cast<ValueType>(raw_type), 0, v); !s) return s;
    f.metadata_.emplace_back(std::move(key), std::move(v));
  }
  // Views into metadata_ are stable now that it no longer grows.
  for (const auto& [key, value] : f.metadata_) {
    if (!seen.insert(key).second) {
      ctx_.clear();
      return fail("duplicate key {}", Value::string(key).to_display(0, 200));
    }
  }
  ctx_.clear();
  return {};
}

Status Parser::read_tensor_infos(GgufFile& f, uint64_t tensor_count) {
  f.tensors_.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    ctx_ = fmt::format("tensor #{}", i);
    TensorInfo t;
    if (auto s = read_string(t.name, "tensor name", kMaxTensorNameBytes); !s) return s;
    ctx_ = fmt::format("tensor #{} {}", i, Value::string(t.name).to_display(0, 200));
    uint32_t n_dims = 0;
    size_t at = pos_;
    if (auto s = read(n_dims, "n_dims"); !s) return s;
    if (n_dims == 0 || n_dims > kMaxDims)
      return fail("n_dims {} at offset {} is not in 1..{}", n_dims, at, kMaxDims);
    t.shape.resize(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      at = pos_;
      if (auto s = read(dim, "dimension"); !s) return s;
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return fail("dimension {} is {} at offset {} (negative as int64)", d,
                    static_cast<int64_t>(dim), at);
      t.shape[d] = static_cast<int64_t>(dim);
    }
    uint32_t raw_type = 0;
    at = pos_;
    if (auto s = read(raw_type, "tensor type"); !s) return s;
    if (!dtype_traits(raw_type)) return fail("unknown tensor type {} at offset {}", raw_type, at);
    t.type = static_cast<DType>(raw_type);
    if (auto s = read(t.offset, "tensor offset"); !s) return s;
    f.tensors_.push_back(std::move(t));
  }
  ctx_.clear();
  std::unordered_set<std::string_view> seen;
  for (const auto& t : f.tensors_)
    if (!seen.insert(t.name).second)
      return fail("duplicate tensor name {}", Value::string(t.name).to_display(0, 200));
  return {};
}

Status Parser::read_alignment(GgufFile& f) {
  f.alignment_ = kDefaultAlignment;
  const Value* v = f.find("general.alignment");
  if (!v) return {};
  // The spec says u32; any integer type is accepted since the value is what matters.
  const auto a = v->as_uint();
  if (!a) return fail("general.alignment has type {}, expected an unsigned integer",
                      value_type_name(v->type()));
  if (*a == 0 || (*a & (*a - 1)) != 0 || *a > (uint64_t{1} << 31))
    return fail("general.alignment {} is not a power of two in 1..2^31", *a);
  f.alignment_ = *a;
  return {};
}

Status Parser::place_tensors(GgufFile& f) {
  const uint64_t size = bytes_.size();
  // pos_ <= size and alignment <= 2^31, so this cannot overflow.
  f.data_offset_ = (pos_ + f.alignment_ - 1) / f.alignment_ * f.alignment_;
  if (f.tensors_.empty()) return {};
  if (f.data_offset_ > size)
    return fail("truncated: the data section starts at offset {} but the file ends at {}",
                f.data_offset_, size);
  const uint64_t data_size = size - f.data_offset_;
  for (size_t i = 0; i < f.tensors_.size(); ++i) {
    TensorInfo& t = f.tensors_[i];
    ctx_ = fmt::format("tensor {}", Value::string(t.name).to_display(0, 200));
    int64_t elements = 1;
    for (int64_t d : t.shape)
      if (__builtin_mul_overflow(elements, d, &elements))
        return fail("shape {} has more elements than fit in int64", fmt::join(t.shape, "x"));
    const DTypeTraits tr = *dtype_traits(static_cast<uint32_t>(t.type));
    if (t.shape[0] % tr.block_size != 0)
      return fail("row of {} elements is not a multiple of the block size {} of type {}",
                  t.shape[0], tr.block_size, tr.name);
    const auto row = row_bytes(t.type, t.shape[0]);
    if (!row) return fail("byte size of a row of {} elements overflows", t.shape[0]);
    const uint64_t rows = t.shape[0] == 0 ? 0 : static_cast<uint64_t>(elements / t.shape[0]);
    if (__builtin_mul_overflow(*row, rows, &t.nbytes))
      return fail("byte size of shape {} overflows", fmt::join(t.shape, "x"));
    if (t.offset % f.alignment_ != 0)
      return fail("offset {} is not a multiple of the alignment {}", t.offset, f.alignment_);
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      return fail("data [{}, +{}) runs past the end of the data section ({} bytes at file offset {})",
                  t.offset, t.nbytes, data_size, f.data_offset_);
    t.data = t.nbytes == 0 ? nullptr : bytes_.data() + f.data_offset_ + t.offset;
  }
  ctx_.clear();
  // Overlap check on the tensors sorted by offset; empty tensors occupy no bytes.
  std::vector<size_t> order(f.tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return f.tensors_[a].offset < f.tensors_[b].offset; });
  const TensorInfo* prev = nullptr;
  for (size_t i : order) {
    const TensorInfo& t = f.tensors_[i];
    if (t.nbytes == 0) continue;
    if (prev && prev->offset + prev->nbytes > t.offset)
      return fail("tensor {} [{}, +{}) overlaps tensor {} [{}, +{})",
                  Value::string(t.name).to_display(0, 200), t.offset, t.nbytes,
                  Value::string(prev->name).to_display(0, 200), prev->offset, prev->nbytes);
    prev = &t;
  }
  return {};
}

Status Parser::run(GgufFile& f) {
  uint32_t magic = 0;
  if (auto s = read(magic, "magic"); !s) return s;
  if (magic != kMagic) {
    std::string shown;
    for (int i = 0; i < 4; ++i) {
      const auto c = static_cast<unsigned char>(bytes_[i]);
      shown += (c >= 0x20 && c < 0x7f) ? fmt::format("{}", static_cast<char>(c))
                                       : fmt::format("\\x{:02x}", c);
    }
    return fail("not a GGUF file (magic '{}', expected 'GGUF')", shown);
  }
  uint32_t version = 0;
  if (auto s = read(version, "version"); !s) return s;
  if (version == 1)
    return fail("GGUF version 1 is not supported (32-bit counts; re-convert the model to v3)");
  if (version != 2 && version != 3) {
    if (version == 0x02000000 || version == 0x03000000)
      return fail("big-endian GGUF files are not supported");
    return fail("unsupported GGUF version {} (expected 2 or 3)", version);
  }
  f.version_ = version;
  uint64_t tensor_count = 0;
  uint64_t kv_count = 0;
  if (auto s = read(tensor_count, "tensor count"); !s) return s;
  if (auto s = read(kv_count, "metadata count"); !s) return s;
  if (kv_count > left() / kMinKvBytes)
    return fail("metadata count {} cannot fit in the {} bytes left (truncated or corrupt)", kv_count,
                left());
  if (tensor_count > (left() - kv_count * kMinKvBytes) / kMinTensorInfoBytes)
    return fail("tensor count {} cannot fit in the {} bytes left (truncated or corrupt)",
                tensor_count, left());
  if (auto s = read_metadata(f, kv_count); !s) return s;
  if (auto s = read_tensor_infos(f, tensor_count); !s) return s;
  if (auto s = read_alignment(f); !s) return s;
  return place_tensors(f);
}

Result<std::unique_ptr<GgufFile>> GgufFile::parse(std::span<const uint8_t> bytes, std::string name) {
  auto f = std::unique_ptr<GgufFile>(new GgufFile());
  f->name_ = std::move(name);
  f->bytes_ = bytes;
  Parser parser(bytes, f->name_);
  if (auto s = parser.run(*f); !s) return s.error_value();
  return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.error_value();
  auto f = parse((*mapped)->bytes(), path);
  if (!f) return f.error_value();
  (*f)->mapping_ = std::move(*mapped);
  return f;
}

}  // namespace cadenza::gguf
