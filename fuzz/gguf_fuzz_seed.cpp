// Writes small valid GGUF files into a directory to seed the fuzz corpus (see scripts/fuzz.sh):
// every metadata type, nested arrays, a non-default alignment and tensors of several types.
#include <cstdio>
#include <string>

#include "gguf/gguf.h"

using namespace cadenza;
using namespace cadenza::gguf;

namespace {

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 13);
  return v;
}

int write(const GgufWriter& w, const std::string& path) {
  if (auto s = w.write(path); !s) {
    std::fprintf(stderr, "%s\n", s.error().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  int rc = 0;
  {
    GgufWriter w;
    w.set("general.architecture", Value::string("llama"));
    w.set("a.u8", Value::u8(1));
    w.set("a.i8", Value::i8(-1));
    w.set("a.u16", Value::u16(2));
    w.set("a.i16", Value::i16(-2));
    w.set("a.u32", Value::u32(3));
    w.set("a.i32", Value::i32(-3));
    w.set("a.u64", Value::u64(4));
    w.set("a.i64", Value::i64(-4));
    w.set("a.f32", Value::f32(0.5f));
    w.set("a.f64", Value::f64(0.25));
    w.set("a.bool", Value::boolean(true));
    w.set("tokenizer.ggml.tokens", Value::string_array({"<s>", "</s>", "a", ""}));
    w.set("tokenizer.ggml.scores", Value::f32_array({0.f, -1.f, -2.f, -3.f}));
    w.set("a.nested", Value::array(ValueType::ARRAY,
                                   {Value::i32_array({1, 2}), Value::array(ValueType::STRING, {})}));
    (void)w.add_tensor("f32", DType::F32, {4, 2}, bytes(32, 1));
    (void)w.add_tensor("f16", DType::F16, {4}, bytes(8, 2));
    (void)w.add_tensor("q8_0", DType::Q8_0, {32}, bytes(34, 3));
    (void)w.add_tensor("q4_k", DType::Q4_K, {256}, bytes(144, 4));
    rc |= write(w, dir + "/seed-all-types.gguf");
  }
  {
    GgufWriter w(64);
    w.set("general.name", Value::string("aligned"));
    (void)w.add_tensor("q4_0", DType::Q4_0, {32, 2}, bytes(36, 5));
    (void)w.add_tensor("empty", DType::F32, {0}, std::vector<uint8_t>{});
    rc |= write(w, dir + "/seed-align64.gguf");
  }
  {
    GgufWriter w;
    w.set("tokenizer.ggml.model", Value::string("gpt2"));
    rc |= write(w, dir + "/seed-vocab-only.gguf");
  }
  return rc;
}
