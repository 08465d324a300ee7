// GgufWriter: serializes metadata and tensor infos, then streams tensor data one tensor at a time.
//
// The writer refuses (at write time) anything the reader would reject, so every file it
// produces opens with GgufFile::open.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#include "gguf/gguf.h"

namespace cadenza::gguf {
namespace {

constexpr uint32_t kVersion = 3;

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

bool valid_alignment(uint64_t a) { return a != 0 && (a & (a - 1)) == 0 && a <= (uint64_t{1} << 31); }

void append_bytes(std::vector<uint8_t>& out, const void* p, size_t n);

// Where serialized bytes go: a memory buffer (to_bytes) or a FILE (write).
class Sink {
 public:
  virtual ~Sink() = default;
  virtual Status put(const uint8_t* p, size_t n) = 0;
  // Space for n bytes that the caller fills in place (zeroed). Valid until the next call.
  virtual Result<std::span<uint8_t>> reserve(size_t n) = 0;
  virtual Status commit() = 0;  // writes what reserve() handed out
};

class MemorySink final : public Sink {
 public:
  explicit MemorySink(std::vector<uint8_t>& out) : out_(out) {}
  Status put(const uint8_t* p, size_t n) override {
    append_bytes(out_, p, n);
    return {};
  }
  Result<std::span<uint8_t>> reserve(size_t n) override {
    const size_t at = out_.size();
    out_.resize(at + n);
    return std::span<uint8_t>(out_.data() + at, n);
  }
  Status commit() override { return {}; }

 private:
  std::vector<uint8_t>& out_;
};

class FileSink final : public Sink {
 public:
  FileSink(std::FILE* f, const std::string& path) : f_(f), path_(path) {}
  Status put(const uint8_t* p, size_t n) override {
    if (n != 0 && std::fwrite(p, 1, n, f_) != n)
      return make_error("{}: write failed: {}", path_, std::strerror(errno));
    return {};
  }
  Result<std::span<uint8_t>> reserve(size_t n) override {
    // One tensor's bytes at a time: the largest tensor bounds the memory, not the model.
    buf_.assign(n, 0);
    return std::span<uint8_t>(buf_);
  }
  Status commit() override {
    auto s = put(buf_.data(), buf_.size());
    buf_.clear();
    buf_.shrink_to_fit();
    return s;
  }

 private:
  std::FILE* f_;
  const std::string& path_;
  std::vector<uint8_t> buf_;
};

// resize + memcpy rather than insert(): g++ 12 reports a bogus -Wstringop-overflow on the latter.
void append_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  if (n == 0) return;
  const size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}

template <typename T>
void append(std::vector<uint8_t>& out, T v) {
  append_bytes(out, &v, sizeof(T));
}

void append_string(std::vector<uint8_t>& out, const std::string& s) {
  append<uint64_t>(out, s.size());
  append_bytes(out, s.data(), s.size());
}

// Checks what the reader checks: item types match the array's element type, nesting depth, and
// the file-wide array item budget.
Status validate(const std::string& key, const Value& v, uint32_t depth, uint64_t& elements) {
  if (v.type() != ValueType::ARRAY) return {};
  if (depth + 1 > kMaxArrayDepth)
    return make_error("key '{}': arrays nested deeper than {}", key, kMaxArrayDepth);
  const auto& items = *v.as_array();
  elements += items.size();
  if (elements > kMaxArrayElements)
    return make_error("key '{}': more than {} array items in the file", key, kMaxArrayElements);
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].type() != v.element_type())
      return make_error("key '{}': array item {} has type {}, expected {}", key, i,
                        value_type_name(items[i].type()), value_type_name(v.element_type()));
    if (auto s = validate(key, items[i], depth + 1, elements); !s) return s;
  }
  return {};
}

void append_value(std::vector<uint8_t>& out, const Value& v) {
  switch (v.type()) {
    case ValueType::UINT8: append(out, static_cast<uint8_t>(*v.as_uint())); return;
    case ValueType::UINT16: append(out, static_cast<uint16_t>(*v.as_uint())); return;
    case ValueType::UINT32: append(out, static_cast<uint32_t>(*v.as_uint())); return;
    case ValueType::UINT64: append(out, *v.as_uint()); return;
    case ValueType::INT8: append(out, static_cast<int8_t>(*v.as_int())); return;
    case ValueType::INT16: append(out, static_cast<int16_t>(*v.as_int())); return;
    case ValueType::INT32: append(out, static_cast<int32_t>(*v.as_int())); return;
    case ValueType::INT64: append(out, *v.as_int()); return;
    case ValueType::FLOAT32: append(out, static_cast<float>(*v.as_float())); return;
    case ValueType::FLOAT64: append(out, *v.as_float()); return;
    case ValueType::BOOL: append<uint8_t>(out, *v.as_bool() ? 1 : 0); return;
    case ValueType::STRING: append_string(out, *v.as_string()); return;
    case ValueType::ARRAY: {
      const auto& items = *v.as_array();
      append(out, static_cast<uint32_t>(v.element_type()));
      append<uint64_t>(out, items.size());
      for (const auto& item : items) append_value(out, item);
      return;
    }
  }
}

}  // namespace

GgufWriter::GgufWriter(uint64_t alignment) : alignment_(alignment) {
  if (alignment != kDefaultAlignment)
    set("general.alignment",
        Value::u32(static_cast<uint32_t>(std::min<uint64_t>(alignment, UINT32_MAX))));
}

