// GGUF files: a validating reader over mmap (versions 2 and 3) and a writer.
//
// Reader contract: every structural fact read from the file is validated before use (magic,
// version, counts, string lengths, nested array depth, tensor types, shapes, offsets, alignment,
// duplicate names). A malformed file yields an Error whose message starts with the file name and
// names the problem; no input makes the reader crash, hang, or allocate more than a small multiple
// of the file's own size.
//
// Thread-safety: a GgufFile is immutable after open() and may be read from any thread.
// Ownership: GgufFile owns its mapping; TensorInfo::data points into it and lives as long as it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tensor/dtype.h"
#include "util/result.h"

namespace cadenza {
class MappedFile;
}

namespace cadenza::gguf {

// Reader limits (see src/gguf/README.md). They bound work and memory on hostile input; real files
// are far below them.
inline constexpr uint32_t kMaxArrayDepth = 8;            // arrays nested inside arrays
inline constexpr uint64_t kMaxArrayElements = 1u << 24;  // all array items of a file, summed
inline constexpr uint64_t kMaxKeyBytes = 65535;          // metadata key length (GGUF spec)
inline constexpr uint64_t kMaxTensorNameBytes = 1024;    // spec says 64; we are lenient
inline constexpr uint32_t kMaxDims = 4;
inline constexpr uint64_t kDefaultAlignment = 32;

enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
std::string_view value_type_name(ValueType t);

// A metadata value: a scalar, a string, or an array (of any element type, arrays included).
class Value {
 public:
  Value() = default;
  static Value u8(uint8_t v);
  static Value i8(int8_t v);
  static Value u16(uint16_t v);
  static Value i16(int16_t v);
  static Value u32(uint32_t v);
  static Value i32(int32_t v);
  static Value u64(uint64_t v);
  static Value i64(int64_t v);
  static Value f32(float v);
  static Value f64(double v);
  static Value boolean(bool v);
  static Value string(std::string v);
  // All items must have type `element_type`.
  static Value array(ValueType element_type, std::vector<Value> items);
  static Value string_array(const std::vector<std::string>& items);
  static Value f32_array(const std::vector<float>& items);
  static Value i32_array(const std::vector<int32_t>& items);

  ValueType type() const { return type_; }
  ValueType element_type() const { return element_type_; }  // meaningful for ARRAY only

  // Typed views; nullopt/nullptr when the value has another kind. as_uint accepts any integer
  // that is >= 0, as_int any integer that fits int64, as_float any float or integer.
  std::optional<uint64_t> as_uint() const;
  std::optional<int64_t> as_int() const;
  std::optional<double> as_float() const;
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;
  const std::vector<Value>* as_array() const;

  // Human-readable rendering; arrays show at most `max_items` items then "... (N items)";
  // strings are quoted with control characters escaped and cut after `max_string_bytes` bytes.
  std::string to_display(size_t max_items = 8, size_t max_string_bytes = SIZE_MAX) const;

  // Deep equality (type, element type and contents; floats compare as doubles, so NaN != NaN).
  bool operator==(const Value& other) const;

 private:
  using Storage = std::variant<std::monostate, uint64_t, int64_t, double, bool, std::string,
                               std::vector<Value>>;
  ValueType type_ = ValueType::UINT8;
  ValueType element_type_ = ValueType::UINT8;
  Storage data_;
};

struct TensorInfo {
  std::string name;
  DType type = DType::F32;
  // ggml order: shape[0] is the innermost (contiguous) dimension. 1 to 4 dimensions.
  std::vector<int64_t> shape;
  uint64_t offset = 0;          // from the start of the data section
  uint64_t nbytes = 0;          // validated: inside the file
  const uint8_t* data = nullptr;  // into the mapping (nullptr only for nbytes == 0)

  int64_t num_elements() const;  // validated at open: no overflow
  int64_t rows() const { return shape.empty() || shape[0] == 0 ? 0 : num_elements() / shape[0]; }
  std::span<const uint8_t> bytes() const { return {data, static_cast<size_t>(nbytes)}; }
};

class GgufFile {
 public:
  // Maps and validates `path`.
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path);
  // Validates an in-memory image (no copy: `bytes` must outlive the GgufFile). `name` is used in
  // error messages. Used by the fuzz target and tests.
  static Result<std::unique_ptr<GgufFile>> parse(std::span<const uint8_t> bytes, std::string name);
  ~GgufFile();

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return bytes_.size(); }
  // Whether the bytes are a memory mapping of a file (open) rather than the caller's (parse).
  bool mapped() const { return mapping_ != nullptr; }
  // The header, metadata and tensor table: bytes [0, data_offset()) of the file.
  std::span<const uint8_t> header_bytes() const { return bytes_.subspan(0, data_offset_); }

  // Metadata in file order. Keys are unique (duplicates are rejected at open).
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;

  // Typed lookups. Errors name the file and key ("x.gguf: key 'llama.block_count' missing" or
  // "... has type string, expected an integer").
  Result<std::string> get_string(std::string_view key) const;
  Result<uint64_t> get_uint(std::string_view key) const;
  Result<int64_t> get_int(std::string_view key) const;
  Result<double> get_float(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<double>> get_float_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;
  // With defaults for optional keys; still an error when present with the wrong type.
  Result<uint64_t> get_uint_or(std::string_view key, uint64_t fallback) const;
  Result<double> get_float_or(std::string_view key, double fallback) const;
  Result<bool> get_bool_or(std::string_view key, bool fallback) const;
  Result<std::string> get_string_or(std::string_view key, std::string fallback) const;

  // Tensors in file order; names are unique.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  friend class Parser;  // reader.cpp fills the fields below
  std::string name_;
  std::unique_ptr<MappedFile> mapping_;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<TensorInfo> tensors_;
};

// Writes GGUF version 3 files. Tensor data is produced at write time by a callback so that large
// models can be written one tensor at a time without holding them all in memory.
class GgufWriter {
 public:
  // Fills exactly the tensor's byte size into `out` (zero-initialised). Called once per tensor, in
  // add order, from write()/to_bytes() on the calling thread.
  using Fill = std::function<void(std::span<uint8_t> out)>;

  // An alignment other than 32 is recorded as the `general.alignment` key (u32). It must be a
  // power of two <= 2^31; write() reports an invalid one.
  explicit GgufWriter(uint64_t alignment = kDefaultAlignment);

  // Adds or replaces a metadata key (file order is insertion order; a replaced key keeps its
  // place). Setting `general.alignment` changes the alignment the writer uses.
  void set(std::string key, Value value);
  // Adds a tensor; shape in ggml order. Returns an error for a duplicate name, a bad shape, or a
  // shape whose row is not a multiple of the type's block size.
  Status add_tensor(std::string name, DType type, std::vector<int64_t> shape, Fill fill);
  Status add_tensor(std::string name, DType type, std::vector<int64_t> shape,
                    std::vector<uint8_t> bytes);

  // Writes `path.tmp.<pid>` then renames it over `path`, so readers never see a partial file.
  // Errors (invalid metadata such as an array item of the wrong type or a bad alignment, I/O
  // failures) name the path; the temp file is removed.
  Status write(const std::string& path) const;
  // The file image in memory, for tests and fuzz seeds. Empty when write() would report invalid
  // metadata.
  std::vector<uint8_t> to_bytes() const;

 private:
  struct PendingTensor {
    std::string name;
    DType type;
    std::vector<int64_t> shape;
    uint64_t nbytes;
    Fill fill;
  };
  uint64_t alignment_;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace cadenza::gguf
