// Helpers shared by the GGUF tests: a small valid sample file, a byte builder for hand-crafted
// headers, and the invariants every successfully parsed file must satisfy.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"

namespace cadenza::gguf::test {

// Deterministic bytes for tensor data.
inline std::vector<uint8_t> pattern_bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  return v;
}

// A small file with every metadata type (nested and empty arrays included) and tensors of several
// types, one of them empty. Used by the round-trip, corruption and fuzz-seed code.
inline GgufWriter sample_writer(uint64_t alignment = kDefaultAlignment) {
  GgufWriter w(alignment);
  w.set("general.architecture", Value::string("llama"));
  w.set("general.name", Value::string(""));
  w.set("t.u8", Value::u8(200));
  w.set("t.i8", Value::i8(-100));
  w.set("t.u16", Value::u16(60000));
  w.set("t.i16", Value::i16(-30000));
  w.set("t.u32", Value::u32(4000000000u));
  w.set("t.i32", Value::i32(-2000000000));
  w.set("t.u64", Value::u64(18000000000000000000ull));
  w.set("t.i64", Value::i64(-9000000000000000000ll));
  w.set("t.f32", Value::f32(0.15625f));
  w.set("t.f64", Value::f64(-1e300));
  w.set("t.bool", Value::boolean(true));
  w.set("t.strings", Value::string_array({"<s>", "", "hello world", "\xe2\x96\x81the"}));
  w.set("t.floats", Value::f32_array({0.5f, -1.25f, 3.0f}));
  w.set("t.ints", Value::i32_array({1, -2, 3}));
  w.set("t.empty", Value::array(ValueType::UINT64, {}));
  w.set("t.nested",
        Value::array(ValueType::ARRAY,
                     {Value::array(ValueType::UINT8, {Value::u8(1), Value::u8(2)}),
                      Value::array(ValueType::STRING, {}),
                      Value::array(ValueType::ARRAY,
                                   {Value::array(ValueType::BOOL, {Value::boolean(false)})})}));
  EXPECT_TRUE(w.add_tensor("a.f32", DType::F32, {4, 3}, pattern_bytes(48, 1)).ok());
  EXPECT_TRUE(w.add_tensor("b.f16", DType::F16, {8}, pattern_bytes(16, 2)).ok());
  EXPECT_TRUE(w.add_tensor("c.q8_0", DType::Q8_0, {64, 2}, pattern_bytes(4 * 34, 3)).ok());
  EXPECT_TRUE(w.add_tensor("d.empty", DType::F32, {0, 5}, std::vector<uint8_t>{}).ok());
  EXPECT_TRUE(w.add_tensor("e.q4_k", DType::Q4_K, {256}, pattern_bytes(144, 4)).ok());
  return w;
}

// Little-endian byte builder for hand-crafted files.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& put(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
    return *this;
  }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(tensors).u64(kvs);
  }
  // A u32 metadata pair.
  Bytes& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(4).u32(v); }
  // A tensor info.
  Bytes& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  Bytes& pad_to(size_t alignment) {
    b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

// What must hold for any file the reader accepts, whatever its origin.
inline void check_invariants(const GgufFile& f, std::span<const uint8_t> bytes) {
  ASSERT_TRUE(f.version() == 2 || f.version() == 3);
  ASSERT_NE(f.alignment(), 0u);
  ASSERT_EQ(f.alignment() & (f.alignment() - 1), 0u);
  for (const auto& t : f.tensors()) {
    ASSERT_GE(t.shape.size(), 1u);
    ASSERT_LE(t.shape.size(), 4u);
    ASSERT_EQ(t.offset % f.alignment(), 0u);
    auto row = row_bytes(t.type, t.shape[0]);
    ASSERT_TRUE(row.has_value());
    ASSERT_EQ(t.nbytes, *row * static_cast<uint64_t>(t.rows()));
    if (t.nbytes == 0) continue;
    ASSERT_GE(t.data, bytes.data() + f.data_offset());
    ASSERT_LE(t.data + t.nbytes, bytes.data() + bytes.size());
    ASSERT_EQ(t.data, bytes.data() + f.data_offset() + t.offset);
    ASSERT_EQ(f.find_tensor(t.name), &t);
  }
}

// Parses `bytes`; either it succeeds and the invariants hold, or the error starts with the name.
// Returns whether it parsed.
inline bool parse_or_named_error(std::span<const uint8_t> bytes, const std::string& name) {
  auto r = GgufFile::parse(bytes, name);
  if (!r) {
    EXPECT_EQ(r.error().rfind(name + ": ", 0), 0u) << r.error();
    return false;
  }
  check_invariants(**r, bytes);
  return true;
}

}  // namespace cadenza::gguf::test