void GgufWriter::set(std::string key, Value value) {
  if (key == "general.alignment") alignment_ = value.as_uint().value_or(0);
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

Status GgufWriter::add_tensor(std::string name, DType type, std::vector<int64_t> shape, Fill fill) {
  if (name.empty() || name.size() > kMaxTensorNameBytes)
    return make_error("tensor '{}': name must be 1..{} bytes", name, kMaxTensorNameBytes);
  for (const auto& t : tensors_)
    if (t.name == name) return make_error("tensor '{}': duplicate name", name);
  if (!dtype_traits(static_cast<uint32_t>(type)))
    return make_error("tensor '{}': unknown type {}", name, static_cast<uint32_t>(type));
  if (shape.empty() || shape.size() > kMaxDims)
    return make_error("tensor '{}': {} dimensions, expected 1..{}", name, shape.size(), kMaxDims);
  int64_t elements = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(elements, d, &elements))
      return make_error("tensor '{}': bad shape {}", name, fmt::join(shape, "x"));
  const auto row = row_bytes(type, shape[0]);
  if (!row)
    return make_error("tensor '{}': row of {} elements is not a multiple of the block size {} of {}",
                      name, shape[0], traits(type).block_size, dtype_name(type));
  const uint64_t rows = shape[0] == 0 ? 0 : static_cast<uint64_t>(elements / shape[0]);
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(*row, rows, &nbytes))
    return make_error("tensor '{}': byte size overflows", name);
  tensors_.push_back({std::move(name), type, std::move(shape), nbytes, std::move(fill)});
  return {};
}

Status GgufWriter::add_tensor(std::string name, DType type, std::vector<int64_t> shape,
                              std::vector<uint8_t> bytes) {
  auto data = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  const std::string n = name;
  if (auto s = add_tensor(std::move(name), type, std::move(shape),
                          [data](std::span<uint8_t> out) {
                            std::memcpy(out.data(), data->data(), out.size());
                          });
      !s)
    return s;
  if (tensors_.back().nbytes != data->size()) {
    const uint64_t expected = tensors_.back().nbytes;
    tensors_.pop_back();
    return make_error("tensor '{}': {} bytes given, the shape needs {}", n, data->size(), expected);
  }
  return {};
}

// Padding in small pieces: an alignment may be up to 2^31 and must not cost that much memory.
static Status put_zeros(Sink& sink, uint64_t n) {
  static constexpr uint8_t kZeros[4096] = {};
  while (n > 0) {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(n, sizeof(kZeros)));
    if (auto s = sink.put(kZeros, k); !s) return s;
    n -= k;
  }
  return {};
}

// Serializes the header and streams the tensors into `sink`. `what` prefixes errors.
static Status emit(const std::string& what, uint64_t alignment,
                   const std::vector<std::pair<std::string, Value>>& metadata,
                   const auto& tensors, Sink& sink) {
  if (!valid_alignment(alignment))
    return make_error("{}: alignment {} is not a power of two in 1..2^31", what, alignment);
  uint64_t elements = 0;
  for (const auto& [key, value] : metadata) {
    if (key.empty() || key.size() > kMaxKeyBytes)
      return make_error("{}: key '{}' must be 1..{} bytes", what, key, kMaxKeyBytes);
    if (key == "general.alignment" && value.type() != ValueType::UINT32)
      return make_error("{}: general.alignment must be u32", what);
    if (auto s = validate(key, value, 0, elements); !s) return make_error("{}: {}", what, s.error());
  }
  std::vector<uint8_t> h;
  append(h, uint32_t{0x46554747});
  append(h, kVersion);
  append<uint64_t>(h, tensors.size());
  append<uint64_t>(h, metadata.size());
  for (const auto& [key, value] : metadata) {
    append_string(h, key);
    append(h, static_cast<uint32_t>(value.type()));
    append_value(h, value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    append_string(h, t.name);
    append(h, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) append(h, static_cast<uint64_t>(d));
    append(h, static_cast<uint32_t>(t.type));
    append(h, offset);
    if (t.nbytes > UINT64_MAX - 2 * alignment - offset)
      return make_error("{}: tensor '{}': data section size overflows", what, t.name);
    offset = align_up(offset + t.nbytes, alignment);
  }
  if (auto s = sink.put(h.data(), h.size()); !s) return s;
  // A file without tensors ends with its metadata, as the reference vocabulary files do.
  if (!tensors.empty())
    if (auto s = put_zeros(sink, align_up(h.size(), alignment) - h.size()); !s) return s;
  for (const auto& t : tensors) {
    auto buf = sink.reserve(t.nbytes);
    if (!buf) return buf.error_value();
    if (t.nbytes != 0) t.fill(*buf);
    if (auto s = sink.commit(); !s) return s;
    if (auto s = put_zeros(sink, align_up(t.nbytes, alignment) - t.nbytes); !s) return s;
  }
  return {};
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  MemorySink sink(out);
  if (!emit("<memory>", alignment_, metadata_, tensors_, sink)) return {};
  return out;
}

Status GgufWriter::write(const std::string& path) const {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return make_error("{}: cannot create: {}", tmp, std::strerror(errno));
  FileSink sink(f, tmp);
  Status s = emit(path, alignment_, metadata_, tensors_, sink);
  if (std::fclose(f) != 0 && s) s = make_error("{}: write failed: {}", tmp, std::strerror(errno));
  if (s && std::rename(tmp.c_str(), path.c_str()) != 0)
    s = make_error("{}: cannot rename {} to it: {}", path, tmp, std::strerror(errno));
  if (!s) std::remove(tmp.c_str());
  return s;
}

}  // namespace cadenza::gguf
